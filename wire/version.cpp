#include "wire/version.h"

namespace sonopipe {

const char* version() { return SONOPIPE_VERSION; }  // defined for this file alone (wire/CMakeLists.txt)

std::string version_line(const std::string& program) { return program + " " + version(); }

}  // namespace sonopipe
