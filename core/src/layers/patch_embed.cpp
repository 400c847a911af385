// patch_embed.cpp — cutting the image into patch rows (im2col) and its adjoint (col2im), and the
// relevance rules that take LRP from the patch embedding to the pixels (z^B, ε).
//
// The patch embedding itself is a linear layer over these rows (a stride-p convolution with a
// p×p kernel is exactly that); patches are taken row-major over the (H/p)×(W/p) grid, each
// flattened in (C, p, p) order to match the (d, C, p, p) checkpoint weight.
#include "vitlens/tensor/gemm.h"
#include "vitlens/tensor/tiny.h"
#include "vitlens/layers/layers.h"

namespace vitlens {

void im2col(Mat& patches, const Image& x, int p) {
  const int gh = x.h / p, gw = x.w / p;
  patches.resize(gh * gw, x.c * p * p);
  for (int gy = 0; gy < gh; ++gy)
    for (int gx = 0; gx < gw; ++gx) {
      float* row = patches.row(gy * gw + gx).data();
      for (int c = 0; c < x.c; ++c)
        for (int py = 0; py < p; ++py) {
          const float* src = &x.data[(size_t(c) * x.h + size_t(gy * p + py)) * x.w + size_t(gx * p)];
          for (int px = 0; px < p; ++px) *row++ = src[px];
        }
    }
}

void col2im(Image& dx, const Mat& dpatches, int c, int h, int w, int p) {
  dx = Image(c, h, w);
  const int gw = w / p, gh = h / p;
  for (int gy = 0; gy < gh; ++gy)
    for (int gx = 0; gx < gw; ++gx) {
      const float* row = dpatches.row(gy * gw + gx).data();
      for (int ch = 0; ch < c; ++ch)
        for (int py = 0; py < p; ++py) {
          float* dst = &dx.data[(size_t(ch) * h + size_t(gy * p + py)) * w + size_t(gx * p)];
          for (int px = 0; px < p; ++px) dst[px] += *row++;
        }
    }
}

void patch_embed_relevance(MatD& pixel_map, const MatD& r, const MatD& patches, const MatD& embed,
                           const Mat& W, const Vec& b, PatchRule rule, int c, int h, int w,
                           int patch, LrpScratch& s) {
  const Eigen::Index cpp = W.cols();
  MatD r_patches;  // (P, C·p·p)
  if (rule == PatchRule::epsilon) {
    linear_relevance(r_patches, r, patches, embed, W, b, LinearRule::epsilon, s);
  } else {
    // z^B (Montavon et al. 2017), L and H the min and max of the normalised image, bias ignored:
    //   Z = x·Wᵀ − L·ΣW⁺ − H·ΣW⁻ + 1e-9, S = R/Z, R = x⊙(S·W) − L·(S·W⁺) − H·(S·W⁻),
    // with x·Wᵀ = embed − b and S·W⁻ = S·W − S·W⁺.
    const double lo = patches.minCoeff(), hi = patches.maxCoeff();
    s.w.resize(W.rows(), 2 * cpp);  // [W | W⁺]
    s.w.leftCols(cpp) = W;
    s.w.rightCols(cpp) = W.cwiseMax(0.0f);
    const VecD pos_sum = s.w.rightCols(cpp).cast<double>().rowwise().sum();           // (d) ΣW⁺
    const VecD neg_sum = W.cast<double>().rowwise().sum() - pos_sum;                   // (d) ΣW⁻
    s.z = embed;
    s.z.rowwise() -= (b.cast<double>() + lo * pos_sum + hi * neg_sum).transpose();
    s.z.array() += 1e-9;
    s.s = r.cwiseQuotient(s.z);
    s.a.resize(s.s.rows(), s.s.cols());  // S in float, below 2⁻⁶⁴ 0 (tensor/tiny.h)
    const double* sd = s.s.data();
    float* ad = s.a.data();
    for (Eigen::Index j = 0; j < s.s.size(); ++j) ad[j] = to_float_flushed(sd[j]);
    s.p.resize(r.rows(), 2 * cpp);
    gemm_nn(s.p.data(), s.a.data(), s.w.data(), int(r.rows()), int(2 * cpp), int(W.rows()), int(W.rows()),
            int(2 * cpp), int(2 * cpp), 1.0f, 0.0f);  // [S·W | S·W⁺]
    s.t = s.p.cast<double>();
    r_patches = patches.cwiseProduct(s.t.leftCols(cpp)) - lo * s.t.rightCols(cpp) -
                hi * (s.t.leftCols(cpp) - s.t.rightCols(cpp));
  }
  // Scatter the patch rows back to the image (col2im) and sum over channels.
  pixel_map = MatD::Zero(h, w);
  const int gw = w / patch, gh = h / patch;
  for (int gy = 0; gy < gh; ++gy)
    for (int gx = 0; gx < gw; ++gx) {
      const double* row = r_patches.row(gy * gw + gx).data();
      for (int ch = 0; ch < c; ++ch)
        for (int py = 0; py < patch; ++py)
          for (int px = 0; px < patch; ++px) pixel_map(gy * patch + py, gx * patch + px) += *row++;
    }
}

}  // namespace vitlens
