// --model-control-mode=poll: a thread that rescans the model repository every
// few seconds and follows it, as Triton's poll mode does: a model whose files
// changed (added, removed or rewritten versions, its config.pbtxt) is loaded
// again through RepositoryModelLoad's path, and a model whose directory is
// gone is unloaded.
#ifndef KILN_SERVER_REPOSITORY_POLLER_H_
#define KILN_SERVER_REPOSITORY_POLLER_H_

#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/model_manager.h"
#include "server/compiler_service.h"

namespace kiln::server {

// What a model's directory holds: every file under DIR/NAME with its size and
// modification time, so that any change to it changes this.
std::string RepositoryModelFingerprint(const std::string& dir, const std::string& name);

// Every model directory's fingerprint.
std::map<std::string, std::string> RepositoryFingerprints(const std::string& dir);

class RepositoryPoller {
 public:
  // Starts polling `dir` every `interval`, taking `seen` (fingerprints from
  // before the start-up load) as what is loaded.
  RepositoryPoller(std::string dir, absl::Duration interval,
                   std::map<std::string, std::string> seen, CompilerService* compiler,
                   engine::ModelManager* models);
  // Stops the thread (a scan under way finishes first).
  ~RepositoryPoller();

 private:
  void Loop();
  void PollOnce();

  const std::string dir_;
  const absl::Duration interval_;
  CompilerService* const compiler_;
  engine::ModelManager* const models_;
  std::map<std::string, std::string> seen_;  // only the poll thread touches it
  absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_REPOSITORY_POLLER_H_
