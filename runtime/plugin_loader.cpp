#include "runtime/plugin_loader.h"

#include <dlfcn.h>

#include <exception>

#include "sdk/plugin.h"

namespace sonopipe {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) { throw PluginError(path + ": " + why); }

}  // namespace

void load_stage_plugin(const std::string& path, StageRegistry& registry) {
  // RTLD_LOCAL: two plugins may define symbols of the same name without clashing.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* error = dlerror();
    fail(path, std::string("cannot load the library: ") + (error ? error : "unknown dlopen error"));
  }
  using AbiVersionFunction = int (*)();
  using RegisterFunction = void (*)(StageRegistry&, int);
  auto abi_version = reinterpret_cast<AbiVersionFunction>(dlsym(library, plugin_abi_symbol));
  if (!abi_version)
    fail(path, std::string("not a sonopipe stage plugin: no symbol ") + plugin_abi_symbol +
                   " (define the entry points with SONOPIPE_STAGE_PLUGIN, sdk/plugin.h)");
  const int plugin_abi = abi_version();
  if (plugin_abi != stage_abi_version)
    fail(path, "built for stage ABI version " + std::to_string(plugin_abi) + ", this sonopiped has " +
                   std::to_string(stage_abi_version) + "; rebuild the plugin against this sonopipe");
  auto register_stages = reinterpret_cast<RegisterFunction>(dlsym(library, plugin_register_symbol));
  if (!register_stages) fail(path, std::string("not a sonopipe stage plugin: no symbol ") + plugin_register_symbol);

  StageRegistry added;
  try {
    register_stages(added, stage_abi_version);
  } catch (const std::exception& e) {
    fail(path, std::string("registering its stages threw: ") + e.what());
  } catch (...) {
    fail(path, "registering its stages threw a non-standard exception");
  }
  if (added.all().empty()) fail(path, "registered no stage");
  for (const StageInfo& info : added.all()) {
    if (registry.find(info.name)) fail(path, "stage '" + info.name + "' is already registered (built in or by an earlier plugin)");
    if (!info.create) fail(path, "stage '" + info.name + "' has no factory");
  }
  for (const StageInfo& info : added.all()) registry.add(info);
}

}  // namespace sonopipe
