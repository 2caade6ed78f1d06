// Launcher of the tensor-core gather (mma_kernel.cuh): stride-1 forward and input gradient of
// float16 and bfloat16 channels_last tensors (C a multiple of 16, 16-byte aligned), on devices of
// compute capability 8.0 and above, while tensor cores are allowed (set_tensor_cores).
#include <ATen/cuda/CUDAContext.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "families.cuh"
#include "mma_kernel.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Allowed unless MMO1D_TENSOR_CORES=0 at start; set_tensor_cores() changes it.
std::atomic<bool>& tensor_cores_flag() {
  static std::atomic<bool> flag{[] {
    const char* v = std::getenv("MMO1D_TENSOR_CORES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }()};
  return flag;
}

bool set_tensor_cores(bool enabled) {
  return tensor_cores_flag().exchange(enabled);
}

bool tensor_cores_enabled() {
  return tensor_cores_flag().load();
}

// Shared memory for the staged planes: enough for larger passes (two blocks per SM with the
// tables of K = 31), and at least one output row of the worst halo (|a|, |b| <= K / 2) at tile size T.
constexpr int64_t kMmaPlaneBudget = 96 * 1024;

int mma_tile(int64_t H, int64_t W) {
  const int64_t m = std::max(H, W);
  return m >= 64 ? 64 : static_cast<int>((m + 7) / 8 * 8);
}

int64_t mma_worst_planes(int K, int T) {
  const int hb = K / 2, hl = (hb + 7) & ~7;
  const int pc = ((hl + T + hb + 15 - 8 + 15) & ~15) + 8;
  return int64_t(kMmaCB) * 2 * (1 + 2 * hb) * pc;
}

template <typename T>
constexpr bool kMmaDtype = std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;

}  // namespace

template <typename scalar_t>
bool MmaGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!kMmaDtype<scalar_t>) {
    return false;
  } else {
    if (!tensor_cores_enabled() || pass == Pass::kWeightGrad || !p.nhwc || !p.aligned || p.stride != 1 ||
        p.C % kMmaCB != 0 || at::cuda::getCurrentDeviceProperties()->major < 8) {
      return false;
    }
    const int T = mma_tile(p.H, p.W);
    const int64_t budget = std::max(kMmaPlaneBudget, mma_worst_planes(p.K, T));
    const int64_t tiles = int64_t(ceil_div(p.H, T)) * ceil_div(p.W, T);
    plan->path = "mma_nhwc";
    plan->variant = T;
    plan->tile = budget;
    const int64_t smem = budget + int64_t(kMmaCB) * mma_table_bytes(p.K);
    plan->launch = LaunchShape{p.N * tiles * (p.C / kMmaCB), 1, kMmaThreads, smem};
    return launch_fits(mma_gather_nhwc_kernel<scalar_t>, plan->launch);
  }
}

template <typename scalar_t>
void MmaGather::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (kMmaDtype<scalar_t>) {
    const int C = static_cast<int>(a.src.size(1)), H = static_cast<int>(a.src.size(2));
    const int W = static_cast<int>(a.src.size(3)), K = static_cast<int>(a.weight.size(1));
    const auto opts = a.theta.options();
    at::Tensor groups = at::empty({int64_t(C) * 2 * (K + 1) * 4}, opts.dtype(at::kInt));
    at::Tensor weights = at::empty({int64_t(C) * 2 * mma_weight_capacity(K)}, opts.dtype(at::kFloat));
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    build_mma_tables_kernel<scalar_t><<<ceil_div(2 * C, 128), 128, 0, stream>>>(
        a.theta.template data_ptr<float>(), a.weight.template data_ptr<scalar_t>(), C, K, a.floor_rounding, a.residual, a.sign,
        reinterpret_cast<int4*>(groups.data_ptr<int>()), weights.data_ptr<float>());
    MMO1D_CUDA_CHECK(cudaGetLastError());
    const int T = plan.variant;
    const int tiles_w = ceil_div(W, T), tiles = ceil_div(H, T) * tiles_w;
    auto kernel = mma_gather_nhwc_kernel<scalar_t>;
    const LaunchShape& s = plan.launch;
    prepare_launch(kernel, s, "tensor-core gather");
    kernel<<<grid_of(s), s.threads, s.smem, stream>>>(
        a.src.template data_ptr<scalar_t>(), a.out.template data_ptr<scalar_t>(), a.bias,
        reinterpret_cast<const int4*>(groups.data_ptr<int>()), weights.data_ptr<float>(), C, H, W, K, T, tiles_w,
        tiles, static_cast<int>(plan.tile));
    MMO1D_CUDA_CHECK(cudaGetLastError());
  }
}

MMO1D_INSTANTIATE_FAMILY(MmaGather)

}  // namespace cuda

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  m.def("set_tensor_cores(bool enabled) -> bool", &cuda::set_tensor_cores);
  m.def("tensor_cores_enabled() -> bool", &cuda::tensor_cores_enabled);
}

}  // namespace mmo1d
