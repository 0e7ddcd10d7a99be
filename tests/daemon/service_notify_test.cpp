// sd_notify with the real daemon and a real NOTIFY_SOCKET (a unix datagram socket made here, as
// systemd makes one for a Type=notify service): READY=1 comes once the sockets are bound, WATCHDOG=1
// keeps coming while it serves (WATCHDOG_USEC set), STOPPING=1 comes at SIGTERM before it exits.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;

namespace {

constexpr const char* kConvertPipeline = R"(
backend: cpu
cpu_threads: 2
pipelines:
  - name: demo
    stages:
      - {type: convert}
)";

// The systemd side: a bound datagram socket whose path goes to the daemon in NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() {
    char pattern[] = "/tmp/sonopipe-notify-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    path_ = dir_ + "/notify";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("cannot bind the notify socket " + path_);
  }
  ~NotifySocket() {
    ::close(fd_);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return path_; }

  // The next datagram, or "" when none came within `timeout`.
  std::string next(std::chrono::milliseconds timeout) {
    pollfd item{fd_, POLLIN, 0};
    if (::poll(&item, 1, static_cast<int>(timeout.count())) <= 0) return "";
    char buffer[4096];
    const ssize_t size = ::recv(fd_, buffer, sizeof buffer, 0);
    return size > 0 ? std::string(buffer, static_cast<std::size_t>(size)) : std::string();
  }
  // Reads datagrams until one contains `line`; the ones read before it are appended to `seen`.
  bool wait_for(const std::string& line, std::vector<std::string>& seen,
                std::chrono::seconds timeout = std::chrono::seconds(20)) {
    const auto deadline = test::Clock::now() + timeout;
    while (test::Clock::now() < deadline) {
      const std::string message = next(std::chrono::milliseconds(200));
      if (message.empty()) continue;
      seen.push_back(message);
      if (message.find(line) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

// Sets environment variables for the daemon started next (it inherits this process's environment).
struct ScopedEnvironment {
  std::vector<std::string> names;
  void set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names.push_back(name);
  }
  ~ScopedEnvironment() {
    for (const std::string& name : names) ::unsetenv(name.c_str());
  }
};

std::string ipc_path(const std::string& endpoint) { return endpoint.substr(std::string("ipc://").size()); }

}  // namespace

TEST_CASE("sonopiped tells systemd ready after binding, pings the watchdog and says stopping at SIGTERM",
          "[daemon][systemd]") {
#ifndef SONOPIPE_WITH_SYSTEMD
  WARN("skipped: built without libsystemd (sd_notify compiled out)");
  return;
#else
  NotifySocket systemd;
  test::DaemonHarness daemon(kConvertPipeline);
  {
    ScopedEnvironment environment;
    environment.set("NOTIFY_SOCKET", systemd.path());
    environment.set("WATCHDOG_USEC", "200000");  // WatchdogSec=0.2: pings every 0.1 s
    daemon.launch();
  }
  std::vector<std::string> seen;
  REQUIRE(systemd.wait_for("READY=1", seen));
  // READY only once every socket is bound: the ipc endpoints exist when it arrives.
  CHECK(std::filesystem::exists(ipc_path(daemon.endpoint("ingest"))));
  CHECK(std::filesystem::exists(ipc_path(daemon.endpoint("publish"))));
  CHECK(std::filesystem::exists(ipc_path(daemon.endpoint("control"))));
  CHECK(seen.size() == 1);  // nothing before READY
  auto reply = daemon.control("status");  // and it serves
  REQUIRE(reply);
  CHECK(reply->ok());
  // The watchdog keeps being fed while it serves.
  for (int ping = 0; ping < 3; ++ping) CHECK(systemd.wait_for("WATCHDOG=1", seen));
  seen.clear();
  daemon.signal(SIGTERM);
  CHECK(systemd.wait_for("STOPPING=1", seen));
  CHECK(daemon.wait_exit() == 0);
#endif
}
