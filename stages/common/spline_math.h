// Cubic-spline math of the `upsample` stage, shared by the CPU reference (double) and the CUDA
// kernel (float): one source for the window rule, the tridiagonal solve and the evaluation.
//
// Knots are the input samples, spacing 1. The spline is kept as its second derivatives M_i:
// on [i, i+1] with t = x - i, u = 1 - t (Numerical Recipes, rosenzweig2011 ref. [18]):
//   S = u y_i + t y_{i+1} + ((u^3 - u) M_i + (t^3 - t) M_{i+1}) / 6          (rosenzweig2011 eq. (1))
// and the M solve   M_{i-1} + 4 M_i + M_{i+1} = 6 (y_{i+1} - 2 y_i + y_{i-1})   for interior i.
// Boundary conditions at a line end: natural (M = 0) or not-a-knot (third derivative continuous
// at the second knot: M_0 - 2 M_1 + M_2 = 0, which turns the first row into 6 M_1 = r_1).
//
// Subsets (the paper's GPU scheme): knot i belongs to subset i / n; subset s owns knots
// [s n, min(s n + n, N)) and solves the window [a - k, b + k] (clipped to the line, and widened to
// at least 4 knots), with the line's boundary condition where the window meets a line end and the
// natural condition at an interior window edge. The error an interior edge causes decays like
// (2 - sqrt 3)^d = 0.27^d at d knots from it. `exact` is one window over the whole line.
#pragma once

#include <cstdint>

#include "stages/common/host_device.h"

