// Launchers of the NCHW segment-window weight gradient (float32, float16, bfloat16; stride 1); its
// planning and launch for any segment tables (seg_wgrad.cuh).
#include <ATen/ops/empty.h>

#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "../seg_gather/seg_gather.cuh"
#include "seg_wgrad.cuh"
#include "seg_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Per-thread point sums of the weight gradient: K floats per thread (the block size is fixed
// before the tile: the largest a tile of up to kSegStartTile a side can use).
int seg_wgrad_threads(FastGeometry g) {
  g.TH = std::min(g.H, kSegStartTile);
  g.TW = std::min(g.W, kSegStartTile);
  return seg_threads(g);
}

}  // namespace

template <typename scalar_t>
auto seg_wgrad_kernel(int variant) {
  if (variant == kSegWgradSharedColumns) return seg_wgrad_nchw_kernel<scalar_t, 2, 1>;
  return variant == kSegWgradTwoTasks ? seg_wgrad_nchw_kernel<scalar_t, 1, 2> : seg_wgrad_nchw_kernel<scalar_t, 1, 1>;
}

template <typename scalar_t>
bool plan_seg_wgrad(const Problem& p, int rows, int halo_k, int points, Plan* plan, int variant) {
  FastGeometry g = plane_geometry(p, rows);
  const int threads = seg_wgrad_threads(g);
  const int64_t fixed = align16(sizeof(int4) * g.K) +
                        align16(sizeof(float) * points * (threads / (variant == kSegWgradSharedColumns ? 2 : 1)));
  auto kernel = seg_wgrad_kernel<scalar_t>(variant);
  if (!choose_fast_tile(g, kSegStartTile, fixed, kWgradBudget, max_dynamic_smem(kernel), seg_tile_bytes, halo_k)) {
    return false;
  }
  plan->chunk =
      wgrad_chunk(p.N, int64_t(g.C) * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  const int chunks = ceil_div(p.N, plan->chunk);
  plan->parts = g.tiles * chunks;
  plan->points = points;
  // Two tasks per thread only where a tile has two rounds of tasks or more (the same shared memory).
  plan->variant = variant == kSegWgradTwoTasks && seg_max_tasks(g) <= threads ? kSegWgradColumns : variant;
  plan->fg = g;
  plan->launch =
      LaunchShape{int64_t(g.C) * g.tiles * chunks, ceil_div(rows, points), threads, seg_smem(g, fixed, halo_k)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
at::Tensor launch_seg_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                     const SegTableView& tables) {
  const FastGeometry& g = plan.fg;
  at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(at::kFloat));
  auto kernel = seg_wgrad_kernel<scalar_t>(plan.variant);
  launch_planned(kernel, plan.launch, "NCHW fast-path weight-gradient", x.data_ptr<scalar_t>(),
                 dy.data_ptr<scalar_t>(), partial.data_ptr<float>(), tables.wgrad(), g, static_cast<int>(x.size(0)),
                 plan.chunk, plan.points);
  return partial;
}

// Domain: the stride-1 weight gradient, NCHW, float32/float16/bfloat16, any C and K.
template <typename scalar_t>
bool SegWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass != Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  plan->path = "seg_wgrad";
  return plan_seg_wgrad<scalar_t>(p, p.K, p.K, p.K, plan);
}

template <typename scalar_t>
void SegWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, false, 1, 1, false);
  const at::Tensor partial = launch_seg_wgrad_partials<scalar_t>(plan, a.src, *a.dy, t.view());
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_sp(), a.out, plan.fg.C, plan.fg.K, plan.parts, 1);
}

#define MMO1D_INSTANTIATE_SEG_WGRAD(T)                                                                \
  template bool plan_seg_wgrad<T>(const Problem&, int, int, int, Plan*, int);                         \
  template at::Tensor launch_seg_wgrad_partials<T>(const Plan&, const at::Tensor&, const at::Tensor&, \
                                                   const SegTableView&);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_SEG_WGRAD)
#undef MMO1D_INSTANTIATE_SEG_WGRAD

MMO1D_INSTANTIATE_FAMILY(SegWgrad)

}  // namespace cuda
}  // namespace mmo1d
