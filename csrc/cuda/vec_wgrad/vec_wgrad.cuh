// The channels_last vector weight gradient's planning and launch, for any table of points (offsets,
// point counts, halos and same-as-previous flags per channel): the vector weight-gradient family
// (vec_wgrad.cu) runs it on the tables of the rounded taps, the interpolated vector family
// (interp_vec.cu) on the points of its taps' samples.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the weight-gradient partial sums (classes: 1 at stride 1, 4 parity classes at stride 2;
// the plane is dy's), `points` table rows per block: all of them (rows), or at stride 1 a slice
// (the blocks of the slices of a tile run side by side). `across`: planes of more than 128 pixels
// that one block covers may take the points across the pixel slots (slices of 8, 16 or 32 points),
// whose partial sums are written for every point of a channel.
template <typename scalar_t>
bool plan_vec_wgrad(const Problem& p, int rows, int halo_k, int classes, int points, Plan* plan, bool across = false);

// The partial sums (classes x C, plan.parts, plan.fg.K) floats of dy * x at each point; with
// bpartial (C x plan.parts floats, allocated here) also those of dy, the bias gradient's. skip (one int
// per block of channels, on the device), when not null: the blocks whose sums another kernel gives,
// left out (their partial sums are not written).
template <typename scalar_t>
at::Tensor launch_vec_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                     const PointTableView<float>& tables, at::Tensor* bpartial,
                                     const int* skip = nullptr);

}  // namespace cuda
}  // namespace mmo1d
