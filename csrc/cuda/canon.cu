// Launcher of the canonical-direction family (canon_kernel.cuh). Its domain: the forward and the
// input gradient at stride 1, channels_last float16 / bfloat16, 16-byte aligned, C a multiple of 16,
// K one of kCanonKs, truncated offsets, and angles whose every block of 16 channels has the offsets of
// one canonical direction. The angles live on the GPU: the direction of each channel block is read
// once per theta buffer (one copy to the host, then cached while the buffer is unchanged, as the
// table cache keys its entries). Not this family's: a call on angles not yet seen during CUDA graph
// capture, on angles that are inference tensors (no version counter), or on a buffer that keeps
// changing (kMaxChanges).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "canon_kernel.cuh"
#include "families.cuh"
#include "table_cache.cuh"

namespace mmo1d {
namespace cuda {

namespace {

constexpr int kCanonKs[] = {31};

// A buffer whose angles changed this many times is not read again: DistributedDataParallel with
// broadcast_buffers=True rewrites every buffer before each forward pass, and a copy to the host per
// call would stall the stream at every layer.
constexpr int kMaxChanges = 2;

// The direction of each channel block of a theta buffer for one K (-1: not one canonical direction),
// on the host and the GPU, and the largest tile of the directions present; or, for a buffer that
// changed more than kMaxChanges times, nothing (`changing`).
struct CanonDirs {
  explicit CanonDirs(c10::weak_intrusive_ptr<c10::StorageImpl> s) : storage(std::move(s)) {}
  std::vector<int8_t> host;
  at::Tensor dev;
  bool all = false;  // every block has a direction
  int smem = 0;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uint32_t version = 0;
  int64_t numel = 0;
  int changes = 0;
  bool changing = false;
};

using DirsKey = std::tuple<int, uintptr_t, int>;  // device, data pointer, K

struct DirsCache {
  std::mutex mutex;
  std::map<DirsKey, std::shared_ptr<const CanonDirs>> entries;
};

DirsCache& dirs_cache() {
  static DirsCache* c = [] {
    auto* cache = new DirsCache();  // never destroyed: tensors must not be freed after CUDA shuts down
    register_theta_cache([] {
      std::lock_guard<std::mutex> lock(dirs_cache().mutex);
      dirs_cache().entries.clear();
    });
    return cache;
  }();
  return *c;
}

template <int K>
int direction_of(float theta) {
  float s, co;
  angle_sincos(theta, &s, &co);
  for (int dir = 0; dir < kCanonDirs; ++dir) {
    bool same = true;
    for (int t = 0; t < K && same; ++t) {
      int dh, dw;
      tap_offset(t, K, s, co, false, &dh, &dw);
      const CanonOffset o = canon_offset(dir, K, t);
      same = dh == o.dh && dw == o.dw;
    }
    if (same) return dir;
  }
  return -1;
}

template <int K>
std::shared_ptr<CanonDirs> classify(const at::Tensor& theta) {
  auto d = std::make_shared<CanonDirs>(theta.storage().getWeakStorageImpl());
  const at::Tensor t = theta.to(at::kCPU);  // the one synchronising copy per theta buffer
  const float* a = t.data_ptr<float>();
  const int64_t blocks = theta.numel() / kCanonCB;
  d->host.assign(blocks, -1);
  d->all = true;
  for (int64_t b = 0; b < blocks; ++b) {
    int dir = direction_of<K>(a[b * kCanonCB]);
    for (int k = 1; k < kCanonCB && dir >= 0; ++k) {
      if (direction_of<K>(a[b * kCanonCB + k]) != dir) dir = -1;
    }
    d->host[b] = static_cast<int8_t>(dir);
    d->all = d->all && dir >= 0;
    if (dir >= 0) d->smem = std::max(d->smem, canon_smem_bytes<K>(dir));
  }
  d->dev = at::from_blob(d->host.data(), {blocks}, at::TensorOptions().dtype(at::kChar)).to(theta.device());
  at::cuda::getCurrentCUDAStream().synchronize();  // the copy is done before any stream reads it
  d->version = theta.unsafeGetTensorImpl()->version_counter().current_version();
  d->numel = theta.numel();
  return d;
}

// The directions of theta's channel blocks, or null where they cannot be known without a copy to
// the host that is not allowed now (graph capture), cannot be cached (inference tensors), or would
// recur at every call (a buffer that keeps changing).
template <int K>
std::shared_ptr<const CanonDirs> canon_dirs(const at::Tensor& theta) {
  if (theta.scalar_type() != at::kFloat || !theta.is_contiguous() || theta.is_inference() ||
      theta.numel() % kCanonCB != 0) {
    return nullptr;
  }
  const uint32_t version = theta.unsafeGetTensorImpl()->version_counter().current_version();
  const DirsKey key{theta.device().index(), reinterpret_cast<uintptr_t>(theta.data_ptr()), K};
  DirsCache& c = dirs_cache();
  int changes = 0;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) {
      const CanonDirs& e = *it->second;
      const auto alive = e.storage.lock();
      const bool same_buffer = alive && alive.get() == theta.storage().unsafeGetStorageImpl() &&
                               e.numel == theta.numel();
      if (same_buffer && e.changing) return nullptr;
      if (same_buffer && e.version == version) return it->second;
      changes = same_buffer ? e.changes + 1 : 0;
      c.entries.erase(it);
    }
  }
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) return nullptr;
  std::shared_ptr<CanonDirs> d;
  if (changes > kMaxChanges) {
    d = std::make_shared<CanonDirs>(theta.storage().getWeakStorageImpl());
    d->numel = theta.numel();
    d->changing = true;
  } else {
    d = classify<K>(theta);
    d->changes = changes;
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.entries.size() >= 1024) c.entries.clear();
  c.entries[key] = d;
  return d->changing ? nullptr : d;
}

