#!/usr/bin/env bash
# `cmake --install` of this build into a temporary prefix, then run_installed.sh on it.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
source_dir="$2"
work="$build/tests/package/install"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
bash "$source_dir/tests/package/run_installed.sh" "$work/prefix" "$source_dir" "$work/run"
