// The channels_last window kernel's planning and launch, for any segment tables (per channel the
// axis, the runs of points along it and their weights; SegTables' layout): the window family
// (win_gather.cu) runs it on the segments of the rounded taps, the interpolated window family
// (interp_win.cu) on those of its taps' samples.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../common/tap_weights.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the gather over tables of `rows` points (and segments) per channel whose halos are those
// of a line of halo_k taps (|dh|, |dw| <= halo_k / 2), with `soft` bytes of shared memory per block
// (tables included) as the tile chooser's target; classes: 1 (stride-1 gathers) or 4 (the stride-2
// input gradient per parity class); one_list: tables whose blocks mostly share one list (the
// kernel's ONE_LIST). False when no tile fits or the launch exceeds the device's limits.
template <typename scalar_t>
bool plan_win_gather(const Problem& p, int rows, int halo_k, int64_t soft, int classes, Plan* plan,
                     bool one_list = false);

// a.out = the gather of a.src (+ a.bias) over the segment tables (entries of plan.fg.K rows; with 4
// classes, four sets of C entries), with their merged weights tables.segw or, when that is null,
// those of taps.
template <typename scalar_t>
void launch_win_gather(const Plan& plan, const Args<scalar_t>& a, const SegTableView& tables,
                       const TapWeights<scalar_t>& taps = {});

}  // namespace cuda
}  // namespace mmo1d
