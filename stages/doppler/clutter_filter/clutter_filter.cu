#include "stages/doppler/clutter_filter/clutter_filter.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "stages/common/cuda_check.h"
#include "stages/doppler/clutter_filter/small_eigen.cuh"
#include "stages/doppler/clutter_filter/subspace_retry.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kConvertBlocks = 1024;  // grid-stride conversions: a few blocks per SM
// The subspace and dominant routes' convergence test (small_eigen.cuh): the removed subspace's error may change
// the output by at most this fraction of its norm; the float projection alone rounds to ~1e-6
// (the [cuda] tests' 2e-5 bound, clutter_filter_test.cpp).
constexpr double kSubspaceTolerance = 1e-6;

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string("clutter_filter: ") + what + " failed: cuBLAS status " + std::to_string(int(status)));
}
void check_solver(cusolverStatus_t status, const char* what) {
  if (status != CUSOLVER_STATUS_SUCCESS)
    throw CudaError(std::string("clutter_filter: ") + what + " failed: cuSOLVER status " + std::to_string(int(status)));
}

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Copies one block of the ensemble into a contiguous pixels x frames matrix (column-major).
__global__ void gather_kernel(const float2* __restrict__ in, ClutterFilterShape s, ClutterBlock b,
                              float2* __restrict__ block) {
  const std::int64_t q = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;  // pixel within the block
  const std::int64_t n = blockIdx.y;
  if (q >= b.pixels()) return;
  const std::int64_t i = q / b.axial, j = q % b.axial;
  block[n * b.pixels() + q] = in[n * s.pixels() + (b.lateral_begin + i) * s.axial + b.axial_begin + j];
}

// Adds a filtered block into the output with its 1 / cover weight.
__global__ void scatter_kernel(const float2* __restrict__ block, ClutterFilterShape s, ClutterBlock b,
                               const float* __restrict__ inverse_cover_lateral,
                               const float* __restrict__ inverse_cover_axial, float2* __restrict__ out) {
  const std::int64_t q = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  const std::int64_t n = blockIdx.y;
  if (q >= b.pixels()) return;
  const std::int64_t lateral = b.lateral_begin + q / b.axial, axial = b.axial_begin + q % b.axial;
  const float w = inverse_cover_lateral[lateral] * inverse_cover_axial[axial];
  const float2 v = block[n * b.pixels() + q];
  float2& o = out[n * s.pixels() + lateral * s.axial + axial];
  o.x += w * v.x;
  o.y += w * v.y;
}

// |U| column by column, centred on its mean (one thread block per column): the input of the SSM.
__global__ void __launch_bounds__(kThreads)
centred_modulus_kernel(const float2* __restrict__ u, std::int64_t pixels, float* __restrict__ modulus) {
  const std::int64_t column = blockIdx.x;
  const float2* col = u + column * pixels;
  float* out = modulus + column * pixels;
  float sum = 0;
  for (std::int64_t p = threadIdx.x; p < pixels; p += blockDim.x) {
    const float m = hypotf(col[p].x, col[p].y);
    out[p] = m;
    sum += m;
  }
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  __shared__ float mean;
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    mean = total / float(pixels);
  }
  __syncthreads();
  for (std::int64_t p = threadIdx.x; p < pixels; p += blockDim.x) out[p] -= mean;
}

// baranger2018's SSM from the covariance C = |U|^T |U| (lower triangle, ascending eigen order), and
// the tissue rank of ClutterFilterStage::similarity_rank() (same algorithm, float): one thread block.
// prefix: n x (n + 1) floats of workspace.
__global__ void __launch_bounds__(kThreads)
similarity_rank_kernel(const float* __restrict__ covariance, int n, int rank_min, int rank_max,
                       float* __restrict__ prefix, int* __restrict__ rank) {
  // Component a in decreasing order is eigen column n - 1 - a.
  auto ssm = [&](int a, int b) {
    int i = n - 1 - a, j = n - 1 - b;
    if (i < j) {
      const int t = i;
      i = j;
      j = t;
    }
    const float denominator = sqrtf(covariance[i + i * n] * covariance[j + j * n]);
    return denominator > 0 ? covariance[i + j * n] / denominator : (i == j ? 1.0f : 0.0f);
  };
  auto d = [&](int a, int b) { return 2 * ssm(a, b) - 1; };
  for (int m = threadIdx.x; m < n; m += blockDim.x) {  // prefix[m (n+1) + k] = sum_{a < k} d(a, m)
    float sum = 0;
    prefix[m * (n + 1)] = 0;
    for (int k = 0; k < n; ++k) {
      sum += d(k, m);
      prefix[m * (n + 1) + k + 1] = sum;
    }
  }
  __syncthreads();
  auto square_step = [&](int begin, int m) {
    return 2 * (prefix[m * (n + 1) + m] - prefix[m * (n + 1) + begin]) + d(m, m);
  };
  float best_score = -INFINITY;
  int best = rank_min;
  for (int k = rank_min + threadIdx.x; k <= rank_max; k += blockDim.x) {
    float tissue = 0;
    for (int m = 0; m < k; ++m) tissue += square_step(0, m);
    float blood = 0, best_blood = -INFINITY;
    for (int m = k; m < n; ++m) {
      blood += square_step(k, m);
      best_blood = fmaxf(best_blood, blood);
    }
    if (tissue + best_blood > best_score) {  // k grows within a thread: ties keep the smaller k
      best_score = tissue + best_blood;
      best = k;
    }
  }
  __shared__ float scores[kThreads];
  __shared__ int ranks[kThreads];
  scores[threadIdx.x] = best_score;
  ranks[threadIdx.x] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < blockDim.x; ++t)
      if (scores[t] > best_score || (scores[t] == best_score && ranks[t] < best)) {
        best_score = scores[t];
        best = ranks[t];
      }
    *rank = best;
  }
}

// The block in double (the Gram matrix's input: cublasZherk).
__global__ void to_double_kernel(const float2* __restrict__ in, double2* __restrict__ out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = make_double2(in[i].x, in[i].y);
}

// V's columns ascend in eigenvalue, so component a (in decreasing order) is column n - 1 - a.
__device__ inline int component_column(int n, int a) { return n - 1 - a; }

// Double to float (the eigenvectors for the similarity's U = S V, in V's column order).
__global__ void to_float_kernel(const double2* __restrict__ in, float2* __restrict__ out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = make_float2(static_cast<float>(in[i].x), static_cast<float>(in[i].y));
}

// V_r (n x (tissue + noise), float): the removed components, tissue first (a < tissue), then the
// noise ones (a >= n - noise_rank).
__global__ void removed_columns_kernel(const double2* __restrict__ v, int n, int tissue_rank, int noise_rank,
                                       float2* __restrict__ removed) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
  if (row >= n) return;
  const int a = b < tissue_rank ? b : n - noise_rank + (b - tissue_rank);
  const double2 x = v[row + component_column(n, a) * n];
  removed[row + b * n] = make_float2(static_cast<float>(x.x), static_cast<float>(x.y));
}

