// Launcher of the stride-2 channels_last forward, polyphase (float32, float16, bfloat16; C a
// multiple of the channel block, 16-byte aligned tensors); its planning and launch for any class
// tables (stride2.cuh).
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "stride2.cuh"
#include "stride2_kernel.cuh"
#include "tiling.cuh"

namespace mmo1d {
namespace cuda {

// The staged tile is sized for the largest halved halo on both axes (a block's channels may have
// different angles).
template <typename scalar_t>
bool plan_s2_gather(const Problem& p, int rows, int halo_k, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB, R = WinTraits<scalar_t>::kR;
  FastGeometry g{static_cast<int>(p.C),
                 rows,
                 static_cast<int>(out_size(p.H, 2)),
                 static_cast<int>(out_size(p.W, 2)),
                 0,
                 0,
                 0,
                 0};  // the output plane
  const int64_t fixed = win_fixed_bytes<scalar_t>(g.K);
  auto kernel = win_gather_s2_nhwc_kernel<scalar_t, R>;
  if (!choose_s2_tile<scalar_t>(g, fixed, max_dynamic_smem(kernel), halo_k)) return false;
  plan->fg = g;
  plan->launch =
      LaunchShape{p.N * g.tiles * (g.C / CB), 1, kFastThreads, fixed + s2_tile_bytes<scalar_t>(g.TH, g.TW, halo_k)};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void launch_s2_gather(const Plan& plan, const at::Tensor& src, at::Tensor& out, const scalar_t* bias,
                      const SegInfo* info, const int4* segs, const float* segw, const int2* halo) {
  constexpr int R = WinTraits<scalar_t>::kR;
  auto kernel = win_gather_s2_nhwc_kernel<scalar_t, R>;
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "stride-2 channels_last window gather");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), bias, info, segs, segw, halo, plan.fg,
      static_cast<int>(src.size(2)), static_cast<int>(src.size(3)));
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

// Domain: the forward at stride 2, channels_last, C a multiple of the channel block, aligned.
template <typename scalar_t>
bool S2Gather::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (pass != Pass::kForward || !p.nhwc || !p.aligned || p.C % CB != 0 || p.stride != 2) return false;
  plan->path = "s2_nhwc";
  return plan_s2_gather<scalar_t>(p, p.K, p.K, plan);
}

template <typename scalar_t>
void S2Gather::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.floor_rounding, a.residual, 1, 4);
  launch_s2_gather<scalar_t>(plan, a.src, a.out, a.bias, t.info(), t.segs(), t.w(), t.halo());
}

#define MMO1D_INSTANTIATE_S2(T)                                                                            \
  template bool plan_s2_gather<T>(const Problem&, int, int, Plan*);                                        \
  template void launch_s2_gather<T>(const Plan&, const at::Tensor&, at::Tensor&, const T*, const SegInfo*, \
                                    const int4*, const float*, const int2*);
MMO1D_INSTANTIATE_S2(float)
MMO1D_INSTANTIATE_S2(c10::Half)
MMO1D_INSTANTIATE_S2(c10::BFloat16)
#undef MMO1D_INSTANTIATE_S2

MMO1D_INSTANTIATE_FAMILY(S2Gather)

}  // namespace cuda
}  // namespace mmo1d
