// Fuzzes the YAML config loader (parse_config) with the built-in stages: any text is either a
// config or one ConfigError, never a crash, a hang or another exception. Inputs that name plugins
// are skipped: loading one runs a shared library's code (plugin loading has its own tests).
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "stages/registry.h"
#include "daemon/config.h"

namespace {

bool names_plugins(const std::string& text) {
  try {
    const YAML::Node root = YAML::Load(text);
    return root.IsMap() && root["plugins"];
  } catch (const std::exception&) {
    return false;  // parse_config refuses it before it could load anything
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 16 * 1024) return 0;  // configs are small; long inputs only slow the search down
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (names_plugins(text)) return 0;
  try {
    const sonopipe::DaemonConfig config = sonopipe::parse_config(text, "fuzz.yaml", sonopipe::builtin_stages());
    if (config.pipelines.empty()) __builtin_trap();  // a config always has a pipeline
  } catch (const sonopipe::ConfigError& e) {
    if (std::string(e.what()).rfind("fuzz.yaml:", 0) != 0) __builtin_trap();  // every error names where
  }
  return 0;
}
