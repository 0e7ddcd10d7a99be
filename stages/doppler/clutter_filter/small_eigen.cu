#include "stages/doppler/clutter_filter/small_eigen.cuh"

#include <cmath>

#include "stages/common/cuda_check.h"

namespace sonopipe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kJacobiSweeps = 20;
constexpr double kJacobiTolerance = 1e-14;  // off-diagonal norm / Frobenius norm

__device__ inline double2 mul(double2 a, double2 b) {
  return make_double2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ inline double2 conj(double2 a) { return make_double2(a.x, -a.y); }
__device__ inline double2 add(double2 a, double2 b) { return make_double2(a.x + b.x, a.y + b.y); }
__device__ inline double2 sub(double2 a, double2 b) { return make_double2(a.x - b.x, a.y - b.y); }
__device__ inline double2 scale(double s, double2 a) { return make_double2(s * a.x, s * a.y); }
__device__ inline double norm2(double2 a) { return a.x * a.x + a.y * a.y; }

// Block-wide sum (all threads get it); `partial` holds kThreads / 32 doubles.
__device__ double block_sum(double v, double* partial) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  __syncthreads();  // partial may still be read by a previous call
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w) total += partial[w];
  return total;
}

// One rotation J of the pair (p, q), p < q, in the (p, q) plane: J = [[c, s], [-s e, c e]], e a unit
// complex number, such that J^H A J has a zero (p, q) entry. With e = conj(a_pq) / |a_pq| the
// phase D = diag(1, e) makes the pair's off-diagonal real, then the real symmetric Schur rotation
// (golub2013 alg. 8.5.1: tau = (a_qq - a_pp) / (2 |a_pq|), t = sign(tau) / (|tau| + sqrt(1 + tau^2)),
// c = 1 / sqrt(1 + t^2), s = t c) zeroes it: J = D [[c, s], [-s, c]].
struct Rotation {
  double c, s;
  double2 e;
};

__device__ Rotation schur_rotation(double app, double aqq, double2 apq) {
  const double magnitude = sqrt(norm2(apq));
  if (!(magnitude > 1e-300)) return {1.0, 0.0, make_double2(1.0, 0.0)};
  const double tau = (aqq - app) / (2 * magnitude);
  double t;
  if (fabs(tau) > 1e150)
    t = 0.5 / tau;
  else
    t = (tau >= 0 ? 1.0 : -1.0) / (fabs(tau) + sqrt(1 + tau * tau));
  const double c = 1 / sqrt(1 + t * t);
  return {c, t * c, make_double2(apq.x / magnitude, -apq.y / magnitude)};
}

// Round r of the round-robin tournament of m (even) indices: pair i of m / 2.
__device__ inline void tournament_pair(int m, int r, int i, int& p, int& q) {
  int a = i == 0 ? 0 : (r + i - 1) % (m - 1) + 1;
  int b = (r + m - 2 - i) % (m - 1) + 1;
  p = min(a, b);
  q = max(a, b);
}

// Both Jacobi kernels start alike: the Hermitian matrix from its lower triangle (the upper one is
// never read) into the m x m shared block, zero-padded to even m; V the identity. Returns
// ||A||_F^2, the scale of the convergence test.
__device__ double load_hermitian(const double2* in, int n, int lda, int m, double2* a, double2* v, double* partial) {
  for (int t = threadIdx.x; t < m * m; t += blockDim.x) {
    const int i = t % m, j = t / m;
    double2 x = make_double2(0, 0);
    if (i < n && j < n) {
      if (i > j)
        x = in[i + j * lda];
      else if (i < j)
        x = conj(in[j + i * lda]);
      else
        x = make_double2(in[i + i * lda].x, 0);
    }
    a[t] = x;
    v[t] = make_double2(i == j ? 1.0 : 0.0, 0.0);
  }
  __syncthreads();
  double local = 0;
  for (int t = threadIdx.x; t < m * m; t += blockDim.x) local += norm2(a[t]);
  return block_sum(local, partial);
}

// ||off(A)||_F^2 of the m x m shared block, for every thread of the block.
__device__ double off_diagonal2(const double2* a, int m, double* partial) {
  double local = 0;
  for (int t = threadIdx.x; t < m * m; t += blockDim.x)
    if (t % m != t / m) local += norm2(a[t]);
  return block_sum(local, partial);
}

// The converged block's eigenpairs in ascending order (the rank of each diagonal entry, ties by
// index): values scaled back by 2^exponent (the kernels that scale A to |A|_F ~ 1), vectors as
// columns; with next_previous also the warm start's copy (leading dimension n).
__device__ void store_ascending(const double2* a, const double2* v, int m, int n, int exponent, double* out_values,
                                double2* out_vectors, int ldv, double2* next_previous) {
  for (int t = threadIdx.x; t < n * n; t += blockDim.x) {
    const int row = t % n, i = t / n;
    const double d = a[i + i * m].x;
    int rank = 0;
    for (int j = 0; j < n; ++j) {
      const double e = a[j + j * m].x;
      rank += (e < d || (e == d && j < i)) ? 1 : 0;
    }
    out_vectors[row + rank * ldv] = v[row + i * m];
    if (next_previous) next_previous[row + rank * n] = v[row + i * m];
    if (row == 0) out_values[rank] = ldexp(d, exponent);
  }
}

__global__ void __launch_bounds__(kThreads)
jacobi_kernel(const double2* __restrict__ matrices, int n, int lda, std::int64_t stride, double* __restrict__ values,
              double2* vectors, int ldv, std::int64_t vectors_stride) {
  __shared__ double2 a[kSmallEigenMax * kSmallEigenMax];  // column-major m x m
  __shared__ double2 v[kSmallEigenMax * kSmallEigenMax];
  __shared__ Rotation rotation[kSmallEigenMax / 2];
  __shared__ int pair_p[kSmallEigenMax / 2], pair_q[kSmallEigenMax / 2];
  __shared__ double partial[kThreads / 32];
  const int m = n + (n & 1);  // even: an odd n gets a zero row and column, never rotated
  const int half = m / 2;
  const double2* in = matrices + blockIdx.x * stride;
  const double frobenius2 = load_hermitian(in, n, lda, m, a, v, partial);
  for (int sweep = 0; sweep < kJacobiSweeps && m > 1; ++sweep) {
    const double off2 = off_diagonal2(a, m, partial);  // uniform: every thread decides alike
    if (off2 <= kJacobiTolerance * kJacobiTolerance * frobenius2) break;
    for (int round = 0; round < m - 1; ++round) {
      if (threadIdx.x < half) {
        int p, q;
        tournament_pair(m, round, threadIdx.x, p, q);
        pair_p[threadIdx.x] = p;
        pair_q[threadIdx.x] = q;
        rotation[threadIdx.x] = q < n ? schur_rotation(a[p + p * m].x, a[q + q * m].x, a[p + q * m])
                                      : Rotation{1.0, 0.0, make_double2(1.0, 0.0)};
      }
      __syncthreads();
      // The pairs of a round are disjoint, so A <- J^H A J splits into 2 x 2 blocks: rows of pair k,
      // columns of pair l, B <- J_k^H B J_l, each read and written by one thread.
      for (int t = threadIdx.x; t < half * half; t += blockDim.x) {
        const int k = t % half, l = t / half;
        const int pk = pair_p[k], qk = pair_q[k], pl = pair_p[l], ql = pair_q[l];
        const Rotation rk = rotation[k], rl = rotation[l];
        const double2 b_pp = a[pk + pl * m], b_qp = a[qk + pl * m], b_pq = a[pk + ql * m], b_qq = a[qk + ql * m];
        // Columns: col p' = c col p - s e col q; col q' = s col p + c e col q.
        const double2 se = scale(rl.s, rl.e), ce = scale(rl.c, rl.e);
        const double2 t_pp = sub(scale(rl.c, b_pp), mul(se, b_pq)), t_qp = sub(scale(rl.c, b_qp), mul(se, b_qq));
        const double2 t_pq = add(scale(rl.s, b_pp), mul(ce, b_pq)), t_qq = add(scale(rl.s, b_qp), mul(ce, b_qq));
        // Rows: row p' = c row p - s conj(e) row q; row q' = s row p + c conj(e) row q.
        const double2 sec = scale(rk.s, conj(rk.e)), cec = scale(rk.c, conj(rk.e));
        a[pk + pl * m] = sub(scale(rk.c, t_pp), mul(sec, t_qp));
        a[pk + ql * m] = sub(scale(rk.c, t_pq), mul(sec, t_qq));
        a[qk + pl * m] = add(scale(rk.s, t_pp), mul(cec, t_qp));
        a[qk + ql * m] = add(scale(rk.s, t_pq), mul(cec, t_qq));
      }
      for (int t = threadIdx.x; t < m * half; t += blockDim.x) {  // V <- V J
        const int i = t % m, l = t / m;
        const int pl = pair_p[l], ql = pair_q[l];
        const Rotation rl = rotation[l];
        const double2 vp = v[i + pl * m], vq = v[i + ql * m];
        v[i + pl * m] = sub(scale(rl.c, vp), mul(scale(rl.s, rl.e), vq));
        v[i + ql * m] = add(scale(rl.s, vp), mul(scale(rl.c, rl.e), vq));
      }
      __syncthreads();
    }
  }
  store_ascending(a, v, m, n, 0, values + std::int64_t(blockIdx.x) * n, vectors + blockIdx.x * vectors_stride, ldv,
                  nullptr);
}

