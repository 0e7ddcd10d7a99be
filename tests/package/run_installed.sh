#!/usr/bin/env bash
# Drives an INSTALLED sonopipe (a `cmake --install` prefix or an unpacked .deb's usr/) end to end:
# builds examples/plugin-stage against the installed CMake package, lists the plugin's stage with the
# installed sonopiped, simulates IQ frames with the installed sonopipe-sim, replays them through the
# installed daemon (plugin pipeline `log_envelope`) while the installed sonopipe-record records the
# results, runs the installed sonopipe-run over the same frames, and checks every result value with
# the installed Python package against numpy (and sonopipe-run's against the daemon's). Then
# compiles tests/client/client_program.c with `pkg-config --cflags --libs sonopipe-client` alone
# and runs it against the installed daemon (convert round trips byte for byte, every error path).
#   run_installed.sh PREFIX SOURCE_DIR WORK_DIR
set -euo pipefail
prefix="$(cd "$1" && pwd)"
source_dir="$2"
work="$3"
bin="$prefix/bin"
python_dir="$prefix/lib/python3/dist-packages"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "run_installed: FAILED: $*" >&2; exit 1; }

echo "-- installed files"
for f in "$bin/sonopiped" "$bin/sonopipe-sim" "$bin/sonopipe-replay" "$bin/sonopipe-record" "$bin/sonopipe-ctl" \
         "$bin/sonopipe-keygen" "$prefix/lib/systemd/system/sonopiped.service" \
         "$bin/sonopipe-view" "$bin/sonopipe-run" "$bin/sonopipe-cohort" "$prefix/include/sonopipe/sdk/stage.h" "$prefix/include/sonopipe/sdk/plugin.h" \
         "$python_dir/sonopipe/__init__.py" "$python_dir/sonopipe/v1/frame_pb2.py" "$prefix/share/sonopipe/config/demo.yaml" \
         "$prefix/include/sonopipe/sonopipe_client.h" "$prefix/share/sonopipe/matlab/SonopipeSender.m"; do
  [ -e "$f" ] || fail "missing $f"
done
[ -x "$bin/sonopipe-igtl" ] || fail "missing $bin/sonopipe-igtl"
# lib/ or lib/<multiarch>/ (GNUInstallDirs picks the multiarch folder for a /usr prefix).
for name in libsonopipe-stage-sdk.so libsonopipe-client.so sonopipe.pc sonopipe-client.pc sonopipeConfig.cmake; do
  [ -n "$(find "$prefix/lib" -name "$name" -print -quit)" ] || fail "missing $name under $prefix/lib"
done

echo "-- every installed program answers --version with the one version (VERSION)"
version="$(head -n 1 "$source_dir/VERSION")"
for program in sonopiped sonopipe-sim sonopipe-replay sonopipe-record sonopipe-ctl sonopipe-keygen sonopipe-run \
               sonopipe-import sonopipe-export sonopipe-igtl sonopipe-view sonopipe-web sonopipe-cohort; do
  answer="$("$bin/$program" --version)" || fail "$program --version"
  [ "$answer" = "$program $version" ] || fail "$program --version says '$answer', expected '$program $version'"
done
answer="$(PYTHONPATH="$python_dir" /usr/bin/python3 -c 'import sonopipe; print(sonopipe.__version__)')"
[ "$answer" = "$version" ] || fail "the installed Python package says version '$answer', expected '$version'"
config_version="$(find "$prefix/lib" -name sonopipeConfigVersion.cmake -print -quit)"
grep -qx "set(PACKAGE_VERSION \"$version\")" "$config_version" || fail "$config_version is not version $version"
for pc in sonopipe sonopipe-client; do
  pc_file="$(find "$prefix/lib" -name "$pc.pc" -print -quit)"
  answer="$(PKG_CONFIG_PATH="$(dirname "$pc_file")" pkg-config --modversion "$pc")"
  [ "$answer" = "$version" ] || fail "pkg-config --modversion $pc says '$answer', expected '$version'"
done