// G = S^H S in double for N <= 32 frames, from the float block directly (no double copy): cuBLAS's
// Zgemm (32 x 32 output, 63,001 deep: starved of parallelism) and the conversion took 0.058 ms on the
// H100 for ~0.005 ms of bytes and ~0.008 ms of FP64 (docs/benchmarks.md, --case routes). Each block
// stages kGramPixels pixels x 32 frames in shared memory; its threads own 4 x 4 tiles of the upper
// triangle of G (36 tiles of the 8 x 8 tile grid) in 7 groups over the staged pixels; partial sums
// per block go to `partials` (n x n each, upper triangle), summed by small_gram_reduce_kernel.
constexpr int kGramPixels = 64;
constexpr int kGramTiles = 36, kGramGroups = 7;  // 252 of the 256 threads busy

__global__ void __launch_bounds__(kThreads)
small_gram_kernel(const float2* __restrict__ s, std::int64_t pixels, int n, double2* __restrict__ partials) {
  __shared__ float2 staged[kSmallEigenMax][kGramPixels + 1];
  __shared__ double2 sum[kSmallEigenMax * kSmallEigenMax];
  const int t = threadIdx.x;
  for (int e = t; e < kSmallEigenMax * kSmallEigenMax; e += blockDim.x) sum[e] = make_double2(0, 0);
  const int group = t / kGramTiles;
  const bool active = group < kGramGroups;
  int ti = 0, tj = 0;
  for (int c = t % kGramTiles, row = 8; ti < 8; ++ti, --row) {  // tile (ti, tj), ti <= tj
    if (c < row) {
      tj = ti + c;
      break;
    }
    c -= row;
  }
  double re[4][4] = {}, im[4][4] = {};
  for (std::int64_t base = blockIdx.x * std::int64_t(kGramPixels); base < pixels;
       base += std::int64_t(gridDim.x) * kGramPixels) {
    __syncthreads();
    for (int e = t; e < kSmallEigenMax * kGramPixels; e += blockDim.x) {
      const int f = e / kGramPixels, q = e % kGramPixels;
      const std::int64_t p = base + q;
      staged[f][q] = (f < n && p < pixels) ? s[f * pixels + p] : make_float2(0, 0);
    }
    __syncthreads();
    if (!active) continue;
    for (int q = group; q < kGramPixels; q += kGramGroups) {
      double2 xi[4], xj[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float2 u = staged[4 * ti + a][q], w = staged[4 * tj + a][q];
        xi[a] = make_double2(u.x, u.y);
        xj[a] = make_double2(w.x, w.y);
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) {  // conj(x_i) x_j
          re[a][b] = fma(xi[a].x, xj[b].x, fma(xi[a].y, xj[b].y, re[a][b]));
          im[a][b] = fma(xi[a].x, xj[b].y, fma(-xi[a].y, xj[b].x, im[a][b]));
        }
    }
  }
  __syncthreads();
  if (active)
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        double2* entry = &sum[(4 * ti + a) + (4 * tj + b) * kSmallEigenMax];
        atomicAdd(&entry->x, re[a][b]);
        atomicAdd(&entry->y, im[a][b]);
      }
  __syncthreads();
  double2* out = partials + blockIdx.x * std::int64_t(n) * n;
  for (int e = t; e < n * n; e += blockDim.x) out[e] = sum[(e % n) + (e / n) * kSmallEigenMax];
}

// G (n x n, both triangles) from the blocks' partial sums: thread (entry, chunk) of 32 x 8 sums the
// partials chunk, chunk + 8, ...; the chunks are added in shared memory.
__global__ void __launch_bounds__(kThreads)
small_gram_reduce_kernel(const double2* __restrict__ partials, int blocks, int n, double2* __restrict__ gram) {
  __shared__ double2 chunk_sum[8][32];
  const int lane = threadIdx.x % 32, chunk = threadIdx.x / 32;
  const int e = blockIdx.x * 32 + lane;
  const int nn = n * n;
  double re = 0, im = 0;
  if (e < nn)
#pragma unroll 4
    for (int b = chunk; b < blocks; b += 8) {
      const double2 v = partials[std::int64_t(b) * nn + e];
      re += v.x;
      im += v.y;
    }
  chunk_sum[chunk][lane] = make_double2(re, im);
  __syncthreads();
  if (chunk != 0 || e >= nn) return;
  for (int c = 1; c < 8; ++c) {
    re += chunk_sum[c][lane].x;
    im += chunk_sum[c][lane].y;
  }
  const int i = e % n, j = e / n;
  if (i > j) return;
  gram[i + j * n] = make_double2(re, im);
  gram[j + i * n] = make_double2(re, -im);  // G_ji = conj(G_ij)
}

// S_f = S - (S V_r) V_r^H for N <= 32 frames and r <= N / 2 (float, V_r n x r from
// removed_columns_kernel): one thread per pixel holds its N samples in registers, so S is read once
// and S_f written once (the floor's bytes); cuBLAS's S Q (Cgemm) took 0.033 ms and Cgemm + cublasLt
// 0.044 ms at 63,001 x 32 on the H100 for 0.016 ms of bytes (docs/benchmarks.md, --case routes).
__global__ void __launch_bounds__(kThreads)
small_rank_update_kernel(const float2* __restrict__ in, float2* __restrict__ out, std::int64_t pixels, int n,
                         const float2* __restrict__ removed, int r) {
  __shared__ float2 vr[kSmallEigenMax * kSmallEigenMax];
  for (int t = threadIdx.x; t < n * r; t += blockDim.x) vr[t] = removed[t];
  __syncthreads();
  const std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (p >= pixels) return;
  float2 x[kSmallEigenMax], y[kSmallEigenMax];
#pragma unroll
  for (int i = 0; i < kSmallEigenMax; ++i)
    if (i < n) y[i] = x[i] = in[i * pixels + p];
  for (int j = 0; j < r; ++j) {
    float wr = 0, wi = 0;  // w = sum_i x_i V[i, j]
#pragma unroll
    for (int i = 0; i < kSmallEigenMax; ++i)
      if (i < n) {
        const float2 v = vr[i + j * n];
        wr += x[i].x * v.x - x[i].y * v.y;
        wi += x[i].x * v.y + x[i].y * v.x;
      }
#pragma unroll
    for (int i = 0; i < kSmallEigenMax; ++i)
      if (i < n) {  // y_i -= w conj(V[i, j])
        const float2 v = vr[i + j * n];
        y[i].x -= wr * v.x + wi * v.y;
        y[i].y -= wi * v.x - wr * v.y;
      }
  }
#pragma unroll
  for (int i = 0; i < kSmallEigenMax; ++i)
    if (i < n) out[i * pixels + p] = y[i];
}

