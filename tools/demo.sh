#!/usr/bin/env bash
# README command (1), the main job: build, start sonopiped with config/demo.yaml, replay simulated
# ARFI, strain and perfusion acquisitions through it, record the results, render pictures with
# sonopipe-view, print a summary per chain (frames, error vs ground truth, time) and stop cleanly.
# While the daemon runs, the live browser viewer sonopipe-web serves its results; its address is
# printed (open it during the replay). Idempotent; uses the CUDA backend when a GPU is present, the
# CPU backend otherwise.
#   SONOPIPE_BUILD_DIR  build folder (default build/)
#   SONOPIPE_DEMO_DIR   output folder (default <build>/demo)
#   SONOPIPE_WEB_PORT   port of the live viewer on 127.0.0.1 (default 8088; 0: any free port)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${SONOPIPE_BUILD_DIR:-$root/build}"
out="${SONOPIPE_DEMO_DIR:-$build/demo}"
config="$root/config/demo.yaml"
control=tcp://127.0.0.1:5557

bash "$root/tools/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$(nproc)"

bin="$build"
sim="$bin/tools/sim/sonopipe-sim"
replay="$bin/tools/replay/sonopipe-replay"
record="$bin/tools/record/sonopipe-record"
ctl="$bin/tools/ctl/sonopipe-ctl"
python="$bin/tools/python/sonopipe-python"
view="$bin/tools/python/sonopipe-view"
web="$bin/tools/python/sonopipe-web"

rm -rf "$out"
mkdir -p "$out"
started=$(date +%s)
echo "== 1/5 simulating acquisitions into $out"
"$sim" arfi --out "$out/arfi.h5" --sets 3 --stream-id 1 --seed 11 > "$out/sim-arfi.log"
"$sim" strain --out "$out/strain.h5" --dims 2 --frames 4 --type int16 --stream-id 2 --seed 12 > "$out/sim-strain.log"
"$sim" perfusion --output "$out/perfusion" --recording "$out/perfusion.h5" --shape 48,48,1 --samples 64 \
  --cnr 50 --phantom territories --seed 13 > "$out/sim-perfusion.log"

echo "== 2/5 starting sonopiped --config config/demo.yaml"
"$bin/daemon/sonopiped" --config "$config" > "$out/sonopiped.log" 2>&1 &
daemon=$!
cleanup() { kill "$daemon" "${recorder:-}" "${viewer:-}" 2> /dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do "$ctl" status --endpoint "$control" > /dev/null 2>&1 && break; sleep 0.2; done
"$ctl" status --endpoint "$control" > /dev/null
grep -m1 "backend" "$out/sonopiped.log" || true

# The live viewer (loopback only); the demo goes on without it when it cannot start (e.g. port taken).
"$web" --endpoint tcp://127.0.0.1:5556 --port "${SONOPIPE_WEB_PORT:-8088}" > "$out/web.log" 2>&1 &
viewer=$!
for _ in $(seq 100); do grep -q "viewer at" "$out/web.log" && break; kill -0 "$viewer" 2> /dev/null || break; sleep 0.1; done
grep -m1 -o "viewer at http://[^ ]*" "$out/web.log" | sed "s/^/   live /" \
  || { kill "$viewer" 2> /dev/null; echo "   live viewer not started (see $out/web.log)"; viewer=""; }

"$record" --out "$out/results.h5" --topic result/ --topic status --ready-file "$out/record.ready" \
  > "$out/record.log" 2>&1 &
recorder=$!
for _ in $(seq 200); do [ -f "$out/record.ready" ] && break; sleep 0.1; done

echo "== 3/5 replaying (lossless)"
for acquisition in arfi strain perfusion; do
  "$replay" "$out/$acquisition.h5" --lossless --max | tail -n 3 | sed "s/^/   $acquisition: /"
done

echo "== 4/5 draining and stopping"
# Every received frame is either processed, rejected or dropped once the daemon has caught up.
for _ in $(seq 600); do
  "$ctl" status --endpoint "$control" --json > "$out/status.json"
  "$python" -c 'import json,sys; s=json.load(open(sys.argv[1])); g=lambda k: int(s.get(k, 0))
sys.exit(0 if g("framesProcessed")+g("framesRejected")+g("framesDropped") >= g("framesReceived") else 1)' \
    "$out/status.json" && break
  sleep 0.5
done
"$ctl" status --endpoint "$control" > "$out/status.txt"
"$ctl" stop --endpoint "$control" --wait > /dev/null
wait "$daemon"
daemon=""
sleep 1
kill -INT "$recorder" && wait "$recorder" || true
recorder=""
if [ -n "$viewer" ]; then kill "$viewer" && wait "$viewer" || true; fi
viewer=""
cat "$out/status.txt"

echo "== 5/5 rendering pictures"
"$view" --recording "$out/results.h5" --frames "$out/arfi.h5" --frames "$out/strain.h5" --png "$out/png" > "$out/view.log" 2>&1 \
  || { cat "$out/view.log"; exit 1; }
"$python" "$root/tools/demo_summary.py" --results "$out/results.h5" --arfi "$out/arfi.h5" \
  --strain "$out/strain.h5" --perfusion "$out/perfusion.h5" --status "$out/status.json" \
  --seconds "$(( $(date +%s) - started ))"
echo "pictures: $out/png ($(ls "$out/png" | wc -l) files); logs and recordings: $out"
