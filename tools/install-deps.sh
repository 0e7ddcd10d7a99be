#!/usr/bin/env bash
# Installs the Debian packages sonopipe needs to build, test and run. Idempotent: installs only
# what is missing, and runs apt-get update at most once per call.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler libspdlog-dev catch2
  libyaml-cpp-dev libhdf5-dev libcli11-dev libnifti2-dev libopenigtlink-dev libmatio-dev
  libsystemd-dev clang-14 libclang-rt-14-dev
  libeigen3-dev    # the Doppler clutter filter's CPU reference (Eigen's SelfAdjointEigenSolver)
  liblapacke-dev   # clutter_filter_test's reference SVD (LAPACK's zgesdd)
  python3 python3-zmq python3-protobuf python3-numpy python3-scipy python3-matplotlib python3-h5py
  python3-aiohttp  # sonopipe-web
  chromium         # the browser of sonopipe-web's test
  python3-distributed  # sonopipe-cohort
  python3-venv python3-setuptools python3-pip  # pip install . into a venv (tests/python/test_pip_install.py)
  octave liboctave-dev  # the MEX gateway built with mkoctfile and its Octave tests
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
