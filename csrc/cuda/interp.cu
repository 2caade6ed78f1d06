// Launcher of the interpolated family ('bilinear', 'gaussian'): every dtype, stride, K and layout.
// A call builds its tables (interp_tables.cuh), then runs the general kernels (general.cuh) over
// the points: the gathers read the points of nonzero coefficient, the weight-gradient kernels sum
// dy * x at every point (all of them when the angle's gradient is wanted: a point of coefficient 0
// still has a derivative). The weight and angle gradients are the contractions of those sums with
// the samples' coefficients and derivatives, by ATen reductions of fixed order (deterministic).
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "general.cuh"
#include "interp_tables.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename acc_t>
struct InterpTables {
  at::Tensor ints,
      accs;         // ints: off | halo | npts_gather | npts_all | spt | scratch; accs: pw | coef | dcoef | scratch
  int64_t C, R, S;  // channels, row length, samples per channel
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 2 * C * R); }
  const int* npts_gather() const { return ints.data_ptr<int>() + 2 * C * R + 2 * C; }
  const int* npts_all() const { return npts_gather() + C; }
  at::Tensor counts(bool all) const { return ints.narrow(0, 2 * C * R + (all ? 3 : 2) * C, C); }
  at::Tensor spt() const { return ints.narrow(0, 2 * C * R + 4 * C, C * S).view({C, S}); }
  const acc_t* w() const { return accs.data_ptr<acc_t>(); }
  at::Tensor coef() const { return accs.narrow(0, C * R, C * S).view({C, S}); }
  at::Tensor dcoef() const { return accs.narrow(0, C * R + C * S, C * S).view({C, S}); }
};

template <typename scalar_t, typename acc_t>
InterpTables<acc_t> build_interp_tables(const at::Tensor& theta, const at::Tensor& weight, const InterpSpec& spec,
                                        bool residual) {
  const int C = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  const int R = interp_rows(spec, K);
  const int64_t S = int64_t(K) * spec.samples();
  InterpTables<acc_t> t;
  t.C = C;
  t.R = R;
  t.S = S;
  const auto dev = weight.device();
  // ints: off (2CR) | halo (2C) | npts_gather (C) | npts_all (C) | spt (CS) | raw_off (2CR) | raw_nz (CR) | order (CR)
  // (S = K * M with M even: every int2 array starts 8-byte aligned)
  t.ints = at::empty({2 * int64_t(C) * R + 4 * C + C * S + 4 * int64_t(C) * R}, at::TensorOptions(dev).dtype(at::kInt));
  t.accs = at::empty({int64_t(C) * R + 2 * C * S + int64_t(C) * R},
                     at::TensorOptions(dev).dtype(c10::CppTypeToScalarType<acc_t>::value));
  int* ip = t.ints.template data_ptr<int>();
  int* spt = ip + 2 * int64_t(C) * R + 4 * C;
  int* raw = spt + C * S;
  acc_t* ap = t.accs.template data_ptr<acc_t>();
  const at::Tensor angles = theta.to(c10::CppTypeToScalarType<acc_t>::value).contiguous();
  const at::Tensor w = weight.contiguous();
  constexpr int kThreads = 64;
  build_interp_tables_kernel<scalar_t, acc_t><<<ceil_div(C, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      angles.data_ptr<acc_t>(), w.data_ptr<scalar_t>(), C, K, R, spec, residual, reinterpret_cast<int2*>(ip), ap,
      ip + 2 * int64_t(C) * R + 2 * C, ip + 2 * int64_t(C) * R + 3 * C,
      reinterpret_cast<int2*>(ip + 2 * int64_t(C) * R), spt, ap + int64_t(C) * R, ap + int64_t(C) * R + C * S,
      reinterpret_cast<int2*>(raw), ap + int64_t(C) * R + 2 * C * S, raw + 2 * int64_t(C) * R,
      raw + 3 * int64_t(C) * R);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return t;
}

