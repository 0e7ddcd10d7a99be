// Drives the real sonopiped binary in integration tests: writes a config with ipc endpoints in a
// fresh temporary folder, starts the daemon as a child process (its log goes to a file in that
// folder), and talks to it through a small ZeroMQ client (PUSH frames, SUB results, REQ control).
// The child is always killed and reaped when the harness goes out of scope. Every wait is a poll
// loop with a generous bound, so the tests hold on a loaded two-core machine.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "wire/wire.h"
#include "tests/support/test_support.h"

extern char** environ;

namespace sonopipe::test {

using Clock = std::chrono::steady_clock;
inline constexpr auto kStartTimeout = std::chrono::seconds(20);
inline constexpr auto kReplyTimeout = std::chrono::seconds(10);

struct Received {
  std::string topic;
  v1::ResultHeader header;
  std::string payload;
};

// True in a build instrumented with AddressSanitizer (tools/sanitize.sh asan instruments the daemon
// and the tests alike): for the few checks that measure the sanitizer's cost rather than our code.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// The daemon under test: $SONOPIPED when set (e.g. binaries copied to a GPU machine), else the
// build tree's daemon/sonopiped.
inline std::string daemon_binary() {
  if (const char* path = std::getenv("SONOPIPED")) return path;
  return binary_path("daemon/sonopiped");
}

class DaemonHarness {
 public:
  // `settings` is YAML placed after the endpoint keys (pipelines, queue settings, ...).
  // `ingest` replaces the default ingest line (a PULL bound at endpoint("ingest")); "{dir}" in it
  // and in `settings` stands for the temporary folder.
  explicit DaemonHarness(std::string settings, std::string ingest = "") {
    char pattern[] = "/tmp/sonopipe-test-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    config_path_ = dir_ + "/config.yaml";
    std::ofstream config(config_path_);
    if (ingest.empty()) ingest = "{endpoint: \"" + endpoint("ingest") + "\"}";
    for (auto at = ingest.find("{dir}"); at != std::string::npos; at = ingest.find("{dir}")) ingest.replace(at, 5, dir_);
    for (auto at = settings.find("{dir}"); at != std::string::npos; at = settings.find("{dir}")) settings.replace(at, 5, dir_);
    config << "ingest: " << ingest << "\n"
           << "publish: {endpoint: \"" << endpoint("publish") << "\", status_interval_s: 0.1}\n"
           << "control: {endpoint: \"" << endpoint("control") << "\"}\n"
           << settings << "\n";
  }
  ~DaemonHarness() {
    push_.reset();
    sub_.reset();
    pub_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    if (std::getenv("SONOPIPE_KEEP_TEST_DIR") == nullptr) std::filesystem::remove_all(dir_, ignored);
  }
  DaemonHarness(const DaemonHarness&) = delete;
  DaemonHarness& operator=(const DaemonHarness&) = delete;

  std::string endpoint(const std::string& name) const { return "ipc://" + dir_ + "/" + name; }
  const std::string& config_path() const { return config_path_; }
  std::string log() const {
    std::ifstream file(dir_ + "/daemon.log");
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }
  // The log once it holds `text` (a counter is raised before its log line is written), or as it is
  // after `timeout`.
  std::string wait_for_log(const std::string& text, std::chrono::seconds timeout = std::chrono::seconds(10)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string current = log();
    while (current.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      current = log();
    }
    return current;
  }

