// The rotating window of the segment kernels (NCHW fast path, channels_last window and stride-2
// paths): a thread owns R outputs that follow each other by one step u, so a segment of L points,
// runs of points that also follow each other by u, needs R + L - 1 source values, each read once
// into a window of R registers that rotates as the walk advances.
#pragma once

#include <type_traits>

namespace mmo1d {
namespace cuda {

// f(std::integral_constant<int, I>) for I = B, ..., E - 1, in order.
template <int B, int E, typename F>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (B < E) {
    f(std::integral_constant<int, B>{});
    static_for<B + 1, E>(f);
  }
}

// Walks a segment of L points whose source values lie at src + k * ustep (k < R + L - 1);
// load(p, v) reads the value at p into the window register v (a value or an array of channels).
// For point l, after its new value is in the window, use(l, i) runs with the window rotated by the
// compile-time i (decltype(i)::value): v[(i + r) % R] is output r's value of that point.
// SPLIT: whole groups of R points without a test per point, then the last L % R; else a test per
// point (fewer registers).
template <int R, bool SPLIT, typename P, typename Value, typename Load, typename Use>
__device__ __forceinline__ void walk_segment(const P* src, int ustep, int L, Value (&v)[R], Load load, Use use) {
#pragma unroll
  for (int k = 0; k < R - 1; ++k) load(src + k * ustep, v[k]);
  const P* sp = src + (R - 1) * ustep;
  auto point = [&](int l, auto i) {
    constexpr int I = decltype(i)::value;
    load(sp, v[(I + R - 1) % R]);
    sp += ustep;
    use(l, i);
  };
  if constexpr (SPLIT) {
    int l0 = 0;
    for (; l0 + R <= L; l0 += R) static_for<0, R>([&](auto i) { point(l0 + decltype(i)::value, i); });
    static_for<0, R - 1>([&](auto i) {
      if (l0 + decltype(i)::value < L) point(l0 + decltype(i)::value, i);
    });
  } else {
    for (int l0 = 0; l0 < L; l0 += R) {
      static_for<0, R>([&](auto i) {
        if (l0 + decltype(i)::value < L) point(l0 + decltype(i)::value, i);
      });
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
