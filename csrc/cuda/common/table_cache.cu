// The table-structure cache (table_cache.cuh). Entries are keyed by theta's data pointer and the
// table key, and checked against a weak reference to theta's storage and its version counter, so a
// freed buffer whose address is reused, or an angle changed in place, never hits a stale entry.
// Use from another stream than the building one waits for the build (an event) and tells the
// caching allocator about that stream.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "table_cache.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Enough for every oriented convolution of the largest models (three kinds of tables each) and
// several models at once; the least recently used entry goes first.
constexpr size_t kMaxEntries = 1024;

struct Entry {
  at::Tensor table;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uint32_t version;
  int64_t numel;
  c10::StreamId stream;
  std::shared_ptr<at::cuda::CUDAEvent> built;
  std::list<std::string>::iterator lru;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, Entry> entries;
  std::list<std::string> lru;  // most recent first
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors must not be freed after CUDA shuts down
  return *c;
}

std::string key_string(const at::Tensor& theta, const TableKey& key) {
  std::string s;
  s.reserve(64);
  s += std::to_string(theta.device().index()) + ':' + std::to_string(reinterpret_cast<uintptr_t>(theta.data_ptr()));
  s += ':' + std::to_string(static_cast<int>(key.kind)) + ':' + std::to_string(key.K) + ':' +
       std::to_string(static_cast<int>(key.mode)) + ':' + std::to_string(key.sign) + ':' + std::to_string(key.classes);
  return s;
}

bool still_valid(const Entry& e, const at::Tensor& theta, uint32_t version) {
  if (e.version != version || e.numel != theta.numel()) return false;
  const auto alive = e.storage.lock();
  return alive && alive.get() == theta.storage().unsafeGetStorageImpl();
}

}  // namespace

at::Tensor cached_table_structure(const at::Tensor& theta, const TableKey& key,
                                  const std::function<at::Tensor(const at::Tensor&)>& build) {
  // Inference tensors (made under torch.inference_mode, e.g. a model moved to the GPU there) have no
  // version counter to check against.
  const bool cacheable = theta.scalar_type() == at::kFloat && theta.is_contiguous() && theta.is_cuda() &&
                         !theta.is_inference() &&
                         c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None;
  if (!cacheable) return build(theta.to(at::kFloat).contiguous());
  const uint32_t version = theta.unsafeGetTensorImpl()->version_counter().current_version();
  const std::string k = key_string(theta, key);
  const auto stream = at::cuda::getCurrentCUDAStream();
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.entries.find(k);
    if (it != c.entries.end()) {
      Entry& e = it->second;
      if (still_valid(e, theta, version)) {
        c.lru.splice(c.lru.begin(), c.lru, e.lru);
        if (stream.id() != e.stream) {
          e.built->block(stream);
          c10::cuda::CUDACachingAllocator::recordStream(e.table.storage().data_ptr(), stream);
        }
        return e.table;
      }
      c.lru.erase(e.lru);
      c.entries.erase(it);
    }
  }
  at::Tensor table = build(theta);
  auto built = std::make_shared<at::cuda::CUDAEvent>();
  built->record(stream);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.entries.count(k) == 0) {
    while (c.entries.size() >= kMaxEntries) {
      c.entries.erase(c.lru.back());
      c.lru.pop_back();
    }
    c.lru.push_front(k);
    c.entries.emplace(k, Entry{table, theta.storage().getWeakStorageImpl(), version, theta.numel(), stream.id(), built,
                               c.lru.begin()});
  }
  return table;
}

int64_t table_cache_size() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return static_cast<int64_t>(c.entries.size());
}

void clear_table_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.entries.clear();
  c.lru.clear();
}

}  // namespace cuda
}  // namespace mmo1d
