// Launchers of the NCHW fast path (float32, float16, bfloat16; stride 1): the segment-window
// gather (forward and input gradient) and its weight gradient; the gather's planning and launch for
// any segment tables (nchw_fast.cuh).
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "nchw_fast.cuh"
#include "nchw_fast_kernel.cuh"
#include "tiling.cuh"
#include "wgrad_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

FastGeometry plane_geometry(const Problem& p) {
  return FastGeometry{static_cast<int>(p.C), p.K, static_cast<int>(p.H), static_cast<int>(p.W), 0, 0, 0, 0};
}

// Shared memory of a block: tables and the tile of the worst line (halos of halo_k taps).
int64_t seg_smem(const FastGeometry& g, int64_t fixed, int halo_k) {
  return fixed + max_over_halos(halo_k, [&](int ph, int pw) { return seg_tile_bytes(g.TH, g.TW, ph, pw); });
}

// Per-thread point sums of the weight gradient: K floats per thread (the block size is fixed
// before the tile: the largest a tile of up to kSegStartTile a side can use).
int seg_wgrad_threads(FastGeometry g) {
  g.TH = std::min(g.H, kSegStartTile);
  g.TW = std::min(g.W, kSegStartTile);
  return seg_threads(g);
}

}  // namespace

template <typename scalar_t>
bool plan_seg_gather(const Problem& p, int rows, int halo_k, Plan* plan) {
  FastGeometry g = plane_geometry(p);
  g.K = rows;
  const int64_t fixed = seg_fixed_bytes(g.K);
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  if (!choose_fast_tile(g, kSegStartTile, fixed, kSegGatherBudget, max_dynamic_smem(kernel), seg_tile_bytes, halo_k)) {
    return false;
  }
  plan->fg = g;
  plan->launch = LaunchShape{p.N * g.C * g.tiles, 1, seg_threads(g), seg_smem(g, fixed, halo_k)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void launch_seg_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                       const SegInfo* info, const int4* segs, const float* segw, const int2* halo,
                       const TapWeights<scalar_t>& taps) {
  TORCH_CHECK(segw != nullptr || taps.w != nullptr,
              "oriented_dwconv1d: the NCHW gather needs merged weights or the taps' weights");
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path gather");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, info, segs, segw, halo, plan.fg, taps.w, taps.tap_sp,
      taps.residual);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// Domain: the stride-1 gathers, NCHW, float32/float16/bfloat16, any C and K; tiles within the
// device's limits.
template <typename scalar_t>
bool SegGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass == Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  plan->path = "seg_nchw";
  return plan_seg_gather<scalar_t>(p, p.K, p.K, plan);
}

// The blocks merge the weights from the (C, K) weight and the cached tap -> slot map (one launch and
// one allocation fewer per call).
template <typename scalar_t>
void SegGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, a.residual, a.sign, 1, false);
  const at::Tensor w = a.weight.contiguous();
  launch_seg_gather<scalar_t>(plan, a.src, a.out, a.bias, t.info(), t.segs(), nullptr, t.halo(),
                              TapWeights<scalar_t>{w.data_ptr<scalar_t>(), t.tap_sp(), a.residual});
}

template <typename scalar_t>
auto seg_wgrad_kernel(int variant) {
  if (variant == kSegWgradSharedColumns) return seg_wgrad_nchw_kernel<scalar_t, 2, 1>;
  return variant == kSegWgradTwoTasks ? seg_wgrad_nchw_kernel<scalar_t, 1, 2> : seg_wgrad_nchw_kernel<scalar_t, 1, 1>;
}

template <typename scalar_t>
bool plan_seg_wgrad(const Problem& p, int rows, int halo_k, int points, Plan* plan, int variant) {
  FastGeometry g = plane_geometry(p);
  g.K = rows;
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
at::Tensor launch_seg_wgrad_partials(const Plan& plan, const at::Tensor& x, const at::Tensor& dy, const SegInfo* info,
                                     const int4* segs, const int2* halo) {
  const FastGeometry& g = plan.fg;
  at::Tensor partial = at::empty({int64_t(g.C) * plan.parts * g.K}, x.options().dtype(at::kFloat));
  auto kernel = seg_wgrad_kernel<scalar_t>(plan.variant);
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "NCHW fast-path weight-gradient");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<scalar_t>(), dy.data_ptr<scalar_t>(), info, segs, halo, partial.data_ptr<float>(), g,
      static_cast<int>(x.size(0)), plan.chunk, plan.points);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return partial;
}

// Domain: the stride-1 weight gradient, NCHW, float32/float16/bfloat16, any C and K.
template <typename scalar_t>
bool SegWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass != Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  plan->path = "seg_wgrad_nchw";
  return plan_seg_wgrad<scalar_t>(p, p.K, p.K, p.K, plan);
}

template <typename scalar_t>
void SegWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, false, 1, 1, false);
  const at::Tensor partial = launch_seg_wgrad_partials<scalar_t>(plan, a.src, *a.dy, t.info(), t.segs(), t.halo());
  launch_wgrad_reduce<scalar_t, float>(partial, t.tap_sp(), a.out, plan.fg.C, plan.fg.K, plan.parts, 1);
}

#define MMO1D_INSTANTIATE_SEG(T)                                                                                      \
  template bool plan_seg_gather<T>(const Problem&, int, int, Plan*);                                                  \
  template void launch_seg_gather<T>(const Plan&, const at::Tensor&, at::Tensor&, const T*, const SegInfo*,           \
                                     const int4*, const float*, const int2*, const TapWeights<T>&);                   \
  template bool plan_seg_wgrad<T>(const Problem&, int, int, int, Plan*, int);                                         \
  template at::Tensor launch_seg_wgrad_partials<T>(const Plan&, const at::Tensor&, const at::Tensor&, const SegInfo*, \
                                                   const int4*, const int2*);
MMO1D_INSTANTIATE_SEG(float)
MMO1D_INSTANTIATE_SEG(c10::Half)
MMO1D_INSTANTIATE_SEG(c10::BFloat16)
#undef MMO1D_INSTANTIATE_SEG

MMO1D_INSTANTIATE_FAMILY(SegGather)
MMO1D_INSTANTIATE_FAMILY(SegWgrad)

}  // namespace cuda
}  // namespace mmo1d