// The same rotation with fewer dependent double-precision operations (the latency of a round): with
// d = a_qq - a_pp, t = sign(d) 2 |a_pq| / (|d| + hypot(d, 2 |a_pq|)) (tau's formula times 2 |a_pq| / 2 |a_pq|),
// c = rsqrt(1 + t^2), e = conj(a_pq) rsqrt(|a_pq|^2).
__device__ Rotation schur_rotation_fast(double app, double aqq, double2 apq) {
  const double magnitude2 = norm2(apq);
  if (!(magnitude2 > 1e-300)) return {1.0, 0.0, make_double2(1.0, 0.0)};
  const double inverse = rsqrt(magnitude2), magnitude = magnitude2 * inverse;
  const double d = aqq - app;
  const double t = copysign(2 * magnitude, d >= 0 ? 1.0 : -1.0) / (fabs(d) + hypot(d, 2 * magnitude));
  const double c = rsqrt(1 + t * t);
  return {c, t * c, make_double2(apq.x * inverse, -apq.y * inverse)};
}

// One barrier pair per round: thread (k, l) of a 16 x 16 grid computes the rotations of pairs k and
// l itself (redundantly, from the entries the previous round left), reads its 2 x 2 block of A and
// rows 2k, 2k + 1 of V's pair-l columns, and writes them after a barrier. The two-phase kernel above
// spends a phase of 16 threads and a barrier on the rotations of every round.
__global__ void __launch_bounds__(kThreads)
jacobi_fused_kernel(const double2* __restrict__ matrices, int n, int lda, std::int64_t stride,
                    double* __restrict__ values, double2* vectors, int ldv, std::int64_t vectors_stride) {
  __shared__ double2 a[kSmallEigenMax * kSmallEigenMax];  // column-major m x m
  __shared__ double2 v[kSmallEigenMax * kSmallEigenMax];
  __shared__ double partial[kThreads / 32];
  const int m = n + (n & 1);
  const int half = m / 2;
  const double2* in = matrices + blockIdx.x * stride;
  const double frobenius2 = load_hermitian(in, n, lda, m, a, v, partial);
  const int k = threadIdx.x & 15, l = threadIdx.x >> 4;
  const bool active = k < half && l < half;
  const Rotation identity{1.0, 0.0, make_double2(1.0, 0.0)};
  for (int sweep = 0; sweep < kJacobiSweeps && m > 1; ++sweep) {
    const double off2 = off_diagonal2(a, m, partial);
    if (off2 <= kJacobiTolerance * kJacobiTolerance * frobenius2) break;
    for (int round = 0; round < m - 1; ++round) {
      int pk = 0, qk = 0, pl = 0, ql = 0;
      double2 a_pp, a_qp, a_pq, a_qq, v0p, v0q, v1p, v1q;
      if (active) {
        tournament_pair(m, round, k, pk, qk);
        tournament_pair(m, round, l, pl, ql);
        const Rotation rk = qk < n ? schur_rotation_fast(a[pk + pk * m].x, a[qk + qk * m].x, a[pk + qk * m]) : identity;
        const Rotation rl = ql < n ? schur_rotation_fast(a[pl + pl * m].x, a[ql + ql * m].x, a[pl + ql * m]) : identity;
        const double2 b_pp = a[pk + pl * m], b_qp = a[qk + pl * m], b_pq = a[pk + ql * m], b_qq = a[qk + ql * m];
        const double2 se = scale(rl.s, rl.e), ce = scale(rl.c, rl.e);
        const double2 t_pp = sub(scale(rl.c, b_pp), mul(se, b_pq)), t_qp = sub(scale(rl.c, b_qp), mul(se, b_qq));
        const double2 t_pq = add(scale(rl.s, b_pp), mul(ce, b_pq)), t_qq = add(scale(rl.s, b_qp), mul(ce, b_qq));
        const double2 sec = scale(rk.s, conj(rk.e)), cec = scale(rk.c, conj(rk.e));
        a_pp = sub(scale(rk.c, t_pp), mul(sec, t_qp));
        a_pq = sub(scale(rk.c, t_pq), mul(sec, t_qq));
        a_qp = add(scale(rk.s, t_pp), mul(cec, t_qp));
        a_qq = add(scale(rk.s, t_pq), mul(cec, t_qq));
        const int r0 = 2 * k, r1 = 2 * k + 1;  // V <- V J_l on rows r0, r1
        const double2 x0p = v[r0 + pl * m], x0q = v[r0 + ql * m], x1p = v[r1 + pl * m], x1q = v[r1 + ql * m];
        v0p = sub(scale(rl.c, x0p), mul(se, x0q));
        v0q = add(scale(rl.s, x0p), mul(ce, x0q));
        v1p = sub(scale(rl.c, x1p), mul(se, x1q));
        v1q = add(scale(rl.s, x1p), mul(ce, x1q));
      }
      __syncthreads();
      if (active) {
        a[pk + pl * m] = a_pp;
        a[pk + ql * m] = a_pq;
        a[qk + pl * m] = a_qp;
        a[qk + ql * m] = a_qq;
        v[2 * k + pl * m] = v0p;
        v[2 * k + ql * m] = v0q;
        v[2 * k + 1 + pl * m] = v1p;
        v[2 * k + 1 + ql * m] = v1q;
      }
      __syncthreads();
    }
  }
  store_ascending(a, v, m, n, 0, values + std::int64_t(blockIdx.x) * n, vectors + blockIdx.x * vectors_stride, ldv,
                  nullptr);
}

// The rotation with its angle found in float (the double-precision divide, square roots and hypot
// of schur_rotation_fast were a long dependent chain in every round): t, c, s and e in float, with
// the fast intrinsics (rsqrt, a 2-ulp divide), from the double entries of a matrix scaled to
// |A|_F ~ 1, then c, s and e rescaled in double so that c^2 + s^2 = 1 and |e| = 1 to double
// rounding (f = 1 / sqrt(r) = 1 - (r - 1) / 2 + 3 (r - 1)^2 / 8, error O(|r - 1|^3) ~ 1e-18). J is
// then unitary in double, so A's eigenvalues and V's orthonormality are kept to double rounding;
// only the zeroing is approximate: the rotated a_pq is ~1e-6 of its value before instead of 0,
// which the next sweep's rotation of that pair removes. |a_pq| below 1e-18 (of the scaled |A|_F,
// where x^2 + y^2 leaves float's normal range) is not rotated: far below the 1e-14 stop.
__device__ Rotation schur_rotation_float_angle(double app, double aqq, double2 apq) {
  const float x = static_cast<float>(apq.x), y = static_cast<float>(apq.y);
  const float magnitude2 = fmaf(x, x, y * y);
  if (!(magnitude2 > 1e-36f)) return {1.0, 0.0, make_double2(1.0, 0.0)};
  const float inverse = rsqrtf(magnitude2), magnitude = magnitude2 * inverse;
  const float d = static_cast<float>(aqq - app);
  // t = sign(tau) / (|tau| + sqrt(1 + tau^2)) with tau = d / (2 |a_pq|), multiplied through by 2 |a_pq|.
  const float h = fmaf(d, d, 4 * magnitude2);  // > 0
  const float t = __fdividef(copysignf(2 * magnitude, d), fabsf(d) + h * rsqrtf(h));
  const float c = rsqrtf(fmaf(t, t, 1.0f));
  double cd = c, sd = t * c;
  const double r = fma(cd, cd, sd * sd) - 1;
  const double f = fma(r, fma(0.375, r, -0.5), 1.0);
  cd *= f;
  sd *= f;
  double ex = x * inverse, ey = -y * inverse;
  const double q = fma(ex, ex, ey * ey) - 1;
  const double g = fma(q, fma(0.375, q, -0.5), 1.0);
  ex *= g;
  ey *= g;
  return {cd, sd, make_double2(ex, ey)};
}

// The rotation of pair (p, q) of a round from the round's input A (float angle); identity where q
// is the padding of an odd n.
__device__ inline Rotation pair_rotation(const double2* a, int m, int n, int p, int q) {
  if (q >= n) return {1.0, 0.0, make_double2(1.0, 0.0)};
  return schur_rotation_float_angle(a[p + p * m].x, a[q + q * m].x, a[p + q * m]);
}

