#!/usr/bin/env bash
# README command: a UFF recording replayed through the daemon, with pictures. Simulates ARFI sets,
# writes them as a USTB UFF file (sonopipe-export: beamformed IQ on a linear scan, one UFF frame per
# ensemble entry), replays that file with sonopipe-replay --ensemble through config/arfi.yaml,
# records the displacement, renders it with sonopipe-view and prints the error against the
# simulator's truth. Called like tools/demo.sh; uses CUDA when a GPU is present, else the CPU.
#   SONOPIPE_BUILD_DIR  build folder (default build/)
#   SONOPIPE_DEMO_DIR   output folder (default <build>/demo-uff)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SONOPIPE_BUILD_DIR:-$root/build}"
out="${SONOPIPE_DEMO_DIR:-$build/demo-uff}"
config="$root/config/arfi.yaml"
control=tcp://127.0.0.1:5567
tracks=40  # ensemble = 1 + tracks UFF frames per ARFI set

bash "$root/tools/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$(nproc)"

bin="$build"
sim="$bin/tools/sim/sonopipe-sim"
export_uff="$bin/tools/export/sonopipe-export"
import_uff="$bin/tools/import/sonopipe-import"
replay="$bin/tools/replay/sonopipe-replay"
record="$bin/tools/record/sonopipe-record"
ctl="$bin/tools/ctl/sonopipe-ctl"
python="$bin/tools/python/sonopipe-python"
view="$bin/tools/python/sonopipe-view"

rm -rf "$out"
mkdir -p "$out"
echo "== 1/5 simulating 3 ARFI sets and writing them as UFF: $out/arfi.uff"
"$sim" arfi --out "$out/arfi.h5" --sets 3 --tracks "$tracks" --stream-id 1 --seed 11 > "$out/sim-arfi.log"
"$export_uff" "$out/arfi.h5" --out "$out/arfi.uff"
# The same UFF file as a sonopipe recording, for sonopipe-view's frame pictures.
"$import_uff" "$out/arfi.uff" --out "$out/arfi-from-uff.h5" --ensemble $((tracks + 1))

echo "== 2/5 starting sonopiped --config config/arfi.yaml"
"$bin/daemon/sonopiped" --config "$config" > "$out/sonopiped.log" 2>&1 &
daemon=$!
cleanup() { kill "$daemon" "${recorder:-}" 2> /dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$ctl" status --endpoint "$control" > /dev/null 2>&1 && break; sleep 0.2; done
"$ctl" status --endpoint "$control" > /dev/null

"$record" --endpoint tcp://127.0.0.1:5566 --out "$out/results.h5" --topic result/arfi/displacement_filtered --count 3 \
  --ready-file "$out/record.ready" > "$out/record.log" 2>&1 &
recorder=$!
for _ in $(seq 200); do [ -f "$out/record.ready" ] && break; sleep 0.1; done

echo "== 3/5 replaying the UFF file (lossless, --ensemble $((tracks + 1)))"
"$replay" "$out/arfi.uff" --ensemble $((tracks + 1)) --endpoint tcp://127.0.0.1:5565 --lossless --max 2>&1 \
  | sed "s/^/   /"

echo "== 4/5 recording the results and stopping"
wait "$recorder"
recorder=""
"$ctl" stop --endpoint "$control" --wait > /dev/null
wait "$daemon"
daemon=""

echo "== 5/5 rendering pictures"
"$view" --recording "$out/results.h5" --frames "$out/arfi-from-uff.h5" --png "$out/png" > "$out/view.log" 2>&1 \
  || { cat "$out/view.log"; exit 1; }
"$python" - "$root/tools" "$out/results.h5" "$out/arfi.h5" << 'PY'
import sys
sys.path.insert(0, sys.argv[1])
import demo_summary
from sonopipe.recording import read_recording
line = demo_summary.arfi_line(read_recording(sys.argv[2]), read_recording(sys.argv[3]))
if line is None:
    sys.exit("no ARFI displacement published from the UFF replay")
print(f"   arfi from UFF: {line}")
PY
echo "pictures: $out/png ($(ls "$out/png" | wc -l) files); UFF file, recordings and logs: $out"
