// The interpolated discretisations of an oriented 1D kernel ('bilinear', 'gaussian'): the pixels
// each tap reads, their coefficients and the coefficients' derivatives in the angle. Shared by the
// CPU and CUDA kernels (plain PyTorch oracle: mmo1d/ops/interp_reference.py).
//
// Tap t (d = t - K/2) of output pixel (p, q) sits at (p*s + a, q*s + b) with a = -d sin(theta),
// b = d cos(theta). The output pixel is an integer, so which pixels a tap reads, relative to it,
// and with what coefficients, is the same at every output pixel: a tap is M samples
// (dh, dw, coef, dcoef/dtheta), and the op is a depthwise convolution with a sparse kernel.
// - bilinear: the floor-based neighbours (floor(a) + {0, 1}, floor(b) + {0, 1}) with the bilinear
//   weights (grid_sample with align_corners=True); M = 4. A neighbour of weight 0 (a or b integer)
//   is still a sample: its coefficient's derivative is not 0.
// - gaussian: the pixels within `radius` of (a, b), weighted by exp(-dist^2 / (2 sigma^2)) and
//   normalised to sum 1 over the tap; candidates floor(a) - r .. floor(a) + r + 1 per axis
//   (r = ceil(radius)), M = (2r + 2)^2, those outside the band with coefficient and derivative 0.
//   The exponentials are taken relative to the nearest candidate's, which leaves the normalised
//   coefficients and their derivatives unchanged and keeps them finite at any sigma.
// Positions are relative to the output pixel (exact at every image size); T is float (float32
// angles, sine and cosine as in the rounded op) or double (float64 calls).
#pragma once

#include <cmath>

#include "oriented_dwconv1d.h"
#include "tap_rule.h"

namespace mmo1d {

// Sine and cosine of an angle in the kernels' precision (float: as the rounded op; a non-finite
// angle has sine = cosine = 0, so every tap sits at the centre and the angle's gradient is 0).
MMO1D_HOST_DEVICE void interp_sincos(float theta, float* s, float* c) {
  angle_sincos(theta, s, c);
}
MMO1D_HOST_DEVICE void interp_sincos(double theta, double* s, double* c) {
  if (!(fabs(theta) <= 1.7976931348623157e308)) {
    *s = 0.0;
    *c = 0.0;
    return;
  }
  *s = sin(theta);
  *c = cos(theta);
}

// The M samples of the tap at distance d from the centre, for an angle of sine s and cosine c:
// offsets (dh, dw), coefficients and their derivatives in the angle. Returns M.
template <typename T>
MMO1D_HOST_DEVICE int tap_samples(const TapRule& rule, T s, T c, int d, int* dh, int* dw, T* coef, T* dcoef) {
  const T dd = static_cast<T>(d);
  const T a = -dd * s, b = dd * c;     // position relative to the output pixel
  const T da = -dd * c, db = -dd * s;  // their derivatives in the angle
  const T fa = floor(a), fb = floor(b);
  const int h0 = static_cast<int>(fa), w0 = static_cast<int>(fb);
  if (rule.mode == TapMode::kBilinear) {
    const T fh = a - fa, fw = b - fb;
    for (int m = 0; m < 4; ++m) {
      const int di = m >> 1, dj = m & 1;
      const T ch = di ? fh : T(1) - fh, cw = dj ? fw : T(1) - fw;
      dh[m] = h0 + di;
      dw[m] = w0 + dj;
      coef[m] = ch * cw;
      dcoef[m] = (di ? da : -da) * cw + ch * (dj ? db : -db);
    }
    return 4;
  }
  const int r = rule.reach, side = 2 * r + 2, M = side * side;
  const T r2 = static_cast<T>(rule.radius * rule.radius);
  const T inv2s2 = static_cast<T>(0.5 / (rule.sigma * rule.sigma));
  // The nearest candidate's squared distance (the band always holds it: it is within sqrt(2)/2).
  const T nh = a - fa < T(0.5) ? fa : fa + T(1), nw = b - fb < T(0.5) ? fb : fb + T(1);
  const T near2 = (nh - a) * (nh - a) + (nw - b) * (nw - b);
  T sum = T(0), dsum = T(0);
  for (int m = 0; m < M; ++m) {
    const int i = h0 - r + m / side, j = w0 - r + m % side;
    const T eh = static_cast<T>(i) - a, ew = static_cast<T>(j) - b;
    const T dist2 = eh * eh + ew * ew;
    dh[m] = i;
    dw[m] = j;
    if (dist2 <= r2) {
      const T g = exp(-(dist2 - near2) * inv2s2);
      // d/dtheta of exp(-dist2 / (2 sigma^2)), up to the common factor (which normalisation cancels).
      const T dg = g * T(2) * inv2s2 * (eh * da + ew * db);
      coef[m] = g;
      dcoef[m] = dg;
      sum += g;
      dsum += dg;
    } else {
      coef[m] = T(0);
      dcoef[m] = T(0);
    }
  }
  for (int m = 0; m < M; ++m) {
    const T k = coef[m] / sum;
    dcoef[m] = (dcoef[m] - k * dsum) / sum;
    coef[m] = k;
  }
  return M;
}

// The largest number of samples per tap of any rule (gaussian radius 8).
constexpr int kMaxInterpSamples = (2 * 8 + 2) * (2 * 8 + 2);

}  // namespace mmo1d
