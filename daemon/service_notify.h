// systemd's service notifications (sd_notify, tools/systemd/sonopiped.service with Type=notify):
// READY=1 once every socket is bound, WATCHDOG=1 while the daemon serves, STOPPING=1 when it starts
// to drain. Nothing happens outside systemd (no NOTIFY_SOCKET), nor in a build without libsystemd.
#pragma once

#include <chrono>

namespace sonopipe::service {

void notify_ready();
void notify_stopping();
void notify_watchdog();
// How often to send WATCHDOG=1: half of the unit's WatchdogSec (systemd's advice), or zero when
// no watchdog is asked for.
std::chrono::microseconds watchdog_interval();

}  // namespace sonopipe::service
