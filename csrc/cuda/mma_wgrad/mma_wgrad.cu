// Launcher of the tensor-core weight gradient (float16, bfloat16; channels_last, stride 1, rounded taps)
// on large planes: each block of 16 channels that it takes (mma_wgrad_blocks_kernel, from the call's
// tables on the device) is summed by mma_wgrad_kernel, the others by the vector weight gradient in a
// second launch that skips the taken blocks; two reductions write their channels of dw and db.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "../vec_wgrad/vec_wgrad.cuh"
#include "mma_ptx.cuh"

#if MMO1D_MMA_TOOLKIT
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "mma_wgrad_kernel.cuh"
#endif

namespace mmo1d {
namespace cuda {

#if MMO1D_MMA_TOOLKIT

namespace {

template <typename scalar_t>
constexpr bool kMma16 = std::is_same_v<scalar_t, c10::Half> || std::is_same_v<scalar_t, c10::BFloat16>;

template <typename scalar_t>
auto mma_kernel() {
  return mma_wgrad_kernel<std::is_same_v<scalar_t, c10::Half>>;
}

// Whether the current device runs the kernel's tensor-core code: sm_90 or later, and machine code
// built from sm_90 PTX or later (a build for older architectures holds an empty kernel, even where
// the driver compiles its PTX for this device). Asked once per device.
template <typename scalar_t>
bool mma_runs_here() {
  static std::mutex mutex;
  static std::map<int, bool> answers;
  int dev = 0;
  MMO1D_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = answers.find(dev);
  if (it != answers.end()) return it->second;
  bool runs = at::cuda::getCurrentDeviceProperties()->major >= 9;
  if (runs) {
    cudaFuncAttributes attr;
    MMO1D_CUDA_CHECK(cudaFuncGetAttributes(&attr, mma_kernel<scalar_t>()));
    runs = attr.ptxVersion >= 90 && attr.binaryVersion >= 90;
  }
  answers.emplace(dev, runs);
  return runs;
}

// The views of an H x W plane at K taps (rows, then columns): tiles of up to kMmaAlong outputs along
// the lines, evened out and rounded up to 8 (a line's box then starts 128-byte aligned in shared
// memory, and an ldmatrix block that wraps to the next line stays on distinct banks); boxes wider by
// 2 K/2 rounded up to 8.
struct MmaWgradShape {
  MmaWgradView view[2];
  int ph_cap = 0, max_tiles = 0, budget = 0;
};

bool mma_wgrad_shape(int H, int W, int K, int64_t budget, MmaWgradShape* s) {
  const int kh = K / 2;
  for (int o = 0; o < 2; ++o) {
    const int along = o ? H : W, lines = o ? W : H;
    const int tiles = (along + kMmaAlong - 1) / kMmaAlong;
    const int tv = mma_round_up((along + tiles - 1) / tiles, 8), bw = tv + mma_round_up(2 * kh, 8);
    if (bw > 256) return false;  // a bulk tensor copy's box
    s->view[o] = MmaWgradView{tv, bw, (along + tv - 1) / tv, lines, along};
  }
  s->budget = static_cast<int>(budget);
  // Blocks whose halo across their lines is more than kMmaWgradMaxAcross of K/2 (the diagonals: their
  // square halo), or for which no tile fits: the vector weight gradient.
  for (s->ph_cap = static_cast<int>(kh * kMmaWgradMaxAcross); s->ph_cap >= 0; --s->ph_cap) {
    const int t0 = mma_tiles(s->view[0], mma_tile_lines(s->view[0], s->ph_cap, K, s->budget));
    const int t1 = mma_tiles(s->view[1], mma_tile_lines(s->view[1], s->ph_cap, K, s->budget));
    if (t0 > 0 && t1 > 0) {
      s->max_tiles = std::max(t0, t1);
      return true;
    }
  }
  return false;
}

// Blocks a (image, 16 channels): half the most tiles, so that blocks of few tiles leave few blocks
// empty and the others take two.
int mma_grid_tiles(const MmaWgradShape& s) {
  return (s.max_tiles + 1) / 2;
}

// The shared memory of kMmaWgradBlocksPerSM blocks' share of a multiprocessor, within the device's limit.
int64_t mma_wgrad_budget() {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t share = int64_t(prop->sharedMemPerMultiprocessor) / kMmaWgradBlocksPerSM -
                        int64_t(prop->reservedSharedMemPerBlock) - 128;
  return std::min<int64_t>(share, int64_t(prop->sharedMemPerBlockOptin)) / 128 * 128;
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaDriverEntryPointQueryResult q;
    void* f = nullptr;
#if CUDART_VERSION >= 12050
    MMO1D_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
#else
    MMO1D_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q));
#endif
    if (q == cudaDriverEntryPointSuccess) fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  });
  TORCH_CHECK(fn != nullptr, "oriented_dwconv1d: the CUDA driver has no cuTensorMapEncodeTiled");
  return fn;
}

