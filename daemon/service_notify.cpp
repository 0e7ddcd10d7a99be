#include "daemon/service_notify.h"

#ifdef SONOPIPE_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace sonopipe::service {

#ifdef SONOPIPE_WITH_SYSTEMD

void notify_ready() { sd_notify(0, "READY=1\nSTATUS=serving"); }
void notify_stopping() { sd_notify(0, "STOPPING=1\nSTATUS=draining"); }
void notify_watchdog() { sd_notify(0, "WATCHDOG=1"); }

std::chrono::microseconds watchdog_interval() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
  return std::chrono::microseconds(usec / 2);
}

#else

void notify_ready() {}
void notify_stopping() {}
void notify_watchdog() {}
std::chrono::microseconds watchdog_interval() { return std::chrono::microseconds(0); }

#endif

}  // namespace sonopipe::service
