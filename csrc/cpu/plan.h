// Geometry of a call and the tap plan of the CPU kernels.
//
// The plan groups channels into runs: maximal ranges of consecutive channels whose K taps have the
// same offsets (the models' angle layout has D runs; a single angle, one). Within a run the
// distinct offsets are the run's entries (taps that coincide, e.g. the centre taps at 45 degrees,
// share one); an entry's weight is the sum of its taps' weights, and the gradient of each tap is
// that of its entry. Merged weights are stored entry by entry, the run's channels contiguous:
// merged[run.w0 + e * run.len() + (c - run.c0)] for entry e (counted within the run) of channel c.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "../tap_rule.h"

namespace mmo1d {
namespace cpu {

struct Geometry {
  int64_t N, C, H, W, K, Ho, Wo, s;
};

Geometry make_geometry(const at::Tensor& input, int64_t K, int64_t stride);

struct Offset {
  int64_t dh, dw;
};

struct Run {
  int64_t c0, c1;  // channels [c0, c1)
  int64_t e0, ne;  // entries [e0, e0 + ne) of Plan::entries
  int64_t w0;      // first merged weight of the run
  int64_t len() const { return c1 - c0; }
};

struct Plan {
  int64_t C = 0, K = 0;
  std::vector<Run> runs;
  std::vector<Offset> entries;
  std::vector<int64_t> tap_entry;  // (C, K): entry (within the run) of tap t of channel c
  std::vector<int64_t> run_of;     // (C,): run of channel c
  int64_t merged_size = 0;         // number of merged weights

  // The plan of the transposed taps (offsets negated): the input gradient at stride 1 gathers
  // grad_output at -offset.
  Plan negated() const;
  // The largest |dw| and |dh| over the entries of a run.
  int64_t max_abs_dw(const Run& run) const;
  int64_t max_abs_dh(const Run& run) const;
};

// The plan of the angles theta (C,) for K taps, with offsets rounded as the op defines.
Plan make_plan(const at::Tensor& theta, int64_t K, TapMode mode);

// Padding of merged weights and other per-run arrays on both sides: a vector that overhangs a run
// (line_kernels.h) reads up to a vector's lanes (at most 16) beyond it.
constexpr int64_t kRunPad = 32;

// Merged weights (see above) of the (C, K) weights w, with kRunPad zeros before and after.
template <typename T>
struct MergedWeights {
  std::vector<T> padded;
  const T* data() const { return padded.data() + kRunPad; }
};

template <typename T>
MergedWeights<T> merge_weights(const Plan& plan, const T* w);

// Whether a channels_last input is computed directly on its NHWC memory: the channels' runs are
// long enough to fill vectors (on average at least 4 channels, hence C >= 4 as the NHWC kernels
// need); otherwise the NCHW kernels run on an NCHW copy.
bool use_channels_last_kernels(const at::Tensor& input, const Plan& plan);

// Outputs j in [0, n) whose input index j * step + off lies in [0, length): [*j0, *j1).
inline void valid_span(int64_t off, int64_t step, int64_t length, int64_t n, int64_t* j0, int64_t* j1) {
  // j >= ceil(-off / step) and j <= floor((length - 1 - off) / step), with floor division.
  const int64_t lo = off >= 0 ? 0 : (-off + step - 1) / step;
  const int64_t last = length - 1 - off;
  const int64_t hi = last < 0 ? 0 : last / step + 1;
  *j0 = lo;
  *j1 = hi < n ? hi : n;
  if (*j1 < *j0) {
    *j1 = *j0;
  }
}

// Minimum number of work items per task of at::parallel_for when an item costs `work`
// multiply-adds: about 32K multiply-adds per task, so that small calls stay on one thread.
inline int64_t grain_for(int64_t work) {
  return work >= 32768 ? 1 : 32768 / (work > 0 ? work : 1);
}

}  // namespace cpu
}  // namespace mmo1d
