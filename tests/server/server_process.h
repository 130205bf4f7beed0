// A kiln-server child process on a free port (the binary as a test's data
// dependency, //server:kiln-server), stopped with SIGTERM when destroyed.
#ifndef KILN_TESTS_SERVER_SERVER_PROCESS_H_
#define KILN_TESTS_SERVER_SERVER_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {

// A kiln-server child process on a free port.
class ServerProcess {
 public:
  // Started with --cache-dir=`cache_dir` and `flags`; its stderr to the
  // file `stderr_path` when given (else the test's).
  explicit ServerProcess(const std::string& cache_dir, std::vector<std::string> flags = {},
                         const std::string& stderr_path = "") {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      if (!stderr_path.empty()) {
        std::FILE* err = std::fopen(stderr_path.c_str(), "w");
        if (err != nullptr) ::dup2(::fileno(err), STDERR_FILENO);
      }
      ::close(out[0]);
      flags.insert(flags.begin(), {"kiln-server", "--port=0", "--threads=1",
                                   "--cache-dir=" + cache_dir});
      std::vector<char*> argv;
      for (std::string& f : flags) argv.push_back(f.data());
      argv.push_back(nullptr);
      ::execv("server/kiln-server", argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    // "kiln-server HTTP on A:P" and "... metrics on A:P" (when on) come
    // before the gRPC port's "kiln-server listening on A:P".
    char line[256] = {0};
    while (f && std::fgets(line, sizeof line, f)) {
      const char* colon = std::strrchr(line, ':');
      const int port = colon ? std::atoi(colon + 1) : 0;
      if (std::strncmp(line, "kiln-server HTTP on ", 20) == 0) {
        http_port_ = port;
      } else if (std::strncmp(line, "kiln-server metrics on ", 23) == 0) {
        metrics_port_ = port;
      } else {
        port_ = port;
        break;
      }
    }
    if (f) std::fclose(f);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }
  int port() const { return port_; }
  // With --http-port / --metrics-port: the bound ports; else -1.
  int http_port() const { return http_port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` and waits up to `timeout` for the process to exit; false
  // if it is still running (it is then killed).
  bool StopWith(int signal, std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return true;
    ::kill(pid_, signal);
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status;
    while (std::chrono::steady_clock::now() < end) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return false;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int http_port_ = -1;
  int metrics_port_ = -1;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_SERVER_PROCESS_H_