// Four entries of a matrix (column-major, leading dimension m): rows r0, r1 of columns c0, c1.
struct Quad {
  double2 a00, a10, a01, a11;  // (r0, c0), (r1, c0), (r0, c1), (r1, c1)
};
__device__ inline Quad load_quad(const double2* in, int m, int r0, int r1, int c0, int c1) {
  return {in[r0 + c0 * m], in[r1 + c0 * m], in[r0 + c1 * m], in[r1 + c1 * m]};
}
__device__ inline void store_quad(double2* out, int m, int r0, int r1, int c0, int c1, const Quad& x) {
  out[r0 + c0 * m] = x.a00;
  out[r1 + c0 * m] = x.a10;
  out[r0 + c1 * m] = x.a01;
  out[r1 + c1 * m] = x.a11;
}

// Columns c0, c1 of a quad times the rotation J of their pair: col 0' = c col 0 - s e col 1,
// col 1' = s col 0 + c e col 1.
__device__ inline Quad rotate_columns(const Quad& x, const Rotation& r) {
  const double2 se = scale(r.s, r.e), ce = scale(r.c, r.e);
  return {sub(scale(r.c, x.a00), mul(se, x.a01)), sub(scale(r.c, x.a10), mul(se, x.a11)),
          add(scale(r.s, x.a00), mul(ce, x.a01)), add(scale(r.s, x.a10), mul(ce, x.a11))};
}

// Rows r0, r1 of a quad times J^H of their pair: row 0' = c row 0 - s conj(e) row 1,
// row 1' = s row 0 + c conj(e) row 1.
__device__ inline Quad rotate_rows(const Quad& x, const Rotation& r) {
  const double2 sec = scale(r.s, conj(r.e)), cec = scale(r.c, conj(r.e));
  return {sub(scale(r.c, x.a00), mul(sec, x.a10)), add(scale(r.s, x.a00), mul(cec, x.a10)),
          sub(scale(r.c, x.a01), mul(sec, x.a11)), add(scale(r.s, x.a01), mul(cec, x.a11))};
}

// The mixed kernel: A and V in double, the rotations' angles in float (schur_rotation_float_angle),
// A scaled by a power of two to |A|_F ~ 1 at the load (exact; the eigenvalues scaled back at the
// end). A and V are double-buffered in dynamic shared memory (4 m^2 double2, 64 KiB at m = 32), so
// a round reads one copy and writes the other. Thread (k, l) of a 16 x 16 grid writes the 2 x 2
// block (pairs k, l) of J_k^H A J_l and rows k, k + m / 2 of V's pair-l columns; the round's pairs
// come from a table made once (the tournament's integer divisions were a third of a round's
// instructions). The round is latency-bound (result-1: ~1.3 us a round whatever the work), so its
// chain is kept short: kRotationPhase = false, every thread computes the two rotations it needs
// (one barrier a round); true, 16 threads compute the round's rotations while the others load their
// block and rows, then a barrier (H100: 200 against 210 us at n = 32). kCircle (the stage's, with
// the rotation phase): the circle method's storage below (172 us).
// The circle method's storage (kCircle): pair i of every round is (slot i, slot i + m / 2), and
// between rounds every index moves one step round the circle 1 -> 2 -> .. -> m/2 - 1 -> m - 1 ->
// m - 2 -> .. -> m/2 -> 1 (slot 0 stays): a round writes its output at the slots of the next, so a
// thread's rows and columns are the same slots every round (consecutive across a quarter-warp: no
// bank conflict, no pair table) and after the m - 1 rounds of a sweep every index is home again.
// The zero row and column of an odd n's padding rotate with the identity (a_pq = 0).
__device__ inline int circle_next(int slot, int half, int m) {
  if (slot == 0) return 0;
  if (slot < half - 1) return slot + 1;  // top row, to the right
  if (slot == half - 1) return m - 1;    // top right, down
  if (slot == half) return 1;            // bottom left, up
  return slot - 1;                       // bottom row, to the left
}

template <bool kRotationPhase, bool kCircle = false>
__global__ void __launch_bounds__(kThreads, 1)  // 64 KiB of shared memory: few blocks an SM; no spills
jacobi_mixed_kernel(const double2* __restrict__ matrices, int n, int lda, std::int64_t stride,
                    double* __restrict__ values, double2* vectors, int ldv, std::int64_t vectors_stride,
                    int* __restrict__ sweeps, double2* previous, unsigned long long* stats,
                    const int* __restrict__ skip) {
  if (skip && skip[blockIdx.x]) return;  // solved by the dominant route (uniform: before any barrier)
  extern __shared__ double2 buffers[];  // A, A', V, V' (m x m each, column-major)
  __shared__ double partial[kThreads / 32];
  __shared__ uchar2 pairs[(kSmallEigenMax - 1) * (kSmallEigenMax / 2)];  // [round][pair] = (p, q)
  __shared__ Rotation rotations[kSmallEigenMax / 2];                      // kRotationPhase
  const int m = n + (n & 1);
  const int half = m / 2, mm = m * m;
  for (int t = threadIdx.x; t < (m - 1) * half; t += kThreads) {
    int p = 0, q = 0;
    tournament_pair(m, t / half, t % half, p, q);
    pairs[t] = make_uchar2(static_cast<unsigned char>(p), static_cast<unsigned char>(q));
  }
  const double2* in = matrices + blockIdx.x * stride;
  double2* a = buffers;
  double2* v = buffers + 2 * mm;
  const double frobenius2 = load_hermitian(in, n, lda, m, a, v, partial);  // barriers: the table is ready
  // Warm start (`previous`: this entry's eigenvectors of the frame before, n x n): A <- V0^H A V0 and
  // V <- V0, where V0 is unitary to 1e-8 (the guard; a zeroed or foreign buffer starts cold).
  bool warm = false;
  if (previous) {
    double2* v0 = buffers + 3 * mm;  // V' until the sweeps
    double2* product = buffers + mm;  // A'
    const double2* stored = previous + blockIdx.x * std::int64_t(n) * n;
    for (int t = threadIdx.x; t < mm; t += kThreads) {
      const int i = t % m, j = t / m;
      v0[t] = i < n && j < n ? stored[i + j * n] : make_double2(i == j ? 1.0 : 0.0, 0.0);
    }
    __syncthreads();
    // Column i of V0 across a warp: the sum starts at row i (skewed), so that a warp's loads of
    // columns i are not 32 reads of one bank.
    double bad = 0;  // entries of V0^H V0 - I over 1e-8 (NaN included)
    for (int t = threadIdx.x; t < mm; t += kThreads) {
      const int i = t % m, j = t / m;
      double2 sum = make_double2(i == j ? -1.0 : 0.0, 0.0);
      for (int k = 0, r = i; k < m; ++k, r = r + 1 == m ? 0 : r + 1)
        sum = add(sum, mul(conj(v0[r + i * m]), v0[r + j * m]));
      bad += !(fabs(sum.x) <= 1e-8 && fabs(sum.y) <= 1e-8) ? 1.0 : 0.0;
    }
    warm = block_sum(bad, partial) == 0;  // uniform
    if (warm) {
      for (int t = threadIdx.x; t < mm; t += kThreads) {  // A V0
        const int i = t % m, j = t / m;
        double2 sum = make_double2(0, 0);
        for (int r = 0; r < m; ++r) sum = add(sum, mul(a[i + r * m], v0[r + j * m]));
        product[t] = sum;
      }
      __syncthreads();
      for (int t = threadIdx.x; t < mm; t += kThreads) {  // V0^H (A V0), lower triangle mirrored: Hermitian
        const int i = t % m, j = t / m;
        if (i < j) continue;
        double2 sum = make_double2(0, 0);
        for (int k = 0, r = i; k < m; ++k, r = r + 1 == m ? 0 : r + 1)  // skewed, as the guard's
          sum = add(sum, mul(conj(v0[r + i * m]), product[r + j * m]));
        if (i == j) sum.y = 0;
        a[i + j * m] = sum;
        a[j + i * m] = conj(sum);
      }
      for (int t = threadIdx.x; t < mm; t += kThreads) v[t] = v0[t];
      __syncthreads();
    }
  }
  // A <- A 2^-e with 2^e ~ |A|_F: the float angles see entries of order one.
  const int exponent = frobenius2 > 0 && isfinite(frobenius2) ? ilogb(sqrt(frobenius2)) : 0;
  for (int t = threadIdx.x; t < mm; t += kThreads) a[t] = scale(ldexp(1.0, -exponent), a[t]);
  __syncthreads();
  const double scaled2 = ldexp(frobenius2, -2 * exponent);
  const int k = threadIdx.x & 15, l = threadIdx.x >> 4;
  const bool active = k < half && l < half;
  const int next_k0 = circle_next(k, half, m), next_k1 = circle_next(k + half, half, m);  // kCircle
  const int next_l0 = circle_next(l, half, m), next_l1 = circle_next(l + half, half, m);
  int current = 0, sweep = 0;
  for (; sweep < kJacobiSweeps && m > 1; ++sweep) {
    const double off2 = off_diagonal2(buffers + current * mm, m, partial);  // ends with a barrier
    if (!(off2 > kJacobiTolerance * kJacobiTolerance * scaled2)) break;
    for (int round = 0; round < m - 1; ++round) {
      const double2* a_in = buffers + current * mm;
      double2* a_out = buffers + (1 - current) * mm;
      const double2* v_in = buffers + (2 + current) * mm;
      double2* v_out = buffers + (3 - current) * mm;
      if (kCircle) {
        Quad block{}, rows{};
        if (active) {  // loaded first: they do not depend on this round's rotations
          block = load_quad(a_in, m, k, k + half, l, l + half);
          rows = load_quad(v_in, m, k, k + half, l, l + half);
        }
        if (static_cast<int>(threadIdx.x) < half) {
          const int p = threadIdx.x, q = p + half;
          rotations[p] = schur_rotation_float_angle(a_in[p + p * m].x, a_in[q + q * m].x, a_in[p + q * m]);
        }
        __syncthreads();
        if (active) {
          const Rotation rl = rotations[l], rk = rotations[k];
          store_quad(a_out, m, next_k0, next_k1, next_l0, next_l1, rotate_rows(rotate_columns(block, rl), rk));
          store_quad(v_out, m, k, k + half, next_l0, next_l1, rotate_columns(rows, rl));
        }
        current = 1 - current;
        __syncthreads();
        continue;
      }
      const uchar2* round_pairs = pairs + round * half;
      // Thread (k, l): the block of pairs k (rows) and l (columns) of A, and rows k, k + m / 2 of
      // V's pair-l columns (consecutive rows across a quarter-warp: no bank conflict).
      uchar2 pair_k = make_uchar2(0, 0), pair_l = make_uchar2(0, 0);
      Quad block{}, rows{};
      if (active) {  // loaded first: they do not depend on this round's rotations
        pair_k = round_pairs[k];
        pair_l = round_pairs[l];
        block = load_quad(a_in, m, pair_k.x, pair_k.y, pair_l.x, pair_l.y);
        rows = load_quad(v_in, m, k, k + half, pair_l.x, pair_l.y);
      }
      if (kRotationPhase) {
        if (static_cast<int>(threadIdx.x) < half) {
          const uchar2 pair = round_pairs[threadIdx.x];
          rotations[threadIdx.x] = pair_rotation(a_in, m, n, pair.x, pair.y);
        }
        __syncthreads();
      }
      if (active) {
        const Rotation rl = kRotationPhase ? rotations[l] : pair_rotation(a_in, m, n, pair_l.x, pair_l.y);
        const Rotation rk = kRotationPhase ? rotations[k] : pair_rotation(a_in, m, n, pair_k.x, pair_k.y);
        store_quad(a_out, m, pair_k.x, pair_k.y, pair_l.x, pair_l.y, rotate_rows(rotate_columns(block, rl), rk));
        store_quad(v_out, m, k, k + half, pair_l.x, pair_l.y, rotate_columns(rows, rl));
      }
      current = 1 - current;
      __syncthreads();
    }
  }
  if (sweeps && threadIdx.x == 0) sweeps[blockIdx.x] = sweep;
  if (stats && threadIdx.x == 0) {
    atomicAdd(stats, 1ull);
    atomicAdd(stats + 1, warm ? 1ull : 0ull);
    atomicAdd(stats + 2, static_cast<unsigned long long>(sweep));
  }
  const double2* a_final = buffers + current * mm;
  const double2* v_final = buffers + (2 + current) * mm;
  store_ascending(a_final, v_final, m, n, exponent, values + std::int64_t(blockIdx.x) * n,
                  vectors + blockIdx.x * vectors_stride, ldv,
                  previous ? previous + blockIdx.x * std::int64_t(n) * n : nullptr);
}

