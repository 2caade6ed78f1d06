// A cache of the angle-dependent part of the per-call tables: offsets, points, segments, halos and
// tap -> point maps depend only on theta, K, the rounding rule, the sign and the parity classes, so they
// are built once per theta buffer and kept while that buffer lives unchanged (same storage, same
// version counter). Merged weights still follow the weight of each call, except in the interpolated
// taps' tables, which a training forward keeps for its own backward (call_tables).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

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

// How a pass of a call uses the tables that a training forward keeps for its backward.
enum class TablesUse {
  kBuild,  // a forward that records no backward: build them, keep nothing
  kKeep,   // a forward that records its backward: build them and keep them, in place of the entry's
  kReuse,  // the input gradient: the kept ones if still valid, else build and keep them
  kTake,   // the weight gradient, the last pass to read them: the kept ones if still valid, of any
           // variant (it reads none of what differs), and forget them; else build them
};

// Tables that depend on theta and on other tensors of the call (the interpolated taps' tables, which
// hold merged weights), kept from a forward to its backward under `key` beside theta's buffer: the
// kept tensors are valid while theta and every tensor of `deps` are unchanged since they were built
// (same storage, data pointer and version counter) and the entry's variant is `variant`. Only the
// backward reads what a forward kept, so a weight changed behind the version counter between steps
// (writes through .data, as averaged models make) is never read stale. Not kept: inference tensors
// among theta and deps, calls during graph capture.
std::vector<at::Tensor> call_tables(const at::Tensor& theta, const std::vector<at::Tensor>& deps,
                                    const std::string& key, int variant, TablesUse use,
                                    const std::function<std::vector<at::Tensor>()>& build);

// Number of cached and kept tables (for tests and diagnostics), and emptying the cache.
int64_t table_cache_size();
void clear_table_cache();

}  // namespace cuda
}  // namespace mmo1d
