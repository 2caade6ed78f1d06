// Offsets of the taps, their runs and entries, and the merged weights (see plan.h).
#include "plan.h"

#include <algorithm>
#include <cstdlib>

#include "../oriented_dwconv1d.h"

namespace mmo1d {
namespace cpu {

Geometry make_geometry(const at::Tensor& input, int64_t K, int64_t stride) {
  const int64_t H = input.size(2), W = input.size(3);
  return {input.size(0), input.size(1), H, W, K, out_size(H, stride), out_size(W, stride), stride};
}

Plan make_plan(const at::Tensor& theta, int64_t K, TapMode mode) {
  const at::Tensor th = theta.to(at::kCPU, at::kFloat).contiguous();
  const float* angles = th.data_ptr<float>();
  Plan plan;
  plan.C = th.size(0);
  plan.K = K;
  std::vector<Offset> taps(plan.C * K);
  for (int64_t c = 0; c < plan.C; ++c) {
    float s, co;
    angle_sincos(angles[c], &s, &co);
    for (int64_t t = 0; t < K; ++t) {
      int dh, dw;
      tap_offset(static_cast<int>(t), static_cast<int>(K), s, co, mode, &dh, &dw);
      taps[c * K + t] = {dh, dw};
    }
  }
  const auto same_taps = [&](int64_t a, int64_t b) {
    return std::equal(taps.begin() + a * K, taps.begin() + (a + 1) * K, taps.begin() + b * K,
                      [](const Offset& x, const Offset& y) { return x.dh == y.dh && x.dw == y.dw; });
  };
  plan.tap_entry.resize(plan.C * K);
  plan.run_of.resize(plan.C);
  for (int64_t c0 = 0; c0 < plan.C;) {
    int64_t c1 = c0 + 1;
    while (c1 < plan.C && same_taps(c0, c1)) {
      ++c1;
    }
    Run run{c0, c1, static_cast<int64_t>(plan.entries.size()), 0, plan.merged_size};
    for (int64_t t = 0; t < K; ++t) {
      const Offset o = taps[c0 * K + t];
      int64_t e = 0;
      while (e < run.ne && !(plan.entries[run.e0 + e].dh == o.dh && plan.entries[run.e0 + e].dw == o.dw)) {
        ++e;
      }
      if (e == run.ne) {
        plan.entries.push_back(o);
        ++run.ne;
      }
      for (int64_t c = c0; c < c1; ++c) {
        plan.tap_entry[c * K + t] = e;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      plan.run_of[c] = static_cast<int64_t>(plan.runs.size());
    }
    plan.merged_size += run.ne * run.len();
    plan.runs.push_back(run);
    c0 = c1;
  }
  return plan;
}

Plan Plan::negated() const {
  Plan plan = *this;
  for (Offset& o : plan.entries) {
    o = {-o.dh, -o.dw};
  }
  return plan;
}

int64_t Plan::max_abs_dw(const Run& run) const {
  int64_t m = 0;
  for (int64_t e = run.e0; e < run.e0 + run.ne; ++e) {
    m = std::max<int64_t>(m, std::abs(entries[e].dw));
  }
  return m;
}

int64_t Plan::max_abs_dh(const Run& run) const {
  int64_t m = 0;
  for (int64_t e = run.e0; e < run.e0 + run.ne; ++e) {
    m = std::max<int64_t>(m, std::abs(entries[e].dh));
  }
  return m;
}

template <typename T>
MergedWeights<T> merge_weights(const Plan& plan, const T* w) {
  MergedWeights<T> merged{std::vector<T>(plan.merged_size + 2 * kRunPad, T(0))};
  T* m = merged.padded.data() + kRunPad;
  for (int64_t c = 0; c < plan.C; ++c) {
    const Run& run = plan.runs[plan.run_of[c]];
    for (int64_t t = 0; t < plan.K; ++t) {
      m[run.w0 + plan.tap_entry[c * plan.K + t] * run.len() + (c - run.c0)] += w[c * plan.K + t];
    }
  }
  return merged;
}

template MergedWeights<float> merge_weights<float>(const Plan&, const float*);
template MergedWeights<double> merge_weights<double>(const Plan&, const double*);

bool use_channels_last_kernels(const at::Tensor& input, const Plan& plan) {
  return output_memory_format(input) == at::MemoryFormat::ChannelsLast &&
         static_cast<int64_t>(plan.runs.size()) * 4 <= plan.C;
}

}  // namespace cpu
}  // namespace mmo1d
