#include "stages/doppler/clutter_filter/clutter_filter.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sdk/thread_pool.h"
#include "stages/doppler/doppler_conventions.h"
#include "stages/doppler/slow_time.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/doppler/clutter_filter/clutter_filter.cuh"
#else
namespace sonopipe::cuda {
class ClutterFilterGpu {};  // never made without CUDA; complete so that the stage's unique_ptr can be destroyed
}  // namespace sonopipe::cuda
#endif

namespace sonopipe {
namespace {

using ComplexMatrix = Eigen::Matrix<std::complex<double>, Eigen::Dynamic, Eigen::Dynamic>;
using FloatComplexMatrix = Eigen::Matrix<std::complex<float>, Eigen::Dynamic, Eigen::Dynamic>;

constexpr const char* kClutterFilterName = "clutter_filter";

// Starts of the blocks along one axis of `size` pixels (see plan_blocks()).
std::vector<std::int64_t> block_starts(std::int64_t size, std::int64_t block, double overlap) {
  if (block <= 0 || block >= size) return {0};
  const std::int64_t step = std::max<std::int64_t>(1, std::llround(static_cast<double>(block) * (1 - overlap)));
  std::vector<std::int64_t> starts;
  for (std::int64_t s = 0; s + block < size; s += step) starts.push_back(s);
  starts.push_back(size - block);  // the last block is flush with the far edge
  return starts;
}

// Eigenvectors of the Gram matrix of a block, in decreasing eigenvalue (singular value) order.
ComplexMatrix temporal_vectors(const Eigen::Map<const FloatComplexMatrix>& block) {
  const ComplexMatrix s = block.cast<std::complex<double>>();
  const ComplexMatrix gram = s.adjoint() * s;  // frames x frames, = V diag(sigma^2) V^H
  Eigen::SelfAdjointEigenSolver<ComplexMatrix> eigen(gram);
  return eigen.eigenvectors().rowwise().reverse();  // Eigen sorts ascending
}

}  // namespace

StageInfo ClutterFilterStage::info() {
  return make_stage_info<ClutterFilterStage>(
      kClutterFilterName, "SVD (or polynomial) clutter filter of a Doppler ensemble [frame, lateral, axial]");
}

void ClutterFilterStage::declare(ParamSpec<Params>& spec) {
  using Method = Params::Method;
  using RankChoice = Params::RankChoice;
  spec.choice(&Params::method, "method", {{"svd", Method::svd}, {"polynomial", Method::polynomial}},
              {.doc = "svd: Casorati SVD (demene2015); polynomial: Legendre regression high-pass", .live = true});
  spec.param(&Params::tissue_rank, "tissue_rank",
             {.min = 0, .max = 4096, .unit = "components",
              .doc = "svd: largest singular components removed (rank_choice fixed)", .live = true});
  spec.param(&Params::noise_rank, "noise_rank",
             {.min = 0, .max = 4096, .unit = "components", .doc = "svd: smallest singular components removed",
              .live = true});
  spec.choice(&Params::rank_choice, "rank_choice",
              {{"fixed", RankChoice::fixed}, {"similarity", RankChoice::similarity}},
              {.doc = "svd: tissue rank fixed, or per block from the spatial similarity matrix (baranger2018)",
               .live = true});
  spec.param(&Params::rank_min, "rank_min",
             {.min = 0, .max = 4096, .unit = "components", .doc = "similarity: smallest tissue rank searched",
              .live = true});
  spec.param(&Params::rank_max, "rank_max",
             {.min = 0, .max = 4096, .unit = "components",
              .doc = "similarity: largest tissue rank searched; 0 = frames - noise_rank - 1", .live = true});
  spec.param(&Params::polynomial_order, "polynomial_order",
             {.min = 0, .max = 64, .doc = "polynomial: Legendre degrees 0..order removed", .live = true});
  spec.choice(&Params::eigensolver, "eigensolver",
              {{"auto", Params::Eigensolver::automatic},
               {"full", Params::Eigensolver::full},
               {"jacobi", Params::Eigensolver::jacobi},
               {"subspace", Params::Eigensolver::subspace},
               {"dominant", Params::Eigensolver::dominant}},
              {.doc = "svd, CUDA: auto = the fastest route measured for the shape; full = cuSOLVER's solver with "
                      "the library Gram and projection (the route before); jacobi (<= 32 frames), subspace "
                      "(fixed tissue rank, no noise rank, 33..320 frames) and dominant (fixed tissue rank 1..8, "
                      "no noise rank, <= 32 frames) where they apply",
               .live = true});
  spec.param(&Params::warm_start, "warm_start",
             {.doc = "svd, CUDA, jacobi and dominant routes: start from the previous frame's eigenvectors (same "
                     "tolerance, less work on a stream of related ensembles); a re-configure starts cold",
              .live = true});
  spec.param(&Params::subspace_block, "subspace_block",
             {.min = 0, .max = 32, .unit = "components",
              .doc = "svd subspace route: columns iterated (> tissue_rank); 0 = tissue_rank + 4, at most 32",
              .live = true});
  spec.param(&Params::subspace_iterations, "subspace_iterations",
             {.min = 0, .max = 64, .doc = "svd subspace route: iterations before Rayleigh-Ritz; 0 = 2", .live = true});
  spec.param(&Params::block_lateral, "block_lateral",
             {.min = 0, .max = 1 << 20, .unit = "pixels", .doc = "svd: spatial block width; 0 = the whole image"});
  spec.param(&Params::block_axial, "block_axial",
             {.min = 0, .max = 1 << 20, .unit = "pixels", .doc = "svd: spatial block height; 0 = the whole image"});
  spec.param(&Params::block_overlap, "block_overlap",
             {.min = 0, .max = 0.9, .doc = "svd: fraction of a block shared with its neighbour"});
}

ClutterFilterStage::ClutterFilterStage(const ClutterFilterParams& params) : params_(params) {}

ClutterFilterStage::~ClutterFilterStage() = default;

std::vector<ClutterBlock> ClutterFilterStage::plan_blocks(const ClutterFilterShape& shape,
                                                          const ClutterFilterParams& params) {
  const bool polynomial = params.method == ClutterFilterParams::Method::polynomial;
  const std::int64_t width = polynomial ? 0 : params.block_lateral, height = polynomial ? 0 : params.block_axial;
  const auto lateral = block_starts(shape.lateral, width, params.block_overlap);
  const auto axial = block_starts(shape.axial, height, params.block_overlap);
  const std::int64_t w = lateral.size() > 1 ? width : shape.lateral, h = axial.size() > 1 ? height : shape.axial;
  std::vector<ClutterBlock> blocks;
  for (std::int64_t l : lateral)
    for (std::int64_t a : axial) blocks.push_back({.lateral_begin = l, .lateral = w, .axial_begin = a, .axial = h});
  return blocks;
}

StagePlan ClutterFilterStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  auto fail = [&](const std::string& why) { throw StageError(std::string(kClutterFilterName) + ": " + why); };
  const doppler::EnsembleShape e = doppler::ensemble_shape(kClutterFilterName, input, 2);
  ClutterFilterShape s;
  s.frames = e.frames;
  s.lateral = e.lateral;
  s.axial = e.axial;
  if (const auto* times = frame.vector(doppler::kEnsembleTimeVector); times && static_cast<std::int64_t>(times->size()) != s.frames)
    fail("vector '" + std::string(doppler::kEnsembleTimeVector) + "' has " + std::to_string(times->size()) +
         " values, expected one per frame (" + std::to_string(s.frames) + ")");
  const bool svd = params_.method == ClutterFilterParams::Method::svd;
  if (svd) {
    s.tissue_rank = params_.tissue_rank;
    s.noise_rank = params_.noise_rank;
    if (params_.rank_choice == ClutterFilterParams::RankChoice::fixed && s.tissue_rank + s.noise_rank >= s.frames)
      fail("tissue_rank + noise_rank (" + std::to_string(s.tissue_rank + s.noise_rank) +
           ") must leave at least one of the " + std::to_string(s.frames) + " components");
    s.rank_min = params_.rank_min;
    s.rank_max = params_.rank_max > 0 ? params_.rank_max : s.frames - s.noise_rank - 1;
    if (params_.rank_choice == ClutterFilterParams::RankChoice::similarity &&
        !(s.rank_min <= s.rank_max && s.rank_max + s.noise_rank < s.frames))
      fail("rank_min <= rank_max <= frames - noise_rank - 1 is needed (rank_min " + std::to_string(s.rank_min) +
           ", rank_max " + std::to_string(s.rank_max) + ", " + std::to_string(s.frames) + " frames)");
  } else if (params_.polynomial_order + 1 >= s.frames) {
    fail("polynomial_order + 1 (" + std::to_string(params_.polynomial_order + 1) + ") must be below the " +
         std::to_string(s.frames) + " frames");
  }
  blocks_ = plan_blocks(s, params_);
  s.blocked = blocks_.size() > 1;
  shape_ = s;
  // 1 / (number of blocks covering each lateral row and axial column): the blocks form a product grid.
  inverse_cover_lateral_.assign(static_cast<std::size_t>(s.lateral), 0.0);
  inverse_cover_axial_.assign(static_cast<std::size_t>(s.axial), 0.0);
  for (const ClutterBlock& b : blocks_) {
    if (b.axial_begin == blocks_.front().axial_begin)
      for (std::int64_t i = 0; i < b.lateral; ++i) inverse_cover_lateral_[b.lateral_begin + i] += 1;
    if (b.lateral_begin == blocks_.front().lateral_begin)
      for (std::int64_t j = 0; j < b.axial; ++j) inverse_cover_axial_[b.axial_begin + j] += 1;
  }
  for (double& v : inverse_cover_lateral_) v = 1 / v;
  for (double& v : inverse_cover_axial_) v = 1 / v;
  projector_times_.clear();
  if (!svd) polynomial_for(frame, input);
  last_ranks_.assign(blocks_.size(), 0);
  const std::size_t block_elements = static_cast<std::size_t>(blocks_.front().pixels() * s.frames);
  block_in_.assign(s.blocked ? block_elements : 0, {});
  block_out_.assign(s.blocked ? block_elements : 0, {});

