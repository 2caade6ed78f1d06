// The kernel paths of the CUDA op, the problem a call poses and the launch plan of the path that
// serves it. Each family (general.cu, nchw_fast.cu, nhwc_vec.cu, nhwc_window.cu, stride2.cu) plans
// on the host alone -- its domain (dtype, layout, stride, K, channel alignment) and the current
// device's limits for its kernels -- and runs a plan; dispatch.cu picks the path.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "geometry.cuh"
#include "launch.cuh"

namespace mmo1d {
namespace cuda {

enum class Pass { kForward, kInputGrad, kWeightGrad };

enum class Path {
  kGatherNchw,           // general gather, NCHW (also for channels_last tensors through NCHW copies)
  kGatherNhwc,           // general gather, channels_last
  kSegNchw,              // NCHW fast path, stride 1
  kVecNhwc,              // channels_last vector path, stride 1
  kWinNhwc,              // channels_last window path, stride 1
  kWinClassesNhwc,       // channels_last window path, stride-2 input gradient per parity class
  kS2Nhwc,               // channels_last polyphase stride-2 forward
  kWgradNchw,            // general weight gradient, NCHW (also through NCHW copies)
  kWgradNhwc,            // general weight gradient, channels_last
  kSegWgradNchw,         // NCHW fast-path weight gradient, stride 1
  kVecWgradNhwc,         // channels_last weight gradient, stride 1
  kVecWgradClassesNhwc,  // channels_last weight gradient, stride 2 per parity class
};

const char* path_name(Path path);

// A call: the input x (N, C, H, W), K, the stride, the layout and whether every tensor the
// kernels stream is 16-byte aligned.
struct Problem {
  int64_t N, C, H, W;
  int K, stride;
  bool nhwc, aligned;
  int64_t x_bytes;
};

struct Plan {
  Path path = Path::kGatherNchw;
  GatherGeometry gg{};  // general paths
  FastGeometry fg{};    // fast paths
  LaunchShape launch;
  int64_t tile = 0;          // bytes of the staged tile (kernels that size their sub-tiles from it)
  int variant = 0;           // kernel instance (outputs per thread, parity classes)
  bool via_nchw = false;     // channels_last tensors through NCHW copies
  int chunk = 0, parts = 0;  // weight gradients: images per block, partial sums per channel
};

// ---- Families: plan (false: outside the family's domain or the device's limits) and run ----
// Gathers: forward (src = x, sign +1) and input gradient (src = dy, sign -1).
template <typename scalar_t>
bool plan_general_gather(const Problem& p, Pass pass, Plan* plan);
template <typename scalar_t>
void run_general_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                        const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual);
template <typename scalar_t>
bool plan_general_wgrad(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_general_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw,
                       const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding);

template <typename scalar_t>
bool plan_seg_gather(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_seg_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                    const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual, int sign);
template <typename scalar_t>
bool plan_seg_wgrad(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_seg_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
                   const at::Tensor& weight, bool floor_rounding);

template <typename scalar_t>
bool plan_vec_gather(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_vec_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                    const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual, int sign);
template <typename scalar_t>
bool plan_vec_wgrad(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_vec_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
                   const at::Tensor& weight, bool floor_rounding, at::Tensor* db);

template <typename scalar_t>
bool plan_win_gather(const Problem& p, Pass pass, Plan* plan);
template <typename scalar_t>
void run_win_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                    const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual, int sign);

template <typename scalar_t>
bool plan_s2_gather(const Problem& p, Plan* plan);
template <typename scalar_t>
void run_s2_gather(const Plan& plan, const at::Tensor& x, at::Tensor& out, const scalar_t* bias,
                   const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual);

// ---- The dispatcher (dispatch.cu): the first path, in order of speed, whose plan succeeds ----
template <typename scalar_t>
Plan plan_call(const Problem& p, Pass pass);

// Runs a plan of plan_call: a gather (forward: src = x, sign +1; input gradient: src = dy, sign
// -1) or a weight gradient; with db (C values, dw's dtype) also the bias gradient, the sum of dy over
// N, H and W (summed inside the channels_last weight-gradient kernels, by ATen for the other paths).
template <typename scalar_t>
void run_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const at::Tensor& theta,
                const at::Tensor& weight, bool floor_rounding, bool residual, int sign);
template <typename scalar_t>
void run_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
               const at::Tensor& weight, bool floor_rounding, at::Tensor* db = nullptr);

// Whether C and the data pointers suit the 32-bytes-of-channels vector loads.
template <typename scalar_t>
bool channels_vectorizable(int64_t C, std::initializer_list<const at::Tensor*> ts) {
  if (C % (32 / int64_t(sizeof(scalar_t))) != 0) return false;
  for (const at::Tensor* x : ts) {
    if ((reinterpret_cast<uintptr_t>(x->data_ptr()) & 15) != 0) return false;
  }
  return true;
}

}  // namespace cuda
}  // namespace mmo1d
