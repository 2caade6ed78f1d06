// Launcher of the stride-2 channels_last forward, polyphase (float32, float16, bfloat16; C a
// multiple of the channel block, 16-byte aligned tensors).
#include <ATen/cuda/CUDAContext.h>

#include "../common/tiling.cuh"
#include "../families.cuh"
#include "s2_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

// The staged tile is sized for the largest halved halo on both axes (a block's channels may have
// different angles); false when not even R x R outputs fit.
// Domain: the forward at stride 2, channels_last, C a multiple of the channel block, aligned.
template <typename scalar_t>
bool S2Gather::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = WinTraits<scalar_t>::kR;
  if (pass != Pass::kForward || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 2) return false;
  FastGeometry g = output_geometry(p, p.K);  // p.stride == 2
  const int64_t fixed = win_fixed_bytes<scalar_t>(g.K);
  auto kernel = s2_gather_nhwc_kernel<scalar_t, R>;
  if (!choose_s2_tile<scalar_t>(g, fixed, max_dynamic_smem(kernel))) return false;
  plan->path = "s2_gather";
  plan->fg = g;
  plan->launch =
      LaunchShape{p.N * g.tiles * (g.C / CB), 1, kFastThreads, fixed + s2_tile_bytes<scalar_t>(g.TH, g.TW, g.K)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void S2Gather::run(const Plan& plan, const Args<scalar_t>& a) {
  const at::Tensor& src = a.src;
  at::Tensor& out = a.out;
  constexpr int R = WinTraits<scalar_t>::kR;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, a.residual, 1, 4);
  auto kernel = s2_gather_nhwc_kernel<scalar_t, R>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "stride-2 channels_last window gather");
  const S2GatherParams<scalar_t> params{
      .x = src.data_ptr<scalar_t>(),
      .out = out.data_ptr<scalar_t>(),
      .bias = a.bias,
      .info = t.info(),
      .segs = t.segs(),
      .segw = t.w(),
      .halo = t.halo(),
      .g = plan.fg,
      .Hx = static_cast<int>(src.size(2)),
      .Wx = static_cast<int>(src.size(3))};
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(params);
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

MMO1D_INSTANTIATE_FAMILY(S2Gather)

}  // namespace cuda
}  // namespace mmo1d
