#!/usr/bin/env bash
# README command (2): install what is missing, build everything (CUDA too when nvcc is present)
# and run the whole test suite. A [cuda] entry (<program>_cuda) is skipped, not passed, when no
# GPU is present. Ends with the time of each phase and one line counting CTest's entries,
#   tests: N passed, N failed, N skipped
# and exits non-zero when any entry failed (a program that was not built counts as failed).
# SONOPIPE_BUILD_DIR overrides the build folder (default: build/ in the repository);
# SONOPIPE_CMAKE_ARGS adds configure options, split at spaces (e.g. -DSONOPIPE_CUDA=OFF).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SONOPIPE_BUILD_DIR:-$root/build}"
jobs="$(nproc)"
read -r -a cmake_args <<<"${SONOPIPE_CMAKE_ARGS:-}"

phases=()
timed() {  # timed <phase> <command...>: runs it and records its wall time
  local name="$1" start="$SECONDS"
  shift
  "$@"
  phases+=("$name $((SECONDS - start)) s")
}

timed install-deps bash "$root/tools/install-deps.sh"
timed configure cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
timed build cmake --build "$build" -j "$jobs"

cd "$build"
log="$build/Testing/run-tests.log"
mkdir -p "$(dirname "$log")"
start="$SECONDS"
status=0
# One entry more than cores: many entries mostly wait (sockets, child processes, a browser), so
# with -j nproc a core sits idle while two of them wait.
ctest --output-on-failure -j "$((jobs + 1))" 2>&1 | tee "$log" || status=$?
phases+=("ctest $((SECONDS - start)) s")

# One result line per entry: "  3/80 Test  #12: name .....   Passed    0.50 sec"; anything but
# Passed and Skipped (Failed, Timeout, Not Run, Exception, ...) is a failure.
counts="$(grep -E '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: ' "$log" | awk '
  / Passed +[0-9.]+ sec/ { passed++; next }
  /\*\*\*Skipped/ { skipped++; next }
  { failed++ }
  END { printf "%d %d %d", passed, failed, skipped }')"
read -r passed failed skipped <<<"$counts"
echo "run-tests: ${phases[*]/%/,}" | sed 's/,$//'
echo "tests: $passed passed, $failed failed, $skipped skipped"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ $((passed + skipped)) -eq 0 ]; then
  exit 1
fi
