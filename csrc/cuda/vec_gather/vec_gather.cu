// Launchers of the channels_last vector gather (float32, float16, bfloat16; stride 1, any C),
// forward and input gradient; its planning and launch for any table of points (vec_gather.cuh).
#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "vec_gather.cuh"
#include "vec_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

template <typename scalar_t>
auto vec_gather_kernel(int variant) {
  return variant == kVecRSmall ? vec_gather_nhwc_kernel<scalar_t, kVecRSmall>
                               : vec_gather_nhwc_kernel<scalar_t, kVecRLarge>;
}

}  // namespace

template <typename scalar_t>
bool plan_vec_gather(const Problem& p, int rows, int halo_k, Plan* plan) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  FastGeometry g = plane_geometry(p, rows);
  const int64_t fixed = vec_fixed_bytes<scalar_t>(g.K, false);
  // Both instances have the same static shared memory; the smaller limit of the two bounds the tile.
  const int64_t hard = std::min(max_dynamic_smem(vec_gather_kernel<scalar_t>(kVecRSmall)),
                                max_dynamic_smem(vec_gather_kernel<scalar_t>(kVecRLarge)));
  if (!choose_fast_tile(g, kVecStartTile, fixed, kVecGatherBudget, hard, vec_tile_bytes<scalar_t>, halo_k)) {
    return false;
  }
  plan->fg = g;
  plan->tile = vec_tile_alloc<scalar_t>(g, halo_k);
  plan->variant = vec_variant(g);
  plan->launch = LaunchShape{p.N * g.tiles * ceil_div(g.C, CB), 1, kFastThreads, fixed + plan->tile};
  return launch_fits(vec_gather_kernel<scalar_t>(plan->variant), plan->launch);
}

template <typename scalar_t>
void launch_vec_gather(const Plan& plan, const Args<scalar_t>& a, const PointTableView<float>& tables) {
  auto kernel = vec_gather_kernel<scalar_t>(plan.variant);
  const bool vec_ok = channels_vectorizable<scalar_t>(plan.fg.C, {&a.src, &a.out});
  const VecGatherParams<scalar_t> params{
      .io = {a.src.template data_ptr<scalar_t>(), a.out.template data_ptr<scalar_t>(), a.bias},
      .tables = tables,
      .g = plan.fg,
      .sign = a.sign,
      .vec_ok = vec_ok,
      .tile_bytes = static_cast<int>(plan.tile)};
  launch_planned(kernel, plan.launch, "channels_last vector gather", params);
}

// Domain: the stride-1 gathers, channels_last, float32/float16/bfloat16, any C and K.
template <typename scalar_t>
bool VecGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if (pass == Pass::kWeightGrad || p.stride != 1 || !p.nhwc) return false;
  plan->path = "vec_gather";
  return plan_vec_gather<scalar_t>(p, p.K, p.K, plan);
}

template <typename scalar_t>
void VecGather::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual, true);
  launch_vec_gather<scalar_t>(plan, a, t.view());
}

#define MMO1D_INSTANTIATE_VEC_GATHER(T)                              \
  template bool plan_vec_gather<T>(const Problem&, int, int, Plan*); \
  template void launch_vec_gather<T>(const Plan&, const Args<T>&, const PointTableView<float>&);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_VEC_GATHER)
#undef MMO1D_INSTANTIATE_VEC_GATHER

MMO1D_INSTANTIATE_FAMILY(VecGather)

}  // namespace cuda
}  // namespace mmo1d