namespace sonopipe::spline {

enum class Boundary : int { natural = 0, not_a_knot = 1 };

// A sample of C channels (1: real line, 2: I and Q). The operator is linear, so I and Q share
// every coefficient and differ only in data.
template <typename Real, int C>
struct alignas(sizeof(Real) * (C == 2 ? 2 : 1)) Vec {  // I/Q pairs move as one 8-byte access
  Real v[C];
  SONOPIPE_HD static Vec zero() {
    Vec r;
    for (int c = 0; c < C; ++c) r.v[c] = Real(0);
    return r;
  }
  SONOPIPE_HD Vec operator+(const Vec& o) const {
    Vec r;
    for (int c = 0; c < C; ++c) r.v[c] = v[c] + o.v[c];
    return r;
  }
  SONOPIPE_HD Vec operator-(const Vec& o) const {
    Vec r;
    for (int c = 0; c < C; ++c) r.v[c] = v[c] - o.v[c];
    return r;
  }
  SONOPIPE_HD Vec operator*(Real s) const {
    Vec r;
    for (int c = 0; c < C; ++c) r.v[c] = v[c] * s;
    return r;
  }
};

struct KnotRange {
  std::int64_t begin;
  std::int64_t end;  // exclusive
};

// The window of knots [lo, hi] (inclusive) a subset owning [owned.begin, owned.end) solves.
SONOPIPE_HD inline KnotRange subset_window(KnotRange owned, std::int64_t overlap_k,
                                                    std::int64_t length) {
  std::int64_t hi = owned.end + overlap_k;  // the paper's n + 2k + 1 points
  if (hi > length - 1) hi = length - 1;
  std::int64_t lo = owned.begin - overlap_k;
  if (lo > hi - 3) lo = hi - 3;  // at least 4 knots, so not-a-knot is always defined
  if (lo < 0) lo = 0;
  return {lo, hi + 1};
}

// The pivots of the forward sweep (Thomas algorithm): inverse(row, denominator) is 1 / pivot of
// forward row `row` (0 = the window's first unknown); keep(slot, row, c) / ratio(slot, row) store
// and recall the super-diagonal ratio c of a row kept for back substitution. This form divides and
// keeps c in per-thread scratch (`scratch_c(slot)` returns a reference): it serves any boundary.
// The CUDA kernel has a tabled form for natural windows, whose pivots depend only on the row.
template <typename Real, typename ScratchC>
struct ComputedPivots {
  ScratchC scratch_c;
  SONOPIPE_HD Real inverse(std::int64_t, Real denominator) const { return Real(1) / denominator; }
  SONOPIPE_HD void keep(std::int64_t slot, std::int64_t, Real c) const { scratch_c(slot) = c; }
  SONOPIPE_HD Real ratio(std::int64_t slot, std::int64_t) const { return scratch_c(slot); }
};

// Solves the spline on window [w.begin, w.end) and writes M for the knots [keep.begin, keep.end)
// (inside the window) through m_out(i, value). y(i) reads knot i. `scratch_d(r)` returns a
// reference to slot r of per-thread scratch, r < keep count + 2; `pivots` as above.
// Every kept knot is written.
template <typename Real, int C, typename YAt, typename Pivots, typename ScratchD, typename MOut>
SONOPIPE_HD void solve_window(KnotRange w, KnotRange keep, std::int64_t length,
                                       Boundary boundary, YAt y, const Pivots& pivots,
                                       ScratchD scratch_d, MOut m_out) {
  using V = Vec<Real, C>;
  const std::int64_t lo = w.begin, hi = w.end - 1;
  if (hi - lo < 2) {  // two knots: a straight line (natural), nothing to solve
    for (std::int64_t i = keep.begin; i < keep.end; ++i) m_out(i, V::zero());
    return;
  }
  const bool left_nak = boundary == Boundary::not_a_knot && lo == 0 && hi - lo >= 3;
  const bool right_nak = boundary == Boundary::not_a_knot && hi == length - 1 && hi - lo >= 3;
  // Rows are the unknowns lo+1 .. hi-1; the edge values follow from them.
  // Stored rows start at the first kept knot, or two rows before hi so that not-a-knot can
  // extrapolate M_hi from M_{hi-1} and M_{hi-2}: at most (keep count + 2) slots.
  std::int64_t store_from = keep.begin < hi - 2 ? keep.begin : hi - 2;
  if (store_from < lo + 1) store_from = lo + 1;
  Real c_prev = Real(0);
  V d_prev = V::zero();
  V y_prev = y(lo), y_mid = y(lo + 1);
  for (std::int64_t i = lo + 1; i <= hi - 1; ++i) {
    const V y_next = y(i + 1);
    const V r = (y_next - y_mid * Real(2) + y_prev) * Real(6);
    Real diag = Real(4), sub = Real(1), sup = Real(1);
    if (i == lo + 1) sub = Real(0);  // M_lo is 0 (natural) or eliminated (not-a-knot)
    if (i == hi - 1) sup = Real(0);
    if (i == lo + 1 && left_nak) {  // M_lo = 2 M_1 - M_2 substituted: 6 M_1 + 0 M_2 = r_1
      diag = Real(6);
      sup = Real(0);
    }
    if (i == hi - 1 && right_nak) {  // M_hi = 2 M_{hi-1} - M_{hi-2}: 0 M_{hi-2} + 6 M_{hi-1}
      diag = Real(6);
      sub = Real(0);
    }
    const Real inv_denom = pivots.inverse(i - lo - 1, diag - sub * c_prev);
    const Real c = sup * inv_denom;  // sup is 0 or 1: exact
    const V d = (r - d_prev * sub) * inv_denom;
    if (i >= store_from) {
      pivots.keep(i - store_from, i - lo - 1, c);
      scratch_d(i - store_from) = d;
    }
    c_prev = c;
    d_prev = d;
    y_prev = y_mid;
    y_mid = y_next;
  }
  // Back substitution from hi-1 down to the first kept row.
  V m_next = V::zero(), m_next2 = V::zero();  // M_{i+1}, M_{i+2}
  V m_at_hi = V::zero();
  for (std::int64_t i = hi - 1; i >= store_from; --i) {
    const V m = scratch_d(i - store_from) - m_next * pivots.ratio(i - store_from, i - lo - 1);
    if (i >= keep.begin && i < keep.end) m_out(i, m);
    if (i == hi - 2 && right_nak) m_at_hi = m_next * Real(2) - m;  // 2 M_{hi-1} - M_{hi-2}
    m_next2 = m_next;
    m_next = m;
  }
  // Edge knots.
  if (keep.begin <= lo && lo < keep.end)  // then store_from == lo + 1: m_next = M_lo+1, m_next2 = M_lo+2
    m_out(lo, left_nak ? m_next * Real(2) - m_next2 : V::zero());
  if (keep.begin <= hi && hi < keep.end) m_out(hi, right_nak ? m_at_hi : V::zero());
}

// Position of output j on the input grid, factor = p / q: x = j q / p = i + rest / p, with the
// interval i clamped to the last one (the last knot itself is i = length - 2, rest = p).
// Input knot i lands exactly on output i p / q when that is whole (rest = 0: S = y_i exactly).
SONOPIPE_HD inline std::int64_t output_interval(std::int64_t j, std::int64_t p,
                                                         std::int64_t q, std::int64_t length,
                                                         std::int64_t& rest) {
  const std::int64_t scaled = j * q;
  std::int64_t i = scaled / p;
  rest = scaled - i * p;
  if (i >= length - 1) {
    i = length - 2;
    rest = p;
  }
  return i;
}

// rosenzweig2011 eq. (1) in second-derivative form (see the top of this file).
template <typename Real, int C>
SONOPIPE_HD inline Vec<Real, C> evaluate(const Vec<Real, C>& y0, const Vec<Real, C>& y1,
                                                  const Vec<Real, C>& m0, const Vec<Real, C>& m1,
                                                  Real t) {
  const Real u = Real(1) - t;
  const Real a = (u * u * u - u) * Real(1.0 / 6.0);
  const Real b = (t * t * t - t) * Real(1.0 / 6.0);
  Vec<Real, C> s;
  for (int c = 0; c < C; ++c) s.v[c] = u * y0.v[c] + t * y1.v[c] + a * m0.v[c] + b * m1.v[c];
  return s;
}

// Output samples for an input line of `length` samples at factor p / q.
SONOPIPE_HD inline std::int64_t output_length(std::int64_t length, std::int64_t p,
                                                       std::int64_t q) {
  return (length - 1) * p / q + 1;
}

}  // namespace sonopipe::spline
