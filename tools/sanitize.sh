#!/usr/bin/env bash
# Builds and runs the test suite under sanitizers (CUDA off), each in its own build folder:
#   tools/sanitize.sh asan   the whole suite with AddressSanitizer + UndefinedBehaviorSanitizer
#   tools/sanitize.sh tsan   the executor and daemon tests with ThreadSanitizer
# SONOPIPE_SANITIZE_CXX picks the compiler (default: clang++-14 when present, else c++);
# SONOPIPE_SANITIZE_DIR the parent folder of the build folders (default: the repository's root,
# build-asan/ and build-tsan/); SONOPIPE_SANITIZE_JOBS the parallel jobs (default: nproc).
# SONOPIPE_SANITIZE_TARGETS limits what is built (e.g. "config_test wire_test"; default: as above).
# Extra arguments go to ctest (e.g. -R daemon_test). Exit status: ctest's.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kind="${1:-}"
shift || true
jobs="${SONOPIPE_SANITIZE_JOBS:-$(nproc)}"
parent="${SONOPIPE_SANITIZE_DIR:-$root}"
if [ -n "${SONOPIPE_SANITIZE_CXX:-}" ]; then
  cxx="$SONOPIPE_SANITIZE_CXX"
elif command -v clang++-14 >/dev/null; then
  cxx=clang++-14
else
  cxx=c++
fi
cc="${cxx/clang++/clang}"
[ "$cc" = c++ ] && cc=cc
[ "$cc" = g++ ] && cc=gcc

case "$kind" in
  asan)
    # halt_on_error: the first finding fails the test that made it; leaks are findings too.
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    targets=(all)
    tests=()
    ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer -g -O1"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
    # The threaded parts: the executor (queue, pool, slots), the daemon and its sockets.
    targets=(executor_test frame_queue_test daemon_test hardening_test ingest_test sonopiped)
    tests=(-R '^(executor_test|frame_queue_test|daemon_test|hardening_test|ingest_test)$')
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [ctest arguments...]" >&2
    exit 2
    ;;
esac

if [ -n "${SONOPIPE_SANITIZE_TARGETS:-}" ]; then
  read -r -a targets <<<"$SONOPIPE_SANITIZE_TARGETS"
fi
build="$parent/build-$kind"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONOPIPE_CUDA=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="$flags"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
cd "$build"
# The fuzz entry builds a clang fuzz tree of its own (tests/fuzz/run-fuzzers.sh): not part of this run.
ctest --output-on-failure -j "$jobs" -E "^fuzz_harnesses_" "${tests[@]}" "$@"
