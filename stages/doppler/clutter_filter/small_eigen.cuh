// Small dense kernels of the clutter filter's eigenvector routes (EigenRoute in
// clutter_filter_params.h), for what cuSOLVER does slowly at these sizes: its batched solvers take
// 0.25-0.35 ms on one 32 x 32 Hermitian matrix on the H100 (docs/benchmarks.md, --case routes),
// mostly launch and synchronisation latency; these do it in one thread block per matrix.
// Matrices are column-major double complex, one per batch entry at base + entry * stride.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stages/doppler/clutter_filter/clutter_filter_params.h"  // kDominantMaxRank

namespace sonopipe::cuda {

inline constexpr int kSmallEigenMax = 32;  // largest n of hermitian_jacobi_batched

// Eigenvalues (ascending, `values` + entry * n) and eigenvectors (columns in the same order,
// `vectors` + entry * vectors_stride, leading dimension ldv) of `batch` Hermitian n x n matrices
// (n <= 32; the lower triangle is read, the diagonal's real part). Cyclic Jacobi (parallel
// round-robin ordering) in double until the off-diagonal norm is below 1e-14 of the Frobenius norm
// or 20 sweeps. `vectors` may be `matrices` (in place: each block reads its matrix before writing).
// Variants (the same order): two_phase computes a round's rotations in a phase of its own (n / 2
// threads, then a barrier); fused has every thread compute the two it needs, one
// read-barrier-write-barrier per round; both in double (the kernels before). mixed computes the
// rotations' angles in float (made unitary in double, A scaled to |A|_F ~ 1; A and V stay double),
// takes the round's pairs from a table and double-buffers A and V in shared memory (one barrier per
// round); mixed_phased is mixed with the rotations in a phase of their own (16 threads, while the
// others load; a second barrier); circle is mixed_phased in the circle method's storage (pairs
// (i, i + m/2), the indices moved one step a round: no pair table, no shared-memory bank
// conflicts). The stage runs circle, the fastest measured (H100, n = 32: 172 us; mixed_phased 200,
// mixed 210, the double kernels before 340-351; docs/doppler.md). `sweeps` (the float-angle
// variants; may be null): the sweeps each entry took.
// Warm start (float-angle variants; `previous` may be null): `previous` + entry * n * n holds V0,
// the eigenvectors of a nearby matrix (the frame before's; n x n, leading dimension n). Where V0 is
// unitary to 1e-8 (entries of V0^H V0 - I; a zeroed buffer fails), the sweeps run on V0^H A V0 with
// V starting at V0 (V = V0 J: A's eigenvectors; cyclic Jacobi converges quadratically near
// diagonal), else from the identity; the same convergence test and sweep cap either way. The
// eigenvectors found are stored back into `previous` (ascending). `stats` (may be null): three
// device counters incremented per entry: solves, warm starts, sweeps.
// Consecutive calls on one `previous` must be stream-ordered (one buffer per workspace).
enum class JacobiVariant { mixed, mixed_phased, circle, fused, two_phase };
inline const char* jacobi_variant_name(JacobiVariant variant) {
  switch (variant) {
    case JacobiVariant::mixed: return "mixed";
    case JacobiVariant::mixed_phased: return "mixed_phased";
    case JacobiVariant::circle: return "circle";
    case JacobiVariant::fused: return "fused";
    case JacobiVariant::two_phase: return "two_phase";
  }
  return "?";
}
void hermitian_jacobi_batched(const double2* matrices, int n, int lda, std::int64_t stride, int batch, double* values,
                              double2* vectors, int ldv, std::int64_t vectors_stride, cudaStream_t stream,
                              JacobiVariant variant = JacobiVariant::circle, int* sweeps = nullptr,
                              double2* previous = nullptr, unsigned long long* stats = nullptr,
                              const int* skip = nullptr);
// `skip` (float-angle variants; may be null): entries with skip[entry] != 0 are left as they are
// (the block returns at once): the dominant route's fallback runs only where it did not converge.

// The dominant route (EigenRoute::Kind::dominant): the k largest eigenpairs of `batch` Hermitian
// positive semidefinite n x n matrices (2 <= n <= 32, 1 <= k <= min(8, n - 1); lower triangle
// read), one thread block per matrix, in double:
//   power phase   M = G / trace(G); X <- orth(M X) (classical Gram-Schmidt twice), then M <- M^2 /
//                 trace(M)^2 (p = 2, 4, .. 4096) while the k columns of M X span at most 1e3 in norm
//                 (beyond, rounding would hide the smaller dominant directions: M stays and X keeps
//                 iterating on it), until X stops moving (1e-12, or its rounding floor) or 40
//                 iterations; k > 1: a last iteration on G itself (removes M's rounding floor);
//   Rayleigh-Ritz on G itself: H = X^H G X (k x k) by a warp's Jacobi, X <- X W, theta ascending,
//                 R = G X - X diag(theta);
//   the test      lambda_k+1 <= lambda_max(P G P) <= trace((P G P)^q)^(1/q), P = I - X X^H (Courant-
//                 Fischer; q = 1, 2, 4, .. 256 by squarings, until it passes; tried first: the power
//                 phase's lambda_k+1^p <= trace(P G^p P), free), gap = theta_1 - bound -
//                 |R|_F; converged when gap > 0 and sqrt(theta_k) |R|_F <= tolerance gap |S_f| with
//                 |S_f|^2 = trace(G) - sum(theta): by Davis-Kahan's sin theta theorem the removed
//                 subspace's angle is at most |R|_F / gap (subspace_converged_batched's rule).
// Converged (converged[entry] = 1): the Ritz vectors are the last k columns of `vectors` + entry *
// vectors_stride (n x n, leading dimension ldv; ascending, the layout of the full solver, whose
// top k columns the fixed-rank projection reads), the other columns zero; values (n per entry)
// zero but for the last k. Not converged (0): nothing is written, so `vectors` may be `matrices`
// and a fallback (hermitian_jacobi_batched with skip = converged) works in place.
// `previous` (may be null): n x k per entry, the X of the entry's last converged solve (the warm
// start, used where orthonormal to 1e-8, else a fixed pseudo-random start). `stats` (may be null):
// five device counters: solves, fallbacks (not converged), squarings, power iterations, bound
// squarings; `published` (may be null; mapped host memory): the fallback count stored by the
// block that made it (the host's retry policy reads it without a wait; blocks of one launch may
// store out of order, so a read may lag).
// Variants (the same results): sequential runs each power iteration's product M X, its
// orthonormalisation and the squaring of M one after the other (three block barriers);
// overlapped squares M on warps 4..7 while warps 0..3 multiply and warp 0 orthonormalises (one).
enum class DominantVariant { sequential, overlapped };
inline const char* dominant_variant_name(DominantVariant variant) {
  return variant == DominantVariant::overlapped ? "overlapped" : "sequential";
}
void hermitian_dominant_batched(const double2* matrices, int n, int lda, std::int64_t stride, int batch, int k,
                                double tolerance, double* values, double2* vectors, int ldv,
                                std::int64_t vectors_stride, int* converged, cudaStream_t stream,
                                double2* previous = nullptr, unsigned long long* stats = nullptr,
                                unsigned long long* published = nullptr,
                                DominantVariant variant = DominantVariant::overlapped);

// Orthonormal columns spanning those of each n x b matrix (n <= 320, b <= 32, leading dimension n),
// in place: shifted Cholesky QR then Cholesky QR twice (fukaya2020's shiftedCholeskyQR3: orthogonal
// to ~eps for condition numbers up to ~1e15). breakdown[entry] is set to 1 where a pivot was not
// positive (the columns are then not trusted), else left as it is.
void orthonormalize_columns_batched(double2* matrices, int n, int b, std::int64_t stride, int batch, int* breakdown,
                                    cudaStream_t stream);
std::size_t orthonormalize_shared_bytes(int n, int b);  // over 227 KiB: not possible

// The subspace route's start: the same pseudo-random n x b block (entries in the unit square) for
// every batch entry, deterministic.
void start_block_batched(double2* blocks, int n, int b, std::int64_t stride, int batch, cudaStream_t stream);

// Convergence test of the Rayleigh-Ritz step for the dominant k of b Ritz pairs (theta ascending,
// b per entry; vectors V and G V n x b, leading dimension n): with R the residual G V - V diag(theta)
// of the k largest, and gap = theta_k - (theta_{k+1} + |r_{k+1}|) (an estimate of the distance from
// the k-th eigenvalue to the rest of the spectrum), the removed subspace's angle is at most
// |R|_F / gap (Davis-Kahan) and the filter's output error at most sqrt(theta_1) |R|_F / gap; the
// entry converged when that is <= tolerance |S_f|, |S_f|^2 = trace(G) - sum of the k largest theta.
// converged[entry] = 1 or 0 (0 also where breakdown[entry] is set).
void subspace_converged_batched(const double2* gram, int n, const double2* vectors, std::int64_t vectors_stride,
                                const double2* gram_vectors, std::int64_t gram_vectors_stride, const double* theta,
                                int b, int k, int batch, double tolerance, const int* breakdown, int* converged,
                                cudaStream_t stream);

// Sets `handle` (a conditional node of the graph this kernel runs in) to 1 when an entry did not
// converge, and then adds one to *fallbacks and stores the new count into *published (mapped host
// memory, read by the host without a wait; may be null).
void set_fallback_condition(cudaGraphConditionalHandle handle, const int* converged, int batch,
                            unsigned long long* fallbacks, unsigned long long* published, cudaStream_t stream);

}  // namespace sonopipe::cuda