// f(std::integral_constant<int, K>) for the compiled K equal to k; false if none is.
template <typename F, size_t... I>
bool with_k(int k, F&& f, std::index_sequence<I...>) {
  return ((k == kCanonKs[I] ? (f(std::integral_constant<int, kCanonKs[I]>{}), true) : false) || ...);
}

template <typename F>
bool with_k(int k, F&& f) {
  return with_k(k, f, std::make_index_sequence<sizeof(kCanonKs) / sizeof(int)>{});
}

template <typename scalar_t, int K>
auto canon_kernel(bool rev) {
  return rev ? canon_gather_nhwc_kernel<scalar_t, K, true> : canon_gather_nhwc_kernel<scalar_t, K, false>;
}

}  // namespace

template <typename scalar_t>
bool CanonGather::plan(const Problem& p, Pass pass, Plan* plan) {
  if constexpr (!std::is_same_v<scalar_t, c10::Half> && !std::is_same_v<scalar_t, c10::BFloat16>) {
    return false;
  } else {
    if (pass == Pass::kWeightGrad || p.stride != 1 || !p.nhwc || !p.aligned || p.floor_rounding ||
        p.C % kCanonCB != 0) {
      return false;
    }
    bool ok = false;
    with_k(p.K, [&](auto k) {
      constexpr int K = decltype(k)::value;
      const auto dirs = canon_dirs<K>(*p.theta);
      if (!dirs || !dirs->all) return;
      const int tiles_h = ceil_div(p.H, kCanonTH), tiles_w = ceil_div(p.W, kCanonTW);
      auto kernel = canon_kernel<scalar_t, K>(pass == Pass::kInputGrad);
      plan->launch = LaunchShape{p.N * (p.C / kCanonCB) * tiles_h * tiles_w, 1, kCanonThreads, dirs->smem};
      plan->path = "canon_nhwc";
      plan->variant = pass == Pass::kInputGrad;
      plan->fg = FastGeometry{static_cast<int>(p.C), p.K, static_cast<int>(p.H), static_cast<int>(p.W),
                              kCanonTH, kCanonTW, tiles_w, tiles_h * tiles_w};
      ok = dirs->smem <= max_dynamic_smem(kernel) && launch_fits(kernel, plan->launch);
    });
    return ok;
  }
}

template <typename scalar_t>
void CanonGather::run(const Plan& plan, const Args<scalar_t>& a) {
  if constexpr (!std::is_same_v<scalar_t, c10::Half> && !std::is_same_v<scalar_t, c10::BFloat16>) {
    TORCH_CHECK(false, "oriented_dwconv1d: the canonical-direction kernels take float16 and bfloat16 only");
  } else {
    const FastGeometry& g = plan.fg;
    const bool rev = plan.variant != 0;
    TORCH_CHECK(rev == (a.sign < 0), "oriented_dwconv1d: canonical-direction plan run for the other pass");
    const at::Tensor weight = a.weight.contiguous();
    const scalar_t* src = a.src.template data_ptr<scalar_t>();
    scalar_t* out = a.out.template data_ptr<scalar_t>();
    const scalar_t* w = weight.template data_ptr<scalar_t>();
    const bool served = with_k(g.K, [&](auto k) {
      constexpr int K = decltype(k)::value;
      const auto dirs = canon_dirs<K>(a.theta);
      TORCH_CHECK(dirs && dirs->all, "oriented_dwconv1d: the angles changed between plan and run");
      auto kernel = canon_kernel<scalar_t, K>(rev);
      const LaunchShape& s = plan.launch;
      prepare_launch(kernel, s, "canonical-direction channels_last gather");
      kernel<<<grid_of(s), s.threads, s.smem, at::cuda::getCurrentCUDAStream()>>>(
          src, out, a.bias, w, dirs->dev.template data_ptr<int8_t>(), a.residual, g.C, g.H, g.W, g.tiles_w,
          g.tiles);
      MMO1D_CUDA_CHECK(cudaGetLastError());
    });
    TORCH_CHECK(served, "oriented_dwconv1d: no canonical-direction kernel for K=", g.K);
  }
}

MMO1D_INSTANTIATE_FAMILY(CanonGather)

}  // namespace cuda
}  // namespace mmo1d
