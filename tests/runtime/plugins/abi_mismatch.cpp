// Test plugin: claims an ABI version one above the daemon's (built against "another SDK").
#include "sdk/plugin.h"

SONOPIPE_PLUGIN_EXPORT int sonopipe_plugin_abi_version() { return SONOPIPE_STAGE_ABI_VERSION + 1; }
SONOPIPE_PLUGIN_EXPORT void sonopipe_register_stages(sonopipe::StageRegistry&, int) {}