const char* interp_path(bool wgrad, bool nhwc) {
  return wgrad ? (nhwc ? "interp_wgrad_nhwc" : "interp_wgrad_nchw")
               : (nhwc ? "interp_gather_nhwc" : "interp_gather_nchw");
}

template <typename PlanGather, typename PlanWgrad>
bool plan_layout(const Problem& p, Pass pass, bool nhwc, Plan* plan, PlanGather plan_gather, PlanWgrad plan_wgrad) {
  const bool wgrad = pass == Pass::kWeightGrad;
  const GatherGeometry g =
      gather_geometry(p, wgrad ? Pass::kForward : pass, interp_rows(*p.interp, p.K), interp_halo(*p.interp, p.K));
  if (!(wgrad ? plan_wgrad(p, g, nhwc, plan) : plan_gather(p, g, nhwc, plan))) return false;
  plan->path = interp_path(wgrad, nhwc);
  return true;
}

// dw and dtheta from the sums G (C, R) at the points that `npts` counts, as in the CPU kernels:
// dw[c, t] = sum_m coef * G[point], dtheta[c] = sum_t w[c, t] sum_m dcoef * G[point].
template <typename acc_t>
void contract(const InterpTables<acc_t>& t, const at::Tensor& G, bool all, const at::Tensor& weight, at::Tensor& dw,
              at::Tensor* dtheta) {
  const int64_t C = t.C, K = weight.size(1), M = t.S / K;
  const at::Tensor spt = t.spt().to(at::kLong);
  const at::Tensor counts = t.counts(all).to(at::kLong).view({C, 1});
  const at::Tensor valid = (spt >= 0).logical_and(spt < counts);
  const at::Tensor g = at::where(valid, G.gather(1, spt.clamp_min(0)), at::zeros({}, G.options())).view({C, K, M});
  dw.copy_((g * t.coef().view({C, K, M})).sum(-1));
  if (dtheta != nullptr) {
    const at::Tensor gt = (g * t.dcoef().view({C, K, M})).sum(-1);
    dtheta->copy_((gt * weight.to(G.scalar_type())).sum(-1));
  }
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
              " and ", std::to_string(interp_rows(*p.interp, p.K)),
              " sampled pixels per channel cannot be served on this device: a tile of one output needs more shared ",
              "memory than the device allows, or more blocks than its grid allows");
  return true;
}

template <typename scalar_t>
void Interp::run(const Plan& plan, const Args<scalar_t>& a) {
  using acc_t = at::opmath_type<scalar_t>;
  const bool wgrad = a.dy != nullptr;
  const at::Tensor src = plan.via_nchw ? a.src.contiguous() : a.src;
  const InterpTables<acc_t> t = build_interp_tables<scalar_t, acc_t>(a.theta, a.weight, *a.interp, a.residual);
  if (!wgrad) {
    if (!plan.via_nchw) {
      launch_gather<scalar_t, acc_t>(plan, src, a.out, a.bias, t.off(), t.w(), t.npts_gather(), t.halo());
      return;
    }
    at::Tensor out = at::empty(a.out.sizes(), a.out.options().memory_format(at::MemoryFormat::Contiguous));
    launch_gather<scalar_t, acc_t>(plan, src, out, a.bias, t.off(), t.w(), t.npts_gather(), t.halo());
    a.out.copy_(out);
    return;
  }
  const at::Tensor dy = plan.via_nchw ? a.dy->contiguous() : *a.dy;
  const bool all = a.dtheta != nullptr;
  const int* npts = all ? t.npts_all() : t.npts_gather();
  const at::Tensor partial = launch_wgrad_partials<scalar_t, acc_t>(plan, src, dy, t.off(), npts, t.halo());
  const at::Tensor G = partial.view({t.C, plan.parts, t.R}).sum(1);
  contract<acc_t>(t, G, all, a.weight, a.out, a.dtheta);
  if (a.db != nullptr) *a.db = bias_grad_in_slices(*a.dy);
}

MMO1D_INSTANTIATE_FAMILY_F64(Interp)

}  // namespace cuda
}  // namespace mmo1d
