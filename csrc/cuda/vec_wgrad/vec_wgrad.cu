// Launchers of the channels_last vector weight gradient (float32, float16, bfloat16) at stride 1
// and, per parity class, at stride 2; its planning and launch for any table of points
// (vec_wgrad.cuh).
#include <ATen/cuda/CUDAContext.h>

#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "vec_wgrad.cuh"
#include "vec_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename scalar_t>
auto vec_wgrad_kernel(int variant, int classes) {
  if (classes == 1) {
    if (variant == kVecRFit) return vec_wgrad_nhwc_kernel<scalar_t, kVecRFit, 1>;
    return variant == kVecRSmall ? vec_wgrad_nhwc_kernel<scalar_t, kVecRSmall, 1>
                                 : vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 1>;
  }
  return variant == kVecRSmall ? vec_wgrad_nhwc_kernel<scalar_t, kVecRSmall, 2>
                               : vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 2>;
}

}  // namespace

template <typename scalar_t>
bool plan_vec_wgrad(const Problem& p, int rows, int halo_k, int classes, int points, Plan* plan, bool fit) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  FastGeometry g = output_geometry(p, rows);
  const int64_t fixed = vec_fixed_bytes<scalar_t>(points, true);
  const int64_t hard = std::min({max_dynamic_smem(vec_wgrad_kernel<scalar_t>(kVecRSmall, classes)),
                                 max_dynamic_smem(vec_wgrad_kernel<scalar_t>(kVecRLarge, classes)),
                                 max_dynamic_smem(vec_wgrad_kernel<scalar_t>(kVecRFit, classes))});
  if (!choose_fast_tile(g, kVecStartTile, fixed, kWgradBudget, hard, vec_tile_bytes<scalar_t>, halo_k)) return false;
  const int64_t cgroups = ceil_div(g.C, CB);
  plan->chunk = wgrad_chunk(p.N, cgroups * g.tiles * classes,
                            int64_t(classes) * g.C * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  plan->parts = g.tiles * ceil_div(p.N, plan->chunk);
  plan->fg = g;
  plan->tile = vec_tile_alloc<scalar_t>(g, halo_k);
  plan->variant = vec_variant(g);
  // fit: kVecRFit outputs per thread where a whole tile then takes one round of the block's pixel
  // slots with fewer idle outputs than kVecRLarge (a 14 x 28 tile: 392 of 448 instead of 512).
  const int64_t pixels = int64_t(g.TH) * g.TW;
  if (fit && classes == 1 && pixels > 64 * kVecRSmall && pixels <= 64 * kVecRFit) plan->variant = kVecRFit;
  plan->classes = classes;
  plan->points = points;
  const int grid_y = classes == 1 ? ceil_div(rows, points) : classes;
  plan->launch = LaunchShape{cgroups * g.tiles * ceil_div(p.N, plan->chunk), grid_y, kFastThreads, fixed + plan->tile};
  return launch_fits(vec_wgrad_kernel<scalar_t>(plan->variant, classes), plan->launch);
}

template <typename scalar_t>
at::Tensor launch_vec_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                     const PointTableView<float>& tables, at::Tensor* bpartial) {
  const FastGeometry& g = plan.fg;
  const int classes = plan.classes;
  at::Tensor partial = at::empty({int64_t(classes) * g.C * plan.parts * g.K}, x.options().dtype(at::kFloat));
  if (bpartial != nullptr) *bpartial = at::empty({int64_t(g.C) * plan.parts}, x.options().dtype(at::kFloat));
  auto kernel = vec_wgrad_kernel<scalar_t>(plan.variant, classes);
  const bool vec_ok = channels_vectorizable<scalar_t>(g.C, {&x, &dy});
  const VecWgradParams<scalar_t> params{.io = wgrad_operands<scalar_t, float>(x, dy, partial, plan.chunk),
                                        .tables = tables.wgrad(),
                                        .bpartial = bpartial != nullptr ? bpartial->data_ptr<float>() : nullptr,
                                        .g = g,
                                        .Hx = static_cast<int>(x.size(2)),
                                        .Wx = static_cast<int>(x.size(3)),
                                        .vec_ok = vec_ok,
                                        .tile_bytes = static_cast<int>(plan.tile),
                                        .pcap = plan.points};
  launch_planned(kernel, plan.launch, "channels_last weight-gradient", params);
  return partial;
}

// Domain: channels_last, float32/float16/bfloat16, any C and K; stride 1 (g: the plane of x and
// dy), or stride 2 (four parity classes; g: dy's plane).
template <typename scalar_t>
bool VecWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass != Pass::kWeightGrad || !p.nhwc || (p.stride != 1 && p.stride != 2)) return false;
  const int classes = p.stride == 1 ? 1 : 4;
  plan->path = classes == 1 ? "vec_wgrad" : "vec_wgrad_classes";
  return plan_vec_wgrad<scalar_t>(p, p.K, classes == 1 ? p.K : class_halo_k(p.K), classes, p.K, plan);
}

template <typename scalar_t>
void VecWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  const int classes = plan.classes;
  const auto t = build_tables<scalar_t, float>(a.theta, a.weight, a.rule, false, false, classes);
  at::Tensor bpartial;
  const at::Tensor partial =
      launch_vec_wgrad_partials<scalar_t>(plan, a.src, *a.dy, t.view(), a.db != nullptr ? &bpartial : nullptr);
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_pt(), a.out, plan.fg.C, plan.fg.K, plan.parts, classes,
                                       a.db != nullptr ? &bpartial : nullptr, a.db);
}

#define MMO1D_INSTANTIATE_VEC_WGRAD(T)                                                                \
  template bool plan_vec_wgrad<T>(const Problem&, int, int, int, int, Plan*, bool);                   \
  template at::Tensor launch_vec_wgrad_partials<T>(const Plan&, const at::Tensor&, const at::Tensor&, \
                                                   const PointTableView<float>&, at::Tensor*);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_VEC_WGRAD)
#undef MMO1D_INSTANTIATE_VEC_WGRAD

MMO1D_INSTANTIATE_FAMILY(VecWgrad)

}  // namespace cuda
}  // namespace mmo1d