// Shifted Cholesky QR 3 (fukaya2020): pass 0 factors Y^H Y + s I, s = 11 (n b + b (b + 1)) u |Y|_F^2,
// passes 1 and 2 factor Y^H Y; each replaces Y by Y L^-H (C = L L^H). The factorisation is LDL^H
// right-looking (one barrier per column), scaled to L at the end.
__global__ void __launch_bounds__(kThreads)
cholesky_qr_kernel(double2* matrices, int n, int b, std::int64_t stride, int* breakdown) {
  extern __shared__ double2 shared[];
  double2* y = shared;      // n x b, leading dimension n
  double2* c = shared + n * b;  // b x b, lower triangle
  __shared__ double inverse_pivots[kSmallEigenMax];
  __shared__ int broke;
  double2* g = matrices + blockIdx.x * stride;
  for (int t = threadIdx.x; t < n * b; t += blockDim.x) y[t] = g[t];
  if (threadIdx.x == 0) broke = 0;
  for (int pass = 0; pass < 3; ++pass) {
    __syncthreads();
    for (int t = threadIdx.x; t < b * b; t += blockDim.x) {  // C = Y^H Y, lower triangle
      const int i = t % b, j = t / b;
      if (i < j) continue;
      // Four partial sums: the inner product is a chain of dependent FP64 adds otherwise (latency).
      double2 sum[4] = {make_double2(0, 0), make_double2(0, 0), make_double2(0, 0), make_double2(0, 0)};
      int r = 0;
      for (; r + 3 < n; r += 4)
#pragma unroll
        for (int u = 0; u < 4; ++u) sum[u] = add(sum[u], mul(conj(y[r + u + i * n]), y[r + u + j * n]));
      for (; r < n; ++r) sum[0] = add(sum[0], mul(conj(y[r + i * n]), y[r + j * n]));
      c[t] = add(add(sum[0], sum[1]), add(sum[2], sum[3]));
    }
    __syncthreads();
    if (pass == 0 && threadIdx.x == 0) {
      double trace = 0;
      for (int j = 0; j < b; ++j) trace += c[j + j * b].x;
      const double shift = 11.0 * (double(n) * b + double(b) * (b + 1)) * 1.1102230246251565e-16 * trace;
      for (int j = 0; j < b; ++j) c[j + j * b].x += shift;
    }
    __syncthreads();
    for (int j = 0; j < b; ++j) {  // C_il -= C_ij conj(C_lj) / d_j for j < l <= i
      double d = c[j + j * b].x;
      if (!(d > 0)) d = 1e-300;
      const double inverse_d = 1 / d;
      for (int t = threadIdx.x; t < b * b; t += blockDim.x) {
        const int i = t % b, l = t / b;
        if (l <= j || i < l) continue;
        c[t] = sub(c[t], scale(inverse_d, mul(c[i + j * b], conj(c[l + j * b]))));
      }
      if (threadIdx.x == 0) {
        if (!(c[j + j * b].x > 0)) broke = 1;
        inverse_pivots[j] = rsqrt(d);  // 1 / L_jj
      }
      __syncthreads();
    }
    for (int t = threadIdx.x; t < b * b; t += blockDim.x) {  // L = C D^-1/2 below the diagonal
      const int i = t % b, j = t / b;
      if (i > j) c[t] = scale(inverse_pivots[j], c[t]);
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n; r += blockDim.x) {  // x L^H = y, row by row
      for (int j = 0; j < b; ++j) {
        double2 x = y[r + j * n];
        for (int p = 0; p < j; ++p) x = sub(x, mul(y[r + p * n], conj(c[j + p * b])));
        y[r + j * n] = scale(inverse_pivots[j], x);
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < n * b; t += blockDim.x) g[t] = y[t];
  if (threadIdx.x == 0 && broke) breakdown[blockIdx.x] = 1;
}

__device__ inline double unit_hash(unsigned int x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return double(x) / 4294967296.0 * 2 - 1;
}

__global__ void start_block_kernel(double2* blocks, int n, int b, std::int64_t stride) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n * b) return;
  const double2 x = make_double2(unit_hash(2u * unsigned(t) + 1u), unit_hash(2u * unsigned(t) + 2u));
  blocks[blockIdx.y * stride + t] = x;
}

__global__ void __launch_bounds__(kThreads)
converged_kernel(const double2* __restrict__ gram, int n, const double2* __restrict__ vectors,
                 std::int64_t vectors_stride, const double2* __restrict__ gram_vectors,
                 std::int64_t gram_vectors_stride, const double* __restrict__ theta, int b, int k, double tolerance,
                 const int* __restrict__ breakdown, int* __restrict__ converged) {
  __shared__ double partial[kThreads / 32];
  const int entry = blockIdx.x;
  const double2* v = vectors + entry * vectors_stride;
  const double2* gv = gram_vectors + entry * gram_vectors_stride;
  const double* w = theta + std::int64_t(entry) * b;
  double kept = 0, next = 0, trace = 0;
  for (int t = threadIdx.x; t < n * (k + 1); t += blockDim.x) {
    const int row = t % n, column = b - 1 - t / n;  // the k largest, then the (k+1)-th
    const double r = norm2(sub(gv[row + column * n], scale(w[column], v[row + column * n])));
    if (t / n < k)
      kept += r;
    else
      next += r;
  }
  for (int r = threadIdx.x; r < n; r += blockDim.x) trace += gram[entry * std::int64_t(n) * n + r + r * n].x;
  const double residual2 = block_sum(kept, partial);
  const double next2 = block_sum(next, partial);
  const double trace_all = block_sum(trace, partial);
  if (threadIdx.x != 0) return;
  double removed = 0;
  for (int i = 0; i < k; ++i) removed += w[b - 1 - i];
  const double gap = w[b - k] - (w[b - k - 1] + sqrt(next2));
  const double output = fmax(trace_all - removed, 0.0);
  const bool ok = breakdown[entry] == 0 && gap > 0 &&
                  sqrt(fmax(w[b - 1], 0.0)) * sqrt(residual2) <= tolerance * gap * sqrt(output);
  converged[entry] = ok ? 1 : 0;
}

