// Launchers of the NCHW fast path (float32, float16, bfloat16; stride 1): the segment-window
// gather (forward and input gradient) and its weight gradient.
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "nchw_fast_kernel.cuh"
#include "tiling.cuh"
#include "wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

FastGeometry plane_geometry(const Problem& p) {
  return FastGeometry{static_cast<int>(p.C), p.K, static_cast<int>(p.H), static_cast<int>(p.W), 0, 0, 0, 0};
}

int64_t seg_smem(const FastGeometry& g, int64_t fixed) {
  return fixed + max_over_halos(g.K, [&](int ph, int pw) { return seg_tile_bytes(g.TH, g.TW, ph, pw); });
}

// Per-thread point sums of the weight gradient: K floats per thread (the block size is fixed
// before the tile: the largest a tile of up to kSegStartTile a side can use).
int seg_wgrad_threads(FastGeometry g) {
  g.TH = std::min(g.H, kSegStartTile);
  g.TW = std::min(g.W, kSegStartTile);
  return seg_threads(g);
}

}  // namespace

// Domain: the stride-1 gathers, NCHW, float32/float16/bfloat16, any C and K; tiles within the
// device's limits.
template <typename scalar_t>
bool SegGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass == Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  FastGeometry g = plane_geometry(p);
  const int64_t fixed = seg_fixed_bytes(g.K);
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  if (!choose_fast_tile(g, kSegStartTile, fixed, kSegGatherBudget, max_dynamic_smem(kernel), seg_tile_bytes)) {
    return false;
  }
  plan->path = "seg_nchw";
  plan->fg = g;
  plan->launch = LaunchShape{p.N * g.C * g.tiles, 1, seg_threads(g), seg_smem(g, fixed)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void SegGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const at::Tensor& src = a.src;
  at::Tensor& out = a.out;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.floor_rounding, a.residual, a.sign);
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path gather");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), a.bias, t.info(), t.segs(), t.w(), t.halo(), plan.fg);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// Domain: the stride-1 weight gradient, NCHW, float32/float16/bfloat16, any C and K.
template <typename scalar_t>
bool SegWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass != Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  FastGeometry g = plane_geometry(p);
  const int threads = seg_wgrad_threads(g);
  const int64_t fixed = align16(sizeof(int4) * g.K) + align16(sizeof(float) * g.K * threads);
  auto kernel = seg_wgrad_nchw_kernel<scalar_t>;
  if (!choose_fast_tile(g, kSegStartTile, fixed, kWgradBudget, max_dynamic_smem(kernel), seg_tile_bytes)) {
    return false;
  }
  plan->chunk =
      wgrad_chunk(p.N, int64_t(g.C) * g.tiles, int64_t(g.C) * g.tiles * g.K * int64_t(sizeof(float)), p.x_bytes);
  const int chunks = ceil_div(p.N, plan->chunk);
  plan->parts = g.tiles * chunks;
  plan->path = "seg_wgrad_nchw";
  plan->fg = g;
  plan->launch = LaunchShape{int64_t(g.C) * g.tiles * chunks, 1, threads, seg_smem(g, fixed)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void SegWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  const at::Tensor &x = a.src, &dy = *a.dy;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.floor_rounding, false, 1, 1, false);
  const FastGeometry& g = plan.fg;
  at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(at::kFloat));
  auto kernel = seg_wgrad_nchw_kernel<scalar_t>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path weight-gradient");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.info(), t.segs(), t.halo(), partial.data_ptr<float>(), g,
      static_cast<int>(x.size(0)), plan.chunk);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_sp(), a.out, g.C, g.K, plan.parts, 1);
}

MMO1D_INSTANTIATE_FAMILY(SegGather)
MMO1D_INSTANTIATE_FAMILY(SegWgrad)

}  // namespace cuda
}  // namespace mmo1d