  StagePlan plan{.outputs = {{"filtered", input}}};
  if (backend == Backend::cuda) {
#ifdef SONOPIPE_WITH_CUDA
    if (!gpu_) gpu_ = std::make_unique<cuda::ClutterFilterGpu>();
    const auto sizes =
        gpu_->configure(s, params_, eigen_route(s, params_), blocks_, inverse_cover_lateral_, inverse_cover_axial_);
    plan.workspace_bytes = sizes.workspace_bytes;
    plan.host_staging_bytes = sizes.host_staging_bytes;
#else
    fail("this binary has no CUDA backend");
#endif
  }
  return plan;
}

EigenRoute ClutterFilterStage::eigen_route(const ClutterFilterShape& shape, const ClutterFilterParams& params) {
  using Eigensolver = ClutterFilterParams::Eigensolver;
  EigenRoute route;
  if (params.method != ClutterFilterParams::Method::svd || params.eigensolver == Eigensolver::full) return route;
  const std::int64_t k = shape.tissue_rank;
  const bool fixed_rank = params.rank_choice == ClutterFilterParams::RankChoice::fixed;
  if (shape.frames <= kJacobiMaxFrames) {
    // The dominant k-dimensional subspace alone (a fixed tissue rank, no noise rank: the projection
    // reads the top k eigenvectors only), auto too: tens of microseconds where the spectrum has a
    // gap at k, against the Jacobi kernel's 0.17 ms for every eigenvector; where its test fails,
    // the Jacobi kernel runs for that block after it (docs/doppler.md).
    if ((params.eigensolver == Eigensolver::automatic || params.eigensolver == Eigensolver::dominant) &&
        fixed_rank && shape.noise_rank == 0 && k >= 1 && k <= kDominantMaxRank && k < shape.frames &&
        shape.frames >= 2) {
      route.kind = EigenRoute::Kind::dominant;
      route.warm_start = params.warm_start;
      route.retry = params.eigensolver == Eigensolver::automatic;  // as the subspace route's, below
      return route;
    }
    // Every eigenvector (any rank choice, noise rank too) by the Jacobi kernel (float angles, double
    // A and V: small_eigen.cuh), auto too: cuSOLVER's solvers take 0.25 ms on a 32 x 32 matrix
    // (docs/doppler.md). The small Gram and rank-update kernels measured 0.009 ms slower than cuBLAS
    // in the pwi_disk chain: on request (eigensolver jacobi) only.
    route.kind = EigenRoute::Kind::jacobi;
    route.small_kernels = params.eigensolver == Eigensolver::jacobi;
    route.warm_start = params.warm_start;
    return route;
  }
  // The dominant k-dimensional subspace alone: a fixed tissue rank and no noise rank (the smallest
  // eigenvectors are not in a dominant block; the similarity choice needs every spatial vector).
  // Half the full solver's time where the spectrum has a gap at k, the full solver's and the
  // iteration's where it has none (docs/doppler.md): auto tries it and, after a fallback, takes the
  // full solver for the next frames (SubspaceRetry); asked for, every frame tries it.
  if ((params.eigensolver != Eigensolver::subspace && params.eigensolver != Eigensolver::automatic) ||
      !fixed_rank || shape.noise_rank != 0 || k < 1 ||
      shape.frames > kSubspaceMaxFrames)
    return route;
  // Defaults: the fastest converged setting on the fUS shape (k = 20: block 24, 2 iterations, 1.42 ms
  // against 2.84 ms for the full route on the H100; docs/doppler.md).
  const std::int64_t block = params.subspace_block > 0 ? params.subspace_block : std::min<std::int64_t>(32, k + 4);
  if (block <= k || block > kJacobiMaxFrames || block >= shape.frames) return route;
  route.kind = EigenRoute::Kind::subspace;
  route.block = static_cast<int>(block);
  route.iterations = static_cast<int>(params.subspace_iterations > 0 ? params.subspace_iterations : 2);
  route.retry = params.eigensolver == Eigensolver::automatic;
  return route;
}