__global__ void fallback_condition_kernel(cudaGraphConditionalHandle handle, const int* converged, int batch,
                                          unsigned long long* fallbacks, unsigned long long* published) {
  int all = 1;
  for (int i = 0; i < batch; ++i) all &= converged[i];
  cudaGraphSetConditional(handle, all ? 0u : 1u);
  if (all) return;
  const unsigned long long count = atomicAdd(fallbacks, 1ull) + 1;
  if (published) {
    *static_cast<volatile unsigned long long*>(published) = count;
    __threadfence_system();
  }
}

// ---- The dominant route (hermitian_dominant_batched; docs/doppler.md, "dominant") ----
// One thread block per matrix, every matrix zero-padded to 32 x 32 in shared memory (leading
// dimension kLd = 33: a warp's column reads and the squaring's row reads meet no bank conflict).
constexpr int kLd = 33;
constexpr int kDominantRank = kDominantMaxRank;
// Power phase: X <- orth(M X), M = (G / trace)^(2^j) squared while the k columns stay resolvable;
// at most kPowerSquarings squarings (p = 4096: a ratio lambda_k+1 / lambda_k of 0.9927 still falls
// to 1e-13) and kPowerSteps iterations in all.
constexpr int kPowerSquarings = 12;
constexpr int kPowerSteps = 40;
// The iterate has stopped moving: |(I - X X^H) X_new|_F below this, or below 16 eps spread (the
// rounding floor of M X's smallest dominant direction, below).
constexpr double kChangeStop = 1e-12;
// No squaring once the k columns of M X span more than this ratio of norms (the R diagonal of the
// Gram-Schmidt, ~(lambda_1 / lambda_k)^p): after a squaring the smallest dominant direction would
// sit up to 1e6 below the largest, whose rounding (eps |M| an entry) then turns it by ~1e-10;
// beyond, M stays and X keeps iterating on it (k = 1 never stops squaring for this). A last
// iteration on G itself (rounding eps lambda_1 / lambda_k) then removes that floor where the gap
// at k is clear: the H100 saw a 40 dB gap at k = 2 fall back once with 1e4 here and no such step
// (the test asks the removed subspace to 1e-6 of |S_f|, ~1e-2 of |S| there: angles of ~1e-9).
constexpr double kSpreadMax = 1e3;
// The bound on lambda_k+1: trace(B^q)^(1/q), B = P G P, q = 1, 2, 4, .. 2^kBoundSquarings
// (overestimates lambda_max(B) by at most (n - k)^(1/q): 1.3 % at q = 256, n = 32).
constexpr int kBoundSquarings = 8;
constexpr double kEpsilon = 1.1102230246251565e-16;  // double's unit roundoff

struct DominantShared {
  double2 g[32 * kLd];     // G / trace(G)
  double2 m[2][32 * kLd];  // the powers of M (ping-pong), then B = P G P and its powers
  double2 x[32 * kDominantRank];  // X (n x k, leading dimension 32)
  double2 y[32 * kDominantRank];  // M X, then G X
  double2 h[kDominantRank * kDominantRank];  // H = X^H G X (leading dimension kDominantRank)
  double2 w[kDominantRank * kDominantRank];  // its eigenvectors
  double theta[kDominantRank];                // its eigenvalues, ascending
  Rotation rotations[kDominantRank / 2];
  int slot[kDominantRank];  // H's Jacobi: the pair of each index (+ kDominantRank for the second)
  int stop[2], square[2], broke, pass;  // the power phase's flags, by the iteration's parity
  double power_trace[2];                // kOverlap: trace(M) as the squaring warps found it
  double residual2;
  double power_bound;  // the bound on lambda_k+1 / trace(G) from the power phase's last M
};

__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
// sum over the warp's lanes of conj(a) b
__device__ inline double2 warp_dot(double2 a, double2 b) {
  return make_double2(warp_sum(a.x * b.x + a.y * b.y), warp_sum(a.x * b.y - a.y * b.x));
}
__device__ inline double2 cfma(double2 a, double2 b, double2 c) {  // a b + c
  return make_double2(fma(a.x, b.x, fma(-a.y, b.y, c.x)), fma(a.x, b.y, fma(a.y, b.x, c.y)));
}
// trace of a shared 32 x 32 matrix, in every lane of every warp (no barrier).
__device__ inline double trace32(const double2* a) {
  const int lane = threadIdx.x & 31;
  return warp_sum(a[lane + lane * kLd].x);
}

// out = scale in^2 (32 x 32, leading dimension kLd): thread t owns rows t % 16 and + 16, columns
// t / 16 and + 16 (2 x 2 complex in registers: 16 FP64 FMAs per 4 shared loads). The caller
// synchronises.
__device__ void square32(const double2* in, double2* out, double scale_by) {
  const int ti = threadIdx.x & 15, tj = threadIdx.x >> 4;
  double2 c00 = make_double2(0, 0), c10 = c00, c01 = c00, c11 = c00;
#pragma unroll 8
  for (int s = 0; s < 32; ++s) {
    const double2 a0 = in[ti + s * kLd], a1 = in[ti + 16 + s * kLd];
    const double2 b0 = in[s + tj * kLd], b1 = in[s + (tj + 16) * kLd];
    c00 = cfma(a0, b0, c00);
    c10 = cfma(a1, b0, c10);
    c01 = cfma(a0, b1, c01);
    c11 = cfma(a1, b1, c11);
  }
  out[ti + tj * kLd] = scale(scale_by, c00);
  out[ti + 16 + tj * kLd] = scale(scale_by, c10);
  out[ti + (tj + 16) * kLd] = scale(scale_by, c01);
  out[ti + 16 + (tj + 16) * kLd] = scale(scale_by, c11);
}

// Row `lane` of A x_c (32 x 32 A, leading dimension kLd; x_c = x + 32 c), two partial sums.
__device__ double2 column_product_row(const double2* a, const double2* x, int c, int lane) {
  double2 sum0 = make_double2(0, 0), sum1 = sum0;
#pragma unroll 8
  for (int s = 0; s < 32; s += 2) {
    sum0 = cfma(a[lane + s * kLd], x[s + 32 * c], sum0);
    sum1 = cfma(a[lane + (s + 1) * kLd], x[s + 1 + 32 * c], sum1);
  }
  return add(sum0, sum1);
}

// y_c = A x_c for the k columns (warp c computes column c, lane = row); the caller synchronises.
__device__ void multiply_columns(const double2* a, const double2* x, double2* y, int k) {
  const int lane = threadIdx.x & 31, c = threadIdx.x >> 5;
  if (c < k) y[lane + 32 * c] = column_product_row(a, x, c, lane);
}

// kOverlap: y_c = A x_c by warps 0..3 (warp w: columns w and w + 4); the caller synchronises them.
__device__ void multiply_columns_4(const double2* a, const double2* x, double2* y, int k) {
  const int lane = threadIdx.x & 31;
  for (int c = threadIdx.x >> 5; c < k; c += 4) y[lane + 32 * c] = column_product_row(a, x, c, lane);
}

// kOverlap: out = scale in^2 by 128 threads (u = 0..127: rows u % 16 and + 16, columns u / 16 + 8 b,
// b = 0..3: 2 x 4 complex in registers, 32 FP64 FMAs per 6 shared loads).
__device__ void square32_half(const double2* in, double2* out, double scale_by, int u) {
  const int ti = u & 15, tj = u >> 4;
  double2 c0[4], c1[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) c0[b] = c1[b] = make_double2(0, 0);
#pragma unroll 4
  for (int s = 0; s < 32; ++s) {
    const double2 a0 = in[ti + s * kLd], a1 = in[ti + 16 + s * kLd];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const double2 bv = in[s + (tj + 8 * b) * kLd];
      c0[b] = cfma(a0, bv, c0[b]);
      c1[b] = cfma(a1, bv, c1[b]);
    }
  }
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    out[ti + (tj + 8 * b) * kLd] = scale(scale_by, c0[b]);
    out[ti + 16 + (tj + 8 * b) * kLd] = scale(scale_by, c1[b]);
  }
}

