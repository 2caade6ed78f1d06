// Launchers of the NCHW segment-window gather (float32, float16, bfloat16; stride 1), forward and
// input gradient; its planning and launch for any segment tables (seg_gather.cuh).
#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "seg_gather.cuh"
#include "seg_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

template <typename scalar_t>
bool plan_seg_gather(const Problem& p, int rows, int halo_k, Plan* plan) {
  FastGeometry g = plane_geometry(p, rows);
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
void launch_seg_gather(const Plan& plan, const Args<scalar_t>& a, const SegTableView& tables,
                       const TapWeights<scalar_t>& taps) {
  TORCH_CHECK(tables.segw != nullptr || taps.w != nullptr,
              "oriented_dwconv1d: the NCHW gather needs merged weights or the taps' weights");
  auto kernel = seg_gather_nchw_kernel<scalar_t>;
  launch_planned(kernel, plan.launch, "NCHW fast-path gather", a.src.template data_ptr<scalar_t>(),
                 a.out.template data_ptr<scalar_t>(), a.bias, tables, plan.fg, taps);
}

// Domain: the stride-1 gathers, NCHW, float32/float16/bfloat16, any C and K; tiles within the
// device's limits.
template <typename scalar_t>
bool SegGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass == Pass::kWeightGrad || p.stride != 1 || p.nhwc) return false;
  plan->path = "seg_gather";
  return plan_seg_gather<scalar_t>(p, p.K, p.K, plan);
}

// The blocks merge the weights from the (C, K) weight and the cached tap -> slot map (one launch and
// one allocation fewer per call).
template <typename scalar_t>
void SegGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_segments<scalar_t>(a.theta, a.weight, a.rule, a.residual, a.sign, 1, false);
  const at::Tensor w = a.weight.contiguous();
  launch_seg_gather<scalar_t>(plan, a, t.view(), TapWeights<scalar_t>{w.data_ptr<scalar_t>(), t.tap_sp(), a.residual});
}

#define MMO1D_INSTANTIATE_SEG_GATHER(T)                              \
  template bool plan_seg_gather<T>(const Problem&, int, int, Plan*); \
  template void launch_seg_gather<T>(const Plan&, const Args<T>&, const SegTableView&, const TapWeights<T>&);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_SEG_GATHER)
#undef MMO1D_INSTANTIATE_SEG_GATHER

MMO1D_INSTANTIATE_FAMILY(SegGather)

}  // namespace cuda
}  // namespace mmo1d
