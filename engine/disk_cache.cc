// The on-disk kernel cache.
//
// Directory layout:
//   <dir>/<64 hex digits of the key>.kkc     one entry, named only from its key
//   <dir>/tmp/<key>.<pid>.<n>                entries being written
// Entry file (little-endian):
//   magic "KILNKRN\0" | u32 format version | key (64 hex chars)
//   | str triple | str canonical | str cpu | str features | str llvm | str kiln
//   | str options | str symbol | u32 op count, str ops... | f64 compile ms
//   | i64 created (unix s) | u64 object size | object bytes
//   | 32-byte SHA-256 of everything before it
// (str = u32 length + bytes). On load every field is checked — magic, version,
// key, triple, identity, sizes and the checksum — before the object is handed
// to the JIT, so a corrupt, truncated or foreign file is never mapped as code;
// it is counted and removed, and the kernel is compiled again.
//
// Writers never expose a partial file: they write a temp file in tmp/ (same
// file system), fsync it and rename it over the final name, which is atomic.
// So two servers sharing the directory at worst both compile a kernel and the
// last rename wins with an identical entry; readers see the old or the new
// file, whole. Temp files whose writer process is gone are removed at start.
// LRU: a hit refreshes the file's mtime; after a store, entries are evicted by
// oldest mtime until the directory is under the byte budget. Evicting a file
// never touches kernels already loaded in memory.
// When the directory cannot be created, the cache disables itself with one
// warning; serving goes on from memory. When it cannot be written
// (read-only, disk full), entries are still read; writes pause and are
// tried again later, each failure counted.
// Nothing in the directory is followed through a symlink: entries are
// opened with O_NOFOLLOW and must be regular files (a link planted there
// could otherwise make the server read, or evict, a file elsewhere).
#include "engine/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/sha256.h"

namespace kiln::engine {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'K', 'R', 'N', '\0'};
constexpr char kSuffix[] = ".kkc";

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void PutStr(std::string& out, absl::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s.data(), s.size());
}

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool Str(std::string* s) {
    uint32_t n;
    if (!U32(&n) || n > data_.size() - pos_) return false;
    s->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Bytes(size_t n, std::string* s) {
    if (n > data_.size() - pos_) return false;
    s->assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  bool Raw(void* v, size_t n) {
    if (n > data_.size() - pos_) return false;
    std::memcpy(v, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  absl::string_view data_;
  size_t pos_ = 0;
};

// No entry is this large; a file that is, is not one of ours.
constexpr int64_t kMaxEntryBytes = int64_t{1} << 30;

enum class ReadResult { kRead, kMissing, kNotAnEntry };

// The regular file at `path`, not through a symlink.
ReadResult ReadEntryFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? ReadResult::kMissing : ReadResult::kNotAnEntry;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxEntryBytes) {
    ::close(fd);
    return ReadResult::kNotAnEntry;
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out->resize(done);
  return ReadResult::kRead;
}

struct FileInfo {
  std::string path;
  int64_t bytes;
  struct timespec mtime;
};

std::vector<FileInfo> ListEntries(const std::string& dir) {
  std::vector<FileInfo> files;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() != 64 + 4 || name.substr(64) != kSuffix) continue;
    std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({path, static_cast<int64_t>(st.st_size), st.st_mtim});
  }
  ::closedir(d);
  return files;
}

}  // namespace

std::string EncodeDiskEntry(const DiskEntry& e) {
  std::string out(kMagic, sizeof kMagic);
  PutU32(out, kCacheFormatVersion);
  out += e.key.hex;
  PutStr(out, e.key.target.triple);
  PutStr(out, e.key.canonical);
  PutStr(out, e.key.target.cpu);
  PutStr(out, e.key.target.features);
  PutStr(out, e.key.target.llvm_version);
  PutStr(out, e.key.target.kiln_version);
  PutStr(out, e.key.options);
  PutStr(out, e.symbol);
  PutU32(out, static_cast<uint32_t>(e.ops.size()));
  for (const std::string& op : e.ops) PutStr(out, op);
  out.append(reinterpret_cast<const char*>(&e.compile_ms), 8);
  PutU64(out, static_cast<uint64_t>(e.created_unix_s));
  PutU64(out, e.object.size());
  out += e.object;
  out += Sha256(out);
  return out;
}

