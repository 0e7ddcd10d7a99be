#!/usr/bin/env bash
# Builds the Debian package with CPack, checks its name and declared dependencies, unpacks it into a
# temporary root (dpkg -x: no system change) and runs run_installed.sh on <root>/usr.
#   deb_test.sh BUILD_DIR SOURCE_DIR VERSION
set -euo pipefail
build="$1"
source_dir="$2"
version="$3"
work="$build/tests/package/deb"
rm -rf "$work"
mkdir -p "$work"
# zstd instead of the package's gzip: the same package, members compressed in a third less CPU time
# (dpkg reads both since 1.21.18).
(cd "$build" && cpack -G DEB -B "$work/out" -D CPACK_DEBIAN_COMPRESSION_TYPE=zstd) > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; exit 1; }
deb="$work/out/sonopipe_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || { ls "$work/out"; echo "deb_test: expected $deb"; exit 1; }
dpkg-deb --field "$deb" Package Version Depends | tee "$work/fields.txt"
for dependency in libzmq5 libprotobuf libyaml-cpp libhdf5 python3-zmq python3-numpy; do
  grep -q "$dependency" "$work/fields.txt" || { echo "deb_test: Depends lacks $dependency"; exit 1; }
done
dpkg -x "$deb" "$work/root"
bash "$source_dir/tests/package/run_installed.sh" "$work/root/usr" "$source_dir" "$work/run"
