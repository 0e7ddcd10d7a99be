#include "tools/common/stop_signal.h"

#include <atomic>
#include <csignal>

namespace sonopipe::tools {

namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int signal_number) {
  if (g_stop_signal.exchange(signal_number) != 0) {
    // Second signal: the user insists; let the default action end the process.
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: blocking ZeroMQ calls return EINTR and the loop checks the flag
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_requested() { return g_stop_signal.load() != 0; }

int stop_signal_number() { return g_stop_signal.load(); }

}  // namespace sonopipe::tools
