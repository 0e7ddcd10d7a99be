// Where the daemon's threads run (config `threads:`, docs/configuration.md). On a scanner host the
// daemon can be kept off the CPUs of the acquisition process, and ZeroMQ's two I/O threads (the
// one that reads frames from tcp/ipc senders, the one that writes results to subscribers; the
// host path's busiest threads, docs/host-path.md) each given a CPU of its own.
//
// CPU lists are written as taskset -c writes them: "4-15", "2,3,8-11".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sonopipe {

// "0-3,8" -> {0, 1, 2, 3, 8} (sorted, no duplicates). Throws std::invalid_argument naming what is
// wrong (not a number, a range backwards, a CPU number past CPU_SETSIZE, empty).
std::vector<int> parse_cpu_list(std::string_view text);
// {0, 1, 2, 3, 8} -> "0-3,8".
std::string cpu_list_text(const std::vector<int>& cpus);

// Every thread of this process, now, on `cpus`; threads started later from any of them inherit
// it. Throws std::runtime_error when the kernel refuses (no CPU of the list is available to the
// process, e.g. outside its cgroup's cpuset).
void place_process_threads(const std::vector<int>& cpus);

// The threads of this process named `name` (/proc/self/task/*/comm, e.g. libzmq's "ZMQbg/IO/0")
// on `cpus`; returns how many there were. Throws std::runtime_error when the kernel refuses.
int place_named_threads(std::string_view name, const std::vector<int>& cpus);

// The CPUs thread `tid` of process `pid` may run on (Cpus_allowed_list of /proc/<pid>/task/<tid>/status).
std::vector<int> thread_cpus(int pid, int tid);

}  // namespace sonopipe
