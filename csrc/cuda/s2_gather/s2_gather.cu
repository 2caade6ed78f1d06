// Launcher of the stride-2 channels_last forward, polyphase (float32, float16, bfloat16; C a
// multiple of the channel block, 16-byte aligned tensors).
#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "s2_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

// The staged tile is sized for the largest halved halo on both axes (a block's channels may have
// different angles); the output tile grows while the blocks per multiprocessor stay
// (choose_s2_tile); false when not even OUTPUTS x OUTPUTS outputs fit.
// Domain: the forward at stride 2, channels_last, C a multiple of the channel block, aligned.
template <typename scalar_t>
bool S2Gather::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB, OUTPUTS = WinTraits<scalar_t>::kOutputs;
  if (pass != Pass::kForward || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 2) return false;
  FastGeometry g = output_geometry(p, p.K);  // p.stride == 2
  const int64_t fixed = win_fixed_bytes<scalar_t>(g.K);
  auto kernel = s2_gather_nhwc_kernel<scalar_t, OUTPUTS>;
  KernelLimits& lim = kernel_limits(kernel);
  const int by_registers = blocks_by_registers(kernel, lim, kFastThreads);
  auto blocks_per_sm = [&](int64_t bytes) { return std::min(blocks_by_smem(lim, bytes), by_registers); };
  if (!choose_s2_tile<scalar_t>(g, fixed, lim.max_dynamic_smem, p.N * (g.C / CB), blocks_per_sm)) return false;
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
  constexpr int OUTPUTS = WinTraits<scalar_t>::kOutputs;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, a.residual, 1, 4);
  auto kernel = s2_gather_nhwc_kernel<scalar_t, OUTPUTS>;
  const S2GatherParams<scalar_t> params{.io = {src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), a.bias},
                                        .tables = t.view(),
                                        .g = plan.fg,
                                        .Hx = static_cast<int>(src.size(2)),
                                        .Wx = static_cast<int>(src.size(3))};
  launch_planned(kernel, plan.launch, "stride-2 channels_last window gather", params);
}

MMO1D_INSTANTIATE_FAMILY(S2Gather)

}  // namespace cuda
}  // namespace mmo1d
