// Launcher of the interpolated vector family: 'bilinear' and 'gaussian' taps on channels_last
// float32, float16 and bfloat16 tensors at stride 1 (and the weight gradient at stride 2, per parity
// class: interp_vec_classes.cuh), through the channels_last vector kernels
// (vec_gather/, vec_wgrad/) over the points of the taps' samples (interp_tables.cuh), each block of
// channels walking the union of its channels' points (interp_union.cuh). The gathers read the
// points of nonzero coefficient; the weight-gradient kernel sums dy * x at every point (all of them
// when the angle's gradient is wanted) and dy itself (the bias gradient) in one pass over the
// tensors. The weight and angle gradients are the contractions of the sums, as in the interpolated
// family (interp.cu), all reductions in a fixed order (deterministic).
#include <algorithm>

#include "../common/cuda_context.h"
#include "../common/interp_contract.cuh"
#include "../common/interp_tables.cuh"
#include "../common/interp_union.cuh"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "../vec_gather/vec_gather.cuh"
#include "../vec_wgrad/vec_wgrad.cuh"
#include "interp_vec_classes.cuh"
#include "interp_vec_wgrad.cuh"

namespace mmo1d {
namespace cuda {

// Points per weight-gradient block: all the points of a bilinear line of K=31 (up to 124) would
// take 71 KB of per-warp sums and leave one block per multiprocessor, so longer tables are summed in
// slices. On an H200 (bf16, 64 x 384 x 56 x 56, K=31) slices of 64 points took 2.37 / 2.11 ms for
// bilinear / gaussian, of 48 2.46 / 2.27, of 32 2.47 / 2.31; with the blocks' united points (angles
// moved by up to 0.05 rad), 64: 1.96 / 1.89, 48: 1.97 / 1.90, 96: 2.67 / 2.50, 124: 4.06 / 2.50.
// Planes of up to 128 pixels, whose groups of warps share their rows of sums (8 groups of one warp:
// 8 KB for 128 points), sum up to kInterpGroupedPoints in one block.
constexpr int kInterpWgradPoints = 64;
constexpr int kInterpGroupedPoints = 128;

// The weight gradient puts the points across the pixel slots (slices of 32 points) where
// plan_vec_wgrad takes them (planes of more than 128 pixels that one block covers): on planes of up to
// kInterpAcrossPixels pixels, and on larger ones for tables of more than kInterpAcrossRows points.
// On an H200 (64 x 768, 8 directions, bf16 and fp16) across / grouped: 12 x 12 0.41-0.58, 14 x 14
// 0.55-0.95, 16 x 16 K=31 and gaussian K=15 0.65-0.81, but 16 x 16 bilinear K=15 (60 points) 1.08-1.14.
constexpr int64_t kInterpAcrossPixels = 196;
constexpr int kInterpAcrossRows = 64;

// Domain: interpolated taps, channels_last, float32/float16/bfloat16, any C and K whose tiles fit
// (the tables hold interp_rows points per channel, within interp_halo of the output): stride 1, and
// the weight gradient at stride 2 (the four parity classes' tables hold all of a channel's rows).
template <typename scalar_t>
bool InterpVec::plan(const Problem& p, Pass pass, Plan* plan) {
  if (!p.nhwc || (p.stride != 1 && p.stride != 2)) return false;
  const int rows = interp_rows(p.rule, p.K);
  const int halo_k = 2 * interp_halo(p.rule, p.K) + 1;  // a line of halo_k taps has the points' halo bound
  if (p.stride == 2) {
    if (pass != Pass::kWeightGrad) return false;
    plan->path = "interp_vec_wgrad_classes";
    return plan_vec_wgrad<scalar_t>(p, rows, class_halo_k(halo_k), 4, rows, plan, false);
  }
  if (pass == Pass::kWeightGrad) {
    plan->path = "interp_vec_wgrad";
    const bool across = p.H * p.W <= kInterpAcrossPixels || rows > kInterpAcrossRows;
    const int points = std::min(rows, vec_wgrad_grouped_tile(int64_t(p.H) * p.W) ? kInterpGroupedPoints
                                                                                 : kInterpWgradPoints);
    return plan_vec_wgrad<scalar_t>(p, rows, halo_k, 1, points, plan, across);
  }
  plan->path = "interp_vec";
  return plan_vec_gather<scalar_t>(p, rows, halo_k, plan);
}

template <typename scalar_t>
void InterpVec::run(const Plan& plan, const Args<scalar_t>& a) {
  constexpr int CB = VecTraits<scalar_t>::kCB;
  const int h = interp_halo(a.rule, static_cast<int>(a.weight.size(1)));
  // Blocks of channels walk the union of their channels' points (interp_union.cuh) where the
  // offsets fit its grid; beyond it each channel keeps its own points.
  const bool unite = (2 * h + 1) * (2 * h + 1) <= kSegGridCells;
  const auto t = build_interp_tables<scalar_t, float>(a.theta, a.weight, a.rule, a.residual,
                                                      interp_tables_use(a.dy != nullptr, a.sign), !unite);
  const bool all = a.dy != nullptr && a.dtheta != nullptr;
  InterpUnion u;
  if (unite) u = unite_interp_blocks<CB>(t, t.npts(all), h, a.dy != nullptr);
  const PointTableView<float> tables = unite ? u.view(t.halo()) : t.view(all);
  if (a.dy == nullptr) {
    launch_vec_gather<scalar_t>(plan, a, tables);
    return;
  }
  if (plan.classes == 4) {
    // Stride 2: the rows split into the parity classes, each own point mapped to its class's row.
    const InterpClasses k = split_interp_classes(tables, unite ? u.map().data_ptr<int>() : nullptr, t.npts(all), t.C,
                                                 t.R, plan.parts, t.ints.options());
    interp_vec_wgrad<scalar_t>(plan, a, t, k.view(), k.map(), all);
  } else {
    // With united points, each of a channel's own points has the row of its place in the union.
    interp_vec_wgrad<scalar_t>(plan, a, t, tables, unite ? u.map() : at::Tensor(), all);
  }
}

template <typename scalar_t>
void interp_vec_wgrad(const Plan& plan, const Args<scalar_t>& a, const InterpTables<float>& t,
                      const PointTableView<float>& tables, const at::Tensor& map, bool all, const float* sums,
                      const int* taken, int taken_block) {
  at::Tensor bpartial;
  const at::Tensor partial =
      launch_vec_wgrad_partials<scalar_t>(plan, a.src, *a.dy, tables, a.db != nullptr ? &bpartial : nullptr, taken);
  // Rows beyond a block's points are not written; contract() reads none of them.
  contract<scalar_t, float>(t, partial, plan.parts, map, all, a.weight, a.out, a.dtheta, sums, taken, taken_block);
  if (a.db != nullptr) {
    launch_bias_reduce<scalar_t>(bpartial, *a.db, static_cast<int>(t.C), plan.parts, taken, taken_block);
  }
}

#define MMO1D_INSTANTIATE_INTERP_VEC_WGRAD(T)                                                                      \
  template void interp_vec_wgrad<T>(const Plan&, const Args<T>&, const InterpTables<float>&,                      \
                                    const PointTableView<float>&, const at::Tensor&, bool, const float*, const int*, \
                                    int);
MMO1D_FOR_EACH_FLOAT32_ACC_DTYPE(MMO1D_INSTANTIATE_INTERP_VEC_WGRAD)

MMO1D_INSTANTIATE_FAMILY(InterpVec)

}  // namespace cuda
}  // namespace mmo1d
