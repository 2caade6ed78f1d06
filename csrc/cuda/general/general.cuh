// The general kernels' planning and launches, for any table of points (offsets, merged weights,
// point counts and halos per channel): the general family (general.cu) runs them on the tables of
// the rounded taps, the interpolated family (interp.cu) on the samples of its taps.
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../plan.cuh"

namespace mmo1d {
namespace cuda {

// Geometry of the forward gather (also the weight gradient's) and of the input gradient, which
// gathers from dy upsampled by the stride with negated offsets; `rows` points per channel in the
// tables, within `halo` of the output pixel.
GatherGeometry gather_geometry(const Problem& p, Pass pass, int rows, int halo);

// Plans of a gather or of the weight-gradient partial sums in one layout (nhwc: channels_last);
// false when the tile of one output does not fit, or the launch exceeds the device's limits.
template <typename scalar_t>
bool plan_gather_layout(const Problem& p, GatherGeometry g, bool nhwc, Plan* plan);
template <typename scalar_t>
bool plan_wgrad_layout(const Problem& p, GatherGeometry g, bool nhwc, Plan* plan);

// The gather of a plan: out = sum_j w_j * src at offset sign * off_j (+ bias), over the tables'
// first npts points of each channel.
template <typename scalar_t, typename acc_t>
void launch_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                   const PointTableView<acc_t>& tables);

// The weight-gradient partial sums of a plan: (C, plan.parts, rows) values of acc_t, the sums over
// parts of the images and pixels of dy * x at each point.
template <typename scalar_t, typename acc_t>
at::Tensor launch_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                 const PointTableView<acc_t>& tables);

}  // namespace cuda
}  // namespace mmo1d
