// Test plugin: its registration throws.
#include "sdk/plugin.h"

SONOPIPE_STAGE_PLUGIN(registry) {
  (void)registry;
  throw std::runtime_error("licence server unreachable");
}
