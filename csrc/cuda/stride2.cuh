// The stride-2 channels_last polyphase forward's planning and launch, for any per-class segment
// tables (SegTables' layout, entries cls * C + c): the stride-2 family (stride2.cu) runs it on the
// classes of the rounded taps, the interpolated stride-2 family (interp_s2.cu) on those of its taps'
// samples.
#pragma once

#include <ATen/ATen.h>

#include "plan.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// Plan of the forward over class tables of `rows` segments per entry whose halos are those of a
// line of halo_k taps; false when not even R x R outputs fit or the launch exceeds the device's
// limits.
template <typename scalar_t>
bool plan_s2_gather(const Problem& p, int rows, int halo_k, Plan* plan);

// out = the stride-2 gather of src over the class tables.
template <typename scalar_t>
void launch_s2_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                      const SegInfo* info, const int4* segs, const float* segw, const int2* halo);

}  // namespace cuda
}  // namespace mmo1d
