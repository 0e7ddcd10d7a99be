"""Reference fits with scipy.optimize.fmin for tests/stages/perfusion/nelder_mead_test.cpp.

The cost mirrors stages/perfusion/perfusion_model.h (`recursive` scheme) operation for operation, including
its portable exp, so both sides evaluate bit-identical costs and the two simplex searches can be
compared step for step.

Input file (text): line 1 "dt_s N", line 2 arterial, line 3 portal, then one line per case:
"x0 (5 values, SI) tissue (N values)". Output: one line per case:
"iterations evaluations warnflag fopt x (5 values)", all written with repr().
"""
import math
import sys

import numpy as np
from scipy.optimize import fmin

INV_LN2 = 1.44269504088896338700e+00
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
FACT = [1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
        1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0,
        1.0 / 87178291200.0]


def portable_exp(x):
    if x != x:
        return x
    if x > 709.782712893384:
        return math.inf
    if x < -745.1332191019412:
        return 0.0
    k = float(round(x * INV_LN2))  # round half to even, as rint
    r = (x - k * LN2_HI) - k * LN2_LO
    p = FACT[14]
    for i in range(13, -1, -1):
        p = p * r + FACT[i]
    return math.ldexp(p, int(k))


def delay_shift(tau, dt, n):
    shift = tau / dt
    limit = n + 1.0
    shift = min(max(shift, -limit), limit)
    whole = math.floor(shift)
    return int(whole), shift - whole


def delayed(curve, n, d, i):
    whole, frac = d
    right = i - whole
    if right < 0 or (right == 0 and frac > 0.0):
        return 0.0
    left = right - 1
    last = n - 1
    rv = curve[min(right, last)]
    lv = 0.0 if left < 0 else curve[min(left, last)]
    return frac * lv + (1.0 - frac) * rv


def cost(p, dt, ca, cp, tissue):
    p = [float(v) for v in p]
    if not all(v - v == 0.0 for v in p):
        return math.inf
    n = len(ca)
    da, dp = delay_shift(p[3], dt, n), delay_shift(p[4], dt, n)

    def u(i):
        return p[0] * delayed(ca, n, da, i) + p[1] * delayed(cp, n, dp, i)

    x = p[2] * dt
    decay = portable_exp(-x)
    if -1e-2 < x < 1e-2:
        a = 1.0 + x * (-1.0 / 2 + x * (1.0 / 6 + x * (-1.0 / 24 + x * (1.0 / 120 + x * (-1.0 / 720)))))
        b = 1.0 / 2 + x * (-1.0 / 6 + x * (1.0 / 24 + x * (-1.0 / 120 + x * (1.0 / 720 + x * (-1.0 / 5040)))))
    else:
        e0 = 1.0 - decay
        a = e0 / x
        b = (x - e0) / (x * x)
    integral = 0.0
    u_prev = u(0)
    r = tissue[0] - integral
    total = r * r
    for i in range(1, n):
        u_now = u(i)
        integral = decay * integral + dt * (a * u_prev + b * (u_now - u_prev))
        r = tissue[i] - integral
        total += r * r
        u_prev = u_now
    return total if total - total == 0.0 else math.inf


def main():
    lines = open(sys.argv[1]).read().strip().split("\n")
    dt, n = lines[0].split()
    dt, n = float(dt), int(n)
    ca = [float(v) for v in lines[1].split()]
    cp = [float(v) for v in lines[2].split()]
    out = []
    for line in lines[3:]:
        values = [float(v) for v in line.split()]
        x0, tissue = values[:5], values[5:]
        assert len(tissue) == n
        xopt, fopt, nit, nfev, warn = fmin(cost, np.array(x0), args=(dt, ca, cp, tissue),
                                           xtol=np.inf, ftol=1e-8, maxiter=600,
                                           full_output=True, disp=False)
        out.append(" ".join([str(nit), str(nfev), str(warn), repr(float(fopt))] +
                            [repr(float(v)) for v in xopt]))
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
