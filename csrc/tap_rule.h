// The tap rule of the oriented convolution: how tap t (d = t - K/2) of output pixel (p, q), at the
// position (p*s - d sin(theta), q*s + d cos(theta)), reads the input.
// - 'trunc', 'floor': rounded to one pixel, toward zero (the released weights) or down (the paper);
// - 'bilinear': the four neighbours, weighted as grid_sample with align_corners=True (interp.h);
// - 'gaussian': the pixels within `radius` of the position, weighted by a normalised gaussian of
//   width `sigma` (interp.h).
// The ops take the rule as (rounding, sigma, radius); parse_tap_rule turns them into a TapRule once,
// at the entry of every device, and everything below takes that value.
#pragma once

#include <cmath>
#include <string>

#include "common.h"

namespace mmo1d {

enum class TapMode : int { kTrunc = 0, kFloor = 1, kBilinear = 2, kGaussian = 3 };

struct TapRule {
  TapMode mode;
  double sigma, radius;  // the gaussian band (ignored by the other modes)
  int reach;             // ceil(radius) (gaussian), 0 (the other modes)

  // Whether the taps are interpolated (their angles then have a gradient).
  MMO1D_HOST_DEVICE bool interpolated() const {
    return mode == TapMode::kBilinear || mode == TapMode::kGaussian;
  }
  // Samples per tap of an interpolated rule.
  MMO1D_HOST_DEVICE int samples() const {
    return mode == TapMode::kBilinear ? 4 : (2 * reach + 2) * (2 * reach + 2);
  }
};

// The largest gaussian radius: the band of a tap spans 2 * reach + 2 candidates per axis, so a radius
// that is not small would make every tap read thousands of pixels.
constexpr double kMaxGaussianRadius = 8.0;

// The rule of (rounding, sigma, radius); errors name the problem and the accepted values. Mirrors
// mmo1d.ops.tap_rule.check_tap_rule.
inline TapRule parse_tap_rule(c10::string_view rounding, double sigma, double radius) {
  if (rounding == "trunc") return {TapMode::kTrunc, sigma, radius, 0};
  if (rounding == "floor") return {TapMode::kFloor, sigma, radius, 0};
  if (rounding == "bilinear") return {TapMode::kBilinear, sigma, radius, 0};
  TORCH_CHECK(rounding == "gaussian",
              "oriented_dwconv1d: rounding must be 'trunc', 'floor', 'bilinear' or 'gaussian', got '",
              std::string(rounding), "'");
  TORCH_CHECK(sigma > 0 && std::isfinite(sigma) && radius >= 1 && std::isfinite(radius),
              "oriented_dwconv1d: the gaussian band needs 0 < sigma and 1 <= radius (finite), got sigma=",
              std::to_string(sigma), ", radius=", std::to_string(radius));
  TORCH_CHECK(radius <= kMaxGaussianRadius, "oriented_dwconv1d: the gaussian radius is limited to 8 pixels, got ",
              std::to_string(radius));
  // With a whole-number radius r the taps at |d| = r have the output pixel exactly on their band's
  // edge for every angle: whether it is read depends on the rounding of the position.
  TORCH_CHECK(radius != std::floor(radius), "oriented_dwconv1d: the gaussian radius must not be a whole number, got ",
              std::to_string(radius), ": the taps at that distance from the centre then have the output pixel ",
              "exactly on their band's edge for every angle, where the result jumps");
  return {TapMode::kGaussian, sigma, radius, static_cast<int>(std::ceil(radius))};
}

}  // namespace mmo1d
