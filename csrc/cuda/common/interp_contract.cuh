// The weight and angle gradients of the interpolated taps from the weight-gradient kernels' partial
// sums of dy * x at each point (interp_tables.cuh): one kernel per call, every sum in a fixed order
// (deterministic), as in the CPU kernels:
//   G[c, p] = sum over parts of the partial sums of point p,
//   dw[c, t] = sum_m coef[c, t, m] G[c, point of sample (t, m)],
//   dtheta[c] = sum_t w[c, t] sum_m dcoef[c, t, m] G[c, point of sample (t, m)].
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "cuda_context.h"
#include "interp_tables.cuh"

namespace mmo1d {
namespace cuda {

constexpr int kContractThreads = 128;

// The arguments of interp_contract_kernel, built by its launcher.
template <typename scalar_t, typename acc_t>
struct InterpContractParams {
  const acc_t* partial;
  int parts;
  int R;
  const int* map;
  const acc_t* sums;  // (C, R), or null: the sums of the channels of the blocks marked in taken
  const int* taken;   // per block of taken_block channels
  int taken_block;
  const int* counts;
  const int* spt;
  const acc_t* coef;
  const acc_t* dcoef;
  const scalar_t* weight;
  int K;
  int M;
  scalar_t* dw;
  acc_t* dtheta;
};

// One block per channel c. partial: (C, parts, R) sums, the row of the channel's point p being
// map[c * R + p] (or p without a map); with sums, the channels of the blocks marked in taken read their
// row of sums (C, R) instead (another kernel summed them). counts[c]: the points whose sums count
// (samples on other points read 0). Writes dw (C, K) and, if not null, dtheta (C). Shared memory:
// (R + K) acc_t.
template <typename scalar_t, typename acc_t>
__global__ void __launch_bounds__(kContractThreads)
    interp_contract_kernel(const InterpContractParams<scalar_t, acc_t> params) {
  const acc_t* __restrict__ partial = params.partial;
  int parts = params.parts;
  int R = params.R;
  const int* __restrict__ map = params.map;
  const int* __restrict__ counts = params.counts;
  const int* __restrict__ spt = params.spt;
  const acc_t* __restrict__ coef = params.coef;
  const acc_t* __restrict__ dcoef = params.dcoef;
  const scalar_t* __restrict__ weight = params.weight;
  int K = params.K;
  int M = params.M;
  scalar_t* __restrict__ dw = params.dw;
  acc_t* __restrict__ dtheta = params.dtheta;
  extern __shared__ __align__(16) unsigned char smem[];
  acc_t* G = reinterpret_cast<acc_t*>(smem);
  acc_t* terms = G + R;  // each tap's term of dtheta
  const int c = blockIdx.x, n = counts[c];
  const bool own = params.sums != nullptr && params.taken[c / params.taken_block];
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    const int row = map != nullptr ? map[int64_t(c) * R + p] : p;
    if (own) {
      G[p] = params.sums[int64_t(c) * R + row];
      continue;
    }
    const acc_t* src = partial + int64_t(c) * parts * R + row;
    acc_t v = acc_t(0);
    for (int part = 0; part < parts; ++part) v += src[int64_t(part) * R];
    G[p] = v;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < K; t += blockDim.x) {
    acc_t a = acc_t(0), b = acc_t(0);
    const int64_t s0 = (int64_t(c) * K + t) * M;
    for (int m = 0; m < M; ++m) {
      const int p = spt[s0 + m];
      if (p >= 0 && p < n) {
        a += coef[s0 + m] * G[p];
        b += dcoef[s0 + m] * G[p];
      }
    }
    dw[int64_t(c) * K + t] = static_cast<scalar_t>(a);
    terms[t] = b * static_cast<acc_t>(weight[int64_t(c) * K + t]);
  }
  if (dtheta == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    acc_t v = acc_t(0);
    for (int t = 0; t < K; ++t) v += terms[t];
    dtheta[c] = v;
  }
}

// dw (and dtheta) from partial sums (C, parts, t.R) at the points that `all` counts (every point,
// or those of nonzero coefficient), their rows permuted by map (C, t.R) when it is defined; with sums
// (C, t.R), the blocks of taken_block channels marked in taken from those instead.
template <typename scalar_t, typename acc_t>
void contract(const InterpTables<acc_t>& t, const at::Tensor& partial, int64_t parts, const at::Tensor& map, bool all,
              const at::Tensor& weight, at::Tensor& dw, at::Tensor* dtheta, const acc_t* sums = nullptr,
              const int* taken = nullptr, int taken_block = 1) {
  const int64_t C = t.C, K = weight.size(1), M = t.S / K;
  const auto acc_type = c10::CppTypeToScalarType<acc_t>::value;
  const at::Tensor w = weight.contiguous(), spt = t.spt(), coef = t.coef(), dcoef = t.dcoef();
  at::Tensor dwo = dw.is_contiguous() ? dw : at::empty(dw.sizes(), dw.options());
  at::Tensor dto;
  if (dtheta != nullptr) {
    dto = dtheta->scalar_type() == acc_type && dtheta->is_contiguous()
              ? *dtheta
              : at::empty({C}, dtheta->options().dtype(acc_type));
  }
  const int64_t smem = (t.R + K) * int64_t(sizeof(acc_t));
  const InterpContractParams<scalar_t, acc_t> params{
      .partial = partial.data_ptr<acc_t>(),
      .parts = static_cast<int>(parts),
      .R = static_cast<int>(t.R),
      .map = map.defined() ? map.data_ptr<int>() : nullptr,
      .sums = sums,
      .taken = taken,
      .taken_block = taken_block,
      .counts = t.npts(all),
      .spt = spt.data_ptr<int>(),
      .coef = coef.data_ptr<acc_t>(),
      .dcoef = dcoef.data_ptr<acc_t>(),
      .weight = w.data_ptr<scalar_t>(),
      .K = static_cast<int>(K),
      .M = static_cast<int>(M),
      .dw = dwo.data_ptr<scalar_t>(),
      .dtheta = dtheta != nullptr ? dto.data_ptr<acc_t>() : nullptr};
  launch_on_stream(interp_contract_kernel<scalar_t, acc_t>, C, kContractThreads, smem, params);
  if (!dwo.is_same(dw)) dw.copy_(dwo);
  if (dtheta != nullptr && !dto.is_same(*dtheta)) dtheta->copy_(dto);
}

}  // namespace cuda
}  // namespace mmo1d