// Classical Gram-Schmidt twice (giraud2005: orthogonal to working precision) on the k columns a
// warp holds (lane = row). Returns false on a breakdown (a column within 1e-13 of the span of those
// before, or not finite); `spread`: the largest over the smallest column norm after projection
// (the R diagonal).
__device__ bool orthonormalize_warp(double2 (&x)[kDominantRank], int k, double& spread) {
  double smallest = 1e300, largest = 0;
  bool ok = true;
#pragma unroll
  for (int c = 0; c < kDominantRank; ++c) {
    if (c >= k) break;
    const double before = sqrt(warp_sum(norm2(x[c])));
#pragma unroll
    for (int pass = 0; pass < 2; ++pass)
#pragma unroll
      for (int d = 0; d < kDominantRank; ++d) {
        if (d >= c) break;
        const double2 h = warp_dot(x[d], x[c]);
        x[c] = sub(x[c], mul(h, x[d]));
      }
    const double after = sqrt(warp_sum(norm2(x[c])));
    if (!(after > 1e-13 * before) || !(after > 1e-300) || !isfinite(after)) ok = false;
    x[c] = scale(ok ? 1 / after : 0.0, x[c]);
    smallest = fmin(smallest, after);
    largest = fmax(largest, after);
  }
  spread = largest / smallest;
  return ok;
}

// Eigenpairs of the k x k Hermitian H (leading dimension kDominantRank) by one warp: cyclic Jacobi
// in the round-robin order (k / 2 disjoint rotations a round, double), W = the product of the
// rotations; an odd k gets a zero row and column, never rotated. Stops at off(H) <= 1e-15 |H|_F.
__device__ void jacobi_warp(DominantShared& sh, int k) {
  const int lane = threadIdx.x & 31;
  const int m = k + (k & 1), half = m / 2;
  constexpr int ld = kDominantRank;
  for (int e = lane; e < m * m; e += 32) {
    const int i = e % m, j = e / m;
    sh.w[i + j * ld] = make_double2(i == j ? 1.0 : 0.0, 0.0);
    if (i >= k || j >= k) sh.h[i + j * ld] = make_double2(0, 0);
  }
  __syncwarp();
  if (k == 1) return;
  auto entries2 = [&](bool off_only) {
    double local = 0;
    for (int e = lane; e < m * m; e += 32)
      if (!off_only || e % m != e / m) local += norm2(sh.h[(e % m) + (e / m) * ld]);
    return warp_sum(local);
  };
  const double frobenius2 = entries2(false);
  const Rotation identity{1.0, 0.0, make_double2(1.0, 0.0)};
  for (int sweep = 0; sweep < 30; ++sweep) {
    if (!(entries2(true) > 1e-30 * frobenius2)) break;
    for (int round = 0; round < m - 1; ++round) {
      if (lane < half) {
        int p, q;
        tournament_pair(m, round, lane, p, q);
        sh.rotations[lane] =
            q < k ? schur_rotation(sh.h[p + p * ld].x, sh.h[q + q * ld].x, sh.h[p + q * ld]) : identity;
        sh.slot[p] = lane;
        sh.slot[q] = lane + kDominantRank;
      }
      __syncwarp();
      // Two entries a lane (m <= 8: 64 entries): H <- H J and W <- W J (columns), then H <- J^H H (rows).
      double2 hv[2], wv[2];
      for (int u = 0; u < 2; ++u) {
        const int e = lane + 32 * u;
        if (e >= m * m) break;
        const int i = e % m, j = e / m;
        const int s = sh.slot[j], l = s % kDominantRank;
        const bool first = s < kDominantRank;
        const Rotation r = sh.rotations[l];
        int p, q;
        tournament_pair(m, round, l, p, q);
        const double2 hp = sh.h[i + p * ld], hq = sh.h[i + q * ld], wp = sh.w[i + p * ld], wq = sh.w[i + q * ld];
        if (first) {  // col p' = c col p - s e col q
          hv[u] = sub(scale(r.c, hp), mul(scale(r.s, r.e), hq));
          wv[u] = sub(scale(r.c, wp), mul(scale(r.s, r.e), wq));
        } else {  // col q' = s col p + c e col q
          hv[u] = add(scale(r.s, hp), mul(scale(r.c, r.e), hq));
          wv[u] = add(scale(r.s, wp), mul(scale(r.c, r.e), wq));
        }
      }
      __syncwarp();
      for (int u = 0; u < 2; ++u) {
        const int e = lane + 32 * u;
        if (e >= m * m) break;
        sh.h[(e % m) + (e / m) * ld] = hv[u];
        sh.w[(e % m) + (e / m) * ld] = wv[u];
      }
      __syncwarp();
      for (int u = 0; u < 2; ++u) {
        const int e = lane + 32 * u;
        if (e >= m * m) break;
        const int i = e % m, j = e / m;
        const int s = sh.slot[i], l = s % kDominantRank;
        const Rotation r = sh.rotations[l];
        int p, q;
        tournament_pair(m, round, l, p, q);
        const double2 bp = sh.h[p + j * ld], bq = sh.h[q + j * ld];
        hv[u] = s < kDominantRank ? sub(scale(r.c, bp), mul(scale(r.s, conj(r.e)), bq))   // row p'
                                  : add(scale(r.s, bp), mul(scale(r.c, conj(r.e)), bq));  // row q'
      }
      __syncwarp();
      for (int u = 0; u < 2; ++u) {
        const int e = lane + 32 * u;
        if (e >= m * m) break;
        sh.h[(e % m) + (e / m) * ld] = hv[u];
      }
      __syncwarp();
    }
  }
}

