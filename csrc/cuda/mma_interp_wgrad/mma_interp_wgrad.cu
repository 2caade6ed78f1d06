// Launcher of the tensor-core weight gradient of the interpolated taps ('bilinear', 'gaussian'; float16
// and bfloat16, channels_last, stride 1) on large planes. The points of each block of 16 channels are
// the union of its channels' samples' points (interp_union.cuh): one offset list for both groups of 8
// channels, so the tensor-core kernel (mma_wgrad/) sums dy * x at every point of the union for all 16
// channels at once. The blocks it takes (a union of at most kMmaInterpPoints points whose halo across
// the lines is at most kMmaWgradMaxAcross of the points' reach) get their sums there; the others are
// summed by the interpolated vector weight gradient in the same call, skipping the taken blocks. The
// contraction (interp_contract.cuh) reads each block's sums where they were summed and writes dw and
// dtheta; every sum in a fixed order (deterministic).
#include <ATen/ops/empty.h>

#include <algorithm>
#include <type_traits>

#include "../common/cuda_context.h"
#include "../common/interp_tables.cuh"
#include "../common/interp_union.cuh"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "../interp_vec/interp_vec_wgrad.cuh"
#include "../mma_wgrad/mma_wgrad.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// The points of a call: the tables' rows, up to kMmaInterpPoints points in a block's list, within the
// samples' halo along the lines.
MmaWgradPoints interp_points(const TapRule& rule, int K) {
  const int rows = interp_rows(rule, K), points = std::min(rows, kMmaInterpPoints);
  return MmaWgradPoints{rows, points, mma_round_up(points, 2), interp_halo(rule, K)};
}

}  // namespace

// Domain: mma_wgrad_domain on planes of at least kMmaInterpWgradMinPixels, float16 and bfloat16, the
// interpolated taps, offsets within the union builder's grid; the interpolated vector weight gradient's
// plan must fit too (the blocks left to it).
template <typename scalar_t>
bool MmaInterpWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!std::is_same_v<scalar_t, c10::Half> && !std::is_same_v<scalar_t, c10::BFloat16>) {
    return false;
  } else {
    if (!mma_wgrad_domain<scalar_t>(p, pass, kMmaInterpWgradMinPixels)) return false;
    const int h = interp_halo(p.rule, p.K);
    if ((2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;  // the union of a block's points
    Plan vec;
    if (!InterpVec::plan<scalar_t>(p, pass, &vec) || vec.classes != 1) return false;
    return plan_mma_wgrad<scalar_t>(p, "mma_interp_wgrad", interp_points(p.rule, p.K),
                                    static_cast<int>(h * kMmaWgradMaxAcross), vec, plan);
  }
}

template <typename scalar_t>
void MmaInterpWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (std::is_same_v<scalar_t, c10::Half> || std::is_same_v<scalar_t, c10::BFloat16>) {
    const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual,
                                                        interp_tables_use(true, a.sign), false);
    const bool all = a.dtheta != nullptr;
    const InterpUnion u = unite_interp_blocks<kMmaCB>(t, t.npts(all), interp_halo(a.rule, plan.fg.K), true);
    const PointTableView<float> tables = u.view(t.halo());
    const MmaWgradSums m = launch_mma_wgrad_sums<scalar_t>(plan, a.src, *a.dy, tables.wgrad(), a.db != nullptr);
    // The taken blocks' sums of each point and their bias gradient, then the blocks left to the
    // interpolated vector weight gradient, and the contraction of both.
    const at::Tensor sums = at::empty({t.C * t.R}, a.src.options().dtype(at::kFloat));
    scalar_t* db = a.db != nullptr ? a.db->template data_ptr<scalar_t>() : nullptr;
    launch_mma_wgrad_reduce<scalar_t>(plan, m, static_cast<int>(t.R), nullptr, u.npts(), nullptr,
                                      sums.data_ptr<float>(), db);
    interp_vec_wgrad<scalar_t>(*plan.rest, a, t, tables, u.map(), all, sums.data_ptr<float>(), m.taken(), kMmaCB);
  }
}

MMO1D_INSTANTIATE_FAMILY(MmaInterpWgrad)

}  // namespace cuda
}  // namespace mmo1d