std::vector<double> ClutterFilterStage::similarity_matrix(const std::complex<float>* in, std::int64_t pixels,
                                                          std::int64_t frames) {
  const Eigen::Map<const FloatComplexMatrix> block(in, pixels, frames);
  const ComplexMatrix v = temporal_vectors(block);
  // baranger2018 sec. II-B: spatial singular vectors u_i = S v_i / sigma_i; the SSM correlates their
  // moduli (the scale 1 / sigma_i drops out of a correlation).
  Eigen::MatrixXd modulus = (block.cast<std::complex<double>>() * v).cwiseAbs();
  modulus.rowwise() -= modulus.colwise().mean();
  const Eigen::VectorXd norm = modulus.colwise().norm();
  Eigen::MatrixXd c = modulus.transpose() * modulus;
  std::vector<double> out(static_cast<std::size_t>(frames * frames));
  for (std::int64_t i = 0; i < frames; ++i)
    for (std::int64_t j = 0; j < frames; ++j) {
      const double denominator = norm(i) * norm(j);
      out[i * frames + j] = denominator > 0 ? c(i, j) / denominator : (i == j ? 1.0 : 0.0);
    }
  return out;
}

std::int64_t ClutterFilterStage::similarity_rank(const std::vector<double>& ssm, std::int64_t n, std::int64_t rank_min,
                                                 std::int64_t rank_max) {
  // d = 2 C - 1; the score of squares [0, k)^2 and [k, m)^2 is the sum of d over them.
  auto d = [&](std::int64_t i, std::int64_t j) { return 2 * ssm[i * n + j] - 1; };
  // column_prefix[m * (n + 1) + k] = sum_{i < k} d(i, m)
  std::vector<double> column_prefix(static_cast<std::size_t>(n * (n + 1)), 0.0);
  for (std::int64_t m = 0; m < n; ++m)
    for (std::int64_t k = 0; k < n; ++k) column_prefix[m * (n + 1) + k + 1] = column_prefix[m * (n + 1) + k] + d(k, m);
  auto square_step = [&](std::int64_t begin, std::int64_t m) {  // square [begin, m)^2 -> [begin, m + 1)^2
    return 2 * (column_prefix[m * (n + 1) + m] - column_prefix[m * (n + 1) + begin]) + d(m, m);
  };
  double tissue = 0, best_score = -std::numeric_limits<double>::infinity();
  std::int64_t best = rank_min;
  for (std::int64_t k = 0; k <= rank_max; ++k) {
    if (k >= rank_min) {
      double blood = 0, best_blood = -std::numeric_limits<double>::infinity();
      for (std::int64_t m = k; m < n; ++m) {
        blood += square_step(k, m);
        best_blood = std::max(best_blood, blood);
      }
      if (tissue + best_blood > best_score) {
        best_score = tissue + best_blood;
        best = k;
      }
    }
    if (k < n) tissue += square_step(0, k);
  }
  return best;
}