// Q = I - V_r V_r^H (column-major n x n), summed in double from the double eigenvectors, rounded to
// float; removed: a < tissue rank (from the device with the similarity choice) or a >= n - noise_rank.
__global__ void projector_kernel(const double2* __restrict__ v, int n, const int* __restrict__ device_rank,
                                 int fixed_rank, int noise_rank, float2* __restrict__ q) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x, column = blockIdx.y;
  if (row >= n) return;
  const int tissue_rank = device_rank ? *device_rank : fixed_rank;
  double re = row == column ? 1.0 : 0.0, im = 0;
  for (int a = 0; a < n; ++a) {
    if (a >= tissue_rank && a < n - noise_rank) continue;
    const int c = component_column(n, a);
    const double2 x = v[row + c * n], y = v[column + c * n];  // x conj(y)
    re -= x.x * y.x + x.y * y.y;
    im -= x.y * y.x - x.x * y.y;
  }
  q[row + column * n] = make_float2(static_cast<float>(re), static_cast<float>(im));
}

}  // namespace

struct ClutterFilterGpu::Impl {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t solver_params = nullptr;
  ClutterFilterShape shape;
  ClutterFilterParams params;
  std::vector<ClutterBlock> blocks;
  std::size_t solver_bytes = 0;  // XsyevBatched's device workspace (it asks for no host workspace)
  // The projection: S_f = S - (S V_r) V_r^H (rank_update: two rank-r products, the second out of
  // place through cublasLt) or S Q.
  bool rank_update = false;
  bool small_update = false;  // N <= 32, fixed ranks, r <= N / 2: small_rank_update_kernel
  bool small_gram = false;    // N <= 32 (route.small_kernels): small_gram_kernel, no double copy or Zgemm
  int gram_blocks = 0;        // small_gram_kernel's grid: one block per SM
  std::size_t gram_partials = 0;
  int removed = 0;  // r = tissue_rank + noise_rank (rank_update only)
  cublasLtMatmulDesc_t update = nullptr;
  cublasLtMatrixLayout_t layout_product = nullptr, layout_removed = nullptr, layout_block = nullptr;
  cublasLtMatmulAlgo_t update_algo{};
  static constexpr std::size_t kLtWorkspaceBytes = 32u << 20;
  // Workspace offsets (bytes).
  std::size_t block_in = 0, block_out = 0, block_double = 0, grams = 0, eigenvalues = 0, vectors = 0, projector = 0,
              product = 0, solver_work = 0, lt_work = 0, info = 0, rank = 0, spatial = 0, modulus = 0,
              covariance = 0, prefix = 0, cover = 0, total = 0;
  // Staging offsets (bytes): cover weights, polynomial Q.
  std::size_t staged_cover = 0, staged_projector = 0, staging_total = 0;
  std::vector<float> cover_host;  // 1 / cover of each lateral row, then of each axial column
  // Eigenvector route (EigenRoute) and the subspace route's buffers (workspace offsets).
  EigenRoute route;
  std::size_t start = 0, iterate = 0, reduced = 0, ritz_values = 0, ritz = 0, gram_ritz = 0, breakdown = 0,
              converged = 0;
  unsigned long long* fallbacks = nullptr;  // device counter of frames that took the full solver
  // Its copy in mapped host memory, stored by the kernel that counts (the retry policy reads it
  // at the next frame without a wait); `published_device` is its device address.
  unsigned long long* published = nullptr;
  unsigned long long* published_device = nullptr;
  SubspaceRetry retry;             // route.retry (auto): when the next frame tries the subspace route
  std::int64_t attempts = 0;       // frames that ran the subspace iteration
  cudaStream_t capture = nullptr;  // stream on which the fallback graphs are captured
  // The fallback (full solver where the subspace iteration did not converge) is a CUDA graph with
  // a conditional node, made once per workspace (its pointers are the workspace's).
  std::vector<std::pair<void*, cudaGraphExec_t>> fallback_graphs;
  // Jacobi route, warm start: the previous frame's eigenvectors, one set per workspace (a lane's
  // slots run frames concurrently, each on its own workspace) at offset `previous`; a workspace's
  // first frame after configure zeroes them (the kernel's guard then starts cold).
  std::size_t previous = 0;
  std::vector<void*> warm_workspaces;
  unsigned long long* jacobi_counters = nullptr;  // device: solves, warm starts, sweeps (JacobiStats)
  unsigned long long* dominant_counters = nullptr;  // device: DominantStats' five counts
  // The dominant route's fallback count in mapped host memory (stored by the kernel; its device
  // address `dominant_published_device`) and auto's retry policy on it (SubspaceRetry: after a
  // fallback the next frames take the Jacobi kernel directly, 4, 8, .. 128 of them).
  unsigned long long* dominant_published = nullptr;
  unsigned long long* dominant_published_device = nullptr;
  SubspaceRetry dominant_retry;

