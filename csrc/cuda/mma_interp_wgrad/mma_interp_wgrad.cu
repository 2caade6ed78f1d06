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
#include "../common/interp_contract.cuh"
#include "../common/interp_tables.cuh"
#include "../common/interp_union.cuh"
#include "../common/tiling.cuh"
#include "../families.cuh"
#include "../mma_wgrad/mma_wgrad.cuh"
#include "../vec_wgrad/vec_wgrad.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// The points of a call: the tables' rows, up to kMmaInterpPoints points in a block's list, within the
// samples' halo along the lines.
MmaWgradPoints interp_points(const TapRule& rule, int K) {
  const int rows = interp_rows(rule, K), points = std::min(rows, kMmaInterpPoints);
  return MmaWgradPoints{rows, points, mma_round_up(points, 2), interp_halo(rule, K)};
}

int interp_ph_max(const TapRule& rule, int K) {
  return static_cast<int>(interp_halo(rule, K) * kMmaWgradMaxAcross);
}

// The shape of a call on x (N, C, H, W) at K taps.
bool interp_shape(int64_t N, int64_t C, int64_t H, int64_t W, int K, const TapRule& rule, int64_t x_bytes,
                  MmaWgradShape* s) {
  return mma_wgrad_shape(N, C, static_cast<int>(H), static_cast<int>(W), interp_points(rule, K),
                         interp_ph_max(rule, K), x_bytes, s);
}

}  // namespace

// Domain: the weight gradient of interpolated taps, float16 and bfloat16, channels_last, stride 1, C a
// multiple of 16, 16-byte aligned tensors, planes of at least kMmaWgradMinPixels, offsets within the
// union builder's grid, a device and build of sm_90 or later; the interpolated vector weight
// gradient's plan must fit too (the blocks left to it).
template <typename scalar_t>
bool MmaInterpWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!std::is_same_v<scalar_t, c10::Half> && !std::is_same_v<scalar_t, c10::BFloat16>) {
    return false;
  } else {
    if (pass != Pass::kWeightGrad || !p.nhwc || p.stride != 1 || !p.aligned || p.C % kMmaCB != 0) return false;
    if (p.H * p.W < kMmaWgradMinPixels || !mma_wgrad_runs_here<scalar_t>()) return false;
    const int h = interp_halo(p.rule, p.K);
    if ((2 * h + 1) * (2 * h + 1) > kSegGridCells) return false;  // the union of a block's points
    MmaWgradShape s;
    if (!interp_shape(p.N, p.C, p.H, p.W, p.K, p.rule, p.x_bytes, &s)) return false;
    Plan vec;
    if (!InterpVec::plan<scalar_t>(p, pass, &vec) || vec.classes != 1) return false;
    plan->path = "mma_interp_wgrad";
    plan->fg = output_geometry(p, p.K);
    return plan_mma_wgrad<scalar_t>(p.C, s, plan);
  }
}

template <typename scalar_t>
void MmaInterpWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (std::is_same_v<scalar_t, c10::Half> || std::is_same_v<scalar_t, c10::BFloat16>) {
    const at::Tensor& x = a.src;
    const at::Tensor& dy = *a.dy;
    const int64_t N = x.size(0), C = x.size(1);
    const int K = static_cast<int>(a.weight.size(1)), h = interp_halo(a.rule, K);
    const int64_t x_bytes = static_cast<int64_t>(x.nbytes());
    MmaWgradShape s;
    TORCH_CHECK(interp_shape(N, C, x.size(2), x.size(3), K, a.rule, x_bytes, &s),
                "oriented_dwconv1d: the tensor-core weight gradient's tiles changed since its plan");
    const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual,
                                                        interp_tables_use(true, a.sign), false);
    const bool all = a.dtheta != nullptr;
    const InterpUnion u = unite_interp_blocks<kMmaCB>(t, t.npts(all), h, true);
    const PointTableView<float> tables = u.view(t.halo());
    const bool with_bias = a.db != nullptr;
    const MmaWgradSums m = launch_mma_wgrad_sums<scalar_t>(plan, s, x, dy, tables.wgrad(), with_bias);

    // The blocks left to the interpolated vector weight gradient (as InterpVec runs it, skipping the
    // taken blocks), then the taken blocks' sums and bias gradient over what it wrote.
    const Problem p{N, C, x.size(2), x.size(3), K, 1, true, true, x_bytes, &a.theta, a.rule};
    Plan vec;
    TORCH_CHECK(InterpVec::plan<scalar_t>(p, Pass::kWeightGrad, &vec) && vec.classes == 1,
                "oriented_dwconv1d: the interpolated vector weight gradient no longer fits the call planned with it");
    at::Tensor bpartial;
    const at::Tensor partial =
        launch_vec_wgrad_partials<scalar_t>(vec, x, dy, tables, with_bias ? &bpartial : nullptr, m.taken());
    if (with_bias) a.db->copy_(bpartial.view({C, vec.parts}).sum(1));
    const at::Tensor sums = at::empty({C * t.R}, x.options().dtype(at::kFloat));
    launch_mma_wgrad_reduce<scalar_t>(m, s, static_cast<int>(t.R), nullptr, u.npts(), nullptr,
                                      sums.data_ptr<float>(), with_bias ? a.db->template data_ptr<scalar_t>() : nullptr);
    contract<scalar_t, float>(t, partial, vec.parts, u.map(), all, a.weight, a.out, a.dtheta, sums.data_ptr<float>(),
                              m.taken(), kMmaCB);
  }
}

MMO1D_INSTANTIATE_FAMILY(MmaInterpWgrad)

}  // namespace cuda
}  // namespace mmo1d