std::int64_t ClutterFilterStage::filter_block_svd(const std::complex<float>* in, std::int64_t pixels,
                                                  const ClutterFilterShape& shape,
                                                  ClutterFilterParams::RankChoice choice, std::complex<float>* out) {
  const std::int64_t frames = shape.frames;
  const Eigen::Map<const FloatComplexMatrix> block(in, pixels, frames);
  const ComplexMatrix v = temporal_vectors(block);
  std::int64_t tissue_rank = shape.tissue_rank;
  if (choice == ClutterFilterParams::RankChoice::similarity)
    tissue_rank = similarity_rank(similarity_matrix(in, pixels, frames), frames, shape.rank_min, shape.rank_max);
  // Q = I - V_r V_r^H over the removed components: the first tissue_rank and the last noise_rank.
  ComplexMatrix q = ComplexMatrix::Identity(frames, frames);
  for (std::int64_t c = 0; c < frames; ++c)
    if (c < tissue_rank || c >= frames - shape.noise_rank) q.noalias() -= v.col(c) * v.col(c).adjoint();
  Eigen::Map<FloatComplexMatrix> filtered(out, pixels, frames);
  filtered = (block.cast<std::complex<double>>() * q).cast<std::complex<float>>();  // S_f = S Q
  return tissue_rank;
}