  // Starts sonopiped with `extra_args`, connects the client and waits until results can flow
  // (a status heartbeat has arrived on the SUB socket).
  void start(const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> args{daemon_binary(), "--config", config_path_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = spawn(args, dir_ + "/daemon.log");
    sub_.emplace(context_, zmq::socket_type::sub);
    sub_->set(zmq::sockopt::rcvhwm, 0);  // keep everything: the tests count results
    sub_->set(zmq::sockopt::subscribe, "");
    sub_->connect(endpoint("publish"));
    push_.emplace(context_, zmq::socket_type::push);
    push_->set(zmq::sockopt::linger, 0);
    push_->set(zmq::sockopt::sndtimeo, 20000);
    push_->connect(endpoint("ingest"));
    const auto deadline = Clock::now() + kStartTimeout;
    while (Clock::now() < deadline) {
      if (auto message = receive(std::chrono::milliseconds(200)); message && message->topic == "status") return;
      if (exited()) FAIL("sonopiped exited during start-up:\n" << log());
    }
    FAIL("no status heartbeat from sonopiped within the start timeout:\n" << log());
  }

  // Starts sonopiped only, without the harness's own client (for sockets the test makes itself,
  // e.g. with CURVE keys); wait_for_log("sonopiped ready") tells when it serves.
  void launch(const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> args{daemon_binary(), "--config", config_path_};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = spawn(args, dir_ + "/daemon.log");
  }

  // Runs sonopiped to completion (for --check-config and friends); returns the exit code.
  int run_to_exit(const std::vector<std::string>& args, std::string& output) {
    std::vector<std::string> argv{daemon_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out_path = dir_ + "/run.out";
    pid_t pid = spawn(argv, out_path);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::ifstream file(out_path);
    std::stringstream text;
    text << file.rdbuf();
    output = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void send(const std::string& header, const void* payload, std::size_t bytes) {
    REQUIRE(try_send(header, payload, bytes));
  }
  // The same without asserting, for a sender thread (Catch's assertions are not thread-safe: the
  // test thread checks the outcome).
  bool try_send(const std::string& header, const void* payload, std::size_t bytes) {
    return push_->send(zmq::buffer(header), zmq::send_flags::sndmore) &&
           push_->send(zmq::const_buffer(payload, bytes), zmq::send_flags::none);
  }
  // A PUB socket bound at `name` (for SUB ingest); frames sent on it are lost until the daemon's
  // subscription has arrived, so the caller waits for that (e.g. until frames_received grows).
  void bind_publisher(const std::string& name) {
    pub_.emplace(context_, zmq::socket_type::pub);
    pub_->set(zmq::sockopt::sndhwm, 0);
    pub_->bind(endpoint(name));
  }
  void publish_frame(const std::string& header, const void* payload, std::size_t bytes) {
    REQUIRE(pub_->send(zmq::buffer(header), zmq::send_flags::sndmore));
    REQUIRE(pub_->send(zmq::const_buffer(payload, bytes), zmq::send_flags::none));
  }

  void send_parts(const std::vector<std::string>& parts) {
    for (std::size_t i = 0; i < parts.size(); ++i)
      REQUIRE(push_->send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore
                                                                      : zmq::send_flags::none));
  }

  // The next message on the SUB socket (results and status), or nullopt after `timeout`.
  std::optional<Received> receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{sub_->handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t part;
      if (!sub_->recv(part, zmq::recv_flags::none)) return std::nullopt;
      parts.push_back(std::move(part));
    } while (parts.back().more());
    Received received;
    received.topic = parts[0].to_string();
    if (received.topic == "status") {
      last_status_.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size()));
      have_status_ = true;
    } else if (parts.size() == 3) {
      received.header.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size()));
      received.payload = parts[2].to_string();
    }
    return received;
  }

  // Collects results (status heartbeats are skipped) until `count` arrived or the timeout passed.
  std::vector<Received> receive_results(std::size_t count, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::vector<Received> results;
    const auto deadline = Clock::now() + timeout;
    while (results.size() < count && Clock::now() < deadline) {
      auto message = receive(std::chrono::milliseconds(200));
      if (message && message->topic != "status") results.push_back(std::move(*message));
    }
    return results;
  }

  // After a stop or a signal: collects the remaining results until the final heartbeat
  // (drained = true) that the daemon sends once it has drained; that Status, or none on timeout.
  std::optional<v1::Status> receive_until_drained(std::vector<Received>& results,
                                                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto message = receive(std::chrono::milliseconds(200));
      if (!message) continue;
      if (message->topic != "status") results.push_back(std::move(*message));
      else if (last_status_.drained()) return last_status_;
    }
    return std::nullopt;
  }

  // The latest heartbeat seen by receive() (valid when have_status()).
  const v1::Status& last_status() const { return last_status_; }
  bool have_status() const { return have_status_; }

  // One request on the control socket; nullopt when no answer came in time.
  std::optional<v1::ControlReply> control(const std::string& command) {
    zmq::socket_t req(context_, zmq::socket_type::req);
    req.set(zmq::sockopt::linger, 0);
    req.connect(endpoint("control"));
    v1::ControlRequest request;
    request.set_schema_version(wire::kSchemaVersion);
    request.set_command(command);
    req.send(zmq::buffer(request.SerializeAsString()), zmq::send_flags::none);
    zmq::pollitem_t item{req.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::duration_cast<std::chrono::milliseconds>(kReplyTimeout)) == 0)
      return std::nullopt;
    zmq::message_t message;
    if (!req.recv(message, zmq::recv_flags::none)) return std::nullopt;
    v1::ControlReply reply;
    reply.ParseFromArray(message.data(), static_cast<int>(message.size()));
    return reply;
  }

  // Polls the control socket until `done(status)` holds; returns the last status seen.
  template <typename Predicate>
  v1::Status wait_for_status(Predicate done, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    v1::Status status;
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (auto reply = control("status"); reply && reply->ok()) {
        status = reply->status();
        if (done(status)) return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return status;
  }

  void signal(int number) { ::kill(pid_, number); }
  pid_t pid() const { return pid_; }
  // The daemon's resident memory in KiB (VmRSS of /proc/<pid>/status), or -1.
  long rss_kib() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
  }

  // Waits for the daemon to exit; returns its exit code, or -1 if it is still running.
  int wait_exit(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  bool exited() {
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return pid_ <= 0;
  }

  static pid_t spawn(const std::vector<std::string>& args, const std::string& output_path) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    pid_t pid = -1;
    int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(error));
    return pid;
  }

  std::string dir_, config_path_;
  pid_t pid_ = -1;
  zmq::context_t context_{1};
  std::optional<zmq::socket_t> sub_, push_, pub_;
  v1::Status last_status_;
  bool have_status_ = false;
};

