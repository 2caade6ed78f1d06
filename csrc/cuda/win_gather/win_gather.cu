// Launchers of the channels_last window path (float32, float16, bfloat16; C a multiple of the
// channel block, 16-byte aligned tensors): the stride-1 gather (forward and input gradient) and the
// stride-2 input gradient per parity class; their planning and launch for any segment tables
// (win_gather.cuh).
#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "win_gather.cuh"
#include "win_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename scalar_t>
auto win_kernel(int classes, bool one_list) {
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  if (one_list) return win_gather_nhwc_kernel<scalar_t, OUTPUTS, 1, true>;
  return classes == 1 ? win_gather_nhwc_kernel<scalar_t, OUTPUTS, 1> : win_gather_nhwc_kernel<scalar_t, OUTPUTS, 2>;
}

// Several images a block (the kernel's SMALL), with the taps' weights or (table_weights) the tables'.
template <typename scalar_t>
auto small_win_kernel(bool table_weights) {
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  return table_weights ? win_gather_nhwc_kernel<scalar_t, OUTPUTS, 1, false, true, true>
                       : win_gather_nhwc_kernel<scalar_t, OUTPUTS, 1, false, true>;
}

bool win_small(const Plan& plan) {
  return plan.images > 1 || plan.image_groups > 1;
}

}  // namespace

template <typename scalar_t>
bool plan_win_gather(const Problem& p, int rows, int halo_k, int64_t soft, int classes, Plan* plan, bool one_list) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  FastGeometry g = output_geometry(p, rows);
  const int64_t fixed = win_fixed_bytes<scalar_t>(g.K, one_list);
  auto tile_bytes = [halo_k](int th, int tw, int ph, int pw) {
    return win_tile_bytes<scalar_t>(th, tw, ph, pw, halo_k / 2, halo_k / 2);
  };
  // The staged tile of g's output tile at the largest halo of any angle.
  auto worst_tile = [&] {
    return max_over_halos(halo_k, [&](int ph, int pw) { return tile_bytes(g.TH, g.TW, ph, pw); });
  };
  auto kernel = win_kernel<scalar_t>(classes, one_list);
  if (!choose_fast_tile(g, kVecStartTile, fixed, soft, max_dynamic_smem(kernel), tile_bytes, halo_k)) return false;
  plan->tile = worst_tile();
  win_region(g, p.N * (g.C / CB) * classes);
  // Blocks take their share of the multiprocessor's shared memory at the occupancy they have (up to
  // what their region needs at any halo), so that lines with small halos stage it in fewer sub-tiles.
  // Small planes (one block covers the plane; stride-1 gathers whose blocks merge the taps' weights)
  // may take several images per block (SMALL), each staged whole with a halo of at most OUTPUTS - 1
  // (win_small_halo) on both axes (a block's channels may have different angles), in groups one after
  // the other; with more than one group the block takes its whole share, so that the next group's
  // copies fit beside the current group's tiles where the block's own halo leaves room.
  // Tables whose blocks share one list (one_list, the interpolated taps') take SMALL with every
  // channel's list staged (small_fixed) and the tables' merged weights, where that keeps the kernel's
  // kWinBlocks blocks per multiprocessor (bf16, bilinear K=31: 14 x 14 and 7 x 7 planes, not 28 x 28).
  const int64_t region = worst_tile();
  const bool small = classes == 1 && g.tiles == 1;
  const int64_t small_fixed = win_fixed_bytes<scalar_t>(g.K);
  const int h = halo_k / 2, ch = win_small_halo<scalar_t>(h, g.H), cw = win_small_halo<scalar_t>(h, g.W);
  const int64_t image = small ? win_tile_bytes<scalar_t>(g.TH, g.TW, ch, cw, ch, cw) : 0;
  const auto small_kernel = small_win_kernel<scalar_t>(one_list);
  const bool small_lists = small && one_list && blocks_by_smem(small_kernel, small_fixed + image) >= kWinBlocks;
  int64_t share =
      region > plan->tile || (small && !one_list) ? smem_share(kernel, kFastThreads, fixed + plan->tile) - fixed : 0;
  if (region > plan->tile) plan->tile = std::min(region, share);
  if (small_lists) share = smem_share(small_kernel, kFastThreads, small_fixed + image) - small_fixed;
  plan->images = 1;
  plan->image_groups = 1;
  if (small && (!one_list || small_lists)) {
    const int images = win_images<scalar_t>(g, p.N, g.C / CB, image, share);
    if (images >= 1) {
      plan->images = images;
      plan->image_groups = win_image_groups(p.N, images, g.C / CB);
      if (win_small(*plan)) plan->tile = plan->image_groups > 1 ? share : images * image;
    }
  }
  plan->fg = g;
  plan->classes = classes;
  plan->one_list = one_list && !win_small(*plan);
  plan->table_weights = one_list && win_small(*plan);
  plan->launch = LaunchShape{ceil_div(p.N, plan->images * plan->image_groups) * g.tiles * (g.C / CB), classes,
                             kFastThreads, (plan->one_list ? fixed : small_fixed) + plan->tile};
  return win_small(*plan) ? launch_fits(small_kernel, plan->launch) : launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void launch_win_gather(const Plan& plan, const Args<scalar_t>& a, const SegTableView& tables,
                       const TapWeights<scalar_t>& taps) {
  TORCH_CHECK(tables.segw != nullptr || (taps.w != nullptr && plan.classes == 1 && !plan.one_list),
              "oriented_dwconv1d: the window gather needs merged weights or, for one class of rounded taps, the "
              "taps' weights");
  TORCH_CHECK(!win_small(plan) || plan.table_weights == (tables.segw != nullptr),
              "oriented_dwconv1d: a window gather of several images a block takes the weights its plan chose: "
              "the tables' merged weights for interpolated taps, the taps' otherwise");
  const WinGatherParams<scalar_t> params{
      .io = {a.src.template data_ptr<scalar_t>(), a.out.template data_ptr<scalar_t>(), a.bias},
      .tables = tables,
      .g = plan.fg,
      .OH = static_cast<int>(a.out.size(2)),
      .OW = static_cast<int>(a.out.size(3)),
      .tile_bytes = static_cast<int>(plan.tile),
      .taps = taps};
  const char* what = "channels_last window gather";
  if (win_small(plan)) {
    const WinSmallParams<scalar_t> small{params, static_cast<int>(a.src.size(0)), plan.images, plan.image_groups};
    launch_planned(small_win_kernel<scalar_t>(plan.table_weights), plan.launch, what, small);
  } else {
    launch_planned(win_kernel<scalar_t>(plan.classes, plan.one_list), plan.launch, what, params);
  }
}