// A map of t (N, C, H, W) channels_last with boxes of 8 channels x bw x bh pixels, zeros outside.
template <typename scalar_t>
CUtensorMap tensor_map(const at::Tensor& t, int bw, int bh) {
  const cuuint64_t C = t.size(1), H = t.size(2), W = t.size(3), N = t.size(0), e = sizeof(scalar_t);
  const cuuint64_t dims[4] = {C, W, H, N}, strides[3] = {C * e, W * C * e, H * W * C * e};
  const cuuint32_t box[4] = {8, cuuint32_t(bw), cuuint32_t(bh), 1}, steps[4] = {1, 1, 1, 1};
  const auto type = std::is_same_v<scalar_t, c10::Half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUtensorMap m;
  const CUresult r = tensor_map_encoder()(&m, type, 4, t.data_ptr(), dims, strides, box, steps,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "oriented_dwconv1d: cuTensorMapEncodeTiled failed (", std::to_string(int(r)),
              ") for ", shape_str(t), " with a box of 8 x ", std::to_string(bw), " x ", std::to_string(bh));
  return m;
}

// The problem of a weight-gradient call as planned (its plan needs the vector family's for the blocks
// this family leaves).
Problem wgrad_problem(const at::Tensor& x, int K, const at::Tensor& theta, TapRule rule) {
  return Problem{x.size(0), x.size(1), x.size(2), x.size(3), K, 1, true, true, static_cast<int64_t>(x.nbytes()),
                 &theta, rule};
}

}  // namespace

// Domain: the weight gradient, float16 and bfloat16, channels_last, stride 1, rounded taps, C a
// multiple of 16, 16-byte aligned tensors, planes of at least kMmaWgradMinPixels, K up to
// kMmaWgradMaxK, a device and build of sm_90 or later; the vector weight gradient's plan must fit too
// (the blocks left to it).
template <typename scalar_t>
bool MmaWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!kMma16<scalar_t>) {
    return false;
  } else {
    if (pass != Pass::kWeightGrad || !p.nhwc || p.stride != 1 || !p.aligned || p.C % kMmaCB != 0) return false;
    if (p.H * p.W < kMmaWgradMinPixels || p.K > kMmaWgradMaxK || !mma_runs_here<scalar_t>()) return false;
    MmaWgradShape s;
    if (!mma_wgrad_shape(static_cast<int>(p.H), static_cast<int>(p.W), p.K, mma_wgrad_budget(), &s)) return false;
    const int64_t part_bytes = p.C * p.N * s.max_tiles * (p.K + 1) * int64_t(sizeof(float));
    if (part_bytes > std::max<int64_t>(p.x_bytes / kWgradWorkspaceShare, kWgradMinWorkspace)) return false;
    Plan vec;
    if (!plan_vec_wgrad<scalar_t>(p, p.K, p.K, 1, p.K, &vec, true)) return false;
    plan->path = "mma_wgrad";
    plan->fg = output_geometry(p, p.K);
    plan->parts = static_cast<int>(p.N * s.max_tiles);
    plan->tile = s.budget;
    plan->launch = LaunchShape{p.N * mma_grid_tiles(s), p.C / kMmaCB, kMmaWarps * 32, s.budget};
    return launch_fits(mma_kernel<scalar_t>(), plan->launch);
  }
}

