#include "stages/strain/ncc_track/cufft_helper.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <spdlog/spdlog.h>

extern char** environ;

namespace sonopipe::ncc {

CufftHelper& CufftHelper::of_process() {
  static CufftHelper* helper = new CufftHelper;  // deliberately leaked, see the header
  return *helper;
}

CufftHelper::~CufftHelper() { stop(false); }

CufftHelper::Counts CufftHelper::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

int CufftHelper::start(const std::string& program) {
  int ends[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return errno;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO);  // dup2 clears close-on-exec
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);
  // The child starts with no signal blocked (the daemon blocks SIGINT and SIGTERM in its threads) and
  // in a process group of its own: a terminal's Ctrl-C stops the daemon, whose exit (EOF) ends it.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, signal);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string serve = "--serve";
  std::string path = program;
  char* argv[] = {path.data(), serve.data(), nullptr};
  pid_t child = -1;
  const int status = posix_spawn(&child, program.c_str(), &actions, &attributes, argv, environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(ends[1]);
  if (status != 0) {
    close(ends[0]);
    return status;
  }
  child_ = child;
  socket_ = ends[0];
  ++counts_.starts;
  return 0;
}

void CufftHelper::stop(bool kill_it) {
  if (socket_ >= 0) close(socket_);  // EOF on the helper's stdin: it exits
  socket_ = -1;
  if (child_ > 0) {
    if (kill_it) kill(child_, SIGKILL);
    while (waitpid(child_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  child_ = -1;
}

void CufftHelper::give_up() {
  given_up_ = true;
  spdlog::warn("ncc_track: the cuFFT helper {} ended or hung twice; new FFT shapes are planned in this process from now on "
               "(their first plan holds the device's other work while cuFFT compiles)", program_);
}

CufftHelper::Answer CufftHelper::make(const std::string& program, const std::string& request) {
  std::lock_guard lock(mutex_);
  if (program != program_) {  // a new program: a fresh start
    stop(false);
    program_ = program;
    ends_ = 0;
    given_up_ = false;
  }
  if (given_up_) {
    ++counts_.unavailable;
    return Answer::unavailable;
  }
  if (child_ < 0) {
    const int error = start(program);
    if (error != 0) {
      given_up_ = true;
      spdlog::warn("ncc_track: the cuFFT helper {} could not be started ({}); new FFT shapes are planned in this "
                   "process", program, std::strerror(error));
      ++counts_.unavailable;
      return Answer::unavailable;
    }
  }
  // The helper ended (EOF, EPIPE) or hangs (killed): this request is planned here.
  const auto ended = [&](bool timed_out) {
    stop(timed_out);
    if (timed_out) {
      ++counts_.timeouts;
      spdlog::warn("ncc_track: the cuFFT helper {} did not answer within {} ms (killed); planned in this process",
                   program_, timeout_.count());
    } else {
      ++counts_.deaths;
      spdlog::warn("ncc_track: the cuFFT helper {} ended; planned in this process", program_);
    }
    if (++ends_ == 2) give_up();
    ++counts_.unavailable;
    return Answer::unavailable;
  };
  const std::string line = request + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = send(socket_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ended(false);
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::string answer;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ended(true);
    pollfd wait_for{socket_, POLLIN, 0};
    const int ready = poll(&wait_for, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return ended(true);
    char buffer[256];
    const ssize_t n = ready > 0 ? recv(socket_, buffer, sizeof buffer, 0) : -1;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ended(false);
    answer.append(buffer, static_cast<std::size_t>(n));
    const std::size_t end = answer.find('\n');
    if (end == std::string::npos) continue;
    answer.resize(end);  // one answer per request: nothing follows it
    if (answer == "ok") {
      ++counts_.made;
      return Answer::made;
    }
    ++counts_.failed;
    spdlog::info("ncc_track: the cuFFT helper did not plan {}: {}", request, answer);
    return Answer::failed;
  }
}

}  // namespace sonopipe::ncc
