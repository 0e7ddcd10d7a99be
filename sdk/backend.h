// Which compute backend runs a pipeline. The CUDA stream type is declared here without CUDA
// headers so that sdk/, runtime/ and stages/ compile in a build without CUDA.
#pragma once

#include <string_view>

struct CUstream_st;  // cudaStream_t is `CUstream_st*`

namespace sonopipe {

enum class Backend { cpu, cuda };

using GpuStream = CUstream_st*;

inline std::string_view backend_name(Backend backend) {
  return backend == Backend::cuda ? "cuda" : "cpu";
}

// True when this binary was built with the CUDA backend.
constexpr bool built_with_cuda() {
#ifdef SONOPIPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace sonopipe
