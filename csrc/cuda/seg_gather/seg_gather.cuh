// The NCHW segment-window gather's planning and launch, for any segment tables (SegTables' layout):
// the segment family (seg_gather.cu) runs it on the segments of the rounded taps, the interpolated
// segment family (interp_seg.cu) on those of its taps' samples.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../common/tap_weights.cuh"
#include "../common/tiling.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// Shared memory of a segment-window block: tables and the tile of the worst line (halos of halo_k
// taps).
inline int64_t seg_smem(const FastGeometry& g, int64_t fixed, int halo_k) {
  return fixed + max_over_halos(halo_k, [&](int ph, int pw) { return seg_tile_bytes(g.TH, g.TW, ph, pw); });
}

// Plan of the stride-1 gather over tables of `rows` points (and segments) per channel whose halos
// are those of a line of halo_k taps; false when no tile fits or the launch exceeds the device's
// limits.
template <typename scalar_t>
bool plan_seg_gather(const Problem& p, int rows, int halo_k, Plan* plan);

// a.out = the gather of a.src (+ a.bias) over the segment tables (C entries of plan.fg.K rows), with
// their merged weights tables.segw or, when that is null, those of taps.
template <typename scalar_t>
void launch_seg_gather(const Plan& plan, const Args<scalar_t>& a, const SegTableView& tables,
                       const TapWeights<scalar_t>& taps = {});

}  // namespace cuda
}  // namespace mmo1d