  void clear_graphs() {
    for (auto& [workspace, exec] : fallback_graphs) cudaGraphExecDestroy(exec);
    fallback_graphs.clear();
  }
  // The graph: a kernel sets the condition from `converged` (and counts), then if set:
  // XsyevBatched on the Gram matrices in place, their eigenvectors copied over the Ritz vectors.
  cudaGraphExec_t make_fallback_graph(double2* grams, double* values, void* solver_work, int* info, double2* vectors,
                                      const int* converged_flags) {
    const int n = static_cast<int>(shape.frames);
    const auto batch = static_cast<std::int64_t>(blocks.size());
    cudaGraph_t graph = nullptr;
    SONOPIPE_CUDA_CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphExec_t exec = nullptr;
    try {
      cudaGraphConditionalHandle handle;
      SONOPIPE_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, cudaGraphCondAssignDefault));
      SONOPIPE_CUDA_CHECK(cudaStreamBeginCaptureToGraph(capture, graph, nullptr, nullptr, 0,
                                                        cudaStreamCaptureModeRelaxed));
      set_fallback_condition(handle, converged_flags, static_cast<int>(batch), fallbacks, published_device, capture);
      SONOPIPE_CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
      std::size_t count = 0;
      SONOPIPE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
      std::vector<cudaGraphNode_t> nodes(count);
      SONOPIPE_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
      cudaGraphNodeParams params{};
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = handle;
      params.conditional.type = cudaGraphCondTypeIf;
      params.conditional.size = 1;
      cudaGraphNode_t node;
      SONOPIPE_CUDA_CHECK(cudaGraphAddNode(&node, graph, nodes.data(), nullptr, count, &params));
      cudaGraph_t body = params.conditional.phGraph_out[0];
      SONOPIPE_CUDA_CHECK(cudaStreamBeginCaptureToGraph(capture, body, nullptr, nullptr, 0,
                                                        cudaStreamCaptureModeRelaxed));
      check_solver(cusolverDnSetStream(solver, capture), "cusolverDnSetStream");
      const cusolverStatus_t status = cusolverDnXsyevBatched(
          solver, solver_params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, CUDA_C_64F, grams, n,
          CUDA_R_64F, values, CUDA_C_64F, solver_work, solver_bytes, nullptr, 0, info, batch);
      SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(vectors, grams, static_cast<std::size_t>(n) * n * batch * sizeof(double2),
                                          cudaMemcpyDeviceToDevice, capture));
      SONOPIPE_CUDA_CHECK(cudaStreamEndCapture(capture, &body));
      check_solver(status, "cusolverDnXsyevBatched (captured)");
      SONOPIPE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    } catch (...) {
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(capture, &capturing) == cudaSuccess && capturing != cudaStreamCaptureStatusNone) {
        cudaGraph_t dropped = nullptr;
        cudaStreamEndCapture(capture, &dropped);
      }
      cudaGetLastError();
      cudaGraphDestroy(graph);
      throw;
    }
    cudaGraphDestroy(graph);
    return exec;
  }

  // Subspace iteration for the dominant k = tissue_rank eigenvectors of every block's Gram matrix
  // G (n x n): X_0 a fixed pseudo-random n x b block; `iterations` times X <- orth(G X) (Zgemm,
  // Cholesky QR); Rayleigh-Ritz: H = X^H G X (b x b), H = W diag(theta) W^H (Jacobi kernel), Ritz
  // vectors X W written as the last b columns of an n x n matrix per block (ascending, as the full
  // solver's: component a is column n - 1 - a); the convergence test, then the fallback graph.
  // Returns the eigenvector matrices (the Ritz ones; the full solver's where it ran).
  const double2* run_subspace(double2* grams, unsigned char* base, cudaStream_t stream) {
    const int n = static_cast<int>(shape.frames), b = route.block, k = static_cast<int>(shape.tissue_rank);
    const int batch = static_cast<int>(blocks.size());
    const long long nn = static_cast<long long>(n) * n, nb = static_cast<long long>(n) * b;
    const long long bb = static_cast<long long>(b) * b;
    auto* x = reinterpret_cast<double2*>(base + start);
    auto* y = reinterpret_cast<double2*>(base + iterate);
    auto* h = reinterpret_cast<double2*>(base + reduced);
    auto* theta = reinterpret_cast<double*>(base + ritz_values);
    auto* vectors = reinterpret_cast<double2*>(base + ritz);
    auto* gv = reinterpret_cast<double2*>(base + gram_ritz);
    auto* broke = reinterpret_cast<int*>(base + breakdown);
    auto* flags = reinterpret_cast<int*>(base + converged);
    const cuDoubleComplex one = {1, 0}, zero = {0, 0};
    auto z = [](const double2* p) { return reinterpret_cast<const cuDoubleComplex*>(p); };
    auto zw = [](double2* p) { return reinterpret_cast<cuDoubleComplex*>(p); };
    SONOPIPE_CUDA_CHECK(cudaMemsetAsync(broke, 0, batch * sizeof(int), stream));
    start_block_batched(x, n, b, nb, batch, stream);
    for (int i = 0; i < route.iterations; ++i) {
      check_blas(cublasZgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, b, n, &one, z(grams), n, nn, z(x), n, nb,
                                           &zero, zw(y), n, nb, batch),
                 "cublasZgemmStridedBatched (G X)");
      orthonormalize_columns_batched(y, n, b, nb, batch, broke, stream);
      std::swap(x, y);
    }
    check_blas(cublasZgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, b, n, &one, z(grams), n, nn, z(x), n, nb,
                                         &zero, zw(y), n, nb, batch),
               "cublasZgemmStridedBatched (G X, Rayleigh-Ritz)");
    check_blas(cublasZgemmStridedBatched(blas, CUBLAS_OP_C, CUBLAS_OP_N, b, b, n, &one, z(x), n, nb, z(y), n, nb,
                                         &zero, zw(h), b, bb, batch),
               "cublasZgemmStridedBatched (X^H G X)");
    hermitian_jacobi_batched(h, b, b, bb, batch, theta, h, b, bb, stream);  // W in place of H
    double2* last = vectors + (n - b) * static_cast<long long>(n);
    check_blas(cublasZgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, b, b, &one, z(x), n, nb, z(h), b, bb,
                                         &zero, zw(last), n, nn, batch),
               "cublasZgemmStridedBatched (X W)");
    check_blas(cublasZgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, b, b, &one, z(y), n, nb, z(h), b, bb,
                                         &zero, zw(gv), n, nb, batch),
               "cublasZgemmStridedBatched (G X W)");
    subspace_converged_batched(grams, n, last, nn, gv, nb, theta, b, k, batch, kSubspaceTolerance, broke, flags,
                               stream);
    cudaGraphExec_t exec = nullptr;
    for (auto& [workspace, graph] : fallback_graphs)
      if (workspace == base) exec = graph;
    if (!exec) {  // first frame on this workspace (one per slot): made once, off the steady state
      exec = make_fallback_graph(grams, reinterpret_cast<double*>(base + eigenvalues), base + solver_work,
                                 reinterpret_cast<int*>(base + info), vectors, flags);
      fallback_graphs.emplace_back(base, exec);
      check_solver(cusolverDnSetStream(solver, stream), "cusolverDnSetStream");
    }
    SONOPIPE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    return vectors;
  }

  ~Impl() {
    clear_graphs();
    if (fallbacks) cudaFree(fallbacks);
    if (jacobi_counters) cudaFree(jacobi_counters);
    if (dominant_counters) cudaFree(dominant_counters);
    if (dominant_published) cudaFreeHost(dominant_published);
    if (published) cudaFreeHost(published);
    if (capture) cudaStreamDestroy(capture);
    destroy_update();
    if (solver_params) cusolverDnDestroyParams(solver_params);
    if (solver) cusolverDnDestroy(solver);
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
  }
  void destroy_update() {
    if (layout_product) cublasLtMatrixLayoutDestroy(layout_product);
    if (layout_removed) cublasLtMatrixLayoutDestroy(layout_removed);
    if (layout_block) cublasLtMatrixLayoutDestroy(layout_block);
    if (update) cublasLtMatmulDescDestroy(update);
    layout_product = layout_removed = layout_block = nullptr;
    update = nullptr;
  }
  // D = S - W V_r^H (W = S V_r, pixels x r; V_r n x r; S and D pixels x n), its algorithm chosen once.
  void plan_update(std::int64_t pixels, int n) {
    destroy_update();
    check_blas(cublasLtMatmulDescCreate(&update, CUBLAS_COMPUTE_32F, CUDA_C_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t conjugate = CUBLAS_OP_C;
    check_blas(cublasLtMatmulDescSetAttribute(update, CUBLASLT_MATMUL_DESC_TRANSB, &conjugate, sizeof(conjugate)),
               "cublasLtMatmulDescSetAttribute");
    check_blas(cublasLtMatrixLayoutCreate(&layout_product, CUDA_C_32F, pixels, removed, pixels), "layout S V_r");
    check_blas(cublasLtMatrixLayoutCreate(&layout_removed, CUDA_C_32F, n, removed, n), "layout V_r");
    check_blas(cublasLtMatrixLayoutCreate(&layout_block, CUDA_C_32F, pixels, n, pixels), "layout S");
    cublasLtMatmulPreference_t preference = nullptr;
    check_blas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::size_t bytes = kLtWorkspaceBytes;
    check_blas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                    sizeof(bytes)),
               "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(lt, update, layout_product, layout_removed, layout_block, layout_block,
                                       preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    check_blas(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found < 1) throw CudaError("clutter_filter: cublasLt has no algorithm for the rank update");
    update_algo = result.algo;
  }
};

