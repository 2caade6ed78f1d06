// The rotating window of the segment kernels (NCHW fast path, channels_last window and stride-2
// paths): a thread owns OUTPUTS outputs that follow each other by one step u, so a segment of L
// points, runs of points that also follow each other by u, needs OUTPUTS + L - 1 source values, each
// read once into a window of OUTPUTS registers that rotates as the walk advances.
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

// f(std::integral_constant<int, I>) for I = B, ..., min(B + n, E) - 1, in order, each behind a branch on
// n (the points left of a segment: the same for the eight slots of a warp that walk one list), so that a
// short tail issues its own points only, not the predicated ones past it.
template <int B, int E, typename F>
__device__ __forceinline__ void tail_points(int n, F&& f) {
  if constexpr (B < E) {
    if (n > B) {
      f(std::integral_constant<int, B>{});
      tail_points<B + 1, E>(n, f);
    }
  }
}

// Walks a segment of L points whose source values lie at src + k * axis_step
// (k < OUTPUTS + L - 1); load(p, v) reads the value at p into the window register v (a value or an
// array of channels). For point l, after its new value is in the window, use(l, i) runs with the
// window rotated by the compile-time i (decltype(i)::value): v[(i + r) % OUTPUTS] is output r's
// value of that point. SPLIT_TAIL: whole groups of OUTPUTS points without a test per point, then the
// last L % OUTPUTS (behind branches: tail_points; predicated for OUTPUTS > 4); else a test per point
// (fewer registers).
template <int OUTPUTS, bool SPLIT_TAIL, typename P, typename Value, typename Load, typename Use>
__device__ __forceinline__ void walk_segment(const P* src, int axis_step, int L, Value (&v)[OUTPUTS], Load load,
                                             Use use) {
#pragma unroll
  for (int k = 0; k < OUTPUTS - 1; ++k) load(src + k * axis_step, v[k]);
  const P* sp = src + (OUTPUTS - 1) * axis_step;
  auto point = [&](int l, auto i) {
    constexpr int I = decltype(i)::value;
    load(sp, v[(I + OUTPUTS - 1) % OUTPUTS]);
    sp += axis_step;
    use(l, i);
  };
  if constexpr (SPLIT_TAIL) {
    int l0 = 0;
    for (; l0 + OUTPUTS <= L; l0 += OUTPUTS) static_for<0, OUTPUTS>([&](auto i) { point(l0 + decltype(i)::value, i); });
    if constexpr (OUTPUTS <= 4) {
      tail_points<0, OUTPUTS - 1>(L - l0, [&](auto i) { point(l0 + decltype(i)::value, i); });
    } else {  // float32's 7-point tail spilled behind branches
      static_for<0, OUTPUTS - 1>([&](auto i) {
        if (l0 + decltype(i)::value < L) point(l0 + decltype(i)::value, i);
      });
    }
  } else {
    for (int l0 = 0; l0 < L; l0 += OUTPUTS) {
      static_for<0, OUTPUTS>([&](auto i) {
        if (l0 + decltype(i)::value < L) point(l0 + decltype(i)::value, i);
      });
    }
  }
}

}  // namespace cuda
}  // namespace mmo1d