std::vector<double> ClutterFilterStage::polynomial_projector(const std::vector<double>& times_s, std::int64_t order) {
  const auto n = static_cast<std::int64_t>(times_s.size());
  const double t0 = times_s.front(), span = times_s.back() - times_s.front();
  Eigen::MatrixXd basis(n, order + 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = span > 0 ? 2 * (times_s[i] - t0) / span - 1 : 0.0;  // [-1, 1]
    // Legendre recurrence: (l + 1) P_{l+1} = (2l + 1) x P_l - l P_{l-1}
    double previous = 1, current = x;
    basis(i, 0) = 1;
    if (order >= 1) basis(i, 1) = x;
    for (std::int64_t l = 1; l < order; ++l) {
      const double next = ((2 * l + 1) * x * current - l * previous) / (l + 1);
      previous = current;
      current = next;
      basis(i, l + 1) = next;
    }
  }
  // Orthonormal on the sampled times (Householder QR: the same span, exactly orthonormal columns).
  const Eigen::MatrixXd b = Eigen::HouseholderQR<Eigen::MatrixXd>(basis).householderQ() *
                            Eigen::MatrixXd::Identity(n, order + 1);
  const Eigen::MatrixXd q = Eigen::MatrixXd::Identity(n, n) - b * b.transpose();
  return std::vector<double>(q.data(), q.data() + n * n);
}

const double* ClutterFilterStage::polynomial_for(const FrameMeta& frame, const TensorSpec& input) {
  const std::vector<double>* times = frame.vector(doppler::kEnsembleTimeVector);
  if (projector_times_.empty() || (times && *times != projector_times_)) {
    projector_times_ = doppler::frame_times_s(frame, input);
    projector_ = polynomial_projector(projector_times_, params_.polynomial_order);
  }
  return projector_.data();
}