template <typename scalar_t>
void MmaWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (kMma16<scalar_t>) {
    const FastGeometry& g = plan.fg;
    const at::Tensor& x = a.src;
    const at::Tensor& dy = *a.dy;
    const int N = static_cast<int>(x.size(0)), C = g.C, K = g.K, cblocks = C / kMmaCB;
    MmaWgradShape s;
    TORCH_CHECK(mma_wgrad_shape(g.H, g.W, K, plan.tile, &s) && int64_t(N) * s.max_tiles == plan.parts,
                "oriented_dwconv1d: the tensor-core weight gradient's tiles changed since its plan");
    const auto t = build_tables<scalar_t, float>(a.theta, a.weight, a.rule, false, false, 1);
    const PointTableView<float> tables = t.view();
    // Per block of 16 channels: its MmaWgradBlock, then (after all of them) whether this family takes it.
    constexpr int64_t kBlockInts = sizeof(MmaWgradBlock) / sizeof(int);
    static_assert(sizeof(MmaWgradBlock) == kBlockInts * sizeof(int), "MmaWgradBlock is a row of ints");
    at::Tensor block_info = at::empty({int64_t(cblocks) * (kBlockInts + 1)}, x.options().dtype(at::kInt));
    auto* blocks = reinterpret_cast<MmaWgradBlock*>(block_info.data_ptr<int>());
    int* taken = block_info.data_ptr<int>() + int64_t(cblocks) * kBlockInts;
    const MmaWgradBlocksParams bp{tables.wgrad(), blocks, taken, {s.view[0], s.view[1]}, C, K, s.ph_cap, s.budget};
    launch_planned(mma_wgrad_blocks_kernel, LaunchShape{ceil_div(cblocks, 128), 1, 128, 0}, "tensor-core tile", bp);

    const bool with_bias = a.db != nullptr;
    const int64_t parts = int64_t(N) * s.max_tiles;
    at::Tensor partial = at::empty({int64_t(C) * parts * K}, x.options().dtype(at::kFloat));
    at::Tensor bpartial = with_bias ? at::empty({int64_t(C) * parts}, x.options().dtype(at::kFloat)) : at::Tensor();
    MmaWgradMaps maps;
    for (int o = 0; o < 2; ++o) {
      const MmaWgradView& v = s.view[o];
      maps.x[o] = tensor_map<scalar_t>(x, o ? 1 : v.bw, o ? v.bw : 1);
      maps.dy[o] = tensor_map<scalar_t>(dy, o ? 1 : v.tv, o ? v.tv : 1);
    }
    const MmaWgradParams mp{tables.wgrad(),
                            blocks,
                            partial.data_ptr<float>(),
                            with_bias ? bpartial.data_ptr<float>() : nullptr,
                            {s.view[0], s.view[1]},
                            N,
                            C,
                            K,
                            s.max_tiles,
                            mma_grid_tiles(s)};
    launch_planned(mma_kernel<scalar_t>(), plan.launch, "tensor-core weight-gradient", mp, maps);

    // The blocks left to the vector weight gradient.
    Plan vec;
    TORCH_CHECK(plan_vec_wgrad<scalar_t>(wgrad_problem(x, K, a.theta, a.rule), K, K, 1, K, &vec, true),
                "oriented_dwconv1d: the vector weight gradient no longer fits the call planned with it");
    at::Tensor vbpartial;
    const at::Tensor vpartial =
        launch_vec_wgrad_partials<scalar_t>(vec, x, dy, tables, with_bias ? &vbpartial : nullptr, taken);
    launch_wgrad_reduce<scalar_t, float>(vpartial, t.tap_pt(), a.out, C, K, vec.parts, 1,
                                         with_bias ? &vbpartial : nullptr, a.db, taken, kMmaCB);
    const MmaWgradReduceParams<scalar_t> rp{blocks,
                                            partial.data_ptr<float>(),
                                            with_bias ? bpartial.data_ptr<float>() : nullptr,
                                            t.tap_pt(),
                                            a.out.template data_ptr<scalar_t>(),
                                            with_bias ? a.db->template data_ptr<scalar_t>() : nullptr,
                                            N,
                                            C,
                                            K,
                                            s.max_tiles};
    const int64_t entries = int64_t(C) * K + (with_bias ? C : 0);
    launch_planned(mma_wgrad_reduce_kernel<scalar_t>, LaunchShape{ceil_div(entries, 8), 1, 256, 0},
                   "tensor-core weight-gradient reduction", rp);
  }
}

#else  // a CUDA 11 toolkit: no tensor maps, no bulk tensor copies

template <typename scalar_t>
bool MmaWgrad::plan(const Problem&, Pass, Plan*) {
  return false;
}

template <typename scalar_t>
void MmaWgrad::run(const Plan&, const Args<scalar_t>&) {
  TORCH_CHECK(false, "oriented_dwconv1d: the tensor-core weight gradient needs a build with a CUDA 12 toolkit");
}

#endif  // MMO1D_MMA_TOOLKIT

MMO1D_INSTANTIATE_FAMILY(MmaWgrad)

}  // namespace cuda
}  // namespace mmo1d
