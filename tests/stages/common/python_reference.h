// Test helper: the python3 that has numpy and scipy (Debian's python3-scipy), for independent
// references. Probes every python3 on PATH (the first may be a pyenv without Debian's modules);
// empty when none has them, and the caller skips with a warning.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace sonopipe::test {

inline std::string python_with_scipy() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/python3";
    if (access(candidate.c_str(), X_OK) != 0) continue;
    const std::string probe = "'" + candidate + "' -c 'import numpy, scipy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return candidate;
  }
  return {};
}

}  // namespace sonopipe::test
