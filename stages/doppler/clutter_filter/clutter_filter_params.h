// Parameters of the `clutter_filter` stage, shared by the CPU reference, the CUDA path and the tests.
// Conventions (Casorati layout, slow time): stages/doppler/doppler_conventions.h.
#pragma once

#include <cstdint>

#include "stages/common/host_device.h"

namespace sonopipe {

struct ClutterFilterParams {
  enum class Method { svd, polynomial };
  enum class RankChoice { fixed, similarity };
  enum class Eigensolver { automatic, full, jacobi, subspace, dominant };
  Method method = Method::svd;
  // SVD: components removed from the top (tissue) and from the bottom (noise), largest first.
  std::int64_t tissue_rank = 4;
  std::int64_t noise_rank = 0;
  // similarity: the tissue rank of each block from the spatial similarity matrix (baranger2018),
  // searched in [rank_min, rank_max] (rank_max 0: frames - noise_rank - 1).
  RankChoice rank_choice = RankChoice::fixed;
  std::int64_t rank_min = 1, rank_max = 0;
  // polynomial: Legendre polynomials of degree 0..polynomial_order in slow time are removed.
  std::int64_t polynomial_order = 2;
  // svd: how the Gram matrix's eigenvectors are found (EigenRoute below): automatic picks the
  // fastest route measured for the shape; full: every eigenvector with cuSOLVER's batched solver and
  // the library Gram and projection (the route before; the reference of the benchmarks); jacobi,
  // subspace and dominant ask for those routes where they apply (else full; dominant: else jacobi
  // up to 32 frames).
  Eigensolver eigensolver = Eigensolver::automatic;
  // Jacobi route: start from the previous frame's eigenvectors on the same workspace (V0^H G V0,
  // nearly diagonal for a stream of related ensembles: fewer sweeps, the same tolerance); dominant
  // route: its iteration starts from the previous frame's dominant vectors.
  bool warm_start = true;
  // Subspace route: block size (columns iterated, > tissue_rank, <= 32) and iteration count;
  // 0 = the measured defaults (EigenRoute).
  std::int64_t subspace_block = 0, subspace_iterations = 0;
  // Spatial blocks (0: the whole image), with a fractional overlap in [0, 0.9].
  std::int64_t block_lateral = 0, block_axial = 0;
  double block_overlap = 0.5;
};

// One block of the image: pixels [lateral_begin, +lateral) x [axial_begin, +axial).
struct ClutterBlock {
  std::int64_t lateral_begin = 0, lateral = 0, axial_begin = 0, axial = 0;
  SONOPIPE_HD std::int64_t pixels() const { return lateral * axial; }
};

// What one run needs besides pointers (resolved at configure).
struct ClutterFilterShape {
  std::int64_t frames = 0, lateral = 0, axial = 0;  // ensemble [frame, lateral, axial]
  SONOPIPE_HD std::int64_t pixels() const { return lateral * axial; }
  std::int64_t tissue_rank = 0, noise_rank = 0, rank_min = 1, rank_max = 0;  // resolved for `frames`
  bool blocked = false;  // more than one block: gather, filter, scatter-average
};

// How the CUDA path finds the removed temporal vectors (ClutterFilterStage::eigen_route(); auto is
// dominant up to 32 frames where it applies, else jacobi there; subspace with retry where it
// applies from 33 frames, else full: docs/doppler.md):
//   full      every eigenvector of every block's N x N Gram matrix, cusolverDnXsyevBatched (with
//             the small kernels at N <= 32 unless eigensolver is full);
//   jacobi    N <= 32: every eigenvector, one thread block per Gram matrix (cyclic Jacobi, A and V in
//             double, the angles in float: small_eigen.cuh): cuSOLVER's solvers spend 0.25-0.35 ms
//             on a 32 x 32 matrix;
//   subspace  fixed tissue rank k, no noise rank, 32 < N <= kSubspaceMaxFrames, k < block <= 32:
//             block subspace iteration on G (Zgemm + Cholesky QR), Rayleigh-Ritz with the Jacobi
//             kernel, a convergence test on the device and, where it fails, the full solver inside
//             a CUDA graph's conditional node (counted);
//   dominant  N <= 32, fixed tissue rank 1 <= k <= kDominantMaxRank, no noise rank: only the
//             dominant k-dimensional invariant subspace of G (the fixed-rank projection reads
//             nothing else), one thread block per Gram matrix in double: subspace iteration on
//             repeated squares of G / trace(G), Rayleigh-Ritz on G, and a test that cannot pass
//             wrongly (Davis-Kahan with lambda_k+1 <= trace((P G P)^q)^(1/q), small_eigen.cuh);
//             where it fails the Jacobi kernel runs for that block (same launch order, no host
//             wait; counted); chosen by auto, with SubspaceRetry's policy after a fallback.
struct EigenRoute {
  enum class Kind { full, jacobi, subspace, dominant };
  Kind kind = Kind::full;
  int block = 0, iterations = 0;  // subspace only
  // subspace, chosen by auto: after a fallback the next frames take the full solver directly
  // (SubspaceRetry, subspace_retry.h); asked for (eigensolver subspace): every frame tries.
  // dominant, chosen by auto: the same policy, the next frames taking the Jacobi kernel directly.
  bool retry = false;
  // N <= 32: the Gram matrix by small_gram_kernel (no double copy, no Zgemm) and the fixed-rank
  // projection by small_rank_update_kernel (r <= N / 2), whichever eigensolver.
  bool small_kernels = false;
  bool warm_start = false;  // jacobi and dominant: ClutterFilterParams::warm_start
};
// The dominant route's counters (device, read with a synchronisation): solves (blocks), fallbacks
// (blocks whose test failed and took the Jacobi kernel), and the squarings, power iterations and
// bound squarings they all took.
struct DominantStats {
  std::int64_t solves = 0, fallbacks = 0, squarings = 0, iterations = 0, bound_squarings = 0;
};
// Largest tissue rank of the dominant route (its k columns live in one warp's registers).
inline constexpr int kDominantMaxRank = 8;
// Jacobi route's counters (device, read with a synchronisation): solves, those that started warm
// (from the previous frame's eigenvectors), and the sweeps they all took.
struct JacobiStats {
  std::int64_t solves = 0, warm = 0, sweeps = 0;
};
// The subspace route's orthonormalisation holds an N x block double-complex matrix in shared memory.
inline constexpr std::int64_t kSubspaceMaxFrames = 320;
inline constexpr std::int64_t kJacobiMaxFrames = 32;

}  // namespace sonopipe
