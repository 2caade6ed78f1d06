// The samples of the interpolated taps as entries of CPU plans (see interp_plan.h).
#include "interp_plan.h"

#include <algorithm>
#include <cstdlib>

namespace mmo1d {
namespace cpu {

namespace {

// One channel's samples: offsets, coefficients and derivatives, (K, M) each.
struct ChannelSamples {
  std::vector<int> dh, dw;
  std::vector<double> coef, dcoef;
};

template <typename T>
void channel_samples(T theta, int64_t K, const TapRule& rule, ChannelSamples* out) {
  const int M = rule.samples();
  T s, c;
  interp_sincos(theta, &s, &c);
  std::vector<int> dh(M), dw(M);
  std::vector<T> coef(M), dcoef(M);
  for (int64_t t = 0; t < K; ++t) {
    tap_samples<T>(rule, s, c, static_cast<int>(t - K / 2), dh.data(), dw.data(), coef.data(), dcoef.data());
    for (int m = 0; m < M; ++m) {
      out->dh[t * M + m] = dh[m];
      out->dw[t * M + m] = dw[m];
      out->coef[t * M + m] = static_cast<double>(coef[m]);
      out->dcoef[t * M + m] = static_cast<double>(dcoef[m]);
    }
  }
}

// The entries of one channel (offsets with a nonzero coefficient first) and each sample's entry.
struct ChannelEntries {
  std::vector<Offset> entries;
  int64_t nonzero = 0;
  std::vector<int64_t> sample_entry;
};

void channel_entries(const ChannelSamples& cs, ChannelEntries* out) {
  const int64_t n = static_cast<int64_t>(cs.dh.size());
  int lo_h = 0, hi_h = 0, lo_w = 0, hi_w = 0;
  for (int64_t i = 0; i < n; ++i) {
    lo_h = std::min(lo_h, cs.dh[i]);
    hi_h = std::max(hi_h, cs.dh[i]);
    lo_w = std::min(lo_w, cs.dw[i]);
    hi_w = std::max(hi_w, cs.dw[i]);
  }
  const int64_t width = hi_w - lo_w + 1;
  std::vector<int64_t> slot((hi_h - lo_h + 1) * width, -1);  // offset -> entry
  out->entries.clear();
  out->sample_entry.assign(n, -1);
  for (int pass = 0; pass < 2; ++pass) {  // nonzero coefficients, then the rest
    for (int64_t i = 0; i < n; ++i) {
      if (cs.coef[i] == 0.0 && cs.dcoef[i] == 0.0) continue;  // outside the gaussian band: no entry
      if ((cs.coef[i] != 0.0) != (pass == 0)) continue;
      int64_t& e = slot[(cs.dh[i] - lo_h) * width + (cs.dw[i] - lo_w)];
      if (e < 0) {
        e = static_cast<int64_t>(out->entries.size());
        out->entries.push_back({cs.dh[i], cs.dw[i]});
      }
      out->sample_entry[i] = e;
    }
    if (pass == 0) out->nonzero = static_cast<int64_t>(out->entries.size());
  }
}

bool same_entries(const ChannelEntries& a, const ChannelEntries& b) {
  return a.nonzero == b.nonzero && a.entries.size() == b.entries.size() &&
         std::equal(a.entries.begin(), a.entries.end(), b.entries.begin(),
                    [](const Offset& x, const Offset& y) { return x.dh == y.dh && x.dw == y.dw; });
}

}  // namespace

InterpPlan make_interp_plan(const at::Tensor& theta, int64_t K, const TapRule& rule, bool float64) {
  const at::Tensor th = theta.to(at::kCPU, float64 ? at::kDouble : at::kFloat).contiguous();
  const int64_t C = th.size(0), M = rule.samples(), KM = K * M;
  InterpPlan ip;
  ip.M = M;
  ip.sample_entry.resize(C * KM);
  ip.coef.resize(C * KM);
  ip.dcoef.resize(C * KM);
  Plan& plan = ip.all;
  plan.C = C;
  plan.K = K;
  plan.run_of.resize(C);
  ChannelSamples cs{std::vector<int>(KM), std::vector<int>(KM), std::vector<double>(KM), std::vector<double>(KM)};
  ChannelEntries prev, cur;
  std::vector<int64_t> nonzero_of_run;
  for (int64_t c = 0; c < C; ++c) {
    if (float64) {
      channel_samples<double>(th.data_ptr<double>()[c], K, rule, &cs);
    } else {
      channel_samples<float>(th.data_ptr<float>()[c], K, rule, &cs);
    }
    channel_entries(cs, &cur);
    std::copy(cs.coef.begin(), cs.coef.end(), ip.coef.begin() + c * KM);
    std::copy(cs.dcoef.begin(), cs.dcoef.end(), ip.dcoef.begin() + c * KM);
    std::copy(cur.sample_entry.begin(), cur.sample_entry.end(), ip.sample_entry.begin() + c * KM);
    if (c > 0 && same_entries(prev, cur)) {
      plan.runs.back().c1 = c + 1;
    } else {
      plan.runs.push_back(
          Run{c, c + 1, static_cast<int64_t>(plan.entries.size()), static_cast<int64_t>(cur.entries.size()), 0});
      plan.entries.insert(plan.entries.end(), cur.entries.begin(), cur.entries.end());
      nonzero_of_run.push_back(cur.nonzero);
      std::swap(prev, cur);
    }
    plan.run_of[c] = static_cast<int64_t>(plan.runs.size()) - 1;
  }
  for (Run& run : plan.runs) {
    run.w0 = plan.merged_size;
    plan.merged_size += run.ne * run.len();
  }
  ip.gather = plan;
  for (size_t r = 0; r < plan.runs.size(); ++r) ip.gather.runs[r].ne = nonzero_of_run[r];
  return ip;
}

template <typename T>
MergedWeights<T> merge_interp_weights(const InterpPlan& ip, const T* w) {
  const Plan& plan = ip.gather;
  MergedWeights<T> merged{std::vector<T>(plan.merged_size + 2 * kRunPad, T(0))};
  T* m = merged.padded.data() + kRunPad;
  const int64_t K = plan.K, M = ip.M;
  for (int64_t c = 0; c < plan.C; ++c) {
    const Run& run = plan.runs[plan.run_of[c]];
    for (int64_t t = 0; t < K; ++t) {
      for (int64_t i = (c * K + t) * M; i < (c * K + t + 1) * M; ++i) {
        if (ip.coef[i] == 0.0) continue;
        m[run.w0 + ip.sample_entry[i] * run.len() + (c - run.c0)] += static_cast<T>(w[c * K + t] * ip.coef[i]);
      }
    }
  }
  return merged;
}

template MergedWeights<float> merge_interp_weights<float>(const InterpPlan&, const float*);
template MergedWeights<double> merge_interp_weights<double>(const InterpPlan&, const double*);

void contract_interp_grads(const InterpPlan& ip, const Plan& used, const double* grad_merged, const double* w,
                           double* dw, double* dtheta) {
  const int64_t K = used.K, M = ip.M;
  for (int64_t c = 0; c < used.C; ++c) {
    const Run& run = used.runs[used.run_of[c]];
    double dth = 0.0;
    for (int64_t t = 0; t < K; ++t) {
      double gw = 0.0, gt = 0.0;
      for (int64_t i = (c * K + t) * M; i < (c * K + t + 1) * M; ++i) {
        const int64_t e = ip.sample_entry[i];
        if (e < 0 || e >= run.ne) continue;  // no entry, or outside `used`: coefficient 0
        const double g = grad_merged[run.w0 + e * run.len() + (c - run.c0)];
        gw += ip.coef[i] * g;
        gt += ip.dcoef[i] * g;
      }
      dw[c * K + t] = gw;
      dth += w[c * K + t] * gt;
    }
    if (dtheta != nullptr) dtheta[c] = dth;
  }
}

}  // namespace cpu
}  // namespace mmo1d
