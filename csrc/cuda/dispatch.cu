// The dispatcher: for a call (a Problem and a pass) the first path, in order of speed, whose plan
// succeeds; every fast path states its domain in its plan function and checks its launch against
// the current device's limits, so a call that no fast path serves goes to the general kernels,
// never to a launch error.
#include <type_traits>

#include "../oriented_dwconv1d.h"
#include "plan.cuh"

namespace mmo1d {
namespace cuda {

const char* path_name(Path path) {
  switch (path) {
    case Path::kGatherNchw:
      return "gather_nchw";
    case Path::kGatherNhwc:
      return "gather_nhwc";
    case Path::kSegNchw:
      return "seg_nchw";
    case Path::kVecNhwc:
      return "vec_nhwc";
    case Path::kWinNhwc:
      return "win_nhwc";
    case Path::kWinClassesNhwc:
      return "win_classes_nhwc";
    case Path::kS2Nhwc:
      return "s2_nhwc";
    case Path::kWgradNchw:
      return "wgrad_nchw";
    case Path::kWgradNhwc:
      return "wgrad_nhwc";
    case Path::kSegWgradNchw:
      return "seg_wgrad_nchw";
    case Path::kVecWgradNhwc:
      return "vec_wgrad_nhwc";
    case Path::kVecWgradClassesNhwc:
      return "vec_wgrad_classes_nhwc";
  }
  return "unknown";
}

namespace {

// The fast paths of a gather (forward or input gradient), fastest first.
template <typename scalar_t>
bool plan_fast_gather(const Problem& p, Pass pass, Plan* plan) {
  if (p.stride == 2 && pass == Pass::kForward) return plan_s2_gather<scalar_t>(p, plan);
  if (plan_win_gather<scalar_t>(p, pass, plan)) return true;
  if (p.stride != 1) return false;
  return p.nhwc ? plan_vec_gather<scalar_t>(p, plan) : plan_seg_gather<scalar_t>(p, plan);
}

template <typename scalar_t>
bool plan_fast_wgrad(const Problem& p, Plan* plan) {
  return p.nhwc ? plan_vec_wgrad<scalar_t>(p, plan) : plan_seg_wgrad<scalar_t>(p, plan);
}

}  // namespace

template <typename scalar_t>
Plan plan_call(const Problem& p, Pass pass) {
  Plan plan;
  if constexpr (!std::is_same_v<scalar_t, double>) {  // the fast paths accumulate in float32
    Plan fast;
    if (pass == Pass::kWeightGrad ? plan_fast_wgrad<scalar_t>(p, &fast) : plan_fast_gather<scalar_t>(p, pass, &fast)) {
      return fast;
    }
  }
  if (pass == Pass::kWeightGrad) {
    plan_general_wgrad<scalar_t>(p, &plan);
  } else {
    plan_general_gather<scalar_t>(p, pass, &plan);
  }
  return plan;
}

template <typename scalar_t>
void run_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const at::Tensor& theta,
                const at::Tensor& weight, bool floor_rounding, bool residual, int sign) {
  if constexpr (!std::is_same_v<scalar_t, double>) {
    switch (plan.path) {
      case Path::kSegNchw:
        return run_seg_gather<scalar_t>(plan, src, out, bias, theta, weight, floor_rounding, residual, sign);
      case Path::kVecNhwc:
        return run_vec_gather<scalar_t>(plan, src, out, bias, theta, weight, floor_rounding, residual, sign);
      case Path::kWinNhwc:
      case Path::kWinClassesNhwc:
        return run_win_gather<scalar_t>(plan, src, out, bias, theta, weight, floor_rounding, residual, sign);
      case Path::kS2Nhwc:
        return run_s2_gather<scalar_t>(plan, src, out, bias, theta, weight, floor_rounding, residual);
      default:
        break;
    }
  }
  TORCH_CHECK(plan.path == Path::kGatherNchw || plan.path == Path::kGatherNhwc,
              "oriented_dwconv1d: no gather runs the plan of path ", path_name(plan.path));
  run_general_gather<scalar_t>(plan, src, out, bias, theta, weight, floor_rounding, residual);
}

template <typename scalar_t>
void run_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
               const at::Tensor& weight, bool floor_rounding, at::Tensor* db) {
  if constexpr (!std::is_same_v<scalar_t, double>) {
    switch (plan.path) {
      case Path::kSegWgradNchw:
        run_seg_wgrad<scalar_t>(plan, x, dy, dw, theta, weight, floor_rounding);
        break;
      case Path::kVecWgradNhwc:
      case Path::kVecWgradClassesNhwc:
        return run_vec_wgrad<scalar_t>(plan, x, dy, dw, theta, weight, floor_rounding, db);
      default:
        TORCH_CHECK(plan.path == Path::kWgradNchw || plan.path == Path::kWgradNhwc,
                    "oriented_dwconv1d: no weight gradient runs the plan of path ", path_name(plan.path));
        run_general_wgrad<scalar_t>(plan, x, dy, dw, theta, weight, floor_rounding);
    }
  } else {
    TORCH_CHECK(plan.path == Path::kWgradNchw || plan.path == Path::kWgradNhwc,
                "oriented_dwconv1d: no weight gradient runs the plan of path ", path_name(plan.path));
    run_general_wgrad<scalar_t>(plan, x, dy, dw, theta, weight, floor_rounding);
  }
  if (db != nullptr) *db = bias_grad(dy);
}

#define MMO1D_INSTANTIATE(T)                                                                                    \
  template Plan plan_call<T>(const Problem&, Pass);                                                             \
  template void run_gather<T>(const Plan&, const at::Tensor&, at::Tensor&, const T*, const at::Tensor&,         \
                              const at::Tensor&, bool, bool, int);                                              \
  template void run_wgrad<T>(const Plan&, const at::Tensor&, const at::Tensor&, at::Tensor&, const at::Tensor&, \
                             const at::Tensor&, bool, at::Tensor*);
MMO1D_INSTANTIATE(double)
MMO1D_INSTANTIATE(float)
MMO1D_INSTANTIATE(c10::Half)
MMO1D_INSTANTIATE(c10::BFloat16)
#undef MMO1D_INSTANTIATE

}  // namespace cuda
}  // namespace mmo1d
