// Launchers of the general kernels: every dtype (float64 included), stride, K and layout. They
// serve every call that no fast path does; a call they cannot serve either raises an error that
// names the shape and the device limit it exceeds.
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>

#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "general.cuh"
#include "general_classes_kernel.cuh"
#include "general_kernel.cuh"
#include "general_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

std::string shape_of(const Problem& p) {
  return shape_str({p.N, p.C, p.H, p.W}) + " with K=" + std::to_string(p.K) + ", stride " + std::to_string(p.stride);
}

// The gather with the kernel of the plan's layout, through NCHW copies where the plan says so.
template <typename scalar_t>
void run_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias, const at::Tensor& theta,
                const at::Tensor& weight, const TapRule& rule, bool residual) {
  using acc_t = at::opmath_type<scalar_t>;
  if (plan.via_nchw) {
    at::Tensor out_nchw = at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
    Plan direct = plan;
    direct.via_nchw = false;
    run_gather<scalar_t>(direct, src.contiguous(), out_nchw, bias, theta, weight, rule, residual);
    out.copy_(out_nchw);
    return;
  }
  const auto t = build_tables<scalar_t, acc_t>(theta, weight, rule, residual, true);
  launch_gather<scalar_t, acc_t>(plan, src, out, bias, t.view());
}

// dw = sum over images and pixels of dy * x at each tap (two deterministic passes).
template <typename scalar_t>
void run_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
               const at::Tensor& weight, const TapRule& rule) {
  using acc_t = at::opmath_type<scalar_t>;
  if (plan.via_nchw) {
    Plan direct = plan;
    direct.via_nchw = false;
    run_wgrad<scalar_t>(direct, x.contiguous(), dy.contiguous(), dw, theta, weight, rule);
    return;
  }
  const auto t = build_tables<scalar_t, acc_t>(theta, weight, rule, false, false);
  const at::Tensor partial = launch_wgrad_partials<scalar_t, acc_t>(plan, x, dy, t.view());
  launch_wgrad_reduce<scalar_t, acc_t>(partial, t.tap_pt(), dw, plan.gg.C, plan.gg.K, plan.parts, 1);
}

// The chunks of images of the weight-gradient blocks over g's tiles and `cgroups` groups of channels
// (plan->chunk, parts, gg), for partial sums of acc_bytes each; returns the blocks of the grid.
int64_t plan_wgrad_chunks(const Problem& p, const GatherGeometry& g, int64_t cgroups, int64_t acc_bytes, Plan* plan) {
  plan->chunk = wgrad_chunk(p.N, cgroups * g.tiles, int64_t(g.C) * g.tiles * g.K * acc_bytes, p.x_bytes);
  plan->parts = g.tiles * ceil_div(p.N, plan->chunk);
  plan->gg = g;
  return cgroups * plan->parts;
}

}  // namespace

GatherGeometry gather_geometry(const Problem& p, Pass pass, int rows, int halo) {
  const int C = static_cast<int>(p.C), H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int Ho = static_cast<int>(out_size(p.H, p.stride)), Wo = static_cast<int>(out_size(p.W, p.stride));
  if (pass == Pass::kInputGrad) return GatherGeometry{C, rows, Ho, Wo, p.stride, H, W, 1, -1, 0, 0, 0, 0, halo};
  return GatherGeometry{C, rows, H, W, 1, Ho, Wo, p.stride, 1, 0, 0, 0, 0, halo};
}

