// Launcher of the interpolated window weight-gradient family: the weight, angle and bias gradients
// of 'bilinear' and 'gaussian' taps on channels_last float32, float16 and bfloat16 tensors whose C
// is a multiple of the channel block, at stride 1, through the window weight-gradient kernel
// (win_wgrad_kernel.cuh) over the runs of the points that each block of channels walks (the union of
// its channels' points, interp_union.cuh, as runs: interp_segments.cuh). The weight and angle
// gradients are the contractions of the sums at the points (interp_contract.cuh), every reduction
// in a fixed order (deterministic).
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>

#include "families.cuh"
#include "interp_contract.cuh"
#include "interp_union.cuh"
#include "tiling.cuh"
#include "win_wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Shared memory per block for the staged tile (the kernel's tables are static): two blocks per
// multiprocessor.
constexpr int64_t kWinWgradBudget = 100 * kKiB;

int64_t staged_bytes(int rows, int cols) {
  return int64_t(rows) * (cols | 1) * 32;  // 32 bytes of channels per pixel, odd pitch
}

template <typename scalar_t>
auto win_wgrad_kernel() {
  return win_wgrad_nhwc_kernel<scalar_t, kWinWgradR>;
}

}  // namespace

// Domain: interpolated taps, channels_last, aligned, C % (32 bytes of channels) == 0, stride 1,
// weight gradients; tables of at most kSegMaxPoints rows whose offsets fit the segment builder's
// grid.
template <typename scalar_t>
bool InterpWinWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = kWinWgradR;
  if (pass != Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 1) return false;
  const int rows = interp_rows(*p.interp, p.K), h = interp_halo(*p.interp, p.K);
  if (rows > kSegMaxPoints || (2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;
  plan->path = "interp_win_wgrad_nhwc";
  FastGeometry g{static_cast<int>(p.C), rows, static_cast<int>(p.H), static_cast<int>(p.W), 0, 0, 0, 0};
  set_even_tiles(g, std::min<int>(g.H, kVecStartTile), std::min<int>(g.W, kVecStartTile));
  // The staged tile: at least R x R outputs with the largest halo on both axes (the sub-tile of
  // a block whose channels' points spread both ways), at most the whole tile of the worst line.
  const int64_t least = staged_bytes(seg_tile_rows<R>(R, h), seg_tile_cols<R>(R, h));
  const int64_t whole = max_over_halos(
      2 * h + 1, [&](int ph, int pw) { return staged_bytes(seg_tile_rows<R>(g.TH, ph), seg_tile_cols<R>(g.TW, pw)); });
  plan->tile = std::max(least, std::min(whole, kWinWgradBudget));
  const int64_t cgroups = g.C / CB;
  plan->chunk = wgrad_chunk(p.N, cgroups * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  plan->parts = g.tiles * ceil_div(p.N, plan->chunk);
  plan->fg = g;
  plan->launch = LaunchShape{cgroups * g.tiles * ceil_div(p.N, plan->chunk), ceil_div(rows, kWinWgradPoints),
                             kFastThreads, plan->tile};
  return launch_fits(win_wgrad_kernel<scalar_t>(), plan->launch);
}

template <typename scalar_t>
void InterpWinWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const FastGeometry& g = plan.fg;
  const int h = interp_halo(*a.interp, static_cast<int>(a.weight.size(1)));
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, *a.interp, a.residual);
  const bool all = a.dtheta != nullptr;
  // Every point of a block's channels (all of them when the angle's gradient is wanted), united, as
  // runs, with the point of each slot.
  const InterpUnion u = unite_interp_blocks<CB>(t, t.npts(all), h, true);
  const InterpSegments s =
      build_interp_segments(u.off(), u.w(), u.npts(), u.same(), u.C, u.R, t.ints, h, 1, SegIndex::kPointAt);
  const at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, a.src.options().dtype(at::kFloat));
  at::Tensor bpartial;
  if (a.db != nullptr) bpartial = at::empty({int64_t(g.C) * plan.parts}, a.src.options().dtype(at::kFloat));
  auto kernel = win_wgrad_kernel<scalar_t>();
  const LaunchShape& l = plan.launch;
  prepare_launch(kernel, l, "channels_last window weight-gradient");
  kernel<<<grid_of(l), l.threads, l.smem, at::cuda::getCurrentCUDAStream()>>>(
      a.src.template data_ptr<scalar_t>(), a.dy->template data_ptr<scalar_t>(), s.info(), s.segs(),
      s.index().data_ptr<int>(), t.halo(), partial.data_ptr<float>(),
      a.db != nullptr ? bpartial.data_ptr<float>() : nullptr, g, static_cast<int>(a.src.size(0)), plan.chunk,
      static_cast<int>(plan.tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
  // The sums sit at the united points' rows: each of a channel's own points has the row of its place
  // in the union.
  contract<scalar_t, float>(t, partial, plan.parts, u.map(), all, a.weight, a.out, a.dtheta);
  if (a.db != nullptr) a.db->copy_(bpartial.view({g.C, plan.parts}).sum(1));
}

MMO1D_INSTANTIATE_FAMILY(InterpWinWgrad)

}  // namespace cuda
}  // namespace mmo1d
