// Loads stage plugins (sdk/plugin.h) into a registry. Used by the config loader (`plugins:`)
// and by `sonopiped --list-stages --plugins`.
#pragma once

#include <stdexcept>
#include <string>

#include "sdk/registry.h"

namespace sonopipe {

// Why a plugin could not be used; the message starts with the library's path.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Opens the shared library at `path`, checks its ABI version and adds every stage it registers to
// `registry`: all of them or, on any error, none (a stage name already in `registry` is an error).
// Throws PluginError for a library that cannot be opened, lacks an entry point, was built for
// another ABI version, throws while registering or registers a duplicate name. A loaded library
// stays loaded for the life of the process (its stages' code must outlive every stage object).
void load_stage_plugin(const std::string& path, StageRegistry& registry);

}  // namespace sonopipe
