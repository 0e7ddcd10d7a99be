// A child process the benchmark and the tests start (the daemon, replay, record): spawned from
// an argument vector, output optionally redirected to a file, signalled and reaped by id.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sonopipe::tools {

class ChildProcess {
 public:
  // argv[0] is a path to the executable. output_path: stdout and stderr go there ("" = inherit).
  explicit ChildProcess(const std::vector<std::string>& argv, const std::string& output_path = "");
  ~ChildProcess();  // a child still running is killed (SIGKILL) and reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void send_signal(int signal_number);
  // Exit status (128 + signal when killed by one), or nullopt when still running at the timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Text of a file (e.g. a child's output) or "" when it cannot be read.
std::string read_text_file(const std::string& path);

}  // namespace sonopipe::tools
