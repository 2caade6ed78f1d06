// Launchers of the channels_last vector weight gradient (float32, float16, bfloat16) at stride 1
// and, per parity class, at stride 2; its planning and launch for any table of points
// (vec_wgrad.cuh).
#include <ATen/ops/empty.h>

#include <iterator>
#include <utility>

#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "vec_wgrad.cuh"
#include "vec_wgrad_across_kernel.cuh"
#include "vec_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// The kernel of each instance: stride 1 (classes 1) at any of kVecWgradOutputs outputs per
// thread in one group of warps, or kVecWgradGroupedOutputs in several; stride 2 (four parity
// classes) at kVecRSmall or kVecRLarge.
template <bool GROUPED>
constexpr const auto& stride1_outputs() {
  if constexpr (GROUPED) {
    return kVecWgradGroupedOutputs;
  } else {
    return kVecWgradOutputs;
  }
}

template <typename scalar_t, bool GROUPED, size_t... I>
auto stride1_kernel(int outputs, std::index_sequence<I...>) {
  constexpr const auto& list = stride1_outputs<GROUPED>();
  decltype(&vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 1, false>) kernel = nullptr;
  ((kernel = outputs == list[I] ? vec_wgrad_nhwc_kernel<scalar_t, list[I], 1, GROUPED> : kernel), ...);
  return kernel;
}

template <typename scalar_t>
auto vec_wgrad_kernel(int outputs, int classes, int groups = 1) {
  if (classes == 1 && groups > 1) {
    return stride1_kernel<scalar_t, true>(outputs, std::make_index_sequence<std::size(stride1_outputs<true>())>());
  }
  if (classes == 1) {
    return stride1_kernel<scalar_t, false>(outputs, std::make_index_sequence<std::size(stride1_outputs<false>())>());
  }
  return outputs == kVecRSmall ? vec_wgrad_nhwc_kernel<scalar_t, kVecRSmall, 2, false>
                               : vec_wgrad_nhwc_kernel<scalar_t, kVecRLarge, 2, false>;
}

// The instance of vec_wgrad_across_kernel of `points` points a block (kVecWgradAcrossPoints).
template <typename scalar_t>
auto across_kernel(int points) {
  return points == 8    ? vec_wgrad_across_kernel<scalar_t, 1>
         : points == 16 ? vec_wgrad_across_kernel<scalar_t, 2>
                        : vec_wgrad_across_kernel<scalar_t, 4>;
}

// Whether a plan takes the grouped kernel over whole planes (one tile), which fetches each next image
// while one computes, and the room that takes after its tile: the next image's plane and two of dy.
bool vec_wgrad_prefetches(const FastGeometry& g, int classes, int groups) {
  return classes == 1 && groups > 1 && g.tiles == 1;
}

int64_t vec_wgrad_prefetch_bytes(const FastGeometry& g) {
  return 3 * int64_t(g.H) * g.W * 32;  // 32 bytes of channels a pixel
}

// The chunks of images of the blocks over g's tiles and `classes` (plan->chunk, parts, fg, classes);
// returns the blocks along the grid's x: the blocks of channels times the parts.
template <typename scalar_t>
int64_t plan_wgrad_parts(const Problem& p, const FastGeometry& g, int classes, Plan* plan) {
  const int64_t cgroups = ceil_div(g.C, VecTraits<scalar_t>::kCB);
  plan->chunk = wgrad_chunk(p.N, cgroups * g.tiles * classes,
                            int64_t(classes) * g.C * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  plan->parts = g.tiles * ceil_div(p.N, plan->chunk);
  plan->fg = g;
  plan->classes = classes;
  return cgroups * plan->parts;
}

// The points across the slots (vec_wgrad_across_kernel) on planes of more than 128 pixels (smaller
// ones take the grouped kernel) that one block covers, at the largest halo of any angle clipped to
// the plane, within the share of two blocks per SM; slices of the fewest of kVecWgradAcrossPoints
// points that hold the rows; planes of more than kVecWgradAcrossPixels pixels only in slices of 32.
// The plan, or false where the plane does not fit.
template <typename scalar_t>
bool plan_across(const Problem& p, FastGeometry g, int rows, int halo_k, Plan* plan) {
  if (vec_wgrad_grouped_tile(int64_t(g.H) * g.W)) return false;
  int points = kVecWgradAcrossPoints[std::size(kVecWgradAcrossPoints) - 1];
  for (const int q : kVecWgradAcrossPoints) {
    if (rows <= q) {
      points = q;
      break;
    }
  }
  if (int64_t(g.H) * g.W > kVecWgradAcrossPixels && points < 32) return false;
  const int h = halo_k / 2, ph = win_clipped_halo(h, g.H), pw = win_clipped_halo(h, g.W);
  const KernelLimits& lim = kernel_limits(across_kernel<scalar_t>(points));
  const int64_t smem = vec_wgrad_across_bytes<scalar_t>(g.H, g.W, ph, pw, points);
  if (smem > lim.max_dynamic_smem || blocks_by_smem(lim, smem) < 2) return false;
  set_even_tiles(g, g.H, g.W);
  const int64_t blocks = plan_wgrad_parts<scalar_t>(p, g, 1, plan);
  plan->tile = smem;
  plan->variant = 0;
  plan->groups = 1;
  plan->points = points;
  plan->across = true;
  plan->launch = LaunchShape{blocks, ceil_div(rows, points), kFastThreads, smem};
  return launch_fits(across_kernel<scalar_t>(points), plan->launch);
}

}  // namespace

