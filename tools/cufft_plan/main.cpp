// sonopipe-cufft-plan DEVICE TYPE N0 [N1 [N2]] BATCH: makes the cuFFT plan of that shape (TYPE: cuFFT's
// cufftType value, e.g. 42 = R2C; N slowest first) on CUDA device DEVICE, without a work area, and
// exits: 0 when cuFFT made it, 1 with a line on stderr otherwise.
//
// Why a process: cuFFT compiles kernels for an FFT size it has not seen on this machine when it
// plans it (the CUDA driver's JIT, 20-90 ms per size on the H100 with CUDA 13) and the driver holds
// its lock meanwhile, so every launch of the process waits: in sonopiped, every pipeline's frames on
// the device (33-51 ms on the run's first ncc_track kernel change, session 11). Compiled here, the
// kernels land in the driver's JIT cache (CUDA_CACHE_PATH, inherited), where the daemon's own plan
// of the same shape finds them (its plan then takes about 1 ms and holds no frame). Started by
// stages/strain/ncc_track (PlanCache) with the daemon's environment.
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  std::vector<long> values;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    values.push_back(std::strtol(argv[i], &end, 10));
    if (!end || *end != '\0' || values.back() < 0) values.clear(), argc = 0;
  }
  const std::size_t rank = values.size() >= 4 ? values.size() - 3 : 0;
  if (rank < 1 || rank > 3) {
    std::fprintf(stderr, "usage: sonopipe-cufft-plan DEVICE TYPE N0 [N1 [N2]] BATCH\n");
    return 1;
  }
  int n[3] = {1, 1, 1};
  for (std::size_t d = 0; d < rank; ++d) n[d] = static_cast<int>(values[2 + d]);
  const int batch = static_cast<int>(values.back());
  if (cudaSetDevice(static_cast<int>(values[0])) != cudaSuccess) {
    std::fprintf(stderr, "sonopipe-cufft-plan: cudaSetDevice(%ld) failed\n", values[0]);
    return 1;
  }
  cufftHandle plan = 0;
  std::size_t work_bytes = 0;
  if (cufftCreate(&plan) != CUFFT_SUCCESS || cufftSetAutoAllocation(plan, 0) != CUFFT_SUCCESS ||
      cufftMakePlanMany(plan, static_cast<int>(rank), n, nullptr, 1, 0, nullptr, 1, 0,
                        static_cast<cufftType>(values[1]), batch, &work_bytes) != CUFFT_SUCCESS) {
    std::fprintf(stderr, "sonopipe-cufft-plan: cuFFT could not plan type %ld, batch %d\n", values[1], batch);
    return 1;
  }
  cufftDestroy(plan);
  return 0;
}
