#!/usr/bin/python3
"""faithfulness_ref.py — independent reference values for tests/native/test_metrics_faithfulness.cpp.

Written from the papers, in float64, sharing no code with the engine:
- ROAD's noisy linear imputation (Rong et al., ICML 2022) without noise: the removed pixels solve
  x_i = sum_j w_ij v_j / sum_j w_ij over the in-image 8-neighbours (1/6 direct, 1/12 diagonal),
  set up here as a dense system and solved with numpy (and again with scipy's sparse solver).
- SSIM (Wang et al. 2004) with scikit-image's structural_similarity: its defaults (7x7 uniform
  window, sample covariance) and Wang's Gaussian window (sigma 1.5, population covariance).

Needs Debian's python3-scipy and python3-skimage (apt-get install python3-skimage); run from the
repository root:

    /usr/bin/python3 tests/reference/faithfulness_ref.py

and paste the printed constants into the test (they are not read at test time).
"""
import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from skimage.metrics import structural_similarity


def road_image(h, w):
    """The 1-channel test image of the C++ test: v = ((7y + 3x^2) mod 11) / 10."""
    y, x = np.mgrid[0:h, 0:w]
    return ((7 * y + 3 * x * x) % 11) / 10.0


def road_mask(h, w):
    """Removed where (7y + 5x) mod 3 == 0, plus a solid 2x3 block at rows 2-3, cols 1-3."""
    y, x = np.mgrid[0:h, 0:w]
    m = ((7 * y + 5 * x) % 3) == 0
    m[2:4, 1:4] = True
    return m


def impute(img, removed):
    h, w = img.shape
    idx = -np.ones((h, w), dtype=int)
    cells = list(zip(*np.nonzero(removed)))
    for n, (y, x) in enumerate(cells):
        idx[y, x] = n
    a = np.zeros((len(cells), len(cells)))
    b = np.zeros(len(cells))
    for n, (y, x) in enumerate(cells):
        for oy in (-1, 0, 1):
            for ox in (-1, 0, 1):
                if oy == 0 and ox == 0:
                    continue
                qy, qx = y + oy, x + ox
                if not (0 <= qy < h and 0 <= qx < w):
                    continue
                wt = 1.0 / 6.0 if (oy == 0 or ox == 0) else 1.0 / 12.0
                a[n, n] += wt
                if removed[qy, qx]:
                    a[n, idx[qy, qx]] -= wt
                else:
                    b[n] += wt * img[qy, qx]
    dense = np.linalg.solve(a, b)
    sparse = scipy.sparse.linalg.spsolve(scipy.sparse.csc_matrix(a), b)
    assert np.max(np.abs(dense - sparse)) < 1e-12
    out = img.copy()
    for n, (y, x) in enumerate(cells):
        out[y, x] = dense[n]
    return out


def ssim_maps(h, w):
    """The two maps of the C++ SSIM test: a = sin(0.7y) + cos(0.45x), b = a + 0.3 cos(1.3x + 0.2y^2)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    a = np.sin(0.7 * y) + np.cos(0.45 * x)
    b = a + 0.3 * np.cos(1.3 * x + 0.2 * y * y)
    return a, b


def main():
    np.set_printoptions(precision=17)
    h, w = 6, 7
    img, removed = road_image(h, w), road_mask(h, w)
    out = impute(img, removed)
    print("ROAD 6x7, removed pixels in raster order (p = y*7 + x: value):")
    for y in range(h):
        for x in range(w):
            if removed[y, x]:
                print(f"  {{{y * w + x}, {out[y, x]:.17g}}},")

    a, b = ssim_maps(9, 10)
    print("SSIM 9x10, scikit-image defaults (win 7, data_range 2.5):",
          f"{structural_similarity(a, b, win_size=7, data_range=2.5):.17g}")
    a, b = ssim_maps(12, 13)
    print("SSIM 12x13, Gaussian sigma 1.5, population covariance (data_range 2.5):",
          f"{structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=2.5):.17g}")
    print("SSIM 12x13, Gaussian sigma 1.5, sample covariance (data_range 2.5):",
          f"{structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=True, data_range=2.5):.17g}")


if __name__ == "__main__":
    main()