std::optional<DiskEntry> DecodeDiskEntry(const std::string& bytes, std::string* why) {
  if (bytes.size() < sizeof kMagic + 4 + 64 + 32) {
    *why = "truncated";
    return std::nullopt;
  }
  const absl::string_view body(bytes.data(), bytes.size() - 32);
  if (Sha256(body) != bytes.substr(bytes.size() - 32)) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "bad magic";
    return std::nullopt;
  }
  Reader r(body);
  std::string skip;
  r.Bytes(sizeof kMagic, &skip);
  uint32_t version = 0;
  r.U32(&version);
  if (version != static_cast<uint32_t>(kCacheFormatVersion)) {
    *why = absl::StrCat("format version ", version, ", expected ", kCacheFormatVersion);
    return std::nullopt;
  }
  DiskEntry e;
  uint32_t op_count = 0;
  uint64_t created = 0, object_size = 0;
  bool ok = r.Bytes(64, &e.key.hex) && r.Str(&e.key.target.triple) && r.Str(&e.key.canonical) &&
            r.Str(&e.key.target.cpu) && r.Str(&e.key.target.features) &&
            r.Str(&e.key.target.llvm_version) && r.Str(&e.key.target.kiln_version) &&
            r.Str(&e.key.options) && r.Str(&e.symbol) && r.U32(&op_count);
  for (uint32_t i = 0; ok && i < op_count; ++i) {
    std::string op;
    ok = r.Str(&op);
    e.ops.push_back(op);
  }
  std::string ms;
  ok = ok && r.Bytes(8, &ms) && r.U64(&created) && r.U64(&object_size) &&
       r.Bytes(object_size, &e.object) && r.pos() == body.size();
  if (!ok) {
    *why = "malformed";
    return std::nullopt;
  }
  std::memcpy(&e.compile_ms, ms.data(), 8);
  e.created_unix_s = static_cast<int64_t>(created);
  return e;
}

EntryCheck CheckEntry(const std::string& bytes, const KernelKey& key, DiskEntry* entry,
                      std::string* why) {
  std::optional<DiskEntry> decoded = DecodeDiskEntry(bytes, why);
  if (!decoded) return EntryCheck::kCorrupt;
  if (decoded->key.hex != key.hex || decoded->key.target.triple != key.target.triple) {
    *why = "written for another key or target";
    return EntryCheck::kCorrupt;
  }
  if (!decoded->key.SameIdentity(key)) return EntryCheck::kOtherIdentity;
  *entry = *std::move(decoded);
  return EntryCheck::kMatch;
}

std::unique_ptr<DiskCache> DiskCache::Open(const std::string& dir, int64_t max_bytes,
                                           absl::Duration write_retry) {
  std::unique_ptr<DiskCache> cache(new DiskCache(dir, max_bytes, write_retry));
  // mkdir -p
  std::string path;
  for (absl::string_view part : absl::StrSplit(dir + "/tmp", '/')) {
    path += std::string(part) + "/";
    if (part.empty()) continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      absl::MutexLock lock(&cache->mutex_);
      cache->Disable(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
      return cache;
    }
  }
  if (::access(dir.c_str(), W_OK) != 0 || ::access((dir + "/tmp").c_str(), W_OK) != 0) {
    absl::MutexLock lock(&cache->mutex_);
    cache->PauseWrites(absl::StrCat(dir, " is not writable"));
    return cache;
  }
  cache->CleanStaleTempFiles();
  return cache;
}

void DiskCache::CleanStaleTempFiles() {
  const std::string tmp = dir_ + "/tmp";
  DIR* d = ::opendir(tmp.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    std::vector<std::string> parts = absl::StrSplit(e->d_name, '.');
    int pid = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &pid)) continue;
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      ::unlink(absl::StrCat(tmp, "/", e->d_name).c_str());
    }
  }
  ::closedir(d);
}

