#!/usr/bin/env bash
# Runs a build's whole test suite ([cuda] tests included) and every benchmark suite on a machine
# with a GPU, writing one log per program. Used on the lent GPU machine, where the build arrives as
# a packed copy of build/ (test binaries find sources and binaries through the two variables below).
#   tools/gpu-check.sh BUILD_DIR LOG_DIR [PART...]   parts: tests core arfi strain perfusion (default all)
set -uo pipefail
build="$(cd "${1:?usage: gpu-check.sh BUILD_DIR LOG_DIR [PART...]}" && pwd)"
logs="${2:?log folder}"
shift 2
parts="${*:-tests core arfi strain perfusion}"
wants() { [[ " $parts " == *" $1 "* ]]; }
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$logs"
export SONOPIPE_SOURCE_DIR="$root" SONOPIPE_BINARY_DIR="$build" SONOPIPED="$build/daemon/sonopiped"
export SONOPIPE_STRAIN_TEST_BACKEND=cuda
[ -d "$build/.bundle-libs" ] && export LD_LIBRARY_PATH="$build/.bundle-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$logs/gpu.txt"
failed=0
if wants tests; then
  for test in "$build"/tests/*_test; do
    name=$(basename "$test")
    if timeout 300 "$test" > "$logs/$name.log" 2>&1; then result=ok; else result=FAILED; failed=1; fi
    printf '%-28s %s  %s\n' "$name" "$result" "$(grep -E 'test cases|All tests passed' "$logs/$name.log" | tail -1)"
  done
fi
bench="$build/tools/bench/sonopipe-bench"
run_bench() {  # suite, time limit in s, extra arguments
  local suite=$1 limit=$2
  shift 2
  wants "$suite" || return 0
  timeout "$limit" "$bench" "$suite" "$@" > "$logs/bench-$suite.log" 2>&1 || { echo "bench $suite: exit $?"; failed=1; }
}
run_bench core 240 --daemon "$SONOPIPED" --backend cuda
run_bench arfi 240
run_bench strain 300
run_bench perfusion 300
exit $failed
