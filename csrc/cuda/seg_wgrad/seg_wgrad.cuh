// The NCHW segment-window weight gradient's planning and launch, for any segment tables (SegTables'
// layout): the segment weight-gradient family (seg_wgrad.cu) runs it on the segments of the rounded
// taps, the interpolated segment family (interp_seg.cu) on those of its taps' samples.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../common/tap_weights.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

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
// segment order (only the rows below a channel's point count are written; the tables' weights are
// not read).
template <typename scalar_t>
at::Tensor launch_seg_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                     const SegTableView& tables);

}  // namespace cuda
}  // namespace mmo1d
