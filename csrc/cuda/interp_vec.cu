// Launcher of the interpolated vector family: 'bilinear' and 'gaussian' taps on channels_last
// float32, float16 and bfloat16 tensors at stride 1, through the channels_last vector kernels
// (nhwc_vec.cuh) over the points of the taps' samples (interp_tables.cuh). The gathers read the
// points of nonzero coefficient; the weight-gradient kernel sums dy * x at every point (all of them
// when the angle's gradient is wanted) and dy itself (the bias gradient) in one pass over the
// tensors. The weight and angle gradients are the contractions of the sums, as in the interpolated
// family (interp.cu), all reductions in a fixed order (deterministic).
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>

#include "families.cuh"
#include "interp_tables.cuh"
#include "nhwc_vec.cuh"

namespace mmo1d {
namespace cuda {

// Points per weight-gradient block: all the points of a bilinear line of K=31 (up to 124) would
// take 71 KB of per-warp sums and leave one block per multiprocessor, so longer tables are summed in
// slices. On an H200 (bf16, 64 x 384 x 56 x 56, K=31) slices of 64 points took 2.37 / 2.11 ms for
// bilinear / gaussian, of 48 2.46 / 2.27, of 32 2.47 / 2.31.
constexpr int kInterpWgradPoints = 64;

// Domain: interpolated taps, channels_last, stride 1, float32/float16/bfloat16, any C and K whose
// tiles fit (the tables hold interp_rows points per channel, within interp_halo of the output).
template <typename scalar_t>
bool InterpVec::plan(const Problem& p, Pass pass, Plan* plan) {
  if (!p.nhwc || p.stride != 1) return false;
  const int rows = interp_rows(*p.interp, p.K);
  const int halo_k = 2 * interp_halo(*p.interp, p.K) + 1;  // a line of halo_k taps has the points' halo bound
  if (pass == Pass::kWeightGrad) {
    plan->path = "interp_vec_wgrad_nhwc";
    return plan_vec_wgrad<scalar_t>(p, rows, halo_k, 1, std::min(rows, kInterpWgradPoints), plan);
  }
  plan->path = "interp_vec_nhwc";
  return plan_vec_gather<scalar_t>(p, rows, halo_k, plan);
}

template <typename scalar_t>
void InterpVec::run(const Plan& plan, const Args<scalar_t>& a) {
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, *a.interp, a.residual, true);
  const int* same = t.same.template data_ptr<int>();
  if (a.dy == nullptr) {
    launch_vec_gather<scalar_t>(plan, a.src, a.out, a.bias, a.sign, t.off(), t.w(), t.npts_gather(), t.halo(), same);
    return;
  }
  const bool all = a.dtheta != nullptr;
  at::Tensor bpartial;
  const at::Tensor partial =
      launch_vec_wgrad_partials<scalar_t>(plan, a.src, *a.dy, t.off(), all ? t.npts_all() : t.npts_gather(), t.halo(),
                                          same, a.db != nullptr ? &bpartial : nullptr);
  // Rows beyond a channel's point count are not written; contract() reads none of them.
  contract<float>(t, partial.view({t.C, plan.parts, t.R}).sum(1), all, a.weight, a.out, a.dtheta);
  if (a.db != nullptr) a.db->copy_(bpartial.view({t.C, plan.parts}).sum(1));
}

MMO1D_INSTANTIATE_FAMILY(InterpVec)

}  // namespace cuda
}  // namespace mmo1d
