// One helper for every CUDA runtime call and kernel launch: failures become exceptions that
// name the call and the source line. Usable from .cu and from host .cpp files.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace sonopipe::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    throw CudaError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorString(status));
  }
}

}  // namespace sonopipe::cuda

#define SONOPIPE_CUDA_CHECK(call) ::sonopipe::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: catches bad launch configurations without synchronising.
#define SONOPIPE_CUDA_CHECK_LAUNCH() \
  ::sonopipe::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
