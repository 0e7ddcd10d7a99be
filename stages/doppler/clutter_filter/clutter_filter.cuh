// CUDA half of the `clutter_filter` stage (stages/doppler/clutter_filter/clutter_filter.h): cuBLAS and
// cuSOLVER handles, the workspace plan and the per-frame work, all on the caller's stream. The route
// is the fastest accurate one `sonopipe-bench doppler --case routes` measured on the H100
// (docs/doppler.md). Per block (pixels P_b x frames N, column-major):
//   G = S^H S                      S converted to double, one cublasZgemm: a float Gram matrix
//                                  turns the removed subspace by eps_float lambda_1 / gap
//   G = V diag(w) V^H              every block's at once (EigenRoute): cusolverDnXsyevBatched in
//                                  double, in place, w ascending (no host workspace, info unread on
//                                  the device); N <= 32 (auto): a Jacobi kernel (small_eigen.cuh,
//                                  float angles, double A and V); a fixed tissue rank k from 33
//                                  frames (auto, with SubspaceRetry): only the dominant k by block
//                                  subspace iteration and Rayleigh-Ritz, the full solver in a
//                                  conditional graph node where the device's convergence test fails;
//                                  N <= 32 at a fixed rank k <= 8 (auto): only the dominant k, one
//                                  thread block per matrix (small_eigen.cuh's dominant route), the
//                                  Jacobi kernel after it for the blocks whose test failed
//   [similarity] U = S V (V in float), |U| centred per column, C = |U|^T |U| normalised
//                (cublasSsyrk), the tissue rank fitted on the device (one block of threads)
//   S_f = S - (S V_r) V_r^H        fixed ranks, N >= 64, r <= N / 4 removed: W = S V_r (Cgemm), then
//                                  D = S - W V_r^H out of place (cublasLt, C = S, D = S_f)
//   S_f = S Q, Q = I - V_r V_r^H   otherwise (and with the similarity rank, known on the device only):
//                                  Q summed in double from V, one Cgemm
//   N <= 32 (route.small_kernels, not with eigensolver full): G by small_gram_kernel from the float
//   block (no double copy, no Zgemm); fixed ranks with r <= N / 2: S_f by small_rank_update_kernel,
//   one thread per pixel holding its N samples
// Blocks: gathered into the workspace (twice: for the Gram, then for the projection), filtered,
// added into the output with 1 / cover weights.
// Polynomial: Q comes from the host (pinned staging) and the projection is the same Cgemm.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "stages/doppler/clutter_filter/clutter_filter_params.h"

namespace sonopipe::cuda {

class ClutterFilterGpu {
 public:
  ClutterFilterGpu();
  ~ClutterFilterGpu();
  ClutterFilterGpu(const ClutterFilterGpu&) = delete;
  ClutterFilterGpu& operator=(const ClutterFilterGpu&) = delete;

  struct Sizes {
    std::size_t workspace_bytes = 0;
    std::size_t host_staging_bytes = 0;
  };
  // Plans the workspace (device) and staging (pinned host) for one run; may allocate and synchronise.
  // `route`: ClutterFilterStage::eigen_route(); a subspace route whose fallback graph cannot be made
  // here becomes the full one (route() says which runs).
  Sizes configure(const ClutterFilterShape& shape, const ClutterFilterParams& params, const EigenRoute& route,
                  const std::vector<ClutterBlock>& blocks, const std::vector<double>& inverse_cover_lateral,
                  const std::vector<double>& inverse_cover_axial);

  // in/out: device complex64 [frame, lateral, axial]. polynomial_projector: host, column-major N x N
  // (method polynomial only). No host synchronisation.
  void run(const float2* in, float2* out, void* workspace, void* host_staging, const double* polynomial_projector,
           cudaStream_t stream);

  EigenRoute route() const;
  // Frames whose subspace iteration did not converge (the full solver ran); synchronises.
  std::int64_t subspace_fallbacks() const;
  // Frames that ran the subspace iteration (auto's retry sends the others to the full solver).
  std::int64_t subspace_attempts() const;
  // The Jacobi route's counters since configure; synchronises.
  JacobiStats jacobi_stats() const;
  // The dominant route's counters since configure; synchronises.
  DominantStats dominant_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonopipe::cuda
