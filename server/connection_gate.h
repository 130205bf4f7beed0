// --max-connections: Kiln accepts plaintext gRPC connections itself and
// hands each to the gRPC server (grpc::AddInsecureChannelFromFd) only while
// fewer than the cap are open; one past it is closed at once, and its client
// sees UNAVAILABLE and retries later. gRPC 1.51 has no cap of its own, and
// once its listener met the descriptor limit it stopped accepting for good
// (issue 20: ~1 100 idle connections at a 1024-descriptor limit). Here a
// full descriptor table only pauses the accept loop.
//
// Open connections are counted without hooking gRPC's close: each accepted
// descriptor is remembered with its socket's inode, and an entry whose
// descriptor no longer names that socket (gRPC closed it; the number may
// have been reused since) is dropped when the count is next needed.
//
// TLS connections cannot be handed over this way (gRPC 1.51 takes insecure
// descriptors only), so the cap is for plaintext servers; with TLS the
// server refuses the flag rather than ignore it.
#ifndef KILN_SERVER_CONNECTION_GATE_H_
#define KILN_SERVER_CONNECTION_GATE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/log_limiter.h"

namespace grpc {
class Server;
}

namespace kiln::server {

class ConnectionGate {
 public:
  // Binds and listens on address:port (0 picks a free port). Accepts nothing
  // until Start.
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Listen(const std::string& address,
                                                                int port, int max_connections);
  ~ConnectionGate();

  int port() const { return port_; }
  // Accepts connections for `server` (started, and outliving Stop) on a
  // thread of the gate's own.
  void Start(grpc::Server* server);
  // Stops accepting; connections already handed over stay the server's.
  void Stop();

 private:
  ConnectionGate(int listen_fd, int wake_fd, int port, int max_connections)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port), max_(max_connections) {}
  void AcceptLoop(grpc::Server* server);
  // Drops the entries whose descriptor no longer names their socket.
  void Prune() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const int listen_fd_;
  const int wake_fd_;  // an eventfd Stop writes to end the loop's poll
  const int port_;
  const int max_;
  std::thread thread_;
  // Refusals are logged, at most a few lines a second (the rest counted).
  LogLimiter refusal_log_{5};
  absl::Mutex mutex_;  // the accept thread's; Stop only joins it
  // Accepted descriptors and their sockets' inodes.
  std::vector<std::pair<int, ino_t>> accepted_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kiln::server

#endif  // KILN_SERVER_CONNECTION_GATE_H_
