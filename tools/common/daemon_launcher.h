// Starts a real sonopiped for benchmarks and system tests: writes its config, spawns the binary,
// waits until its control socket answers, and stops it the way an operator would (control
// "stop", then SIGTERM, then SIGKILL), keeping its log for the report.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "sonopipe/v1/result.pb.h"
#include "tools/common/child_process.h"

namespace sonopipe::tools {

struct DaemonEndpoints {
  std::string ingest, publish, control;
};

// "tcp": free loopback ports; "ipc": socket files in `directory`. Throws for other transports.
DaemonEndpoints pick_endpoints(const std::string& transport, const std::string& directory);

// <directory of the running executable>/<relative>, e.g. "../../daemon/sonopiped" from tools/bench/.
std::string path_next_to_executable(const std::string& relative);

class DaemonLauncher {
 public:
  // config_yaml goes to <directory>/sonopiped.yaml, output to <directory>/sonopiped.log. Throws
  // std::runtime_error (with the log's tail) when the daemon exits or does not answer in time.
  DaemonLauncher(const std::string& binary, const std::string& config_yaml, const std::string& control_endpoint,
                 const std::string& directory, std::chrono::milliseconds startup_timeout);
  ~DaemonLauncher();
  DaemonLauncher(const DaemonLauncher&) = delete;
  DaemonLauncher& operator=(const DaemonLauncher&) = delete;

  v1::Status status();                              // throws when the daemon does not answer
  int stop(std::chrono::milliseconds timeout);      // exit code
  std::string log_tail(std::size_t lines = 20) const;
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const;  // the daemon's process id (e.g. to read /proc/<pid>/status)

 private:
  zmq::context_t context_{1};
  std::string control_endpoint_, log_path_;
  std::unique_ptr<ChildProcess> process_;
  bool stopped_ = false;
  int exit_code_ = 0;
};

}  // namespace sonopipe::tools
