// The merged weights of a gather's block taken straight from the (C, K) weight and the segment
// tables' tap -> slot map (SegTables::tap_sp), for tables built without merged weights: one kernel
// launch and one allocation fewer per call than merging them beforehand (merge_weights_kernel).
// The window gather (channels_last) and the NCHW segment gather stage them this way.
#pragma once

#include <cstdint>

namespace mmo1d {
namespace cuda {

// The weights of a gather whose tables carry no merged weights: the (C, K) weight w and the tables'
// tap -> slot map, merged by each block (one class of rounded taps).
template <typename scalar_t>
struct TapWeights {
  const scalar_t* w = nullptr;
  const int* tap_sp = nullptr;
  bool residual = false;
};

// sw[slot][channel] for the block's CB channels [c0, c0 + CB): the sum, in tap order, of the
// weights of the taps at that slot's point (+1 at the centre tap in the residual form), as
// merge_weights_kernel sums them. Only for one class of rounded taps: there the table builder opens
// a new point whenever a tap's offset differs from the previous tap's, so the taps of a point are
// consecutive and the first of them sums the run. Slots without a point are not written (never
// read).
template <typename scalar_t, int CB>
__device__ __forceinline__ void stage_merged_weights(float* __restrict__ sw, const scalar_t* __restrict__ w,
                                                     const int* __restrict__ tap_sp, int c0, int K, bool residual) {
  for (int e = threadIdx.x; e < CB * K; e += blockDim.x) {
    const int k = e / K, t = e - k * K;
    const int* map = tap_sp + int64_t(c0 + k) * K;
    const int j = map[t];
    if (j < 0 || (t > 0 && map[t - 1] == j)) continue;
    const scalar_t* wc = w + int64_t(c0 + k) * K;
    float v = 0.0f;
    for (int u = t; u < K && map[u] == j; ++u)
      v += static_cast<float>(wc[u]) + ((residual && u == K / 2) ? 1.0f : 0.0f);
    sw[j * CB + k] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
