// Launcher of the tensor-core weight gradient (float16, bfloat16; channels_last, stride 1, rounded taps)
// on large planes: each block of 16 channels that it takes (mma_wgrad_blocks_kernel, from the call's
// tables on the device) is summed by mma_wgrad_kernel, the others by the vector weight gradient in a
// second launch that skips the taken blocks; two reductions write their channels of dw and db. Also the
// planning and launch of mma_wgrad.cuh, which the interpolated family shares.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "../common/cuda_context.h"
#include "../common/tiling.cuh"
#include "../common/wgrad_reduce.cuh"
#include "../families.cuh"
#include "../vec_wgrad/vec_wgrad.cuh"
#include "mma_ptx.cuh"
#include "mma_wgrad.cuh"

#if MMO1D_MMA_TOOLKIT
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "mma_wgrad_kernel.cuh"
#endif

namespace mmo1d {
namespace cuda {

template <typename scalar_t>
constexpr bool kMma16 = std::is_same_v<scalar_t, c10::Half> || std::is_same_v<scalar_t, c10::BFloat16>;

#if MMO1D_MMA_TOOLKIT

namespace {

template <typename scalar_t>
auto mma_kernel() {
  return mma_wgrad_kernel<std::is_same_v<scalar_t, c10::Half>>;
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

}  // namespace

template <typename scalar_t>
bool mma_wgrad_runs_here() {
  if constexpr (!kMma16<scalar_t>) {
    return false;
  } else {
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
}

namespace {

// The shape of an N x C x H x W call (x of x_bytes) at points pts (plan_mma_wgrad). The views (rows, then
// columns): tiles of up to kMmaAlong outputs along the lines, evened out and rounded up to 8 (a line's box
// then starts 128-byte aligned in shared memory, and an ldmatrix block that wraps to the next line stays on
// distinct banks); boxes wider by 2 reach rounded up to 8.
bool mma_wgrad_shape(int64_t N, int64_t C, int H, int W, const MmaWgradPoints& pts, int ph_max, int64_t x_bytes,
                     MmaWgradShape* s) {
  for (int o = 0; o < 2; ++o) {
    const int along = o ? H : W, lines = o ? W : H;
    const int tiles = (along + kMmaAlong - 1) / kMmaAlong;
    const int tv = mma_round_up((along + tiles - 1) / tiles, 8), bw = tv + mma_round_up(2 * pts.reach, 8);
    if (bw > 256) return false;  // a bulk tensor copy's box
    s->view[o] = MmaWgradView{tv, bw, (along + tv - 1) / tv, lines, along};
  }
  s->pts = pts;
  s->budget = static_cast<int>(mma_wgrad_budget());
  // Blocks whose halo across their lines is more than ph_cap, or for which no tile fits: another family.
  for (s->ph_cap = ph_max; s->ph_cap >= 0; --s->ph_cap) {
    const int t0 = mma_tiles(s->view[0], mma_tile_lines(s->view[0], s->ph_cap, pts, s->budget));
    const int t1 = mma_tiles(s->view[1], mma_tile_lines(s->view[1], s->ph_cap, pts, s->budget));
    if (t0 > 0 && t1 > 0) {
      s->max_tiles = std::max(t0, t1);
      break;
    }
  }
  if (s->ph_cap < 0) return false;
  // Chunks of images: kMmaWgradWaves waves of blocks, the partial sums within the workspace.
  const int64_t per_chunk = C / kMmaCB * s->grid_tiles();
  const int64_t part_bytes = C * s->grid_tiles() * (pts.points + 1) * int64_t(sizeof(float));
  const int64_t want = device_blocks(kMmaWgradBlocksPerSM) * kMmaWgradWaves;
  const int64_t max_chunks = std::min<int64_t>(N, wgrad_max_chunks(part_bytes, x_bytes));
  const int64_t chunks = std::clamp<int64_t>(want / per_chunk, 1, max_chunks);
  s->images = static_cast<int>(ceil_div(N, chunks));
  s->chunks = static_cast<int>(ceil_div(N, int64_t(s->images)));
  return true;
}

}  // namespace

template <typename scalar_t>
bool plan_mma_wgrad(const Problem& p, const char* path, const MmaWgradPoints& pts, int ph_max, const Plan& rest,
                    Plan* plan) {
  MmaWgradShape s;
  if (!mma_wgrad_shape(p.N, p.C, static_cast<int>(p.H), static_cast<int>(p.W), pts, ph_max, p.x_bytes, &s)) {
    return false;
  }
  plan->rest = std::make_shared<const Plan>(rest);
  plan->path = path;
  plan->fg = output_geometry(p, p.K);
  plan->mma = std::make_shared<const MmaWgradShape>(s);
  plan->parts = static_cast<int>(s.parts());
  plan->chunk = s.images;
  plan->tile = s.budget;
  plan->launch = LaunchShape{int64_t(s.chunks) * s.grid_tiles(), p.C / kMmaCB, kMmaWarps * 32, s.budget};
  return launch_fits(mma_kernel<scalar_t>(), plan->launch);
}

template <typename scalar_t>
MmaWgradSums launch_mma_wgrad_sums(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                   const PointWgradTables& tables, bool with_bias) {
  const int N = static_cast<int>(x.size(0)), C = static_cast<int>(x.size(1));
  const MmaWgradShape& s = *plan.mma;
  MmaWgradSums m;
  m.cblocks = C / kMmaCB;
  // Per block of 16 channels: its MmaWgradBlock, then (after all of them) whether this family takes it.
  constexpr int64_t kBlockInts = sizeof(MmaWgradBlock) / sizeof(int);
  static_assert(sizeof(MmaWgradBlock) == kBlockInts * sizeof(int), "MmaWgradBlock is a row of ints");
  m.info = at::empty({m.cblocks * (kBlockInts + 1)}, x.options().dtype(at::kInt));
  auto* blocks = reinterpret_cast<MmaWgradBlock*>(m.info.data_ptr<int>());
  const MmaWgradBlocksParams bp{tables, blocks, const_cast<int*>(m.taken()), {s.view[0], s.view[1]}, s.pts, C,
                                s.ph_cap, s.budget};
  launch_planned(mma_wgrad_blocks_kernel, LaunchShape{ceil_div(m.cblocks, int64_t(128)), 1, 128, 0},
                 "tensor-core tile", bp);
  m.partial = at::empty({int64_t(C) * s.pts.points * s.parts()}, x.options().dtype(at::kFloat));
  if (with_bias) m.bpartial = at::empty({int64_t(C) * s.parts()}, x.options().dtype(at::kFloat));
  MmaWgradMaps maps;
  for (int o = 0; o < 2; ++o) {
    const MmaWgradView& v = s.view[o];
    maps.x[o] = tensor_map<scalar_t>(x, o ? 1 : v.bw, o ? v.bw : 1);
    maps.dy[o] = tensor_map<scalar_t>(dy, o ? 1 : v.tv, o ? v.tv : 1);
  }
  const MmaWgradParams mp{tables,
                          blocks,
                          m.partial.data_ptr<float>(),
                          with_bias ? m.bpartial.data_ptr<float>() : nullptr,
                          {s.view[0], s.view[1]},
                          s.pts,
                          N,
                          C,
                          s.images,
                          s.grid_tiles()};
  launch_planned(mma_kernel<scalar_t>(), plan.launch, "tensor-core weight-gradient", mp, maps);
  return m;
}

template <typename scalar_t>
void launch_mma_wgrad_reduce(const Plan& plan, const MmaWgradSums& m, int E, const int* tap_pt, const int* npts,
                             scalar_t* dw, float* sums, scalar_t* db) {
  const MmaWgradShape& s = *plan.mma;
  const int C = static_cast<int>(m.cblocks * kMmaCB);
  const MmaWgradReduceParams<scalar_t> rp{m.blocks(),
                                          m.partial.data_ptr<float>(),
                                          db != nullptr ? m.bpartial.data_ptr<float>() : nullptr,
                                          tap_pt,
                                          npts,
                                          dw,
                                          sums,
                                          db,
                                          C,
                                          E,
                                          s.pts.points,
                                          s.chunks,
                                          s.grid_tiles()};
  const int64_t entries = int64_t(C) * E + (db != nullptr ? C : 0);
  launch_planned(mma_wgrad_reduce_kernel<scalar_t>, LaunchShape{ceil_div(entries, int64_t(8)), 1, 256, 0},
                 "tensor-core weight-gradient reduction", rp);
}

template <typename scalar_t>
void MmaWgrad::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (kMma16<scalar_t>) {
    const at::Tensor& x = a.src;
    const at::Tensor& dy = *a.dy;
    const int C = plan.fg.C, K = plan.fg.K;
    const auto t = build_tables<scalar_t, float>(a.theta, a.weight, a.rule, false, false, 1);
    const PointTableView<float> tables = t.view();
    const bool with_bias = a.db != nullptr;
    const MmaWgradSums m = launch_mma_wgrad_sums<scalar_t>(plan, x, dy, tables.wgrad(), with_bias);

    // The blocks left to the vector weight gradient.
    const Plan& vec = *plan.rest;
    at::Tensor vbpartial;
    const at::Tensor vpartial =
        launch_vec_wgrad_partials<scalar_t>(vec, x, dy, tables, with_bias ? &vbpartial : nullptr, m.taken());
    launch_wgrad_reduce<scalar_t, float>(vpartial, t.tap_pt(), a.out, C, K, vec.parts, 1,
                                         with_bias ? &vbpartial : nullptr, a.db, m.taken(), kMmaCB);
    launch_mma_wgrad_reduce<scalar_t>(plan, m, K, t.tap_pt(), nullptr, a.out.template data_ptr<scalar_t>(), nullptr,
                                      with_bias ? a.db->template data_ptr<scalar_t>() : nullptr);
  }
}

#else  // a CUDA 11 toolkit: no tensor maps, no bulk tensor copies

template <typename scalar_t>
bool mma_wgrad_runs_here() {
  return false;
}

template <typename scalar_t>
bool plan_mma_wgrad(const Problem&, const char*, const MmaWgradPoints&, int, const Plan&, Plan*) {
  return false;
}

template <typename scalar_t>
MmaWgradSums launch_mma_wgrad_sums(const Plan&, const at::Tensor&, const at::Tensor&, const PointWgradTables&, bool) {
  TORCH_CHECK(false, "oriented_dwconv1d: the tensor-core weight gradient needs a build with a CUDA 12 toolkit");
}

template <typename scalar_t>
void launch_mma_wgrad_reduce(const Plan&, const MmaWgradSums&, int, const int*, const int*, scalar_t*, float*,
                             scalar_t*) {
  TORCH_CHECK(false, "oriented_dwconv1d: the tensor-core weight gradient needs a build with a CUDA 12 toolkit");
}

template <typename scalar_t>
void MmaWgrad::run(const Plan&, const Args<scalar_t>&) {
  TORCH_CHECK(false, "oriented_dwconv1d: the tensor-core weight gradient needs a build with a CUDA 12 toolkit");
}

#endif  // MMO1D_MMA_TOOLKIT

template <typename scalar_t>
bool mma_wgrad_domain(const Problem& p, Pass pass, int min_pixels) {
  return pass == Pass::kWeightGrad && p.nhwc && p.stride == 1 && p.aligned && p.C % kMmaCB == 0 &&
         p.H * p.W >= min_pixels && mma_wgrad_runs_here<scalar_t>();
}

// Domain: mma_wgrad_domain on planes of at least kMmaWgradMinPixels, float16 and bfloat16, rounded taps, K
// up to kMmaWgradMaxK; the vector weight gradient's plan must fit too (the blocks left to it: plan->rest).
// A rounded line's points are its taps' distinct points, within K/2 along.
template <typename scalar_t>
bool MmaWgrad::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!kMma16<scalar_t>) {
    return false;
  } else {
    if (!mma_wgrad_domain<scalar_t>(p, pass, kMmaWgradMinPixels) || p.K > kMmaWgradMaxK) return false;
    Plan vec;
    if (!plan_vec_wgrad<scalar_t>(p, p.K, p.K, 1, p.K, &vec, true)) return false;
    const MmaWgradPoints points{p.K, p.K, kMmaMaxPoints, p.K / 2};
    const int ph_max = static_cast<int>(p.K / 2 * kMmaWgradMaxAcross);
    return plan_mma_wgrad<scalar_t>(p, "mma_wgrad", points, ph_max, vec, plan);
  }
}

#define MMO1D_INSTANTIATE_MMA_WGRAD(T)                                                                      \
  template bool mma_wgrad_runs_here<T>();                                                                   \
  template bool mma_wgrad_domain<T>(const Problem&, Pass, int);                                            \
  template bool plan_mma_wgrad<T>(const Problem&, const char*, const MmaWgradPoints&, int, const Plan&, Plan*); \
  template MmaWgradSums launch_mma_wgrad_sums<T>(const Plan&, const at::Tensor&, const at::Tensor&,         \
                                                 const PointWgradTables&, bool);                            \
  template void launch_mma_wgrad_reduce<T>(const Plan&, const MmaWgradSums&, int, const int*, const int*, T*, \
                                           float*, T*);
MMO1D_INSTANTIATE_MMA_WGRAD(c10::Half)
MMO1D_INSTANTIATE_MMA_WGRAD(c10::BFloat16)

MMO1D_INSTANTIATE_FAMILY(MmaWgrad)

}  // namespace cuda
}  // namespace mmo1d
