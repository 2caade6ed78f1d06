// A cache of the angle-dependent part of the per-call tables: offsets, points, segments, halos and
// tap -> point maps depend only on theta, K, the rounding rule, the sign and the parity classes, so they
// are built once per theta buffer and kept while that buffer lives unchanged (same storage, same
// version counter). Merged weights still follow the weight of each call.
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "../../tap_rule.h"

namespace mmo1d {
namespace cuda {

// What a cached structure is for: the point tables (TablesT) or the segment tables (SegTables).
enum class TableKind { kPoints, kSegments };

struct TableKey {
  TableKind kind;
  int K;
  TapMode mode;  // the rounding of the offsets
  int sign;
  int classes;
};

// The int tensor of the structure for this theta (float32, contiguous, on the current device) and
// key: from the cache when theta's buffer is unchanged since it was built, else from build(theta)
// (on the current stream), which is then cached. theta tensors that are not float32 and contiguous,
// inference tensors, and calls during CUDA graph capture, are built and not cached.
at::Tensor cached_table_structure(const at::Tensor& theta, const TableKey& key,
                                  const std::function<at::Tensor(const at::Tensor&)>& build);

// Number of cached structures (for tests and diagnostics), and emptying the cache.
int64_t table_cache_size();
void clear_table_cache();

}  // namespace cuda
}  // namespace mmo1d
