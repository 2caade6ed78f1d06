// The deterministic reduction of weight-gradient partial sums that every weight-gradient path
// ends with.
#pragma once

#include "cuda_context.h"
#include "launch.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of wgrad_reduce_kernel, built by its launcher: entries of classes x C channels of K
// taps, `parts` partial sums each.
template <typename scalar_t, typename acc_t>
struct WgradReduceParams {
  int C, K, parts, classes;
  const acc_t* partial;   // (classes x C, parts, K)
  const int* tap_pt;      // (classes x C, K): each tap's point in its class, -1 in the others
  scalar_t* dw;           // (C, K)
  const float* bpartial;  // (C, parts) the bias gradient's partial sums, or null
  scalar_t* db;           // (C)
  const int* skip;        // per block of skip_block channels, or null: 1 where another kernel writes dw and db
  int skip_block;
};

// dw[c, t] = sum over parts of partial[c][part][point(t)], in a fixed order. With parity classes
// (tables of classes * C entries), the tap's point is in the one class whose map has it. With
// bpartial (C x parts bias-gradient partial sums), threads C * K + c also write db[c]. Channels whose
// block is marked in skip are left out.
template <typename scalar_t, typename acc_t>
__global__ void wgrad_reduce_kernel(const WgradReduceParams<scalar_t, acc_t> params) {
  const int C = params.C, K = params.K, parts = params.parts, classes = params.classes;
  const acc_t* __restrict__ partial = params.partial;
  const int* __restrict__ tap_pt = params.tap_pt;
  scalar_t* __restrict__ dw = params.dw;
  const float* __restrict__ bpartial = params.bpartial;
  scalar_t* __restrict__ db = params.db;
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= int64_t(C) * K) {
    const int64_t c = e - int64_t(C) * K;
    if (bpartial == nullptr || c >= C) return;
    if (params.skip != nullptr && params.skip[c / params.skip_block]) return;
    const float* bp = bpartial + c * parts;
    float v = 0.0f;
    for (int u = 0; u < parts; ++u) v += bp[u];
    db[c] = static_cast<scalar_t>(v);
    return;
  }
  int64_t entry = e / K;  // cls * C + c
  if (params.skip != nullptr && params.skip[entry / params.skip_block]) return;
  int j = tap_pt[e];
  for (int cls = 1; j < 0 && cls < classes; ++cls) {
    entry += C;
    j = tap_pt[e + int64_t(cls) * C * K];
  }
  const acc_t* pp = partial + entry * parts * K + j;
  acc_t v = acc_t(0);
  for (int u = 0; u < parts; ++u) v += pp[int64_t(u) * K];
  dw[e] = static_cast<scalar_t>(v);
}

// The second pass of every weight gradient: dw from the partial sums (classes: parity classes of
// the tables, 1 or 4) and, when the kernel summed them, db from the bias gradient's partial sums
// (bpartial: C x parts floats; db: C values in dw's dtype). skip (per block of skip_block channels, on
// the device; stride 1 only), when not null: the channels another kernel writes, left out.
template <typename scalar_t, typename acc_t>
void launch_wgrad_reduce(const at::Tensor& partial, const int* tap_pt, at::Tensor& dw, int C, int K, int parts,
                         int classes, const at::Tensor* bpartial = nullptr, at::Tensor* db = nullptr,
                         const int* skip = nullptr, int skip_block = 1) {
  auto kernel = wgrad_reduce_kernel<scalar_t, acc_t>;
  const bool with_bias = bpartial != nullptr && db != nullptr;
  const LaunchShape s{ceil_div(int64_t(C) * K + (with_bias ? C : 0), 256), 1, 256, 0};
  const WgradReduceParams<scalar_t, acc_t> params{.C = C,
                                                  .K = K,
                                                  .parts = parts,
                                                  .classes = classes,
                                                  .partial = partial.data_ptr<acc_t>(),
                                                  .tap_pt = tap_pt,
                                                  .dw = dw.data_ptr<scalar_t>(),
                                                  .bpartial = with_bias ? bpartial->data_ptr<float>() : nullptr,
                                                  .db = with_bias ? db->data_ptr<scalar_t>() : nullptr,
                                                  .skip = skip,
                                                  .skip_block = skip_block};
  launch_planned(kernel, s, "weight-gradient reduction", params);
}

// The bias gradient alone: db (C values in its dtype) from bpartial (C x parts floats), each channel's
// parts added in order; the channels of the blocks marked in skip (per block of skip_block channels, on
// the device), when not null, left out (another kernel writes them).
template <typename scalar_t>
void launch_bias_reduce(const at::Tensor& bpartial, at::Tensor& db, int C, int parts, const int* skip = nullptr,
                        int skip_block = 1) {
  // The reduction's threads past C x K taps write db: with no taps, all of them.
  const WgradReduceParams<scalar_t, float> params{.C = C,
                                                  .K = 0,
                                                  .parts = parts,
                                                  .classes = 1,
                                                  .partial = nullptr,
                                                  .tap_pt = nullptr,
                                                  .dw = nullptr,
                                                  .bpartial = bpartial.data_ptr<float>(),
                                                  .db = db.data_ptr<scalar_t>(),
                                                  .skip = skip,
                                                  .skip_block = skip_block};
  launch_planned(wgrad_reduce_kernel<scalar_t, float>, LaunchShape{ceil_div(int64_t(C), 256), 1, 256, 0},
                 "bias-gradient reduction", params);
}

}  // namespace cuda
}  // namespace mmo1d