ClutterFilterGpu::ClutterFilterGpu() : impl_(std::make_unique<Impl>()) {}

std::int64_t ClutterFilterGpu::subspace_attempts() const { return impl_->attempts; }

std::int64_t ClutterFilterGpu::subspace_fallbacks() const {
  if (!impl_->fallbacks) return 0;
  unsigned long long count = 0;
  SONOPIPE_CUDA_CHECK(cudaMemcpy(&count, impl_->fallbacks, sizeof(count), cudaMemcpyDeviceToHost));
  return static_cast<std::int64_t>(count);
}

JacobiStats ClutterFilterGpu::jacobi_stats() const {
  if (!impl_->jacobi_counters) return {};
  unsigned long long counters[3] = {};
  SONOPIPE_CUDA_CHECK(cudaMemcpy(counters, impl_->jacobi_counters, sizeof(counters), cudaMemcpyDeviceToHost));
  return {.solves = static_cast<std::int64_t>(counters[0]), .warm = static_cast<std::int64_t>(counters[1]),
          .sweeps = static_cast<std::int64_t>(counters[2])};
}

DominantStats ClutterFilterGpu::dominant_stats() const {
  if (!impl_->dominant_counters) return {};
  unsigned long long c[5] = {};
  SONOPIPE_CUDA_CHECK(cudaMemcpy(c, impl_->dominant_counters, sizeof(c), cudaMemcpyDeviceToHost));
  return {.solves = static_cast<std::int64_t>(c[0]), .fallbacks = static_cast<std::int64_t>(c[1]),
          .squarings = static_cast<std::int64_t>(c[2]), .iterations = static_cast<std::int64_t>(c[3]),
          .bound_squarings = static_cast<std::int64_t>(c[4])};
}

EigenRoute ClutterFilterGpu::route() const { return impl_->route; }
ClutterFilterGpu::~ClutterFilterGpu() = default;

