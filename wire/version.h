// The sonopipe version (the file VERSION at the top of the tree, through CMake's project version):
// what every program prints for --version, the C client library's sp_version and the packages carry.
#pragma once

#include <string>

namespace sonopipe {

// "0.1.0"
const char* version();
// "<program> <version>", the line a program prints for --version.
std::string version_line(const std::string& program);

}  // namespace sonopipe
