// The channels_last vector gather's planning and launch, for any table of points (offsets, merged
// weights, point counts, halos and same-as-previous flags per channel): the vector family
// (vec_gather.cu) runs it on the tables of the rounded taps, the interpolated vector family
// (interp_vec.cu) on the points of its taps' samples.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the stride-1 gather (forward or input gradient) over tables of `rows` points per channel
// whose halos are those of a line of halo_k taps (|dh|, |dw| <= halo_k / 2); false when no tile
// fits or the launch exceeds the device's limits.
template <typename scalar_t>
bool plan_vec_gather(const Problem& p, int rows, int halo_k, Plan* plan);

// a.out = sum_j w_j * a.src at offset a.sign * off_j (+ a.bias), tables of plan.fg.K rows.
template <typename scalar_t>
void launch_vec_gather(const Plan& plan, const Args<scalar_t>& a, const PointTableView<float>& tables);

}  // namespace cuda
}  // namespace mmo1d
