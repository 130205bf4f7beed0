// A redis-server child process on a free loopback port, for tests of the
// remote kernel cache tier: no persistence (--save '' --appendonly no), stopped
// when destroyed. Stop() and Start() again keep the port, so a test can take
// Redis away mid-load and bring it back where the servers expect it.
#ifndef KILN_TESTS_TEST_UTIL_REDIS_SERVER_H_
#define KILN_TESTS_TEST_UTIL_REDIS_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

namespace kiln::testing {

class RedisServer {
 public:
  // Also ignores SIGPIPE in the test process, as kiln-server does: hiredis
  // writes with write(2), and a stopped server must cost an error, not the test.
  RedisServer() : port_(FreeLoopbackPort()) {
    std::signal(SIGPIPE, SIG_IGN);
    Start();
  }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  // Starts redis-server and waits (up to 5 s) until it accepts connections;
  // false if it did not.
  bool Start() {
    if (pid_ > 0) return true;
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--loglevel", "warning", "--dir", "/tmp",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      if (Accepts()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // SIGTERM and wait: the port is closed when this returns.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // SIGSTOP / SIGCONT: Redis that accepts nothing and answers nothing.
  void Pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void Resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  // redis-cli against this server with `args` (shell words); its stdout.
  std::string Cli(const std::string& args) const {
    const std::string cmd =
        "redis-cli -h 127.0.0.1 -p " + std::to_string(port_) + " " + args + " 2>/dev/null";
    std::string out;
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      ::pclose(f);
    }
    return out;
  }

 private:
  static int FreeLoopbackPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

  bool Accepts() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }

  const int port_;
  pid_t pid_ = -1;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_TEST_UTIL_REDIS_SERVER_H_