bool ClutterFilterStage::run_cpu(const StageIo& io) {
  const ClutterFilterShape& s = shape_;
  const auto* in = static_cast<const std::complex<float>*>(io.input);
  auto* out = static_cast<std::complex<float>*>(io.outputs[0]);
  const std::int64_t pixels = s.pixels(), frames = s.frames;
  if (params_.method == ClutterFilterParams::Method::polynomial) {
    const double* q = polynomial_for(io.frame, io.input_spec);
    io.pool->parallel_for(static_cast<std::size_t>(pixels), [&](std::size_t begin, std::size_t end) {
      for (std::size_t p = begin; p < end; ++p)
        for (std::int64_t n = 0; n < frames; ++n) {  // y[n] = sum_j x[j] Q[j, n]
          std::complex<double> sum = 0;
          for (std::int64_t j = 0; j < frames; ++j) sum += std::complex<double>(in[j * pixels + p]) * q[j + n * frames];
          out[n * pixels + p] = std::complex<float>(sum);
        }
    });
    return true;
  }
  if (!s.blocked) {
    last_ranks_[0] = filter_block_svd(in, pixels, s, params_.rank_choice, out);
    return true;
  }
  std::fill(out, out + pixels * frames, std::complex<float>{});
  for (std::size_t index = 0; index < blocks_.size(); ++index) {
    const ClutterBlock& b = blocks_[index];
    const std::int64_t block_pixels = b.pixels();
    for (std::int64_t n = 0; n < frames; ++n)
      for (std::int64_t i = 0; i < b.lateral; ++i)
        std::copy_n(in + n * pixels + (b.lateral_begin + i) * s.axial + b.axial_begin, b.axial,
                    block_in_.data() + n * block_pixels + i * b.axial);
    last_ranks_[index] = filter_block_svd(block_in_.data(), block_pixels, s, params_.rank_choice, block_out_.data());
    for (std::int64_t n = 0; n < frames; ++n)
      for (std::int64_t i = 0; i < b.lateral; ++i)
        for (std::int64_t j = 0; j < b.axial; ++j) {
          const std::int64_t lateral = b.lateral_begin + i, axial = b.axial_begin + j;
          const float weight = static_cast<float>(inverse_cover_lateral_[lateral] * inverse_cover_axial_[axial]);
          out[n * pixels + lateral * s.axial + axial] += weight * block_out_[n * block_pixels + i * b.axial + j];
        }
  }
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool ClutterFilterStage::run_cuda(const StageIo& io) {
  const double* projector = nullptr;
  if (params_.method == ClutterFilterParams::Method::polynomial) projector = polynomial_for(io.frame, io.input_spec);
  gpu_->run(static_cast<const float2*>(io.input), static_cast<float2*>(io.outputs[0]), io.workspace, io.host_staging,
            projector, io.stream);
  return true;
}

std::int64_t ClutterFilterStage::subspace_fallbacks() const { return gpu_ ? gpu_->subspace_fallbacks() : 0; }
std::int64_t ClutterFilterStage::subspace_attempts() const { return gpu_ ? gpu_->subspace_attempts() : 0; }
JacobiStats ClutterFilterStage::jacobi_stats() const { return gpu_ ? gpu_->jacobi_stats() : JacobiStats{}; }
DominantStats ClutterFilterStage::dominant_stats() const { return gpu_ ? gpu_->dominant_stats() : DominantStats{}; }
EigenRoute ClutterFilterStage::cuda_eigen_route() const { return gpu_ ? gpu_->route() : EigenRoute{}; }
#else
bool ClutterFilterStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
std::int64_t ClutterFilterStage::subspace_fallbacks() const { return 0; }
std::int64_t ClutterFilterStage::subspace_attempts() const { return 0; }
JacobiStats ClutterFilterStage::jacobi_stats() const { return {}; }
DominantStats ClutterFilterStage::dominant_stats() const { return {}; }
EigenRoute ClutterFilterStage::cuda_eigen_route() const { return {}; }
#endif

}  // namespace sonopipe
