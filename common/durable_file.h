// Files that several processes share and that must survive a crash: a small
// state file (tuning records, say) rewritten whole. A write goes to a
// temporary file in the same directory, is fsynced, renamed over the old one,
// and the directory is fsynced, so a reader (or a restart after power loss)
// sees the old file or the new one, never a torn or empty one. A FileLock
// serialises read-modify-write cycles between processes sharing a directory.
#ifndef KILN_COMMON_DURABLE_FILE_H_
#define KILN_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
bool WriteFully(int fd, absl::string_view bytes);

// Replaces `path` with `bytes` durably (see the file comment). Internal with
// the path and errno's text on failure; the old file is then untouched.
absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes);

// An exclusive advisory lock (flock) on `path`, created if missing, held
// until destruction. Blocks until granted. Processes that all take it around
// read-modify-write cycles of one file do not lose each other's updates.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Whether the lock was taken (the lock file could be opened).
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace kiln

#endif  // KILN_COMMON_DURABLE_FILE_H_