template <typename scalar_t>
bool plan_vec_wgrad(const Problem& p, int rows, int halo_k, int classes, int points, Plan* plan, bool across) {
  FastGeometry g = output_geometry(p, rows);
  plan->across = false;
  if (across && classes == 1 && plan_across<scalar_t>(p, g, rows, halo_k, plan)) return true;
  const int64_t fixed = vec_fixed_bytes<scalar_t>(points, true);
  int64_t hard = max_dynamic_smem(vec_wgrad_kernel<scalar_t>(kVecRLarge, classes));
  for (const int r : kVecWgradOutputs) hard = std::min(hard, max_dynamic_smem(vec_wgrad_kernel<scalar_t>(r, classes)));
  if (classes == 1) {
    for (const int r : kVecWgradGroupedOutputs) {
      hard = std::min(hard, max_dynamic_smem(vec_wgrad_kernel<scalar_t>(r, 1, 2)));
    }
  }
  if (!choose_fast_tile(g, kVecStartTile, fixed, kWgradBudget, hard, vec_tile_bytes<scalar_t>, halo_k)) return false;
  const int64_t blocks = plan_wgrad_parts<scalar_t>(p, g, classes, plan);
  plan->tile = vec_tile_alloc<scalar_t>(g, halo_k);
  // More than kVecRLarge outputs per thread bind the kernel to kVecWgradWideBlocks blocks per SM: only
  // where the tile's shared memory allows no more anyway (K=31 at 28 x 28: yes; K=15: three, kept).
  const bool wide =
      blocks_by_smem(vec_wgrad_kernel<scalar_t>(kVecRLarge, classes), fixed + plan->tile) <= kVecWgradWideBlocks;
  const VecWgradShape shape = classes == 1 ? vec_wgrad_shape(g, points, wide) : VecWgradShape{vec_variant(g), 1};
  plan->variant = shape.outputs;
  plan->groups = shape.groups;
  plan->points = points;
  const int grid_y = classes == 1 ? ceil_div(rows, points) : classes;
  const int64_t room = vec_wgrad_prefetches(g, classes, shape.groups) ? vec_wgrad_prefetch_bytes(g) : 0;
  // The tile was sized for one group's rows of sums (the most); groups share theirs.
  const int64_t tables = vec_fixed_bytes<scalar_t>(points, true, shape.groups);
  plan->launch = LaunchShape{blocks, grid_y, kFastThreads, tables + plan->tile + room};
  return launch_fits(vec_wgrad_kernel<scalar_t>(plan->variant, classes, plan->groups), plan->launch);
}

template <typename scalar_t>
at::Tensor launch_vec_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                     const PointTableView<float>& tables, at::Tensor* bpartial, const int* skip) {
  const FastGeometry& g = plan.fg;
  const int classes = plan.classes;
  at::Tensor partial = at::empty({int64_t(classes) * g.C * plan.parts * g.K}, x.options().dtype(at::kFloat));
  if (bpartial != nullptr) *bpartial = at::empty({int64_t(g.C) * plan.parts}, x.options().dtype(at::kFloat));
  auto kernel = plan.across ? across_kernel<scalar_t>(plan.points)
                            : vec_wgrad_kernel<scalar_t>(plan.variant, classes, plan.groups);
  const bool vec_ok = channels_vectorizable<scalar_t>(g.C, {&x, &dy});
  const VecWgradParams<scalar_t> params{.io = wgrad_operands<scalar_t, float>(x, dy, partial, plan.chunk),
                                        .tables = tables.wgrad(),
                                        .bpartial = bpartial != nullptr ? bpartial->data_ptr<float>() : nullptr,
                                        .g = g,
                                        .Hx = static_cast<int>(x.size(2)),
                                        .Wx = static_cast<int>(x.size(3)),
                                        .vec_ok = vec_ok,
                                        .tile_bytes = static_cast<int>(plan.tile),
                                        .pcap = plan.points,
                                        .groups = plan.groups,
                                        .skip = skip};
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
  return plan_vec_wgrad<scalar_t>(p, p.K, classes == 1 ? p.K : class_halo_k(p.K), classes, p.K, plan, true);
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
                                                   const PointTableView<float>&, at::Tensor*, const int*);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_VEC_WGRAD)
#undef MMO1D_INSTANTIATE_VEC_WGRAD

MMO1D_INSTANTIATE_FAMILY(VecWgrad)

}  // namespace cuda
}  // namespace mmo1d
