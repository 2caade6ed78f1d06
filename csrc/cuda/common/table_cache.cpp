// The table cache (table_cache.cuh). Entries are keyed by theta's data pointer and the table key, and
// checked against weak references to the storages of the tensors they were built from (theta, and the
// weight for the interpolated tables), their data pointers and version counters, so a freed buffer
// whose address is reused, or a tensor changed in place, never hits a stale entry.
// Use from another stream than the building one waits for the build (an event) and tells the
// caching allocator about that stream.
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_context.h"
#include "table_cache.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Enough for every oriented convolution of the largest models (three kinds of tables each) and
// several models at once; the least recently used entry goes first.
constexpr size_t kMaxEntries = 1024;

// A tensor the tables were built from, as it was then.
struct Stamp {
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  const void* data;
  uint32_t version;
  int64_t numel;
};

struct Entry {
  std::vector<at::Tensor> tables;
  std::vector<Stamp> deps;
  int variant;
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

std::string theta_key(const at::Tensor& theta) {
  return std::to_string(theta.device().index()) + ':' + std::to_string(reinterpret_cast<uintptr_t>(theta.data_ptr()));
}

std::string key_string(const at::Tensor& theta, const TableKey& key) {
  std::string s = theta_key(theta);
  s += ':' + std::to_string(static_cast<int>(key.kind)) + ':' + std::to_string(key.K) + ':' +
       std::to_string(static_cast<int>(key.mode)) + ':' + std::to_string(key.sign) + ':' + std::to_string(key.classes);
  return s;
}

Stamp stamp(const at::Tensor& t) {
  const uint32_t version = t.unsafeGetTensorImpl()->version_counter().current_version();
  return Stamp{t.storage().getWeakStorageImpl(), t.data_ptr(), version, t.numel()};
}

bool unchanged(const Stamp& s, const at::Tensor& t) {
  if (s.version != t.unsafeGetTensorImpl()->version_counter().current_version() || s.numel != t.numel() ||
      s.data != t.data_ptr()) {
    return false;
  }
  const auto alive = s.storage.lock();
  return alive && alive.get() == t.storage().unsafeGetStorageImpl();
}

// Inference tensors (made under torch.inference_mode, e.g. a model moved to the GPU there) have no
// version counter to check against; a graph being captured must not keep tables of its own pool.
bool cacheable(const std::vector<at::Tensor>& deps) {
  for (const auto& t : deps) {
    if (!t.is_cuda() || t.is_inference()) return false;
  }
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None;
}

// Entry k's tables when every dep is unchanged since they were built and the variant fits (any_variant:
// any), made usable on the current stream; forget: the entry goes, used or not. An entry that no
// longer fits goes too.
bool find(const std::string& k, const std::vector<at::Tensor>& deps, int variant, bool any_variant, bool forget,
          std::vector<at::Tensor>* tables) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(k);
  if (it == c.entries.end()) return false;
  Entry& e = it->second;
  bool valid = (any_variant || e.variant == variant) && e.deps.size() == deps.size();
  for (size_t i = 0; valid && i < deps.size(); ++i) valid = unchanged(e.deps[i], deps[i]);
  if (valid) {
    const auto stream = at::cuda::getCurrentCUDAStream();
    if (stream.id() != e.stream) {
      e.built->block(stream);
      for (const auto& t : e.tables) {
        if (t.defined()) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
      }
    }
    *tables = e.tables;
    if (!forget) {
      c.lru.splice(c.lru.begin(), c.lru, e.lru);
      return true;
    }
  }
  c.lru.erase(e.lru);
  c.entries.erase(it);
  return valid;
}

// Keeps tables just built on the current stream from deps as entry k, in place of any before.
void keep(const std::string& k, const std::vector<at::Tensor>& deps, int variant, std::vector<at::Tensor> tables) {
  auto built = std::make_shared<at::cuda::CUDAEvent>();
  const auto stream = at::cuda::getCurrentCUDAStream();
  built->record(stream);
  std::vector<Stamp> stamps;
  stamps.reserve(deps.size());
  for (const auto& t : deps) stamps.push_back(stamp(t));
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(k);
  if (it != c.entries.end()) {
    c.lru.erase(it->second.lru);
    c.entries.erase(it);
  }
  while (c.entries.size() >= kMaxEntries) {
    c.entries.erase(c.lru.back());
    c.lru.pop_back();
  }
  c.lru.push_front(k);
  c.entries.emplace(k, Entry{std::move(tables), std::move(stamps), variant, stream.id(), built, c.lru.begin()});
}

}  // namespace

at::Tensor cached_table_structure(const at::Tensor& theta, const TableKey& key,
                                  const std::function<at::Tensor(const at::Tensor&)>& build) {
  if (theta.scalar_type() != at::kFloat || !theta.is_contiguous() || !cacheable({theta})) {
    return build(theta.to(at::kFloat).contiguous());
  }
  const std::string k = key_string(theta, key);
  std::vector<at::Tensor> tables;
  if (find(k, {theta}, 0, false, false, &tables)) return tables[0];
  at::Tensor table = build(theta);
  keep(k, {theta}, 0, {table});
  return table;
}

std::vector<at::Tensor> call_tables(const at::Tensor& theta, const std::vector<at::Tensor>& deps,
                                    const std::string& key, int variant, TablesUse use,
                                    const std::function<std::vector<at::Tensor>()>& build) {
  std::vector<at::Tensor> all{theta};
  all.insert(all.end(), deps.begin(), deps.end());
  if (use == TablesUse::kBuild || !cacheable(all)) return build();
  const std::string k = theta_key(theta) + ":call:" + key;
  std::vector<at::Tensor> tables;
  if (use != TablesUse::kKeep && find(k, all, variant, use == TablesUse::kTake, use == TablesUse::kTake, &tables)) {
    return tables;
  }
  tables = build();
  if (use != TablesUse::kTake) keep(k, all, variant, tables);
  return tables;
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
