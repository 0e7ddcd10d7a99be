// Fuzzes the host path's experiment switches (runtime/host_path_switches.h), text from the
// environment: the input's lines are the switches' values in host_path_switch_names' order (a
// missing line leaves the switch unset, an empty one sets it empty; a NUL ends a value, as the
// environment does). Either every value is taken, or std::invalid_argument names a switch that was
// set and not empty, with its value; host_path_switches_set lists exactly the non-empty ones.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/host_path_switches.h"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fputs(what, stderr);
  std::fputc('\n', stderr);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> expected_set;  // "NAME=value" of each switch set and not empty
  std::size_t at = 0;
  for (const char* name : sonopipe::host_path_switch_names()) {
    if (at > input.size()) {
      ::unsetenv(name);
      continue;
    }
    const std::size_t end = std::min(input.find('\n', at), input.size());
    const std::string line(input.substr(at, end - at));
    at = end + 1;
    const std::string value = line.substr(0, line.find('\0'));
    ::setenv(name, value.c_str(), 1);
    if (!value.empty()) expected_set.push_back(std::string(name) + "=" + value);
  }
  if (sonopipe::host_path_switches_set() != expected_set) broken("host_path_switches_set lists other switches");
  try {
    sonopipe::host_path_switches_from_environment();
  } catch (const std::invalid_argument& error) {
    const std::string_view message = error.what();
    bool named = false;
    for (const std::string& set : expected_set) named = named || message.rfind(set + ": takes ", 0) == 0;
    if (!named) broken("a refusal that names no switch set to that value");
  }
  return 0;
}
