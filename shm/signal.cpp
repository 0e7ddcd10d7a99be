#include "shm/signal.h"

#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace sonopipe::shm {
namespace {

// Field 22 of /proc/<pid>/stat (starttime); 0 when unreadable. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
std::uint64_t start_ticks_of(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* file = std::fopen(path, "re");
  if (!file) return 0;
  char text[1024];
  const std::size_t length = std::fread(text, 1, sizeof text - 1, file);
  std::fclose(file);
  text[length] = '\0';
  const char* after_name = std::strrchr(text, ')');
  if (!after_name) return 0;
  // After ") " come fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime (field 22).
  const char* p = after_name + 1;
  for (int field = 3; field < 22 && *p; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  return std::strtoull(p, nullptr, 10);
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen, std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return;
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  relative.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  // Shared (not FUTEX_PRIVATE): the word lives in a mapping other processes share.
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &relative, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word, const std::atomic<std::uint32_t>& waiters) {
  word.fetch_add(1, std::memory_order_release);
  if (waiters.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

ProcessId this_process() {
  const int pid = static_cast<int>(getpid());
  return {pid, start_ticks_of(pid)};
}

bool process_alive(const ProcessId& process) {
  if (process.pid <= 0) return false;
  if (kill(process.pid, 0) != 0 && errno == ESRCH) return false;
  const std::uint64_t ticks = start_ticks_of(process.pid);
  // A zombie still has its stat; treat a process whose stat says 'Z' as dead.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", process.pid);
  if (std::FILE* file = std::fopen(path, "re")) {
    char text[512];
    const std::size_t length = std::fread(text, 1, sizeof text - 1, file);
    std::fclose(file);
    text[length] = '\0';
    if (const char* after_name = std::strrchr(text, ')'); after_name && after_name[1] == ' ' && after_name[2] == 'Z')
      return false;
  }
  return ticks == 0 || ticks == process.start_ticks;  // unreadable /proc (other namespace): trust kill()
}

}  // namespace sonopipe::shm