// kOverlap (DominantVariant::overlapped): the power phase's squaring of M runs on warps 4..7 while
// warps 0..3 multiply M X and warp 0 orthonormalises (the square is made before its decision and
// kept only where the iteration decides to square); one block barrier an iteration instead of three.
template <bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
dominant_kernel(const double2* matrices, int n, int lda, std::int64_t stride, int k, double tolerance,
                double* values, double2* vectors, int ldv, std::int64_t vectors_stride, int* converged,
                double2* previous, unsigned long long* stats, unsigned long long* published) {
  extern __shared__ double2 dynamic[];
  DominantShared& sh = *reinterpret_cast<DominantShared*>(dynamic);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const double2* in = matrices + blockIdx.x * stride;
  // 1. G from its lower triangle (Hermitian), zero-padded to 32 x 32; M_0 = G / trace(G).
  for (int e = t; e < 32 * 32; e += kThreads) {
    const int i = e & 31, j = e >> 5;
    double2 v = make_double2(0, 0);
    if (i < n && j < n)
      v = i > j ? in[i + j * lda] : (i < j ? conj(in[j + i * lda]) : make_double2(in[i + i * lda].x, 0));
    sh.m[1][i + j * kLd] = v;
  }
  __syncthreads();
  const double trace = trace32(sh.m[1]);  // every warp computes the same value: uniform
  const bool usable = trace > 0 && isfinite(trace);
  const double inverse = usable ? 1 / trace : 0.0;
  for (int e = t; e < 32 * 32; e += kThreads) {
    const int at = (e & 31) + (e >> 5) * kLd;
    sh.g[at] = sh.m[0][at] = scale(inverse, sh.m[1][at]);
  }
  // 2. The start X (warp 0): the previous frame's X where it is orthonormal to 1e-8, else a fixed
  //    pseudo-random block; orthonormalised either way.
  if (warp == 0) {
    double2 x[kDominantRank];
    bool warm = previous != nullptr;
#pragma unroll
    for (int c = 0; c < kDominantRank; ++c) {
      x[c] = make_double2(0, 0);
      if (c < k && lane < n && warm) x[c] = previous[blockIdx.x * std::int64_t(n) * k + lane + c * n];
    }
    if (warm) {
#pragma unroll
      for (int c = 0; c < kDominantRank; ++c)
#pragma unroll
        for (int d = 0; d < kDominantRank; ++d)
          if (c < k && d <= c) {
            const double2 dot = warp_dot(x[d], x[c]);
            if (!(fabs(dot.x - (c == d ? 1.0 : 0.0)) <= 1e-8 && fabs(dot.y) <= 1e-8)) warm = false;
          }
    }
    if (!warm)
#pragma unroll
      for (int c = 0; c < kDominantRank; ++c) {
        const unsigned int at = 2u * unsigned(lane + 32 * c);
        x[c] = c < k && lane < n ? make_double2(unit_hash(at + 1u), unit_hash(at + 2u)) : make_double2(0, 0);
      }
    double spread = 0;
    const bool ok = orthonormalize_warp(x, k, spread);
#pragma unroll
    for (int c = 0; c < kDominantRank; ++c)
      if (c < k) sh.x[lane + 32 * c] = x[c];
    if (lane == 0) {
      sh.broke = ok && usable ? 0 : 1;
      sh.pass = 0;
    }
  }
  __syncthreads();
  int current = 0, squarings = 0, steps = 0, tiers = 0;
  bool may_square = true;
  // M = (G / trace(G))^(2^squarings) / prod_{i < squarings} trace(M_i)^(2^(squarings - i)): this
  // sums log2(trace(M_i)) / 2^i over the squarings done.
  double power_log2 = 0;
  if (!sh.broke) {
    // 3. Power phase (Rutishauser's subspace iteration on powers of M): X <- orth(M X), then M <- M^2
    //    / trace(M)^2 while the k columns' spread allows (kSpreadMax), until X stops moving.
    for (; steps < kPowerSteps; ++steps) {
      const int parity = steps & 1;  // flags written this iteration (read after its barrier)
      const bool squaring = may_square && squarings < kPowerSquarings;  // before this iteration's say
      if (kOverlap) {
        if (warp >= 4) {  // M^2 / trace(M)^2 into the other buffer, kept if the iteration squares
          const double tr = trace32(sh.m[current]);
          if (squaring) square32_half(sh.m[current], sh.m[1 - current], 1 / (tr * tr), t - 128);
          if (t == 128) sh.power_trace[parity] = tr;
        } else {
          multiply_columns_4(sh.m[current], sh.x, sh.y, k);
          asm volatile("bar.sync 1, 128;" ::: "memory");  // warps 0..3
        }
      } else {
        multiply_columns(sh.m[current], sh.x, sh.y, k);
        __syncthreads();
      }
      if (warp == 0) {
        double2 old[kDominantRank], x[kDominantRank];
#pragma unroll
        for (int c = 0; c < kDominantRank; ++c) {
          old[c] = c < k ? sh.x[lane + 32 * c] : make_double2(0, 0);
          x[c] = c < k ? sh.y[lane + 32 * c] : make_double2(0, 0);
        }
        double spread = 0;
        const bool ok = orthonormalize_warp(x, k, spread);
        double change2 = 0;  // |(I - X_old X_old^H) X_new|_F^2
#pragma unroll
        for (int c = 0; c < kDominantRank; ++c) {
          if (c >= k) break;
          double2 r = x[c];
#pragma unroll
          for (int d = 0; d < kDominantRank; ++d)
            if (d < k) r = sub(r, mul(warp_dot(old[d], x[c]), old[d]));
          change2 += warp_sum(norm2(r));
          sh.x[lane + 32 * c] = x[c];
        }
        if (lane == 0) {
          sh.broke = ok ? 0 : 1;
          const double settled = fmax(kChangeStop, 16 * kEpsilon * spread);
          sh.stop[parity] = !ok || !(change2 > settled * settled);
          sh.square[parity] = spread <= kSpreadMax;
        }
      }
      __syncthreads();
      if (sh.stop[parity]) break;
      may_square = may_square && sh.square[parity];
      if (may_square && squarings < kPowerSquarings) {
        if (kOverlap) {  // the square is there already
          power_log2 += log2(sh.power_trace[parity]) / double(1 << squarings);
        } else {
          const double tr = trace32(sh.m[current]);
          power_log2 += log2(tr) / double(1 << squarings);
          square32(sh.m[current], sh.m[1 - current], 1 / (tr * tr));
          __syncthreads();
        }
        current = 1 - current;
        ++squarings;
      }
    }
  }
  // Rounding allowance of the bounds below, in units of trace(G) (or of trace(M)): B's and M's
  // entries carry ~(2k + 2) eps of the matrix's norm; a trace can lose n of them.
  const double allowance = 4.0 * double(n) * n * (2 * k + 2) * kEpsilon;
  if (!sh.broke && k > 1 && squarings > 0) {
    // The last iteration on G itself (k > 1: M's rounding floor, kSpreadMax above).
    multiply_columns(sh.g, sh.x, sh.y, k);
    __syncthreads();
    if (warp == 0) {
      double2 x[kDominantRank];
#pragma unroll
      for (int c = 0; c < kDominantRank; ++c) x[c] = c < k ? sh.y[lane + 32 * c] : make_double2(0, 0);
      double spread = 0;
      const bool ok = orthonormalize_warp(x, k, spread);
#pragma unroll
      for (int c = 0; c < kDominantRank; ++c)
        if (c < k) sh.x[lane + 32 * c] = x[c];
      if (lane == 0 && !ok) sh.broke = 1;
    }
    __syncthreads();
  }
  if (!sh.broke) {
    // The power phase's bound (free: M is there): with p = 2^squarings, G^p has G's eigenvectors
    // and eigenvalues lambda^p in the same order, so lambda_k+1^p <= lambda_max(P G^p P) <=
    // trace(P G^p P) (Courant-Fischer, P = I - X X^H), and trace(P M P) = trace(M) - sum_c x_c^H M
    // x_c; it is tight once p has pushed the rest below rounding, which the iteration needed anyway.
    multiply_columns(sh.m[current], sh.x, sh.y, k);
    __syncthreads();
    if (warp == 0) {
      const double tr = trace32(sh.m[current]);
      double quadratic = 0;
      for (int c = 0; c < k; ++c) quadratic += warp_dot(sh.x[lane + 32 * c], sh.y[lane + 32 * c]).x;
      const double tail = fmax(tr - quadratic, 0.0) + allowance * tr;
      if (lane == 0) sh.power_bound = exp2(power_log2 + log2(tail) / double(1 << squarings));
    }
    __syncthreads();
    // 4. Rayleigh-Ritz on G: H = X^H G X, H = W diag(theta) W^H, X <- X W, Y = G X W, theta ascending;
    //    R = G X - X diag(theta).
    multiply_columns(sh.g, sh.x, sh.y, k);
    __syncthreads();
    if (warp == 0) {
      constexpr int ld = kDominantRank;
      for (int c = 0; c < k; ++c)
        for (int d = c; d < k; ++d) {
          double2 v = warp_dot(sh.x[lane + 32 * c], sh.y[lane + 32 * d]);
          if (c == d) v.y = 0;
          if (lane == 0) {
            sh.h[c + d * ld] = v;
            sh.h[d + c * ld] = conj(v);
          }
        }
      __syncwarp();
      jacobi_warp(sh, k);
      // The order of the eigenvalues (rank of each diagonal entry, ties by index).
      int order[kDominantRank];
      double theta[kDominantRank];
#pragma unroll
      for (int i = 0; i < kDominantRank; ++i) {
        theta[i] = i < k ? sh.h[i + i * ld].x : 0.0;
        order[i] = 0;
      }
#pragma unroll
      for (int i = 0; i < kDominantRank; ++i) {
        int rank = 0;
#pragma unroll
        for (int j = 0; j < kDominantRank; ++j)
          if (i < k && j < k && (theta[j] < theta[i] || (theta[j] == theta[i] && j < i))) ++rank;
        if (i < k) order[rank] = i;
      }
      double2 x[kDominantRank], y[kDominantRank];
      double residual2 = 0;
#pragma unroll
      for (int r = 0; r < kDominantRank; ++r) {
        if (r >= k) break;
        const int column = order[r];
        double2 xs = make_double2(0, 0), ys = xs;
        for (int d = 0; d < k; ++d) {
          const double2 wv = sh.w[d + column * ld];
          xs = cfma(sh.x[lane + 32 * d], wv, xs);
          ys = cfma(sh.y[lane + 32 * d], wv, ys);
        }
        x[r] = xs;
        y[r] = ys;
        residual2 += warp_sum(norm2(sub(ys, scale(theta[column], xs))));
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < kDominantRank; ++r)
        if (r < k) {
          sh.x[lane + 32 * r] = x[r];
          sh.y[lane + 32 * r] = y[r];
          if (lane == 0) sh.theta[r] = theta[order[r]];
        }
      if (lane == 0) sh.residual2 = residual2;
    }
    __syncthreads();
    // 5. The test. B = P G P = G - X Y^H - Y X^H + X diag(theta) X^H (P = I - X X^H, Y = G X);
    //    lambda_k+1(G) <= lambda_max(B) (Courant-Fischer: B is G on an (n - k)-dimensional subspace)
    //    <= trace(B^q)^(1/q) for q = 1, 2, 4, ..; with gap = theta_1 - bound - |R|_F > 0 the angle
    //    between span(X) and G's dominant subspace is at most |R|_F / gap (Davis-Kahan's sin theta
    //    theorem), and the filter's output error at most sqrt(theta_k) |R|_F / gap; accepted when that
    //    is <= tolerance |S_f|, |S_f|^2 = trace(G) - sum(theta) (subspace_converged_batched's rule).
    //    First with the power phase's bound (above); where that fails, B's.
    const double residual = sqrt(sh.residual2);
    double removed = 0;
    for (int c = 0; c < k; ++c) removed += sh.theta[c];
    const double output2 = fmax(trace32(sh.g) - removed, 0.0);
    auto passes = [&](double bound) {
      const double gap = sh.theta[0] - (bound + allowance) - residual;
      return gap > 0 && sqrt(fmax(sh.theta[k - 1], 0.0)) * residual <= tolerance * gap * sqrt(output2);
    };
    bool pass = passes(sh.power_bound);
    for (int e = t; !pass && e < 32 * 32; e += kThreads) {
      const int i = e & 31, j = e >> 5;
      double2 b = sh.g[i + j * kLd];
      for (int c = 0; c < k; ++c) {
        const double2 xi = sh.x[i + 32 * c], xj = sh.x[j + 32 * c], yi = sh.y[i + 32 * c], yj = sh.y[j + 32 * c];
        b = sub(b, add(mul(xi, conj(yj)), mul(yi, conj(xj))));
        b = add(b, scale(sh.theta[c], mul(xi, conj(xj))));
      }
      sh.m[0][i + j * kLd] = b;
    }
    __syncthreads();
    double log2_product = 0;  // sum over the tiers before of log2(c_i) / 2^i
    int bound_buffer = 0;
    for (tiers = 0; !pass; ++tiers) {
      const double c = trace32(sh.m[bound_buffer]);
      // trace(B^(2^t)) = c_t prod_{i<t} c_i^(2^(t-i)) with A_t = A_{t-1}^2 / c_{t-1}^2, A_0 = B.
      const double bound = c > 0 ? exp2(log2_product + log2(c) / double(1 << tiers)) : 0.0;
      pass = passes(bound);
      if (pass || tiers == kBoundSquarings || !(c > allowance)) break;
      log2_product += log2(c) / double(1 << tiers);
      square32(sh.m[bound_buffer], sh.m[1 - bound_buffer], 1 / (c * c));
      bound_buffer = 1 - bound_buffer;
      __syncthreads();
    }
    if (t == 0) sh.pass = pass ? 1 : 0;
    __syncthreads();
  }
  const bool pass = sh.pass != 0;
  // 6. Converged: the k Ritz pairs as the last k columns (ascending, as the full solver's), the
  //    other columns and values zero; X kept for the next frame. Else nothing is written (the
  //    matrix stays for the fallback, which may work in place).
  if (pass) {
    double2* out = vectors + blockIdx.x * vectors_stride;
    for (int e = t; e < n * n; e += kThreads) {
      const int row = e % n, column = e / n, c = column - (n - k);
      out[row + column * ldv] = c >= 0 ? sh.x[row + 32 * c] : make_double2(0, 0);
    }
    for (int i = t; i < n; i += kThreads)
      values[blockIdx.x * std::int64_t(n) + i] = i >= n - k ? sh.theta[i - (n - k)] * trace : 0.0;
    if (previous)
      for (int e = t; e < n * k; e += kThreads)
        previous[blockIdx.x * std::int64_t(n) * k + e] = sh.x[(e % n) + 32 * (e / n)];
  }
  if (t == 0) {
    converged[blockIdx.x] = pass ? 1 : 0;
    if (stats) {
      atomicAdd(stats, 1ull);
      if (!pass) {
        const unsigned long long fallbacks = atomicAdd(stats + 1, 1ull) + 1;
        if (published) {  // mapped host memory: the host's retry policy reads it without a wait
          *static_cast<volatile unsigned long long*>(published) = fallbacks;
          __threadfence_system();
        }
      }
      atomicAdd(stats + 2, static_cast<unsigned long long>(squarings));
      atomicAdd(stats + 3, static_cast<unsigned long long>(steps));
      atomicAdd(stats + 4, static_cast<unsigned long long>(tiers));
    }
  }
}

}  // namespace

