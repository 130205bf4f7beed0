#include "server/connection_gate.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/ms_since.h"
#include "grpcpp/server.h"
#include "grpcpp/server_posix.h"

namespace kiln::server {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(const std::string& address,
                                                                       int port,
                                                                       int max_connections) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string host = address == "[::]" ? "::" : address;
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", address, ": ", ::gai_strerror(e)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(found, ::freeaddrinfo);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot listen on ", address, ":", port));
    ::close(fd);
    return s;
  }
  sockaddr_storage bound = {};
  socklen_t length = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    absl::Status s = Errno("eventfd");
    ::close(fd);
    return s;
  }
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(fd, wake, bound_port, max_connections));
}

ConnectionGate::~ConnectionGate() {
  Stop();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void ConnectionGate::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void ConnectionGate::Stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
}

void ConnectionGate::Prune() {
  std::vector<std::pair<int, ino_t>> still;
  for (const auto& [fd, inode] : accepted_) {
    struct stat now;
    if (::fstat(fd, &now) == 0 && S_ISSOCK(now.st_mode) && now.st_ino == inode) {
      still.emplace_back(fd, inode);
    }
  }
  accepted_ = std::move(still);
}

void ConnectionGate::AcceptLoop(grpc::Server* server) {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;  // Stop
    if ((fds[0].revents & POLLIN) == 0) continue;
    // Non-blocking, as gRPC's own listener makes them: its endpoint reads
    // until EAGAIN, and a blocking socket would hold one of its pollers.
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: the connection waits in the backlog
        // until some close, instead of the listener giving up.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    absl::MutexLock lock(&mutex_);
    if (static_cast<int>(accepted_.size()) >= max_) Prune();
    if (static_cast<int>(accepted_.size()) >= max_) {
      // Logged before the close: once its client sees UNAVAILABLE, the line
      // is written (connection_limits_test reads it then).
      int64_t suppressed = 0;
      if (refusal_log_.Admit(SteadyNowNs(), &suppressed)) {
        Log(LogLevel::kWarning, "server",
            absl::StrCat("closed a new connection: ", max_,
                         " are open (--max-connections); its client sees UNAVAILABLE"),
            {.suppressed = suppressed > 0 ? suppressed : -1});
      }
      ::close(fd);
      continue;
    }
    struct stat socket_stat;
    if (::fstat(fd, &socket_stat) != 0) {
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    accepted_.emplace_back(fd, socket_stat.st_ino);
    grpc::AddInsecureChannelFromFd(server, fd);
  }
}

}  // namespace kiln::server