// An example config (config/*.yaml) without its endpoints (the harness sets ipc ones) and with the CPU
// backend on two threads (the CI machine); SONOPIPE_STRAIN_TEST_BACKEND=cuda runs it on the GPU.
inline std::string pipelines_of(const std::string& path) {
  std::ifstream file(path);
  REQUIRE(file.good());
  std::stringstream kept;
  std::string line;
  bool skipping = false;
  const char* backend = std::getenv("SONOPIPE_STRAIN_TEST_BACKEND");
  kept << "backend: " << (backend ? backend : "cpu") << "\ncpu_threads: 2\n";
  while (std::getline(file, line)) {
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '#';
    if (top_level) {
      skipping = false;
      for (const char* key : {"ingest:", "publish:", "control:", "backend:", "cpu_threads:"})
        if (line.rfind(key, 0) == 0) skipping = true;
    }
    if (!skipping) kept << line << "\n";
  }
  return kept.str();
}

// The serialized FrameHeader of a frame of any kind, type and shape (for bad-input tests).
inline std::string frame_header_bytes(FrameKind kind, DType dtype, std::vector<Axis> axes, std::uint64_t sequence,
                                      std::uint32_t stream_id = 0) {
  FrameMeta meta;
  meta.stream_id = stream_id;
  meta.sequence = sequence;
  meta.kind = kind;
  meta.payload.dtype = dtype;
  meta.payload.axes = std::move(axes);
  return wire::frame_header_from_meta(meta).SerializeAsString();
}

// A float32 result payload as values.
inline std::vector<float> floats(const std::string& payload) {
  std::vector<float> values(payload.size() / sizeof(float));
  std::memcpy(values.data(), payload.data(), values.size() * sizeof(float));
  return values;
}

// A FrameHeader for an int16 IQ frame [line, sample, iq=2].
inline v1::FrameHeader iq_header(std::uint64_t sequence, std::int64_t lines, std::int64_t samples,
                                 std::uint32_t stream_id = 0) {
  FrameMeta meta;
  meta.stream_id = stream_id;
  meta.sequence = sequence;
  meta.acquisition_time_ns = 1000000 * static_cast<std::int64_t>(sequence);
  meta.kind = FrameKind::iq;
  meta.payload.dtype = DType::int16;
  meta.payload.axes = {{"line", lines}, {"sample", samples, 1.0 / 8.9e6, "s"}, {"iq", 2}};
  meta.sampling_frequency_hz = 8.9e6;
  meta.center_frequency_hz = 5.33e6;
  meta.demodulation_frequency_hz = 5.0e6;
  return wire::frame_header_from_meta(meta);
}

inline std::vector<std::int16_t> random_samples(std::size_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(-32768, 32767);
  std::vector<std::int16_t> values(count);
  for (auto& v : values) v = static_cast<std::int16_t>(dist(rng));
  return values;
}

}  // namespace sonopipe::test
