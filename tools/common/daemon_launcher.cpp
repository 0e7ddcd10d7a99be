#include "tools/common/daemon_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tools/common/control_client.h"

namespace sonopipe::tools {

namespace {

// A free loopback port: bind to port 0, read it back, release it (the daemon binds it next).
std::string free_tcp_endpoint(zmq::context_t& context) {
  zmq::socket_t probe(context, zmq::socket_type::pull);
  probe.set(zmq::sockopt::linger, 0);
  probe.bind("tcp://127.0.0.1:*");
  return probe.get(zmq::sockopt::last_endpoint);
}

}  // namespace

DaemonEndpoints pick_endpoints(const std::string& transport, const std::string& directory) {
  if (transport == "tcp") {
    zmq::context_t context(1);
    return {free_tcp_endpoint(context), free_tcp_endpoint(context), free_tcp_endpoint(context)};
  }
  if (transport == "ipc") {
    const std::string base = "ipc://" + (std::filesystem::path(directory) / "sonopiped-").string();
    return {base + "ingest.ipc", base + "publish.ipc", base + "control.ipc"};
  }
  if (transport == "shm") {  // the ingest a shared pool (docs/shared-memory.md), the rest ipc
    const std::string base = "ipc://" + (std::filesystem::path(directory) / "sonopiped-").string();
    return {"shm://sonopiped-bench-" + std::to_string(::getpid()), base + "publish.ipc", base + "control.ipc"};
  }
  throw std::invalid_argument("transport must be tcp, ipc or shm, got '" + transport + "'");
}

std::string path_next_to_executable(const std::string& relative) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return relative;
  return (self.parent_path() / relative).lexically_normal().string();
}

DaemonLauncher::DaemonLauncher(const std::string& binary, const std::string& config_yaml,
                               const std::string& control_endpoint, const std::string& directory,
                               std::chrono::milliseconds startup_timeout)
    : control_endpoint_(control_endpoint) {
  if (!std::filesystem::exists(binary))
    throw std::runtime_error("daemon binary " + binary + " does not exist (build it, or pass its path)");
  const std::string config_path = (std::filesystem::path(directory) / "sonopiped.yaml").string();
  log_path_ = (std::filesystem::path(directory) / "sonopiped.log").string();
  std::ofstream(config_path) << config_yaml;
  process_ = std::make_unique<ChildProcess>(std::vector<std::string>{binary, "--config", config_path}, log_path_);
  const auto deadline = std::chrono::steady_clock::now() + startup_timeout;
  while (true) {
    if (auto code = process_->wait(std::chrono::milliseconds(0))) {
      stopped_ = true;
      throw std::runtime_error("sonopiped exited with code " + std::to_string(*code) + " at startup:\n" + log_tail());
    }
    if (control_request(context_, control_endpoint_, "status", std::chrono::milliseconds(200))) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("sonopiped did not answer on " + control_endpoint_ + " within " +
                               std::to_string(startup_timeout.count()) + " ms:\n" + log_tail());
  }
}

DaemonLauncher::~DaemonLauncher() {
  if (!stopped_) stop(std::chrono::seconds(10));
}

v1::Status DaemonLauncher::status() {
  auto reply = control_request(context_, control_endpoint_, "status", std::chrono::seconds(5));
  if (!reply || !reply->ok())
    throw std::runtime_error("sonopiped did not answer 'status'" + (reply ? ": " + reply->error() : std::string()));
  return reply->status();
}

int DaemonLauncher::stop(std::chrono::milliseconds timeout) {
  if (stopped_) return exit_code_;
  stopped_ = true;
  control_request(context_, control_endpoint_, "stop", std::chrono::seconds(2));
  auto code = process_->wait(timeout);
  if (!code) {
    process_->send_signal(SIGTERM);
    code = process_->wait(timeout);
  }
  if (!code) {
    process_->send_signal(SIGKILL);
    code = process_->wait(std::chrono::seconds(5));
  }
  exit_code_ = code.value_or(-1);
  return exit_code_;
}

std::string DaemonLauncher::log_tail(std::size_t lines) const {
  std::istringstream text(read_text_file(log_path_));
  std::vector<std::string> all;
  for (std::string line; std::getline(text, line);) all.push_back(line);
  std::string tail;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) tail += all[i] + "\n";
  return tail;
}

pid_t DaemonLauncher::pid() const { return process_->pid(); }

}  // namespace sonopipe::tools
