#!/usr/bin/env bash
# README command (2): install what is missing, build everything (CUDA too when nvcc is present)
# and run the whole test suite. GPU tests skip with a warning when no device is present.
# SONOPIPE_BUILD_DIR overrides the build folder (default: build/ in the repository).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SONOPIPE_BUILD_DIR:-$root/build}"
bash "$root/tools/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