void hermitian_jacobi_batched(const double2* matrices, int n, int lda, std::int64_t stride, int batch, double* values,
                              double2* vectors, int ldv, std::int64_t vectors_stride, cudaStream_t stream,
                              JacobiVariant variant, int* sweeps, double2* previous,
                              unsigned long long* stats, const int* skip) {
  if (skip && variant != JacobiVariant::mixed && variant != JacobiVariant::mixed_phased &&
      variant != JacobiVariant::circle)
    throw CudaError("hermitian_jacobi_batched: skip flags need a float-angle variant");
  if (previous && variant != JacobiVariant::mixed && variant != JacobiVariant::mixed_phased &&
      variant != JacobiVariant::circle)
    throw CudaError("hermitian_jacobi_batched: a warm start needs a float-angle variant");
  if (n < 1 || n > kSmallEigenMax) throw CudaError("hermitian_jacobi_batched: n must be in [1, 32]");
  const int m = n + (n & 1);
  const auto mixed_bytes = static_cast<std::size_t>(4 * m * m) * sizeof(double2);  // A, A', V, V'
  switch (variant) {
    case JacobiVariant::mixed:
      // Per function and device, on every call (a host-side attribute, no sync): 64 KiB at m = 32.
      SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(jacobi_mixed_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(mixed_bytes)));
      jacobi_mixed_kernel<false><<<batch, kThreads, mixed_bytes, stream>>>(
          matrices, n, lda, stride, values, vectors, ldv, vectors_stride, sweeps, previous, stats, skip);
      break;
    case JacobiVariant::mixed_phased:
      SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(jacobi_mixed_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(mixed_bytes)));
      jacobi_mixed_kernel<true><<<batch, kThreads, mixed_bytes, stream>>>(
          matrices, n, lda, stride, values, vectors, ldv, vectors_stride, sweeps, previous, stats, skip);
      break;
    case JacobiVariant::circle:
      SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(jacobi_mixed_kernel<true, true>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(mixed_bytes)));
      jacobi_mixed_kernel<true, true><<<batch, kThreads, mixed_bytes, stream>>>(matrices, n, lda, stride, values,
                                                                                vectors, ldv, vectors_stride, sweeps,
                                                                                previous, stats, skip);
      break;
    case JacobiVariant::fused:
      jacobi_fused_kernel<<<batch, kThreads, 0, stream>>>(matrices, n, lda, stride, values, vectors, ldv,
                                                          vectors_stride);
      break;
    case JacobiVariant::two_phase:
      jacobi_kernel<<<batch, kThreads, 0, stream>>>(matrices, n, lda, stride, values, vectors, ldv, vectors_stride);
      break;
  }
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

std::size_t orthonormalize_shared_bytes(int n, int b) {
  return (static_cast<std::size_t>(n) * b + static_cast<std::size_t>(b) * b) * sizeof(double2);
}

void orthonormalize_columns_batched(double2* matrices, int n, int b, std::int64_t stride, int batch, int* breakdown,
                                    cudaStream_t stream) {
  const std::size_t bytes = orthonormalize_shared_bytes(n, b);
  if (b > kSmallEigenMax || bytes > 227u * 1024u)
    throw CudaError("orthonormalize_columns_batched: n x b too large for shared memory");
  // Per function and device, on every call (a host-side attribute, no sync): the kernel's static
  // shared memory counts against the 48 KiB default too (n = 64, b = 32 is exactly 48 KiB dynamic).
  SONOPIPE_CUDA_CHECK(cudaFuncSetAttribute(cholesky_qr_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
  cholesky_qr_kernel<<<batch, kThreads, bytes, stream>>>(matrices, n, b, stride, breakdown);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void start_block_batched(double2* blocks, int n, int b, std::int64_t stride, int batch, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n * b + kThreads - 1) / kThreads), static_cast<unsigned>(batch));
  start_block_kernel<<<grid, kThreads, 0, stream>>>(blocks, n, b, stride);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void subspace_converged_batched(const double2* gram, int n, const double2* vectors, std::int64_t vectors_stride,
                                const double2* gram_vectors, std::int64_t gram_vectors_stride, const double* theta,
                                int b, int k, int batch, double tolerance, const int* breakdown, int* converged,
                                cudaStream_t stream) {
  converged_kernel<<<batch, kThreads, 0, stream>>>(gram, n, vectors, vectors_stride, gram_vectors, gram_vectors_stride,
                                                   theta, b, k, tolerance, breakdown, converged);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void set_fallback_condition(cudaGraphConditionalHandle handle, const int* converged, int batch,
                            unsigned long long* fallbacks, unsigned long long* published, cudaStream_t stream) {
  fallback_condition_kernel<<<1, 1, 0, stream>>>(handle, converged, batch, fallbacks, published);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void hermitian_dominant_batched(const double2* matrices, int n, int lda, std::int64_t stride, int batch, int k,
                                double tolerance, double* values, double2* vectors, int ldv,
                                std::int64_t vectors_stride, int* converged, cudaStream_t stream, double2* previous,
                                unsigned long long* stats, unsigned long long* published, DominantVariant variant) {
  if (n < 2 || n > kSmallEigenMax || k < 1 || k > kDominantMaxRank || k >= n)
    throw CudaError("hermitian_dominant_batched: needs 2 <= n <= 32 and 1 <= k <= min(8, n - 1)");
  const auto bytes = static_cast<int>(sizeof(DominantShared));  // 61 KiB
  if (variant == DominantVariant::overlapped) {
    SONOPIPE_CUDA_CHECK(
        cudaFuncSetAttribute(dominant_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    dominant_kernel<true><<<batch, kThreads, bytes, stream>>>(matrices, n, lda, stride, k, tolerance, values, vectors,
                                                             ldv, vectors_stride, converged, previous, stats, published);
  } else {
    SONOPIPE_CUDA_CHECK(
        cudaFuncSetAttribute(dominant_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    dominant_kernel<false><<<batch, kThreads, bytes, stream>>>(matrices, n, lda, stride, k, tolerance, values,
                                                              vectors, ldv, vectors_stride, converged, previous,
                                                              stats, published);
  }
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
