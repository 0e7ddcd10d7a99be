#!/usr/bin/env bash
# Builds and runs the test suite under sanitizers (CUDA off), each in its own build folder. This script
# is the project's sanitizer preset (there is no CMakePresets.json):
#   tools/sanitize.sh asan   every test program and Python test with AddressSanitizer + UBSan
#   tools/sanitize.sh tsan   every program that starts threads, and the tools they drive, with TSan
# SONOPIPE_SANITIZE_CXX picks the compiler (default: clang++-14 when present, else c++);
# SONOPIPE_SANITIZE_DIR the parent folder of the build folders (default: the repository's root,
# build-asan/ and build-tsan/); SONOPIPE_SANITIZE_JOBS the parallel jobs (default: nproc).
# SONOPIPE_SANITIZE_TARGETS limits what is built (e.g. "config_test wire_test"; default: as above).
# Extra arguments go to ctest (e.g. -R daemon_test). Exit status: non-zero when a test failed or any
# process (a daemon or tool a test started, whose own exit status the test may not look at) wrote a
# sanitizer report; the reports are collected in <build>/sanitizer-reports/ and printed at the end.
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
build="$parent/build-$kind"
reports="$build/sanitizer-reports"
suppressions="$root/tests/sanitizers"

# Tests that cannot run instrumented, with the reason (an ERE over CTest names):
# - fuzz_harnesses_*: builds a clang fuzz tree of its own (tests/fuzz/run-fuzzers.sh).
excluded="^fuzz_harnesses_"
case "$kind" in
  asan)
    # halt_on_error: the first finding fails the test that made it; leaks are findings too.
    flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
    # The shared ASan runtime, in every program and library: the Python tests load the instrumented
    # client library into an uninstrumented interpreter, which needs the runtime preloaded, and the
    # daemon those tests start inherits that preload; a program with the static runtime refuses to
    # start beside it ("linked against incompatible ASan runtimes").
    runtime="$("$cxx" -print-file-name=libclang_rt.asan-x86_64.so)"
    link_flags="$flags -shared-libasan -Wl,-rpath,$(dirname "$runtime")"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:log_path=$reports/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
    export LSAN_OPTIONS="suppressions=$suppressions/lsan.supp:print_suppressions=0"
    targets=(all)
    tests=()
    # Python tests that load the client library through ctypes: run apart, with the runtime preloaded
    # into the interpreter and leak detection off for them (CPython and numpy keep allocations at exit
    # that LeakSanitizer reports, and a suppression cannot tell them from the library's own, whose
    # stacks pass through the interpreter too). The library's leaks are checked by client_test (C++).
    preloaded='^python_test_client'
    # - package_*: they build consumers of the installed libraries (client_program.c, the example
    #   plugin) with the system toolchain, unsanitized: the instrumented client library cannot load
    #   into such a program, and preloading the runtime into cmake and make trips ASan in GNU make
    #   itself (strndup past its buffer). Their installed daemon and tools run instrumented up to
    #   that step; what they check is packaging.
    excluded="$excluded|^package_"
    ;;
  tsan)
    flags="-fsanitize=thread -fno-omit-frame-pointer -g -O1"
    link_flags="$flags"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$suppressions/tsan.supp:log_path=$reports/tsan"
    # Every program that starts threads (the executor's pool, the daemon's loops, the strain tracker's
    # workers, the CURVE gate, the IGTLink senders, test threads) and every tool those tests start.
    programs=(device_lane_test device_lane_state_test pipeline_executor_test placement_test frame_queue_test
              daemon_test hardening_test ingest_test security_test resources_test service_notify_test
              plugin_config_test protobuf_log_test arfi_daemon_test strain_daemon_test perfusion_daemon_test
              beamform_daemon_test ncc_track_test strain_test faults_test soak_test
              igtl_test igtl_client_connection_test igtl_layout_test record_test run_test replay_test
              daemon_roundtrip_test stream_route_test client_test client_shm_test shm_transport_test
              shm_ingest_test shm_publish_test replay_shm_test record_shm_test publish_copies_test subscriber_watch_test)
    targets=("${programs[@]}" sonopiped sonopipe-sim sonopipe-replay sonopipe-record sonopipe-ctl sonopipe-igtl
             sonopipe-run sonopipe-bench)
    # The client library (client_test, client_shm_test) links without --no-undefined here: clang's
    # TSan runtime is static, in executables only, and resolves the library's instrumentation calls
    # when it is loaded (client/CMakeLists.txt). (clang 14's shared TSan runtime, -shared-libsan,
    # crashed at start in a two-file check on the development machine, so it is not used.)
    tests=(-R "^($(IFS='|'; echo "${programs[*]}"))\$")
    preloaded=""
    ;;
  *)
    echo "usage: tools/sanitize.sh asan|tsan [ctest arguments...]" >&2
    exit 2
    ;;
esac

if [ -n "${SONOPIPE_SANITIZE_TARGETS:-}" ]; then
  read -r -a targets <<<"$SONOPIPE_SANITIZE_TARGETS"
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSONOPIPE_CUDA=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$link_flags" -DCMAKE_SHARED_LINKER_FLAGS="$link_flags" \
  -DCMAKE_MODULE_LINKER_FLAGS="$link_flags"
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
cd "$build"
rm -rf "$reports"
mkdir -p "$reports"
status=0
if [ -n "$preloaded" ]; then
  ctest --output-on-failure -j "$jobs" "${tests[@]}" "$@" -E "$excluded|$preloaded" || status=$?
  # The preloaded ones among those the arguments select (a later -R would replace theirs).
  names="$(ctest -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p' | grep -E "$preloaded" | paste -sd '|' || true)"
  if [ -n "$names" ]; then
    LD_PRELOAD="$runtime" ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
      ctest --output-on-failure -j "$jobs" -R "^($names)\$" || status=$?
  fi
else
  ctest --output-on-failure -j "$jobs" "${tests[@]}" "$@" -E "$excluded" || status=$?
fi
shopt -s nullglob
found=("$reports"/*)
if [ ${#found[@]} -gt 0 ]; then
  echo "sanitize.sh: ${#found[@]} sanitizer report(s) in $reports:" >&2
  for report in "${found[@]}"; do
    echo "==== $report" >&2
    cat "$report" >&2
  done
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
