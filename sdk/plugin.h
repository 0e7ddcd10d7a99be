// What a stage plugin exports (docs/adding-a-stage.md). A plugin is a shared library, built against
// the installed stage SDK (find_package(sonopipe), target sonopipe::stage_sdk), that defines
//
//   SONOPIPE_STAGE_PLUGIN(registry) {
//     registry.add(MyStage::info());   // one line per stage, exactly as stages/registry.cpp
//   }
//
// The macro defines two C entry points that sonopiped looks up with dlsym:
//   int  sonopipe_plugin_abi_version();            the SDK version the plugin was compiled against
//   void sonopipe_register_stages(StageRegistry&, int abi_version);
// sonopiped refuses a plugin whose ABI version differs from its own before calling anything else,
// so a plugin built against another SDK never runs. The SDK is C++: plugin and daemon must also be
// built with the same compiler family and standard library (Debian's g++ / libstdc++).
#pragma once

#include <stdexcept>
#include <string>

#include "sdk/registry.h"

// Bumped whenever a type or function of the SDK headers changes in a way that breaks plugins
// (layout of StageIo/StagePlan/StageInfo/ParamDecl/TensorSpec/FrameMeta, Stage's virtual functions).
// CMake passes the same number (top CMakeLists.txt, SONOPIPE_STAGE_ABI_VERSION); this fallback
// serves builds that include the header without the SDK target's definitions.
#ifndef SONOPIPE_STAGE_ABI_VERSION
#define SONOPIPE_STAGE_ABI_VERSION 1
#endif

namespace sonopipe {
inline constexpr int stage_abi_version = SONOPIPE_STAGE_ABI_VERSION;
inline constexpr const char* plugin_abi_symbol = "sonopipe_plugin_abi_version";
inline constexpr const char* plugin_register_symbol = "sonopipe_register_stages";
}  // namespace sonopipe

#define SONOPIPE_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

#define SONOPIPE_STAGE_PLUGIN(registry_name)                                                            \
  static void sonopipe_plugin_register_body(::sonopipe::StageRegistry& registry_name);                \
  SONOPIPE_PLUGIN_EXPORT int sonopipe_plugin_abi_version() { return SONOPIPE_STAGE_ABI_VERSION; }      \
  SONOPIPE_PLUGIN_EXPORT void sonopipe_register_stages(::sonopipe::StageRegistry& registry_name,       \
                                                       int abi_version) {                              \
    if (abi_version != SONOPIPE_STAGE_ABI_VERSION)                                                     \
      throw std::runtime_error("plugin built for stage ABI " + std::to_string(SONOPIPE_STAGE_ABI_VERSION) + \
                               ", daemon has " + std::to_string(abi_version));                         \
    sonopipe_plugin_register_body(registry_name);                                                     \
  }                                                                                                    \
  static void sonopipe_plugin_register_body(::sonopipe::StageRegistry& registry_name)
