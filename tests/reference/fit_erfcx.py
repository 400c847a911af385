#!/usr/bin/python3
"""fit_erfcx.py — the coefficients of core/include/vitlens/tensor/normal_cdf.h, and their error.

erfcx(u) = e^{u²}·erfc(u) on u ∈ [0, 6] as a polynomial of degree N in
s = (7u − 12)/(3u + 12) ∈ [−1, 1] (u = 12(1 + s)/(7 − 3s): the map t = (u − 4)/(u + 4) of
Weideman's expansion of the error function, rescaled to [−1, 1] on this interval), interpolated at
N + 1 Chebyshev nodes in 50-digit arithmetic (mpmath). It then evaluates the polynomial in double
as the header does and reports the largest relative error of erfcx on [0, 6] and the largest error
of GELU(x) = x·Φ(x), Φ(x) = ½e^{−x²/2}·erfcx(|x|/√2) for x < 0 and 1 − that for x ≥ 0, against
mpmath over [−12, 12], as a fraction of max(1, |x|).

Usage: /usr/bin/python3 tests/reference/fit_erfcx.py [N] [--print]   (N = 17, the header's)
Measured (N = 17): erfcx 7.6e-16 relative, GELU 1.6e-16 of max(1, |x|).
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 50
args = [a for a in sys.argv[1:] if not a.startswith('--')]
N = int(args[0]) if args else 17


def erfcx(u):
    return mp.exp(u * u) * mp.erfc(u)


M = N + 1
nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / M) for k in range(M)]
values = [erfcx(12 * (1 + s) / (7 - 3 * s)) for s in nodes]
vandermonde = mp.matrix([[s ** j for j in range(M)] for s in nodes])
coef = mp.lu_solve(vandermonde, mp.matrix(values))
c = [float(coef[j]) for j in range(M)]


def poly(s):
    p = 0.0
    for a in reversed(c):
        p = p * s + a
    return p


def gelu(x):
    u = min(abs(x) * 0.7071067811865476, 6.0)
    h = 0.5 * np.exp(-0.5 * x * x) * poly((7.0 * u - 12.0) / (3.0 * u + 12.0))
    return x * (h if x < 0 else 1.0 - h)


err_erfcx = max(float(abs((poly((7.0 * u - 12.0) / (3.0 * u + 12.0)) - erfcx(mp.mpf(u))) / erfcx(mp.mpf(u))))
                for u in np.linspace(0.0, 6.0, 30001))
xs = np.concatenate([np.linspace(-12.0, 12.0, 40001), np.random.RandomState(2).normal(0.0, 2.0, 20000)])
err_gelu = max(float(abs(gelu(x) - mp.mpf(x) * mp.ncdf(mp.mpf(x))) / max(1.0, abs(x))) for x in xs)
print(f"N = {N}: erfcx max relative error {err_erfcx:.3e}; GELU max |error| / max(1, |x|) {err_gelu:.3e}")
if '--print' in sys.argv:
    for a in c:
        print(f"{a!r},")
