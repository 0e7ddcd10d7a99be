// `sonopipe-bench doppler --case routes`: the library routes for the SVD clutter filter's three steps
// (Gram matrix, Hermitian eigensolver, projection), each timed on its own and end to end (stream and
// CUDA-graph replay), with the filtered output's error against an all-double route on the device.
// The ensemble has a designed spectrum (see DesignedCasorati): the error is the one the stage test
// measures against Eigen, at the sizes.
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

namespace sonopipe::bench {

// S = A diag(singular) B^H: A pixels x frames standard normal / sqrt(2 pixels) (nearly orthonormal
// columns), B a random unitary (frames x frames, column-major), so the singular values are close to
// `singular` and the gaps are as designed.
struct DesignedCasorati {
  std::string name;
  std::int64_t pixels = 0, frames = 0, tissue_rank = 0;
  std::vector<double> singular;
  std::vector<std::complex<double>> unitary;
};

// Prints one table per shape (stdout). Needs a CUDA device.
void run_svd_routes(const std::vector<DesignedCasorati>& shapes, int repeats);

}  // namespace sonopipe::bench