template <typename scalar_t>
bool plan_gather_layout(const Problem& p, GatherGeometry g, bool nhwc, Plan* plan) {
  using acc_t = at::opmath_type<scalar_t>;
  // The input gradient at stride 2 by parity class: four lists of points, dy staged as it is.
  const bool classes = g.up == 2;
  const int64_t fixed = gather_fixed_bytes<acc_t>(classes ? kParityClasses * g.K : g.K, nhwc);
  if (nhwc) {
    auto kernel = classes ? gather_nhwc_classes_kernel<scalar_t, acc_t> : gather_nhwc_kernel<scalar_t, acc_t>;
    if (!choose_tile(g, true, sizeof(acc_t), fixed, max_dynamic_smem(kernel), classes)) return false;
    plan->launch = LaunchShape{p.N * g.tiles * ceil_div(g.C, kNhwcChannels), 1, kNhwcThreads,
                               fixed + tile_bytes(g, sizeof(acc_t), true, classes)};
    plan->path = "general_gather_nhwc";
    // Small tiles (stride 2 with long lines) at kNhwcRSmall outputs a thread (variant 4).
    const bool small = !classes && nhwc_outputs_per_thread(g) == kNhwcRSmall;
    if (small) kernel = gather_nhwc_kernel<scalar_t, acc_t, kNhwcRSmall>;
    plan->variant = classes ? 2 : (small ? 4 : 1);
    plan->gg = g;
    return launch_fits(kernel, plan->launch);
  }
  auto kernel = classes ? gather_nchw_classes_kernel<scalar_t, acc_t> : gather_nchw_kernel<scalar_t, acc_t>;
  if (!choose_tile(g, false, sizeof(acc_t), fixed, max_dynamic_smem(kernel), classes)) return false;
  plan->launch = LaunchShape{p.N * g.C * g.tiles, 1, classes ? nchw_class_threads(g) : nchw_threads(g),
                             fixed + tile_bytes(g, sizeof(acc_t), false, classes)};
  plan->path = "general_gather_nchw";
  plan->variant = classes ? 3 : 0;
  plan->gg = g;
  return launch_fits(kernel, plan->launch);
}

// The channels_last weight gradient with the points across the slots (variant 2): where the slot kernel's
// tile would leave at least half of its 32 slots x kPerThread outputs idle and the table's rows fill more
// of the 32 point slots x kGeneralAcrossPoints than the tile fills those outputs.
template <typename scalar_t>
bool plan_wgrad_across(const Problem& p, GatherGeometry g, Plan* plan) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t fixed = wgrad_across_fixed_bytes<acc_t>(g.K);
  const auto kernel = wgrad_nhwc_across_kernel<scalar_t, acc_t>;
  if (!choose_tile(g, true, sizeof(acc_t), fixed, max_dynamic_smem(kernel))) return false;
  const int64_t blocks = plan_wgrad_chunks(p, g, ceil_div(g.C, kNhwcChannels), sizeof(acc_t), plan);
  plan->launch = LaunchShape{blocks, 1, kNhwcThreads, fixed + tile_bytes(g, sizeof(acc_t), true)};
  plan->path = "general_wgrad_nhwc";
  plan->variant = 2;
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
bool plan_wgrad_layout(const Problem& p, GatherGeometry g, bool nhwc, Plan* plan) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t fixed = wgrad_fixed_bytes<acc_t>(g.K, nhwc);
  const auto kernel = nhwc ? wgrad_nhwc_kernel<scalar_t, acc_t> : wgrad_nchw_kernel<scalar_t, acc_t>;
  if (!choose_tile(g, nhwc, sizeof(acc_t), fixed, max_dynamic_smem(kernel))) return false;
  constexpr int kSlotOutputs = kNhwcThreads / kNhwcChannels * kPerThread;
  const int64_t nout = int64_t(g.TH) * g.TW;
  if (nhwc && 2 * nout <= kSlotOutputs && 2 * int64_t(g.K) > nout && plan_wgrad_across<scalar_t>(p, g, plan)) {
    return true;
  }
  const int64_t blocks = plan_wgrad_chunks(p, g, nhwc ? ceil_div(g.C, kNhwcChannels) : g.C, sizeof(acc_t), plan);
  const int threads = nhwc ? kNhwcThreads : nchw_threads(g);
  plan->launch = LaunchShape{blocks, 1, threads, fixed + tile_bytes(g, sizeof(acc_t), nhwc)};
  plan->path = nhwc ? "general_wgrad_nhwc" : "general_wgrad_nchw";
  plan->variant = nhwc ? 1 : 0;
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t, typename acc_t>
void launch_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                   const PointTableView<acc_t>& tables) {
  static constexpr const char* kNames[] = {"general NCHW gather", "general channels_last gather",
                                           "general channels_last gather by parity class",
                                           "general NCHW gather by parity class",
                                           "general channels_last gather, small tiles"};
  const auto kernel = plan.variant == 4   ? gather_nhwc_kernel<scalar_t, acc_t, kNhwcRSmall>
                      : plan.variant == 3 ? gather_nchw_classes_kernel<scalar_t, acc_t>
                      : plan.variant == 2 ? gather_nhwc_classes_kernel<scalar_t, acc_t>
                      : plan.variant == 1 ? gather_nhwc_kernel<scalar_t, acc_t>
                                          : gather_nchw_kernel<scalar_t, acc_t>;
  launch_planned(kernel, plan.launch, kNames[plan.variant], src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias,
                 tables.off, tables.w, tables.npts, tables.halo, plan.gg);
}