ClutterFilterGpu::Sizes ClutterFilterGpu::configure(const ClutterFilterShape& shape, const ClutterFilterParams& params,
                                                    const EigenRoute& route, const std::vector<ClutterBlock>& blocks,
                                                    const std::vector<double>& inverse_cover_lateral,
                                                    const std::vector<double>& inverse_cover_axial) {
  Impl& m = *impl_;
  if (!m.blas) check_blas(cublasCreate(&m.blas), "cublasCreate");
  if (!m.lt) check_blas(cublasLtCreate(&m.lt), "cublasLtCreate");
  if (!m.solver) check_solver(cusolverDnCreate(&m.solver), "cusolverDnCreate");
  if (!m.solver_params) check_solver(cusolverDnCreateParams(&m.solver_params), "cusolverDnCreateParams");
  if (!m.capture) SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&m.capture, cudaStreamNonBlocking));
  if (!m.fallbacks) {
    SONOPIPE_CUDA_CHECK(cudaMalloc(&m.fallbacks, sizeof(unsigned long long)));
    SONOPIPE_CUDA_CHECK(cudaMemset(m.fallbacks, 0, sizeof(unsigned long long)));
    SONOPIPE_CUDA_CHECK(cudaHostAlloc(&m.published, sizeof(unsigned long long), cudaHostAllocMapped));
    *m.published = 0;
    SONOPIPE_CUDA_CHECK(cudaHostGetDevicePointer(&m.published_device, m.published, 0));
  }
  if (!m.jacobi_counters) SONOPIPE_CUDA_CHECK(cudaMalloc(&m.jacobi_counters, 3 * sizeof(unsigned long long)));
  SONOPIPE_CUDA_CHECK(cudaMemset(m.jacobi_counters, 0, 3 * sizeof(unsigned long long)));
  if (!m.dominant_counters) SONOPIPE_CUDA_CHECK(cudaMalloc(&m.dominant_counters, 5 * sizeof(unsigned long long)));
  SONOPIPE_CUDA_CHECK(cudaMemset(m.dominant_counters, 0, 5 * sizeof(unsigned long long)));
  if (!m.dominant_published) {
    SONOPIPE_CUDA_CHECK(cudaHostAlloc(&m.dominant_published, sizeof(unsigned long long), cudaHostAllocMapped));
    SONOPIPE_CUDA_CHECK(cudaHostGetDevicePointer(&m.dominant_published_device, m.dominant_published, 0));
  }
  // The counters restart with the configure (a frame of the configure before still in flight
  // could store its count late: the next fallback's count then reads as stale, one try later).
  *static_cast<volatile unsigned long long*>(m.dominant_published) = 0;
  m.dominant_retry = SubspaceRetry(0);
  m.warm_workspaces.clear();  // every workspace starts cold (a new shape or parameters)
  m.retry = SubspaceRetry(*static_cast<volatile unsigned long long*>(m.published));
  m.clear_graphs();
  m.shape = shape;
  m.params = params;
  m.blocks = blocks;
  m.route = route;
  const int n = static_cast<int>(shape.frames);
  const auto batch = static_cast<std::int64_t>(blocks.size());
  const std::size_t block_pixels = static_cast<std::size_t>(blocks.front().pixels());
  const std::size_t block_elements = block_pixels * static_cast<std::size_t>(n);
  const bool svd = params.method == ClutterFilterParams::Method::svd;
  const bool similarity = svd && params.rank_choice == ClutterFilterParams::RankChoice::similarity;
  m.removed = static_cast<int>(shape.tissue_rank + shape.noise_rank);
  // S Q costs 8 P N^2 flops and two passes over S; the rank update 16 P N r and three. The H100
  // measured (sonopipe-bench doppler --case routes) S Q 0.037 ms against 0.049 at N = 32, and 0.53
  // against 0.20 ms at N = 200, r = 20: the update from 64 frames, when r <= N / 4.
  m.rank_update = svd && !similarity && m.removed > 0 && n >= 64 && 4 * m.removed <= n;
  // The small kernels at N <= 32 unless eigensolver is full (the route before, for comparison).
  m.small_update = svd && !similarity && m.removed > 0 && n <= kSmallEigenMax && 2 * m.removed <= n &&
                   route.small_kernels;
  if (m.rank_update) m.plan_update(static_cast<std::int64_t>(block_pixels), n);
  m.solver_bytes = 0;
  if (svd) {
    // The size query takes the matrix and eigenvalue pointers: scratch ones (configure may allocate).
    void* matrix = nullptr;
    void* values = nullptr;
    SONOPIPE_CUDA_CHECK(cudaMalloc(&matrix, static_cast<std::size_t>(n) * n * batch * sizeof(double2)));
    SONOPIPE_CUDA_CHECK(cudaMalloc(&values, static_cast<std::size_t>(n) * batch * sizeof(double)));
    std::size_t host_bytes = 0;
    const cusolverStatus_t status = cusolverDnXsyevBatched_bufferSize(
        m.solver, m.solver_params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, CUDA_C_64F, matrix, n,
        CUDA_R_64F, values, CUDA_C_64F, &m.solver_bytes, &host_bytes, batch);
    cudaFree(matrix);
    cudaFree(values);
    check_solver(status, "cusolverDnXsyevBatched_bufferSize");
    if (host_bytes != 0)
      throw CudaError("clutter_filter: cusolverDnXsyevBatched asks for " + std::to_string(host_bytes) +
                      " bytes of host workspace (a host synchronisation per frame); this route expects none");
  }
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t offset = at;
    at += aligned(bytes);
    return offset;
  };
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  m.block_in = take(shape.blocked ? block_elements * sizeof(float2) : 0);
  m.block_out = take(shape.blocked ? block_elements * sizeof(float2) : 0);
  m.small_gram = svd && route.small_kernels && n <= kSmallEigenMax;
  if (m.small_gram) {
    int device = 0;
    SONOPIPE_CUDA_CHECK(cudaGetDevice(&device));
    SONOPIPE_CUDA_CHECK(cudaDeviceGetAttribute(&m.gram_blocks, cudaDevAttrMultiProcessorCount, device));
  }
  m.block_double = take(svd && !m.small_gram ? block_elements * sizeof(double2) : 0);
  m.gram_partials = take(m.small_gram ? static_cast<std::size_t>(m.gram_blocks) * nn * sizeof(double2) : 0);
  m.grams = take(svd ? nn * batch * sizeof(double2) : 0);  // one per block, then its eigenvectors
  m.eigenvalues = take(svd ? n * batch * sizeof(double) : 0);
  // Warm start: the Jacobi route's n x n eigenvectors, or the dominant route's n x k vectors.
  const bool dominant = svd && route.kind == EigenRoute::Kind::dominant;
  const bool warm = svd && (route.kind == EigenRoute::Kind::jacobi || dominant) && route.warm_start;
  m.previous = take(warm ? nn * batch * sizeof(double2) : 0);
  m.vectors = take(nn * sizeof(float2));  // V in float: V_r (rank update) or all of V (similarity)
  m.projector = take(nn * sizeof(float2));
  m.product = take(m.rank_update ? block_pixels * m.removed * sizeof(float2) : 0);  // S V_r
  m.solver_work = take(m.solver_bytes);
  // cuBLAS's and cublasLt's workspace (one stream uses it at a time, in order): cublasSetStream
  // resets a handle to the library's default pool, and the stage's one handle moves between the
  // lane's slot streams frame by frame; its own workspace keeps the library from allocating.
  m.lt_work = take(Impl::kLtWorkspaceBytes);
  m.info = take(batch * sizeof(int));
  m.rank = take(sizeof(int));
  m.spatial = take(similarity ? block_elements * sizeof(float2) : 0);
  m.modulus = take(similarity ? block_elements * sizeof(float) : 0);
  m.covariance = take(similarity ? nn * sizeof(float) : 0);
  m.prefix = take(similarity ? static_cast<std::size_t>(n) * (n + 1) * sizeof(float) : 0);
  m.cover = take((shape.lateral + shape.axial) * sizeof(float));
  const bool subspace = svd && m.route.kind == EigenRoute::Kind::subspace;
  const std::size_t b = subspace ? static_cast<std::size_t>(m.route.block) : 0;
  const std::size_t block_columns = static_cast<std::size_t>(n) * b * batch;  // n x b per block
  m.start = take(block_columns * sizeof(double2));
  m.iterate = take(block_columns * sizeof(double2));
  m.reduced = take(b * b * batch * sizeof(double2));
  m.ritz_values = take(b * batch * sizeof(double));
  m.ritz = take(subspace ? nn * batch * sizeof(double2) : 0);
  m.gram_ritz = take(block_columns * sizeof(double2));
  m.breakdown = take(subspace ? batch * sizeof(int) : 0);
  m.converged = take(subspace || dominant ? batch * sizeof(int) : 0);  // dominant: the fallback's skip flags
  m.total = at;
  if (subspace) {
    // The fallback graph once on scratch buffers: a CUDA without conditional nodes, or a solver
    // that cannot be captured into one, is found here and the route is the full solver instead.
    const std::size_t grams_bytes = nn * batch * sizeof(double2);
    std::vector<void*> scratch;
    auto scratch_buffer = [&](std::size_t bytes) {
      void* p = nullptr;
      SONOPIPE_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)));
      scratch.push_back(p);
      return p;
    };
    try {
      auto* grams = static_cast<double2*>(scratch_buffer(grams_bytes));
      auto* values = static_cast<double*>(scratch_buffer(n * batch * sizeof(double)));
      void* work = scratch_buffer(m.solver_bytes);
      auto* info = static_cast<int*>(scratch_buffer(batch * sizeof(int)));
      auto* vectors = static_cast<double2*>(scratch_buffer(grams_bytes));
      auto* flags = static_cast<int*>(scratch_buffer(batch * sizeof(int)));
      cudaGraphExec_t exec = m.make_fallback_graph(grams, values, work, info, vectors, flags);
      cudaGraphExecDestroy(exec);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "clutter_filter: the subspace route's fallback graph failed (%s); using the full "
                           "eigensolver\n", e.what());
      m.route = EigenRoute{};
    }
    for (void* p : scratch) cudaFree(p);
  }
  m.cover_host.clear();
  for (double v : inverse_cover_lateral) m.cover_host.push_back(static_cast<float>(v));
  for (double v : inverse_cover_axial) m.cover_host.push_back(static_cast<float>(v));
  at = 0;
  m.staged_cover = take(m.cover_host.size() * sizeof(float));
  m.staged_projector = take(svd ? 0 : nn * sizeof(float2));
  m.staging_total = at;
  return {.workspace_bytes = m.total, .host_staging_bytes = m.staging_total};
}

