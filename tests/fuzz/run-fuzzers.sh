#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz in a clang build of their own (only the harnesses and
# the libraries they need; ASan + UBSan + libFuzzer) and runs each for DURATION seconds, starting
# from its seed corpus. Exit status 1 when any harness found a crash, leak, timeout or UB; the
# input that did it is kept in <build>/findings/<harness>/ (make it a regression case: copy it
# to tests/fuzz/regressions/<harness>/ once it is fixed).
#   tests/fuzz/run-fuzzers.sh 30            CI (a CTest entry when clang is present)
#   tests/fuzz/run-fuzzers.sh 600           the long run: 10 minutes each
#   tests/fuzz/run-fuzzers.sh 600 config    one harness
#   tests/fuzz/run-fuzzers.sh --build-only  build, run nothing (CTest's fuzz_harnesses_build)
#   tests/fuzz/run-fuzzers.sh --no-build 30 config   run on the tree built before (CTest's
#                                           fuzz_harnesses_<name>_30s, one per harness)
# SONOPIPE_FUZZ_BUILD_DIR: the build folder (default build-fuzz/ in the repository);
# SONOPIPE_FUZZ_CXX: the compiler (default clang++-14, else clang++);
# SONOPIPE_FUZZ_FLAGS: optimisation and debug flags of the tree (default "-O1 -gline-tables-only";
# CTest's smoke run builds at "-O0 -g0", see tests/fuzz/tests.cmake).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build_step=yes
run_step=yes
case "${1:-}" in
  --build-only) run_step=no; shift ;;
  --no-build) build_step=no; shift ;;
esac
duration="${1:-30}"
shift || true
build="${SONOPIPE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cxx="${SONOPIPE_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++)}"
cc="${cxx/clang++/clang}"
jobs="$(nproc)"

if [ "$build_step" = yes ]; then
  mkdir -p "$build"
  # -O1: what libFuzzer recommends (more executions per second than -O0). Line tables are all
  # the sanitizers' stack traces need (file:line), at a fraction of -g's compile and link time.
  flags="${SONOPIPE_FUZZ_FLAGS:--O1 -gline-tables-only}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
    -DSONOPIPE_CUDA=OFF -DSONOPIPE_FUZZ=ON \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
  cmake --build "$build" -j "$jobs" --target sonopipe_fuzzers
fi
[ "$run_step" = yes ] || exit 0

harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  for program in "$build"/fuzz/fuzz_*; do harnesses+=("$(basename "$program" | sed 's/^fuzz_//')"); done
fi
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0"
failed=()
for name in "${harnesses[@]}"; do
  work="$build/fuzz-work/$name"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  # New inputs go to a scratch corpus; the committed seeds are read only.
  echo "fuzz: $name for ${duration}s"
  if ! "$build/fuzz/fuzz_$name" -max_total_time="$duration" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$root/tests/fuzz/corpus/$name" \
        >"$work/log" 2>&1; then
    failed+=("$name")
    mkdir -p "$build/findings/$name"
    cp "$work"/artifacts/* "$build/findings/$name/" 2>/dev/null || true
    echo "fuzz: $name FAILED, log $work/log:"
    grep -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$work/log" | head -30
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" | sed "s/^/fuzz: $name /" || true
  echo "fuzz: $name corpus $(ls "$work/corpus" | wc -l) inputs"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $build/findings/)"
  exit 1
fi
echo "fuzz: ${#harnesses[@]} harnesses ran ${duration}s each without a finding"