template <typename scalar_t, typename acc_t>
at::Tensor launch_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                 const PointTableView<acc_t>& tables) {
  const GatherGeometry& g = plan.gg;
  at::Tensor partial =
      at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  const GeneralWgradParams<scalar_t, acc_t> params{.io = wgrad_operands<scalar_t, acc_t>(x, dy, partial, plan.chunk),
                                                   .tables = tables.wgrad(),
                                                   .g = g};
  static constexpr const char* kNames[] = {"general NCHW weight-gradient", "general channels_last weight-gradient",
                                           "general channels_last weight-gradient, points across the slots"};
  const auto kernel = plan.variant == 2   ? wgrad_nhwc_across_kernel<scalar_t, acc_t>
                      : plan.variant == 1 ? wgrad_nhwc_kernel<scalar_t, acc_t>
                                          : wgrad_nchw_kernel<scalar_t, acc_t>;
  launch_planned(kernel, plan.launch, kNames[plan.variant], params);
  return partial;
}

#define MMO1D_INSTANTIATE_GENERAL(T)                                                                                  \
  template bool plan_gather_layout<T>(const Problem&, GatherGeometry, bool, Plan*);                                   \
  template bool plan_wgrad_layout<T>(const Problem&, GatherGeometry, bool, Plan*);                                    \
  template void launch_gather<T, at::opmath_type<T>>(const Plan&, const at::Tensor&, at::Tensor&, const T*,           \
                                                     const PointTableView<at::opmath_type<T>>&);                      \
  template at::Tensor launch_wgrad_partials<T, at::opmath_type<T>>(const Plan&, const at::Tensor&, const at::Tensor&, \
                                                                   const PointTableView<at::opmath_type<T>>&);
MMO1D_FOR_EACH_DTYPE(MMO1D_INSTANTIATE_GENERAL)
#undef MMO1D_INSTANTIATE_GENERAL

// Every call. Channels_last tensors use the channels_last kernels unless even their smallest tile
// does not fit in shared memory (float64 with a very long kernel), where the NCHW kernels run on
// NCHW copies; a call that not even those serve raises an error naming the shape.
template <typename scalar_t>
bool General::plan(const Problem& p, Pass pass, Plan* plan) {
  const bool wgrad = pass == Pass::kWeightGrad;
  const GatherGeometry g = gather_geometry(p, wgrad ? Pass::kForward : pass, p.K, p.K / 2);
  if (p.nhwc &&
      (wgrad ? plan_wgrad_layout<scalar_t>(p, g, true, plan) : plan_gather_layout<scalar_t>(p, g, true, plan))) {
    return true;
  }
  plan->via_nchw = p.nhwc;
  TORCH_CHECK(wgrad ? plan_wgrad_layout<scalar_t>(p, g, false, plan) : plan_gather_layout<scalar_t>(p, g, false, plan),
              "oriented_dwconv1d: input ", shape_of(p),
              " cannot be served on this device: a tile of one output of the ",
              wgrad ? "general weight gradient" : "general gather",
              " needs more shared memory than the device allows, or more blocks than its grid allows");
  return true;
}

template <typename scalar_t>
void General::run(const Plan& plan, const Args<scalar_t>& a) {
  if (a.dy != nullptr) {
    run_wgrad<scalar_t>(plan, a.src, *a.dy, a.out, a.theta, a.weight, a.rule);
  } else {
    run_gather<scalar_t>(plan, a.src, a.out, a.bias, a.theta, a.weight, a.rule, a.residual);
  }
}

MMO1D_INSTANTIATE_FAMILY_F64(General)

}  // namespace cuda
}  // namespace mmo1d
