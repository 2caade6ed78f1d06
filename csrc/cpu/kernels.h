// The CPU kernels' drivers: what the entry points (ops.cpp) call. T is float or double; pointers
// are contiguous tensors in the layout the function names (NHWC: channels_last memory); `merged`
// holds the plan's merged weights (plan.h). Every driver parallelises with at::parallel_for.
#pragma once

#include <cstdint>

#include "plan.h"

namespace mmo1d {
namespace cpu {

// y = conv(x) (+ bias) (+ x sampled at the outputs when residual), NHWC.
template <typename T>
void nhwc_forward(const T* x, const Plan& plan, const T* merged, const T* bias, T* y, const Geometry& g, bool residual);

// dx of the op, NHWC.
template <typename T>
void nhwc_backward_input(const T* dy, const Plan& plan, const T* merged, T* dx, const Geometry& g, bool residual);

// y = conv(x) (+ bias) (+ residual), NCHW.
template <typename T>
void nchw_forward(const T* x, const Plan& plan, const T* merged, const T* bias, T* y, const Geometry& g, bool residual);

// dx of the op, NCHW.
template <typename T>
void nchw_backward_input(const T* dy, const Plan& plan, const T* merged, T* dx, const Geometry& g, bool residual);

// Gradient of every merged weight (plan.merged_size values, double), NHWC or NCHW. The sums run in a
// fixed order that depends on the shapes only (not on the number of threads): per vector lane,
// partial sums of at most 64 products in T, added over the register block in T, then accumulated in
// double.
template <typename T>
void nhwc_backward_weight(const T* dy, const T* x, const Plan& plan, double* grad_merged, const Geometry& g);
template <typename T>
void nchw_backward_weight(const T* dy, const T* x, const Plan& plan, double* grad_merged, const Geometry& g);

}  // namespace cpu
}  // namespace mmo1d

// The explicit instantiations of a layout's drivers (layout: nchw or nhwc) for T, in the files that
// define them.
#define MMO1D_CPU_INSTANTIATE_GATHER(layout, T)                                                            \
  template void layout##_forward<T>(const T*, const Plan&, const T*, const T*, T*, const Geometry&, bool); \
  template void layout##_backward_input<T>(const T*, const Plan&, const T*, T*, const Geometry&, bool);
#define MMO1D_CPU_INSTANTIATE_WGRAD(layout, T) \
  template void layout##_backward_weight<T>(const T*, const T*, const Plan&, double*, const Geometry&);