void ClutterFilterGpu::run(const float2* in, float2* out, void* workspace, void* host_staging,
                           const double* polynomial_projector, cudaStream_t stream) {
  Impl& m = *impl_;
  const ClutterFilterShape& s = m.shape;
  const int n = static_cast<int>(s.frames);
  const std::size_t nn = static_cast<std::size_t>(n) * n;
  auto* base = static_cast<unsigned char*>(workspace);
  auto* staging = static_cast<unsigned char*>(host_staging);
  auto device = [&](std::size_t offset) { return base + offset; };
  auto* q = reinterpret_cast<float2*>(device(m.projector));
  check_blas(cublasSetStream(m.blas, stream), "cublasSetStream");
  check_blas(cublasSetWorkspace(m.blas, device(m.lt_work), Impl::kLtWorkspaceBytes), "cublasSetWorkspace");
  const cuComplex one = make_cuComplex(1, 0), zero = make_cuComplex(0, 0), minus_one = make_cuComplex(-1, 0);

  if (m.params.method == ClutterFilterParams::Method::polynomial) {
    // Q from the host (it depends on the frame times only): staging -> device, then S_f = S Q.
    auto* staged = reinterpret_cast<float2*>(staging + m.staged_projector);
    for (std::size_t i = 0; i < nn; ++i) staged[i] = make_float2(static_cast<float>(polynomial_projector[i]), 0.0f);
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(q, staged, nn * sizeof(float2), cudaMemcpyHostToDevice, stream));
    const int pixels = static_cast<int>(s.pixels());
    check_blas(cublasCgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_N, pixels, n, n, &one, reinterpret_cast<const cuComplex*>(in),
                           pixels, reinterpret_cast<const cuComplex*>(q), n, &zero, reinterpret_cast<cuComplex*>(out),
                           pixels),
               "cublasCgemm (projection)");
    return;
  }

  check_solver(cusolverDnSetStream(m.solver, stream), "cusolverDnSetStream");
  auto* block_double = reinterpret_cast<double2*>(device(m.block_double));
  auto* grams = reinterpret_cast<double2*>(device(m.grams));
  auto* vectors = reinterpret_cast<float2*>(device(m.vectors));
  auto* rank = reinterpret_cast<int*>(device(m.rank));
  auto* cover = reinterpret_cast<float*>(device(m.cover));
  auto* gathered = reinterpret_cast<float2*>(device(m.block_in));
  const bool similarity = m.params.rank_choice == ClutterFilterParams::RankChoice::similarity;
  if (s.blocked) {
    auto* staged_cover = reinterpret_cast<float*>(staging + m.staged_cover);
    std::copy(m.cover_host.begin(), m.cover_host.end(), staged_cover);
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(cover, staged_cover, m.cover_host.size() * sizeof(float),
                                        cudaMemcpyHostToDevice, stream));
    SONOPIPE_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(s.pixels() * n) * sizeof(float2), stream));
  }
  // The block's pixels x frames matrix: the input itself, or gathered into the workspace.
  auto block_matrix = [&](const ClutterBlock& b) -> const float2* {
    if (!s.blocked) return in;
    const dim3 grid(static_cast<unsigned>((b.pixels() + kThreads - 1) / kThreads), static_cast<unsigned>(n));
    gather_kernel<<<grid, kThreads, 0, stream>>>(in, s, b, gathered);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    return gathered;
  };
  // 1. Every block's Gram matrix G = S^H S in double (a float Gram turns the removed subspace by
  //    eps_float lambda_1 / gap): S converted, one Zgemm (both triangles: the H100 ran it in 0.46 ms
  //    at 65,536 x 200 against 1.12 ms for Zherk, which a 200 x 200 output leaves short of blocks).
  const cuDoubleComplex one_z = {1, 0}, zero_z = {0, 0};
  for (std::size_t index = 0; index < m.blocks.size(); ++index) {
    const ClutterBlock& b = m.blocks[index];
    const int pixels = static_cast<int>(b.pixels());
    if (m.small_gram) {
      auto* partials = reinterpret_cast<double2*>(device(m.gram_partials));
      small_gram_kernel<<<m.gram_blocks, kThreads, 0, stream>>>(block_matrix(b), pixels, n, partials);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      small_gram_reduce_kernel<<<static_cast<unsigned>((nn + 31) / 32), kThreads, 0, stream>>>(partials, m.gram_blocks,
                                                                                                 n, grams + index * nn);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      continue;
    }
    to_double_kernel<<<kConvertBlocks, kThreads, 0, stream>>>(block_matrix(b), block_double, std::int64_t(pixels) * n);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    const auto* sd = reinterpret_cast<const cuDoubleComplex*>(block_double);
    check_blas(cublasZgemm(m.blas, CUBLAS_OP_C, CUBLAS_OP_N, n, n, pixels, &one_z, sd, pixels, sd, pixels, &zero_z,
                           reinterpret_cast<cuDoubleComplex*>(grams + index * nn), n),
               "cublasZgemm (Gram)");
  }
  // 2. Every block's eigenvectors (columns ascending in eigenvalue, n x n per block, `eigen`):
  const int batch = static_cast<int>(m.blocks.size());
  // The warm start's buffer of this workspace (Jacobi and dominant routes), zeroed on its first
  // frame after configure (the kernels' guards then start cold); null without warm start.
  auto warm_previous = [&]() -> double2* {
    if (!m.route.warm_start) return nullptr;
    auto* previous = reinterpret_cast<double2*>(device(m.previous));
    if (std::find(m.warm_workspaces.begin(), m.warm_workspaces.end(), workspace) == m.warm_workspaces.end()) {
      SONOPIPE_CUDA_CHECK(cudaMemsetAsync(previous, 0, nn * batch * sizeof(double2), stream));
      m.warm_workspaces.push_back(workspace);
    }
    return previous;
  };
  const double2* eigen = grams;
  // All blocks in one call, in place (their `info` stays on the device, unread: no host sync).
  auto full_solver = [&] {
    check_solver(cusolverDnXsyevBatched(m.solver, m.solver_params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n,
                                        CUDA_C_64F, grams, n, CUDA_R_64F, device(m.eigenvalues), CUDA_C_64F,
                                        device(m.solver_work), m.solver_bytes, nullptr, 0,
                                        reinterpret_cast<int*>(device(m.info)), batch),
                 "cusolverDnXsyevBatched");
  };
  switch (m.route.kind) {
    case EigenRoute::Kind::full:
      full_solver();
      break;
    case EigenRoute::Kind::jacobi: {
      // N <= 32 (auto, or eigensolver jacobi): one thread block per Gram matrix, in place; warm
      // from this workspace's previous eigenvectors (zeroed on its first frame: a cold start).
      hermitian_jacobi_batched(grams, n, n, static_cast<std::int64_t>(nn), batch,
                               reinterpret_cast<double*>(device(m.eigenvalues)), grams, n,
                               static_cast<std::int64_t>(nn), stream, JacobiVariant::circle, nullptr,
                               warm_previous(), m.jacobi_counters);
      break;
    }
    case EigenRoute::Kind::dominant: {
      // N <= 32, fixed rank k (auto): the dominant k eigenpairs in place where the device's test
      // passes (small_eigen.cuh), warm from this workspace's previous dominant vectors; then the
      // Jacobi kernel, which returns at once for those blocks and solves the others (cold), in
      // place: no host wait, one more launch. auto (retry): after a fallback, as the device last
      // published the count (read without a wait), the next frames take the Jacobi kernel alone.
      auto* values = reinterpret_cast<double*>(device(m.eigenvalues));
      int* flags = nullptr;  // null: every block to the Jacobi kernel
      if (!m.route.retry ||
          m.dominant_retry.try_subspace(*static_cast<volatile unsigned long long*>(m.dominant_published))) {
        flags = reinterpret_cast<int*>(device(m.converged));
        hermitian_dominant_batched(grams, n, n, static_cast<std::int64_t>(nn), batch,
                                   static_cast<int>(s.tissue_rank), kSubspaceTolerance, values, grams, n,
                                   static_cast<std::int64_t>(nn), flags, stream, warm_previous(),
                                   m.dominant_counters, m.dominant_published_device);
      }
      hermitian_jacobi_batched(grams, n, n, static_cast<std::int64_t>(nn), batch, values, grams, n,
                               static_cast<std::int64_t>(nn), stream, JacobiVariant::circle, nullptr, nullptr,
                               m.jacobi_counters, flags);
      break;
    }
    case EigenRoute::Kind::subspace:
      // auto (retry): the count of fallbacks as the device last published it, read without a wait.
      if (!m.route.retry || m.retry.try_subspace(*static_cast<volatile unsigned long long*>(m.published))) {
        ++m.attempts;
        eigen = m.run_subspace(grams, base, stream);
      } else {
        full_solver();
      }
      break;
  }
  // 3. Per block: the similarity rank, the projection, the scatter.
  for (std::size_t index = 0; index < m.blocks.size(); ++index) {
    const ClutterBlock& b = m.blocks[index];
    const int pixels = static_cast<int>(b.pixels());
    const double2* v = eigen + index * nn;
    const float2* a = block_matrix(b);
    float2* y = s.blocked ? reinterpret_cast<float2*>(device(m.block_out)) : out;
    const auto* ac = reinterpret_cast<const cuComplex*>(a);
    if (similarity) {
      auto* spatial = reinterpret_cast<cuComplex*>(device(m.spatial));
      auto* modulus = reinterpret_cast<float*>(device(m.modulus));
      auto* covariance = reinterpret_cast<float*>(device(m.covariance));
      // U = S V (the spatial singular vectors times sigma), |U| centred, C = |U|^T |U|.
      to_float_kernel<<<kConvertBlocks, kThreads, 0, stream>>>(v, vectors, std::int64_t(nn));
      SONOPIPE_CUDA_CHECK_LAUNCH();
      check_blas(cublasCgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_N, pixels, n, n, &one, ac, pixels,
                             reinterpret_cast<const cuComplex*>(vectors), n, &zero, spatial, pixels),
                 "cublasCgemm (spatial vectors)");
      centred_modulus_kernel<<<n, kThreads, 0, stream>>>(reinterpret_cast<const float2*>(spatial), pixels, modulus);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      const float one_f = 1, zero_f = 0;
      check_blas(cublasSsyrk(m.blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, n, pixels, &one_f, modulus, pixels, &zero_f,
                             covariance, n),
                 "cublasSsyrk (similarity)");
      similarity_rank_kernel<<<1, kThreads, 0, stream>>>(covariance, n, static_cast<int>(s.rank_min),
                                                         static_cast<int>(s.rank_max),
                                                         reinterpret_cast<float*>(device(m.prefix)), rank);
      SONOPIPE_CUDA_CHECK_LAUNCH();
    }
    if (m.small_update) {
      removed_columns_kernel<<<dim3(1, static_cast<unsigned>(m.removed)), 64, 0, stream>>>(
          v, n, static_cast<int>(s.tissue_rank), static_cast<int>(s.noise_rank), vectors);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      small_rank_update_kernel<<<static_cast<unsigned>((pixels + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
          a, y, pixels, n, vectors, m.removed);
      SONOPIPE_CUDA_CHECK_LAUNCH();
    } else if (m.rank_update) {
      // S_f = S - (S V_r) V_r^H: W = S V_r (Cgemm), then D = S - W V_r^H out of place (cublasLt).
      auto* product = reinterpret_cast<cuComplex*>(device(m.product));
      const auto* removed = reinterpret_cast<const cuComplex*>(vectors);
      removed_columns_kernel<<<dim3(static_cast<unsigned>((n + 63) / 64), static_cast<unsigned>(m.removed)), 64, 0,
                               stream>>>(v, n, static_cast<int>(s.tissue_rank), static_cast<int>(s.noise_rank),
                                         vectors);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      check_blas(cublasCgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_N, pixels, m.removed, n, &one, ac, pixels, removed, n,
                             &zero, product, pixels),
                 "cublasCgemm (S V_r)");
      check_blas(cublasLtMatmul(m.lt, m.update, &minus_one, product, m.layout_product, removed, m.layout_removed, &one,
                                a, m.layout_block, y, m.layout_block, &m.update_algo, device(m.lt_work),
                                Impl::kLtWorkspaceBytes, stream),
                 "cublasLtMatmul (rank update)");
    } else {
      const dim3 projector_grid(static_cast<unsigned>((n + 63) / 64), static_cast<unsigned>(n));
      projector_kernel<<<projector_grid, 64, 0, stream>>>(v, n, similarity ? rank : nullptr,
                                                          static_cast<int>(s.tissue_rank),
                                                          static_cast<int>(s.noise_rank), q);
      SONOPIPE_CUDA_CHECK_LAUNCH();
      // S_f = S Q
      check_blas(cublasCgemm(m.blas, CUBLAS_OP_N, CUBLAS_OP_N, pixels, n, n, &one, ac, pixels,
                             reinterpret_cast<const cuComplex*>(q), n, &zero, reinterpret_cast<cuComplex*>(y), pixels),
                 "cublasCgemm (projection)");
    }
    if (s.blocked) {
      const dim3 grid(static_cast<unsigned>((pixels + kThreads - 1) / kThreads), static_cast<unsigned>(n));
      scatter_kernel<<<grid, kThreads, 0, stream>>>(y, s, b, cover, cover + s.lateral, out);
      SONOPIPE_CUDA_CHECK_LAUNCH();
    }
  }
}

}  // namespace sonopipe::cuda
