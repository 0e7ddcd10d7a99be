#include "daemon/thread_placement.h"

#include <sched.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace sonopipe {
namespace {

int parse_cpu(std::string_view text, std::string_view whole) {
  int cpu = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || cpu < 0)
    throw std::invalid_argument("'" + std::string(whole) + "': '" + std::string(text) +
                                "' is not a CPU number; expected a list such as \"4-15\" or \"2,3,8-11\"");
  if (cpu >= CPU_SETSIZE)
    throw std::invalid_argument("'" + std::string(whole) + "': CPU " + std::to_string(cpu) + " is past the " +
                                std::to_string(CPU_SETSIZE) + " CPUs a process can name");
  return cpu;
}

void set_thread_cpus(pid_t tid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH)  // ESRCH: the thread has ended
    throw std::runtime_error("CPUs " + cpu_list_text(cpus) + ": the kernel refused them (" + std::strerror(errno) +
                             "; are they online and in this process's cpuset?)");
}

std::vector<pid_t> own_threads() {
  std::vector<pid_t> tids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    tids.push_back(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  return tids;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (const std::size_t dash = item.find('-'); dash != std::string_view::npos) {
      const int first = parse_cpu(item.substr(0, dash), text), last = parse_cpu(item.substr(dash + 1), text);
      if (last < first)
        throw std::invalid_argument("'" + std::string(text) + "': the range " + std::string(item) + " runs backwards");
      for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    } else {
      cpus.push_back(parse_cpu(item, text));
    }
  }
  if (cpus.empty()) throw std::invalid_argument("'" + std::string(text) + "': no CPU given");
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return text;
}

void place_process_threads(const std::vector<int>& cpus) {
  for (pid_t tid : own_threads()) set_thread_cpus(tid, cpus);
}

int place_named_threads(std::string_view name, const std::vector<int>& cpus) {
  int placed = 0;
  for (pid_t tid : own_threads()) {
    std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string thread_name;
    if (!std::getline(comm, thread_name) || thread_name != name) continue;
    set_thread_cpus(tid, cpus);
    ++placed;
  }
  return placed;
}

std::vector<int> thread_cpus(int pid, int tid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::string_view list(line);
      list.remove_prefix(std::strlen("Cpus_allowed_list:"));
      while (!list.empty() && (list.front() == ' ' || list.front() == '\t')) list.remove_prefix(1);
      return parse_cpu_list(list);
    }
  return {};
}

}  // namespace sonopipe
