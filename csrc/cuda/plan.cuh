// Kernel families of the CUDA op: the problem a call poses, the arguments it runs with, and the
// launch plan of the family that serves it.
//
// A family is a struct declared with MMO1D_FAMILY (families.cuh): the path names its plans carry,
// whether it takes float64, whether its run also gives the bias gradient (summed in its
// weight-gradient kernels, or as the family chooses),
// whether it serves the interpolated tap rules ('bilinear', 'gaussian') or the rounded ones, and
//   template <typename T> static bool plan(const Problem&, Pass, Plan*);   // false: not its call
//   template <typename T> static void run(const Plan&, const Args<T>&);
// Its plan states its whole domain (pass, dtype, layout, stride, K, channel alignment, angles) and
// checks its launch against the current device's limits; its launcher (one .cu file) defines both
// and instantiates them with MMO1D_INSTANTIATE_FAMILY. dispatch.cpp runs the first family of the
// list in families.cuh whose plan succeeds.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../oriented_dwconv1d.h"
#include "../tap_rule.h"
#include "common/common.cuh"
#include "common/geometry.cuh"
#include "common/launch.cuh"

namespace mmo1d {
namespace cuda {

enum class Pass { kForward, kInputGrad, kWeightGrad };

// A call: the input x (N, C, H, W), K, the stride, the layout, whether every tensor the kernels
// stream is 16-byte aligned, the angles (theta on the device, float) and the tap rule.
struct Problem {
  int64_t N, C, H, W;
  int K, stride;
  bool nhwc, aligned;
  int64_t x_bytes;
  const at::Tensor* theta;
  TapRule rule;
};

// The geometry of a problem's input planes, tables of `rows` rows (no tile yet).
inline FastGeometry plane_geometry(const Problem& p, int rows) {
  return FastGeometry{static_cast<int>(p.C), rows, static_cast<int>(p.H), static_cast<int>(p.W), 0, 0, 0, 0};
}

// The geometry of a problem's output planes (the planes at the stride), tables of `rows` rows (no
// tile yet).
inline FastGeometry output_geometry(const Problem& p, int rows) {
  return FastGeometry{static_cast<int>(p.C),
                      rows,
                      static_cast<int>(out_size(p.H, p.stride)),
                      static_cast<int>(out_size(p.W, p.stride)),
                      0,
                      0,
                      0,
                      0};
}

struct MmaWgradShape;

struct Plan {
  int family = -1;        // index in the family list (families.cuh)
  const char* path = "";  // the path name, one of the family's
  GatherGeometry gg{};    // general paths
  FastGeometry fg{};      // fast paths
  LaunchShape launch;
  int64_t tile = 0;             // bytes of the staged tile (kernels that size their sub-tiles from it)
  int variant = 0;              // kernel instance (outputs per thread, layout, the NCHW weight gradient's)
  bool via_nchw = false;        // channels_last tensors through NCHW copies
  int chunk = 0, parts = 0;     // weight gradients: images per block, partial sums per channel
  int classes = 1, points = 0;  // parity classes (1 or 4); vector weight gradient: table rows per block
  int groups = 1;               // vector weight gradient: groups of warps that share out the points
  bool across = false;          // vector weight gradient: points across the pixel slots (small planes)
  bool one_list = false;        // window gathers: one staged segment list per block (ONE_LIST)
  int images = 1;               // window gathers: images per block (small planes) staged together,
  int image_groups = 1;         // ... in this many groups one after the other,
  bool table_weights = false;   // ... over the tables' merged weights (TABLE_WEIGHTS), not the taps'
  // Families that leave some blocks of channels to another family (the tensor-core weight gradients):
  // that family's plan, and their own tiles and chunks (mma_wgrad/mma_wgrad.cuh), as planned.
  std::shared_ptr<const Plan> rest;
  std::shared_ptr<const MmaWgradShape> mma;
};

// The tensors and options of one call. Gathers (forward and input gradient): out = the gather of
// src (x, sign +1, with bias; or dy, sign -1). Weight gradients: out = dw from x = src and dy, and
// db (C values, when not null) the bias gradient; for interpolated taps also dtheta (C values, in
// theta's dtype) when not null.
template <typename scalar_t>
struct Args {
  const at::Tensor& src;
  at::Tensor& out;
  const at::Tensor& theta;
  const at::Tensor& weight;
  TapRule rule;
  const scalar_t* bias = nullptr;
  int sign = 1;
  bool residual = false;
  const at::Tensor* dy = nullptr;
  at::Tensor* db = nullptr;
  at::Tensor* dtheta = nullptr;
};

#define MMO1D_FAMILY(Name, float64, fused_bias_grad, interp, ...) \
  struct Name {                                                   \
    static constexpr bool kFloat64 = float64;                     \
    static constexpr bool kFusedBiasGrad = fused_bias_grad;       \
    static constexpr bool kInterp = interp;                       \
    static constexpr const char* kPaths[] = {__VA_ARGS__};        \
    template <typename T>                                         \
    static bool plan(const Problem& p, Pass pass, Plan* plan);    \
    template <typename T>                                         \
    static void run(const Plan& plan, const Args<T>& a);          \
  };

// M(T) for each dtype of the families that accumulate in float32 (float32, float16, bfloat16), and
// for each dtype (float64 too): the explicit instantiations of the launchers' helpers.
#define MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(M) M(float) M(c10::Half) M(c10::BFloat16)
#define MMO1D_FOR_EACH_DTYPE(M) M(double) MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(M)

// A family's plan and run for one dtype, and for every dtype the family takes.
#define MMO1D_INSTANTIATE_FAMILY_T(Family, T)                 \
  template bool Family::plan<T>(const Problem&, Pass, Plan*); \
  template void Family::run<T>(const Plan&, const Args<T>&);
#define MMO1D_INSTANTIATE_FAMILY(Family)                                                        \
  static_assert(!Family::kFloat64, #Family " takes float64: use MMO1D_INSTANTIATE_FAMILY_F64"); \
  MMO1D_INSTANTIATE_FAMILY_T(Family, float)                                                     \
  MMO1D_INSTANTIATE_FAMILY_T(Family, c10::Half)                                                 \
  MMO1D_INSTANTIATE_FAMILY_T(Family, c10::BFloat16)
#define MMO1D_INSTANTIATE_FAMILY_F64(Family)    \
  MMO1D_INSTANTIATE_FAMILY_T(Family, double)    \
  MMO1D_INSTANTIATE_FAMILY_T(Family, float)     \
  MMO1D_INSTANTIATE_FAMILY_T(Family, c10::Half) \
  MMO1D_INSTANTIATE_FAMILY_T(Family, c10::BFloat16)

// ---- The dispatcher (dispatch.cpp) ----
// The plan of the first family, in the list's order, whose plan succeeds (the general family, last,
// serves every call or raises an error that names the shape and the limit).
template <typename scalar_t>
Plan plan_call(const Problem& p, Pass pass);

// Runs a plan of plan_call; with a.db, also the bias gradient (by ATen's sum where the family does
// not give it).
template <typename scalar_t>
void run_call(const Plan& plan, const Args<scalar_t>& a);

// Every path name of every family, in the list's order.
std::vector<std::string> path_names();

// Whether C and the data pointers suit the 32-bytes-of-channels vector loads.
template <typename scalar_t>
bool channels_vectorizable(int64_t C, std::initializer_list<const at::Tensor*> ts) {
  if (C % (32 / int64_t(sizeof(scalar_t))) != 0) return false;
  for (const at::Tensor* x : ts) {
    if (!aligned16(*x)) return false;
  }
  return true;
}

}  // namespace cuda
}  // namespace mmo1d