echo "-- building examples/plugin-stage against the installed package only"
cmake -S "$source_dir/examples/plugin-stage" -B "$work/plugin-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/plugin-configure.log" 2>&1 || { cat "$work/plugin-configure.log"; fail "configure"; }
cmake --build "$work/plugin-build" > "$work/plugin-build.log" 2>&1 || { cat "$work/plugin-build.log"; fail "build"; }
plugin="$work/plugin-build/libsonopipe-log-envelope.so"
[ -f "$plugin" ] || fail "the example did not produce $plugin"
echo "-- and with pkg-config instead of CMake"
pc_dir="$(dirname "$(find "$prefix/lib" -name sonopipe.pc -print -quit)")"
flags="$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs sonopipe)" || fail "pkg-config sonopipe"
g++ -std=c++20 -O1 -shared -fPIC "$source_dir/examples/plugin-stage/log_envelope.cpp" $flags -o "$work/libpc_plugin.so" \
  || fail "building the example with pkg-config flags ($flags)"
"$prefix/bin/sonopiped" --list-stages --plugins "$work/libpc_plugin.so" | grep -q '^log_envelope — ' \
  || fail "the pkg-config build of the example is not listed"

echo "-- sonopiped --list-stages --plugins"
"$bin/sonopiped" --list-stages --plugins "$plugin" > "$work/stages.txt"
grep -q '^log_envelope — ' "$work/stages.txt" || fail "log_envelope not listed"
grep -q '^convert — ' "$work/stages.txt" || fail "built-in stages not listed"

echo "-- replay through the installed daemon with the plugin"
"$bin/sonopipe-sim" speckle --out "$work/iq.h5" --frames 4 --shape 16x256 --kind iq --type float32 --seed 5 > /dev/null
cat > "$work/daemon.yaml" <<YAML
ingest: {endpoint: "ipc://$work/ingest"}
publish: {endpoint: "ipc://$work/publish", status_interval_s: 0.2}
control: {endpoint: "ipc://$work/control"}
backend: cpu
cpu_threads: 2
plugins: ["$plugin"]
pipelines:
  - name: bmode
    stages:
      - {type: log_envelope, params: {reference: 0.5, floor_db: -50}}
