// Stage `clutter_filter`: removes tissue (and optionally noise) from a Doppler ensemble.
// Input complex64 [frame, lateral, axial] (stages/doppler/doppler_conventions.h); output
// "filtered", same shape and axes.
//   method svd: the Casorati matrix S (pixels x frames) is projected off its first `tissue_rank`
//     and last `noise_rank` temporal singular vectors, S_f = S (I - V_r V_r^H) (demene2015). V comes
//     from the eigenvectors of the frames x frames Gram matrix S^H S (eigenvalue = sigma^2). The
//     tissue rank is fixed or chosen per block from the spatial similarity matrix of the spatial
//     singular vectors (baranger2018; the fit is stated in similarity_rank()).
//     Optional spatial blocks with overlap: each block is filtered on its own and the overlapping
//     outputs are averaged (equal weights).
//   method polynomial: projection off the Legendre polynomials of degree 0..polynomial_order in
//     slow time (orthonormalised on the frame times), pixel by pixel; blocks do not apply.
// CPU reference: double precision, Eigen's SelfAdjointEigenSolver. CUDA: the Gram matrix and its
// eigenvectors in double (cuBLAS Zgemm, cuSOLVER XsyevBatched over all blocks at once), the
// projection in float (cuBLAS Cgemm / cublasLt); no host synchronisation per frame (clutter_filter.cuh).
#pragma once

#include <complex>
#include <memory>
#include <vector>

#include "sdk/registry.h"
#include "stages/doppler/clutter_filter/clutter_filter_params.h"

namespace sonopipe {

namespace cuda {
class ClutterFilterGpu;
}

class ClutterFilterStage : public Stage {
 public:
  static StageInfo info();
  using Params = ClutterFilterParams;
  static void declare(ParamSpec<Params>& spec);
  explicit ClutterFilterStage(const ClutterFilterParams& params);
  ~ClutterFilterStage() override;

  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override;
  bool run_cpu(const StageIo& io) override;
  bool run_cuda(const StageIo& io) override;

  const ClutterFilterShape& shape() const { return shape_; }
  const std::vector<ClutterBlock>& blocks() const { return blocks_; }
  // Tissue rank of each block in the last CPU run (the chosen one with rank_choice similarity).
  const std::vector<std::int64_t>& last_tissue_ranks() const { return last_ranks_; }

  // The blocks covering a lateral x axial image: starts every round(size (1 - overlap)) pixels, the
  // last block flush with the far edge; one block (the image) when a block size is 0 or >= the image.
  static std::vector<ClutterBlock> plan_blocks(const ClutterFilterShape& shape, const ClutterFilterParams& params);

  // The CUDA path's eigenvector route for this shape (EigenRoute in clutter_filter_params.h):
  // auto up to 32 frames: dominant at a fixed tissue rank 1..kDominantMaxRank without noise rank,
  // else jacobi; auto from 33 frames: subspace (with retry) where it applies, else full; full:
  // cuSOLVER's batched solver; jacobi up to 32 frames; dominant where it applies (else jacobi up to
  // 32 frames); subspace for a fixed tissue rank without noise rank, 33..320 frames (block
  // tissue_rank + 4, at most 32; 2 iterations); else full.
  static EigenRoute eigen_route(const ClutterFilterShape& shape, const ClutterFilterParams& params);
  // Frames whose subspace iteration did not converge and took the full eigensolver (CUDA; reads a
  // device counter: synchronises, not for the frame path).
  std::int64_t subspace_fallbacks() const;
  // Frames that ran the subspace iteration (with auto's retry, the others took the full solver
  // directly); host count, no synchronisation.
  std::int64_t subspace_attempts() const;
  // The Jacobi route's solves, warm starts and sweeps since configure (CUDA; synchronises).
  JacobiStats jacobi_stats() const;
  // The dominant route's solves, fallbacks and work since configure (CUDA; synchronises).
  DominantStats dominant_stats() const;
  // The route the CUDA plan runs (eigen_route(), or full where the subspace route's fallback graph
  // could not be made); full before a CUDA configure.
  EigenRoute cuda_eigen_route() const;

  // CPU reference of the SVD filter on one block: `in` and `out` column-major pixels x frames
  // (leading dimension `pixels`). Returns the tissue rank used.
  static std::int64_t filter_block_svd(const std::complex<float>* in, std::int64_t pixels, const ClutterFilterShape& shape,
                                       ClutterFilterParams::RankChoice choice, std::complex<float>* out);

  // baranger2018's spatial similarity matrix of a block: C(i, j) = Pearson correlation over the
  // pixels of |u_i| and |u_j|, u_i the spatial singular vectors in decreasing singular-value order.
  // `in` column-major pixels x frames. Row-major frames x frames.
  static std::vector<double> similarity_matrix(const std::complex<float>* in, std::int64_t pixels, std::int64_t frames);

  // The tissue rank from a similarity matrix (row-major n x n): the k in [rank_min, rank_max] of the
  // binary two-square model (tissue [0, k)^2, blood [k, m)^2, 0 elsewhere) closest to C in least
  // squares, m free in (k, n] — our fit of baranger2018's "two squares" reading of the SSM: it
  // maximises sum over both squares of (2 C - 1). Ties: the smallest k.
  static std::int64_t similarity_rank(const std::vector<double>& ssm, std::int64_t n, std::int64_t rank_min,
                                      std::int64_t rank_max);

  // I - B B^T, B the orthonormalised Legendre polynomials of degree 0..order on the frame times
  // (column-major n x n, real).
  static std::vector<double> polynomial_projector(const std::vector<double>& times_s, std::int64_t order);

 private:
  // The polynomial projector of this frame's times, recomputed only when they change.
  const double* polynomial_for(const FrameMeta& frame, const TensorSpec& input);

  ClutterFilterParams params_;
  ClutterFilterShape shape_;
  std::vector<ClutterBlock> blocks_;
  std::vector<double> inverse_cover_lateral_, inverse_cover_axial_;  // 1 / blocks covering each row/column
  std::vector<double> projector_, projector_times_;                  // polynomial, and the times it is for
  std::vector<std::int64_t> last_ranks_;
  std::vector<std::complex<float>> block_in_, block_out_;           // CPU block buffers (sized at configure)
  std::unique_ptr<cuda::ClutterFilterGpu> gpu_;                    // CUDA plan (null on the CPU)
};

}  // namespace sonopipe
