// exp(x) computed with the same operations on the CPU and in CUDA kernels (built without FMA
// contraction), so both backends get bit-identical results and the Nelder-Mead searches take
// identical paths. glibc's exp and CUDA's exp differ by an ulp now and then, which is enough to
// flip a simplex comparison. Accuracy: within 2 ulp of the exact value (tests check 4e-16).
#pragma once

#include <cmath>

#include "stages/common/host_device.h"

namespace sonopipe::perfusion {

SONOPIPE_HD inline double portable_exp(double x) {
  if (x != x) return x;                      // NaN
  if (x > 709.782712893384) return HUGE_VAL;  // overflow
  if (x < -745.1332191019412) return 0.0;    // underflow below the smallest subnormal
  // x = k ln2 + r, |r| <= ln2 / 2; ln2_hi has 32 trailing zero bits so k * ln2_hi is exact.
  constexpr double kInvLn2 = 1.44269504088896338700e+00;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double k = ::rint(x * kInvLn2);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  // Taylor series to degree 14: the remainder |r|^15 / 15! < 1e-19 for |r| <= 0.347.
  constexpr double c[15] = {1.0,         1.0,          1.0 / 2,       1.0 / 6,         1.0 / 24,
                            1.0 / 120,   1.0 / 720,    1.0 / 5040,    1.0 / 40320,     1.0 / 362880,
                            1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0,
                            1.0 / 87178291200.0};
  double p = c[14];
  for (int i = 13; i >= 0; --i) p = p * r + c[i];
  return ::ldexp(p, static_cast<int>(k));
}

}  // namespace sonopipe::perfusion