YAML
"$bin/sonopiped" --config "$work/daemon.yaml" > "$work/sonopiped.log" 2>&1 &
daemon=$!
cleanup() { kill "$daemon" "${recorder:-}" 2> /dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$bin/sonopipe-ctl" status --endpoint "ipc://$work/control" > /dev/null 2>&1 && break; sleep 0.1; done
"$bin/sonopipe-ctl" status --endpoint "ipc://$work/control" > /dev/null || { cat "$work/sonopiped.log"; fail "daemon did not start"; }
"$bin/sonopipe-record" --out "$work/results.h5" --endpoint "ipc://$work/publish" --count 4 --duration 60 \
  --ready-file "$work/record.ready" > "$work/record.log" 2>&1 &
recorder=$!
for _ in $(seq 200); do [ -f "$work/record.ready" ] && break; sleep 0.05; done
"$bin/sonopipe-replay" "$work/iq.h5" --endpoint "ipc://$work/ingest" --lossless --max > "$work/replay.log"
wait "$recorder" || { cat "$work/record.log"; fail "recorder"; }
recorder=""
"$bin/sonopipe-ctl" stop --endpoint "ipc://$work/control" --wait > /dev/null
wait "$daemon" || fail "sonopiped exited with $?"
daemon=""

echo "-- the same recording through the installed sonopipe-run; sonopipe-cohort starts"
"$bin/sonopipe-run" --config "$work/daemon.yaml" "$work/iq.h5" --out "$work/run" > "$work/run.log" 2>&1 \
  || { cat "$work/run.log"; fail "sonopipe-run"; }
"$bin/sonopipe-cohort" --help > /dev/null || fail "sonopipe-cohort --help"

echo "-- a C program built with pkg-config sonopipe-client alone, run against the installed daemon"
client_pc_dir="$(dirname "$(find "$prefix/lib" -name sonopipe-client.pc -print -quit)")"
client_flags="$(PKG_CONFIG_PATH="$client_pc_dir" pkg-config --cflags --libs sonopipe-client)" || fail "pkg-config sonopipe-client"
cc -std=c99 -Wall -Wextra -Werror "$source_dir/tests/client/client_program.c" $client_flags -o "$work/client_program" \
  || fail "building client_program.c with pkg-config flags ($client_flags)"
cat > "$work/client.yaml" <<YAML
ingest: {endpoint: "ipc://$work/client-ingest"}
publish: {endpoint: "ipc://$work/client-publish", status_interval_s: 0.2}
control: {endpoint: "ipc://$work/client-control"}
backend: cpu
cpu_threads: 2
pipelines:
  - {name: iq, match: {kinds: [iq]}, stages: [{type: convert, params: {scale: 0.37}}]}
  - {name: rf, match: {kinds: [rf]}, stages: [{type: convert, params: {scale: 0.37}}]}
YAML
"$bin/sonopiped" --config "$work/client.yaml" > "$work/client-daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do "$bin/sonopipe-ctl" status --endpoint "ipc://$work/client-control" > /dev/null 2>&1 && break; sleep 0.1; done
# The program finds the library where pkg-config says it is (a scanner PC would use ldconfig or an rpath).
LD_LIBRARY_PATH="$(PKG_CONFIG_PATH="$client_pc_dir" pkg-config --variable=libdir sonopipe-client)" \
  "$work/client_program" "ipc://$work/client-ingest" "ipc://$work/client-publish" 0.37 "$RANDOM" "ipc://$work/nobody" \
  > "$work/client_program.log" 2>&1 || { cat "$work/client_program.log" "$work/client-daemon.log"; fail "client_program"; }
tail -1 "$work/client_program.log"

echo "-- the Octave quick start of docs/clients.md, word for word but for the prefix and endpoint"
# The first SonopipeSender compiles the MEX gateway from the installed source, header and library
# (sonopipe_build_mex) into the user's cache: here a folder of the work tree.
command -v octave-cli > /dev/null || fail "octave-cli missing (tools/install-deps.sh installs octave liboctave-dev)"
before="$("$bin/sonopipe-ctl" status --endpoint "ipc://$work/client-control" | grep -o '^frames: [0-9]* received')"
XDG_CACHE_HOME="$work/octave-cache" octave-cli --no-gui --quiet --no-history --eval "
addpath $prefix/share/sonopipe/matlab
sender = SonopipeSender('ipc://$work/client-ingest');
for k = 1:10, sender.send(single(randn(256, 64)), struct('kind', 'rf', 'axes', struct('name', {'line', 'sample'}))); end
" > "$work/octave.log" 2>&1 || { cat "$work/octave.log"; fail "the Octave quick start"; }
for _ in $(seq 50); do  # the daemon counts a frame when it reads it: at most moments after Octave's close
  after="$("$bin/sonopipe-ctl" status --endpoint "ipc://$work/client-control" | grep -o '^frames: [0-9]* received')"
  [ "${after//[^0-9]/}" -eq $(( ${before//[^0-9]/} + 10 )) ] && break
  sleep 0.1
done
[ "${after//[^0-9]/}" -eq $(( ${before//[^0-9]/} + 10 )) ] || fail "sonopipe-ctl status: '$before' then '$after', not 10 more"
echo "run_installed: Octave's 10 frames arrived ($after)"
"$bin/sonopipe-ctl" stop --endpoint "ipc://$work/client-control" --wait > /dev/null
wait "$daemon" || fail "sonopiped (client) exited with $?"
daemon=""

echo "-- results checked with the installed Python package"
PYTHONPATH="$python_dir" /usr/bin/python3 - "$work/iq.h5" "$work/results.h5" "$work/run/iq.h5" <<'PY'
import sys
import numpy as np
from sonopipe.recording import read_recording
frames = read_recording(sys.argv[1]).streams
results = read_recording(sys.argv[2]).results[("bmode", "log_envelope")]
(stream,) = frames.values()
assert len(results) == 4, f"expected 4 results, got {len(results)}"
for header, values in results:
    iq = stream.payload[int(header.input_sequence)].astype(np.complex128)
    expected = np.maximum(20 * np.log10(np.maximum(np.abs(iq), 1e-300) / 0.5), -50)
    assert values.shape == iq.shape, (values.shape, iq.shape)
    worst = np.max(np.abs(values - expected))
    assert worst < 1e-4, f"frame {header.input_sequence}: off by {worst} dB"
batch = read_recording(sys.argv[3]).results[("bmode", "log_envelope")]
assert np.array_equal(batch.payload, results.payload), "sonopipe-run differs from the daemon"
print(f"run_installed: 4 results equal 20 log10(|iq| / 0.5) floored at -50 dB, sonopipe-run's too")
PY
echo "run_installed: ok ($prefix)"
