// Launcher of the interpolated family ('bilinear', 'gaussian'): every dtype, stride, K and layout.
// A call builds its tables (interp_tables.cuh), then runs the general kernels (general.cuh) over
// the points: the gathers read the points of nonzero coefficient, the weight-gradient kernels sum
// dy * x at every point (all of them when the angle's gradient is wanted: a point of coefficient 0
// still has a derivative). The weight and angle gradients are the contractions of those sums with
// the samples' coefficients and derivatives, by ATen reductions of fixed order (deterministic).
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>

#include "../common/cuda_context.h"
#include "../common/interp_contract.cuh"
#include "../common/interp_tables.cuh"
#include "../families.cuh"
#include "../general/general.cuh"

namespace mmo1d {
namespace cuda {

namespace {

const char* interp_path(bool wgrad, bool nhwc) {
  return wgrad ? (nhwc ? "interp_wgrad_nhwc" : "interp_wgrad_nchw")
               : (nhwc ? "interp_gather_nhwc" : "interp_gather_nchw");
}

template <typename PlanGather, typename PlanWgrad>
bool plan_layout(const Problem& p, Pass pass, bool nhwc, Plan* plan, PlanGather plan_gather, PlanWgrad plan_wgrad) {
  const bool wgrad = pass == Pass::kWeightGrad;
  const GatherGeometry g =
      gather_geometry(p, wgrad ? Pass::kForward : pass, interp_rows(p.rule, p.K), interp_halo(p.rule, p.K));
  if (!(wgrad ? plan_wgrad(p, g, nhwc, plan) : plan_gather(p, g, nhwc, plan))) return false;
  plan->path = interp_path(wgrad, nhwc);
  return true;
}

}  // namespace

template <typename scalar_t>
bool Interp::plan(const Problem& p, Pass pass, Plan* plan) {
  const auto gather = [](const Problem& q, GatherGeometry g, bool nhwc, Plan* pl) {
    return plan_gather_layout<scalar_t>(q, g, nhwc, pl);
  };
  const auto wgrad = [](const Problem& q, GatherGeometry g, bool nhwc, Plan* pl) {
    return plan_wgrad_layout<scalar_t>(q, g, nhwc, pl);
  };
  if (p.nhwc && plan_layout(p, pass, true, plan, gather, wgrad)) return true;
  plan->via_nchw = p.nhwc;
  TORCH_CHECK(plan_layout(p, pass, false, plan, gather, wgrad), "oriented_dwconv1d_interp: input ",
              shape_str({p.N, p.C, p.H, p.W}), " with K=", std::to_string(p.K), ", stride ", std::to_string(p.stride),
              " and ", std::to_string(interp_rows(p.rule, p.K)),
              " sampled pixels per channel cannot be served on this device: a tile of one output needs more shared ",
              "memory than the device allows, or more blocks than its grid allows");
  return true;
}

template <typename scalar_t>
void Interp::run(const Plan& plan, const Args<scalar_t>& a) {
  using acc_t = at::opmath_type<scalar_t>;
  const bool wgrad = a.dy != nullptr;
  const at::Tensor src = plan.via_nchw ? a.src.contiguous() : a.src;
  const InterpTables<acc_t> t =
      build_interp_tables<scalar_t, acc_t>(a.theta, a.weight, a.rule, a.residual, interp_tables_use(wgrad, a.sign));
  if (!wgrad) {
    if (!plan.via_nchw) {
      launch_gather<scalar_t, acc_t>(plan, src, a.out, a.bias, t.view(false));
      return;
    }
    at::Tensor out = at::empty(a.out.sizes(), a.out.options().memory_format(at::MemoryFormat::Contiguous));
    launch_gather<scalar_t, acc_t>(plan, src, out, a.bias, t.view(false));
    a.out.copy_(out);
    return;
  }
  const at::Tensor dy = plan.via_nchw ? a.dy->contiguous() : *a.dy;
  const bool all = a.dtheta != nullptr;
  const at::Tensor partial = launch_wgrad_partials<scalar_t, acc_t>(plan, src, dy, t.view(all));
  contract<scalar_t, acc_t>(t, partial, plan.parts, at::Tensor(), all, a.weight, a.out, a.dtheta);
  if (a.db != nullptr) *a.db = bias_grad_in_slices(*a.dy);
}

MMO1D_INSTANTIATE_FAMILY_F64(Interp)

}  // namespace cuda
}  // namespace mmo1d
