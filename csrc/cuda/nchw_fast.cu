// Launchers of the NCHW fast path (float32, float16, bfloat16; stride 1): the segment-window
// gather (forward and input gradient) and its weight gradient.
#include <ATen/cuda/CUDAContext.h>

#include "nchw_fast_kernel.cuh"
#include "plan.cuh"
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

// Domain: stride 1, NCHW, float32/float16/bfloat16, any C and K; tiles within the device's limits.
template <typename scalar_t>
bool plan_seg_gather(const Problem& p, Plan* plan) {
  if (p.stride != 1 || p.nhwc) return false;
  FastGeometry g = plane_geometry(p);
  const int64_t fixed = seg_fixed_bytes(g.K);
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  if (!choose_fast_tile(g, kSegStartTile, fixed, kSegGatherBudget, max_dynamic_smem(kernel), seg_tile_bytes)) {
    return false;
  }
  plan->path = Path::kSegNchw;
  plan->fg = g;
  plan->launch = LaunchShape{p.N * g.C * g.tiles, 1, seg_threads(g), seg_smem(g, fixed)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void run_seg_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                    const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual, int sign) {
  const auto t = build_segments<scalar_t>(theta, weight, floor_rounding, residual, sign);
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path gather");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, t.info(), t.segs(), t.w(), t.halo(), plan.fg);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

template <typename scalar_t>
bool plan_seg_wgrad(const Problem& p, Plan* plan) {
  if (p.stride != 1 || p.nhwc) return false;
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
  plan->path = Path::kSegWgradNchw;
  plan->fg = g;
  plan->launch = LaunchShape{int64_t(g.C) * g.tiles * chunks, 1, threads, seg_smem(g, fixed)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void run_seg_wgrad(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, at::Tensor& dw, const at::Tensor& theta,
                   const at::Tensor& weight, bool floor_rounding) {
  const auto t = build_segments<scalar_t>(theta, weight, floor_rounding, false, 1);
  const FastGeometry& g = plan.fg;
  at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(at::kFloat));
  auto kernel = seg_wgrad_nchw_kernel<scalar_t>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path weight-gradient");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), t.info(), t.segs(), t.halo(), partial.data_ptr<float>(), g,
      static_cast<int>(x.size(0)), plan.chunk);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_sp(), dw, g.C, g.K, plan.parts, 1);
}

#define MMO1D_INSTANTIATE(T)                                                                                        \
  template bool plan_seg_gather<T>(const Problem&, Plan*);                                                          \
  template void run_seg_gather<T>(const Plan&, const at::Tensor&, at::Tensor&, const T*, const at::Tensor&,         \
                                  const at::Tensor&, bool, bool, int);                                              \
  template bool plan_seg_wgrad<T>(const Problem&, Plan*);                                                           \
  template void run_seg_wgrad<T>(const Plan&, const at::Tensor&, const at::Tensor&, at::Tensor&, const at::Tensor&, \
                                 const at::Tensor&, bool);
MMO1D_INSTANTIATE(float)
MMO1D_INSTANTIATE(c10::Half)
MMO1D_INSTANTIATE(c10::BFloat16)
#undef MMO1D_INSTANTIATE

}  // namespace cuda
}  // namespace mmo1d
