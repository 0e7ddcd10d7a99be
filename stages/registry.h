// The registry of every stage built into sonopipe: one line per stage in stages/registry.cpp.
#pragma once

#include "sdk/registry.h"

namespace sonopipe {

const StageRegistry& builtin_stages();

}  // namespace sonopipe
