// The NCHW segment-window gather's and weight gradient's planning and launches, for any segment
// tables (SegTables' layout): the segment families (nchw_fast.cu) run them on the segments of the
// rounded taps, the interpolated segment family (interp_seg.cu) on those of its taps' samples.
#pragma once

#include <ATen/ATen.h>

#include "plan.cuh"
#include "tables.cuh"
#include "tap_weights.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the stride-1 gather over tables of `rows` points (and segments) per channel whose halos
// are those of a line of halo_k taps; false when no tile fits or the launch exceeds the device's
// limits.
template <typename scalar_t>
bool plan_seg_gather(const Problem& p, int rows, int halo_k, Plan* plan);

// out = the gather of src over the segment tables (C entries of plan.fg.K rows), with their merged
// weights segw or, when segw is null, those of taps.
template <typename scalar_t>
void launch_seg_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                       const SegInfo* info, const int4* segs, const float* segw, const int2* halo,
                       const TapWeights<scalar_t>& taps = {});

// The NCHW weight gradient's kernel instances (Plan::variant): a column of point sums per thread;
// one per pair of lanes (seg_wgrad_nchw_kernel's SHARE = 2); a thread walking two tasks at once
// (TASKS = 2).
constexpr int kSegWgradColumns = 1, kSegWgradSharedColumns = 2, kSegWgradTwoTasks = 3;

// Plan of the stride-1 weight-gradient partial sums over tables of `rows` points per channel,
// `points` of them (a slice) per block, with the given instance (kSegWgradTwoTasks falls back to
// kSegWgradColumns where the tile has a single round of tasks).
template <typename scalar_t>
bool plan_seg_wgrad(const Problem& p, int rows, int halo_k, int points, Plan* plan, int variant = kSegWgradColumns);

// The partial sums (C, plan.parts, plan.fg.K) floats of dy * x at each point, in the tables'
// segment order (only the rows below a channel's point count are written).
template <typename scalar_t>
at::Tensor launch_seg_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, const SegInfo* info,
                                     const int4* segs, const int2* halo);

}  // namespace cuda
}  // namespace mmo1d
