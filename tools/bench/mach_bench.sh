#!/usr/bin/env bash
# Times mach's delay-and-sum kernel (github.com/Forest-Neurotech/mach, BSD-3-Clear) on the same
# synthetic ensembles as `sonopipe-bench beamform --case pwi_disk_ensemble` (tools/bench/ensemble_workloads.h).
#
#   tools/bench/mach_bench.sh MACH_DIR [BUILD_DIR] [-- mach_driver arguments]
#     MACH_DIR   a mach checkout (its src/mach/kernel.cu and src/mach/vendor/ are used)
#     BUILD_DIR  where the driver is built (default build/mach)
#     e.g. tools/bench/mach_bench.sh ~/mach -- --repeats 50 --workload fus
#     MACH_COMMIT=<sha> names the commit when MACH_DIR is an export without .git
#
# Nothing of mach enters this tree: the script writes, into BUILD_DIR, the part of kernel.cu before
# its Python binding (everything up to and including the launch function _beamform_impl, unchanged,
# without the nanobind includes, which need Python and nanobind), and compiles it with
# tools/bench/mach_driver.cu, which calls _beamform_impl. Flags as mach's own release build for this
# GPU: -O3 -DNDEBUG --generate-line-info, native code for sm_90 (CUDA_ARCH overrides), and the
# NVCC_MAJOR/MINOR definitions its CMakeLists passes; --expt-relaxed-constexpr (sonopipe's flag) for the
# driver's CPU check through stages/beamform/beamform/das.h, which changes no code of mach's kernel.
set -euo pipefail

usage() { echo "usage: $0 MACH_DIR [BUILD_DIR] [-- mach_driver arguments]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
mach_dir=$1; shift
build_dir=build/mach
if [[ $# -ge 1 && $1 != -- ]]; then build_dir=$1; shift; fi
[[ $# -ge 1 && $1 == -- ]] && shift

root=$(cd "$(dirname "$0")/../.." && pwd)
kernel=$mach_dir/src/mach/kernel.cu
[[ -f $kernel ]] || { echo "mach_bench: no $kernel (give a mach checkout)" >&2; exit 2; }
[[ -d $mach_dir/src/mach/vendor ]] || { echo "mach_bench: no $mach_dir/src/mach/vendor" >&2; exit 2; }
mkdir -p "$build_dir"

# The binding starts with the ndarray helpers (template<typename ArrayType> shape_to_string ...).
cut=$(grep -n '^template<typename ArrayType>' "$kernel" | head -n 1 | cut -d: -f1 || true)
[[ -n $cut ]] || { echo "mach_bench: kernel.cu has no 'template<typename ArrayType>' line: its layout changed" >&2; exit 1; }
part=$build_dir/mach_kernel_part.cuh
sed -n "1,$((cut - 1))p" "$kernel" |
  sed -e '/^#include <nanobind\//d' -e '/^namespace nb = nanobind;/d' -e '/^using namespace nb::literals;/d' >"$part"
grep -q 'void _beamform_impl' "$part" || { echo "mach_bench: _beamform_impl not before the binding: kernel.cu changed" >&2; exit 1; }
if grep -q 'nb::' "$part"; then echo "mach_bench: the extracted part still uses nanobind: kernel.cu changed" >&2; exit 1; fi

nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || nvcc=/usr/local/cuda/bin/nvcc
version=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1.\2/p')
major=${version%%.*}; minor=${version#*.}
arch=${CUDA_ARCH:-90}
commit=${MACH_COMMIT:-$(git -C "$mach_dir" rev-parse --short HEAD 2>/dev/null || echo "unknown commit")}
echo "mach_bench: mach $commit from $mach_dir, nvcc $version, sm_$arch" >&2
"$nvcc" -O3 -DNDEBUG --generate-line-info -std=c++17 --expt-relaxed-constexpr -gencode "arch=compute_$arch,code=sm_$arch" \
  -DNVCC_MAJOR="$major" -DNVCC_MINOR="$minor" -DNVCC_VERSION_STR="\"$version\"" \
  -I"$build_dir" -I"$mach_dir/src/mach/vendor" -I"$root" \
  "$root/tools/bench/mach_driver.cu" -o "$build_dir/mach_driver"
echo "mach_bench: kernel time alone: ncu --kernel-name regex:beamformKernel --metrics gpu__time_duration.sum $build_dir/mach_driver --repeats 5" >&2
"$build_dir/mach_driver" "$@"
