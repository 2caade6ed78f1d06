// Launchers of the channels_last window path (float32, float16, bfloat16; C a multiple of the
// channel block, 16-byte aligned tensors): the stride-1 gather (forward and input gradient) and the
// stride-2 input gradient per parity class.
#include <ATen/cuda/CUDAContext.h>

#include "families.cuh"
#include "nhwc_window_kernel.cuh"
#include "tiling.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename scalar_t>
auto win_kernel(int classes) {
  constexpr int R = WinTraits<scalar_t>::kR;
  return classes == 1 ? win_gather_nhwc_kernel<scalar_t, R, 1> : win_gather_nhwc_kernel<scalar_t, R, 2>;
}

}  // namespace

// Domain: channels_last, C % (32 bytes of channels) == 0, aligned; stride 1 (forward or input
// gradient: the source plane is the output plane) or the stride-2 input gradient (source dy,
// output dx, per parity class).
template <typename scalar_t>
bool WinGather::plan(const Problem& p, Pass pass, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  if (pass == Pass::kWeightGrad || !p.nhwc || !p.aligned || p.C % CB != 0) return false;
  const bool classes4 = p.stride == 2 && pass == Pass::kInputGrad;
  if (p.stride != 1 && !classes4) return false;
  const int classes = classes4 ? 4 : 1;
  FastGeometry g{static_cast<int>(p.C),
                 p.K,
                 static_cast<int>(out_size(p.H, p.stride)),
                 static_cast<int>(out_size(p.W, p.stride)),
                 0,
                 0,
                 0,
                 0};
  const int halo_k = classes == 1 ? g.K : class_halo_k(g.K);
  const int64_t fixed = win_fixed_bytes<scalar_t>(g.K);
  auto tile_bytes = [halo_k](int th, int tw, int ph, int pw) {
    return win_tile_bytes<scalar_t>(th, tw, ph, pw, halo_k);
  };
  auto kernel = win_kernel<scalar_t>(classes);
  if (!choose_fast_tile(g, kVecStartTile, fixed, kVecGatherBudget, max_dynamic_smem(kernel), tile_bytes, halo_k)) {
    return false;
  }
  plan->tile = max_over_halos(halo_k, [&](int ph, int pw) { return tile_bytes(g.TH, g.TW, ph, pw); });
  win_region(g, p.N * (g.C / CB) * classes);
  plan->path = classes == 1 ? "win_nhwc" : "win_classes_nhwc";
  plan->fg = g;
  plan->variant = classes;
  plan->launch = LaunchShape{p.N * g.tiles * (g.C / CB), classes, kFastThreads, fixed + plan->tile};
  return launch_fits(kernel, plan->launch);
}

template <typename scalar_t>
void WinGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const at::Tensor& src = a.src;
  at::Tensor& out = a.out;
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.floor_rounding, a.residual, a.sign, plan.variant);
  auto kernel = win_kernel<scalar_t>(plan.variant);
  const LaunchShape& s = plan.launch;
  prepare_launch(kernel, s, "channels_last window gather");
  kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
      src.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), a.bias, t.info(), t.segs(), t.w(), t.halo(), plan.fg,
      static_cast<int>(out.size(2)), static_cast<int>(out.size(3)), static_cast<int>(plan.tile));
  MMO1D_CUDA_CHECK(cudaGetLastError());
}

MMO1D_INSTANTIATE_FAMILY(WinGather)

}  // namespace cuda
}  // namespace mmo1d
