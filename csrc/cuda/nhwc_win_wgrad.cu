// Launcher of the channels_last window weight gradient (float32, float16, bfloat16; stride 1, C a
// multiple of the channel block, 16-byte aligned tensors): partial sums per tile and image chunk
// over the segment tables' points, the bias gradient's alongside, then the shared reduction.
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "nhwc_win_wgrad_kernel.cuh"
#include "tiling.cuh"
#include "wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename scalar_t>
auto win_wgrad_kernel() {
  return win_wgrad_nhwc_kernel<scalar_t, WinTraits<scalar_t>::kR>;
}

}  // namespace

// Domain: the weight gradient at stride 1, channels_last, C % (32 bytes of channels) == 0, aligned,
// where the staged tiles of R x R outputs fit with the largest halo of any angle.
template <typename scalar_t>
bool WinWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = WinTraits<scalar_t>::kR;
  if (pass != Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 1) return false;
  FastGeometry g{static_cast<int>(p.C), p.K, static_cast<int>(p.H), static_cast<int>(p.W), 0, 0, 0, 0};
  auto kernel = win_wgrad_kernel<scalar_t>();
  const int64_t fixed = win_wgrad_fixed_bytes<scalar_t>(g.K);
  const int64_t total = std::min(WinWgradTraits::kBudget, max_dynamic_smem(kernel));
  const int64_t tile = total - fixed;
  const int h = g.K / 2;
  // The smallest sub-tile with the largest halo, and the segment tables staged in the tiles' space.
  if (tile < win_wgrad_src_bytes<R>(R, R, h, h) + win_wgrad_dy_bytes<R>(R, R) ||
      tile < int64_t(sizeof(int4)) * CB * g.K) {
    return false;
  }
  set_even_tiles(g, std::min(g.H, WinWgradTraits::kTile), std::min(g.W, WinWgradTraits::kTile));
  const int64_t cgroups = g.C / CB;
  plan->chunk = wgrad_chunk(p.N, cgroups * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  const int chunks = ceil_div(p.N, plan->chunk);
  plan->parts = g.tiles * chunks;
  plan->path = "win_wgrad_nhwc";
  plan->fg = g;
  plan->tile = tile;
  plan->launch = LaunchShape{cgroups * chunks * g.tiles, 1, kFastThreads, fixed + tile};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void WinWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  const at::Tensor &x = a.src, &dy = *a.dy;
  at::Tensor* db = a.db;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.floor_rounding, false, 1, 1, false);
  const FastGeometry& g = plan.fg;
  at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(at::kFloat));
  at::Tensor bpartial;
  if (db != nullptr) bpartial = at::empty({int64_t(g.C) * plan.parts}, x.options().dtype(at::kFloat));
  auto kernel = win_wgrad_kernel<scalar_t>();
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "channels_last window weight gradient");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.info(), t.segs(), t.halo(), partial.data_ptr<float>(),
      db != nullptr ? bpartial.data_ptr<float>() : nullptr, g, static_cast<int>(x.size(0)), plan.chunk,
      static_cast<int>(plan.tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_sp(), a.out, g.C, g.K, plan.parts, 1,
                                       db != nullptr ? &bpartial : nullptr, db);
}

MMO1D_INSTANTIATE_FAMILY(WinWgrad)

}  // namespace cuda
}  // namespace mmo1d