bool DiskCache::enabled() const {
  absl::MutexLock lock(&mutex_);
  return enabled_;
}

void DiskCache::Disable(const std::string& why) {
  if (!enabled_) return;
  enabled_ = false;
  Log(LogLevel::kWarning, "disk_cache",
      absl::StrCat("disk kernel cache disabled (", why, "); kernels are cached in memory only"));
}

void DiskCache::PauseWrites(const std::string& why) {
  writes_paused_until_ = absl::Now() + write_retry_;
  Log(LogLevel::kWarning, "disk_cache",
      absl::StrCat("disk kernel cache: ", why,
                   "; entries are still read, writes are tried again in ",
                   absl::FormatDuration(write_retry_)));
}

std::string DiskCache::PathFor(const std::string& key_hex) const {
  return absl::StrCat(dir_, "/", key_hex, kSuffix);
}

std::optional<DiskEntry> DiskCache::Load(const KernelKey& key) {
  {
    absl::MutexLock lock(&mutex_);
    if (!enabled_) return std::nullopt;
  }
  const std::string path = PathFor(key.hex);
  std::string bytes;
  const ReadResult read = ReadEntryFile(path, &bytes);
  if (read == ReadResult::kMissing) return std::nullopt;
  std::string why = "not a regular file";
  std::optional<DiskEntry> entry(std::in_place);
  const EntryCheck check =
      read == ReadResult::kRead ? CheckEntry(bytes, key, &*entry, &why) : EntryCheck::kCorrupt;
  absl::MutexLock lock(&mutex_);
  if (check == EntryCheck::kCorrupt) {
    ++corrupt_;
    Log(LogLevel::kWarning, "disk_cache",
        absl::StrCat("removing bad cache entry ", path, " (", why, ")"));
    ::unlink(path.c_str());
    return std::nullopt;
  }
  if (check == EntryCheck::kOtherIdentity) return std::nullopt;  // a true hash collision
  ++hits_;
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // refresh for LRU
  return entry;
}

void DiskCache::Store(const DiskEntry& entry) {
  absl::MutexLock lock(&mutex_);
  if (!enabled_ || absl::Now() < writes_paused_until_) return;
  const std::string bytes = EncodeDiskEntry(entry);
  const std::string tmp =
      absl::StrCat(dir_, "/tmp/", entry.key.hex, ".", ::getpid(), ".", temp_counter_++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && WriteFully(fd, bytes) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(tmp.c_str(), PathFor(entry.key.hex).c_str()) == 0;
  if (!ok) {
    ::unlink(tmp.c_str());
    ++write_failures_;
    PauseWrites(absl::StrCat("cannot write ", tmp, ": ", std::strerror(saved_errno)));
    return;
  }
  EvictOverBudget();
}

void DiskCache::EvictOverBudget() {
  if (max_bytes_ <= 0) return;
  std::vector<FileInfo> files = ListEntries(dir_);
  int64_t total = 0;
  for (const FileInfo& f : files) total += f.bytes;
  if (total <= max_bytes_) return;
  std::sort(files.begin(), files.end(), [](const FileInfo& a, const FileInfo& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec
                                            : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const FileInfo& f : files) {
    if (total <= max_bytes_) break;
    if (::unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      ++evictions_;
    }
  }
}

DiskCacheStats DiskCache::Stats() const {
  DiskCacheStats s;
  std::vector<FileInfo> files = ListEntries(dir_);
  absl::MutexLock lock(&mutex_);
  s.enabled = enabled_;
  s.writing = enabled_ && absl::Now() >= writes_paused_until_;
  s.entries = static_cast<int64_t>(files.size());
  for (const FileInfo& f : files) s.bytes += f.bytes;
  s.hits = hits_;
  s.evictions = evictions_;
  s.corrupt = corrupt_;
  s.write_failures = write_failures_;
  return s;
}

}  // namespace kiln::engine