// Domain: channels_last, C % (32 bytes of channels) == 0, aligned; stride 1 (forward or input
// gradient: the source plane is the output plane) or the stride-2 input gradient (source dy,
// output dx, per parity class).
template <typename scalar_t>
bool WinGather::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (pass == Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0) return false;
  const bool classes4 = p.stride == 2 && pass == Pass::kInputGrad;
  if (p.stride != 1 && !classes4) return false;
  plan->path = classes4 ? "win_gather_classes" : "win_gather";
  return plan_win_gather<scalar_t>(p, p.K, classes4 ? class_halo_k(p.K) : p.K, kVecGatherBudget, classes4 ? 4 : 1,
                                   plan);
}

// The stride-1 gathers merge the weights in their blocks (one launch and one allocation fewer per
// call); the parity classes of the stride-2 input gradient take merged tables.
template <typename scalar_t>
void WinGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const bool in_blocks = plan.classes == 1;
  const auto t =
      build_segments<scalar_t>(a.theta, a.weight, a.rule, a.residual, a.sign, plan.classes, !in_blocks);
  const at::Tensor w = in_blocks ? a.weight.contiguous() : at::Tensor();
  const TapWeights<scalar_t> taps =
      in_blocks ? TapWeights<scalar_t>{w.data_ptr<scalar_t>(), t.tap_sp(), a.residual} : TapWeights<scalar_t>{};
  launch_win_gather<scalar_t>(plan, a, t.view(), taps);
}

#define MMO1D_INSTANTIATE_WIN(T)                                                         \
  template bool plan_win_gather<T>(const Problem&, int, int, int64_t, int, Plan*, bool); \
  template void launch_win_gather<T>(const Plan&, const Args<T>&, const SegTableView&, const TapWeights<T>&);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_WIN)
#undef MMO1D_INSTANTIATE_WIN

MMO1D_INSTANTIATE_FAMILY(WinGather)

}  // namespace cuda
}  // namespace mmo1d
