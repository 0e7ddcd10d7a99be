// Signalling between the processes of a pool: futex waits and wakes on 32-bit words in shared
// memory (no daemon in between), and process identity for telling a dead peer from a live one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "shm/layout.h"

namespace sonopipe::shm {

// Sleeps while `*word == seen`, at most `timeout` (spurious returns are allowed: callers recheck).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen, std::chrono::nanoseconds timeout);
// Bumps `*word` and wakes every waiter, if any was counted in `waiters`.
void futex_wake_all(std::atomic<std::uint32_t>& word, const std::atomic<std::uint32_t>& waiters);

ProcessId this_process();
// False when the process has exited or its pid now names another process (start time differs).
bool process_alive(const ProcessId& process);

}  // namespace sonopipe::shm
