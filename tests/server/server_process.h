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
    char line[256] = {0};
    if (f && std::fgets(line, sizeof line, f)) {
      const char* colon = std::strrchr(line, ':');
      if (colon) port_ = std::atoi(colon + 1);
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
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_SERVER_SERVER_PROCESS_H_
