// Per-call tables of the interpolated taps ('bilinear', 'gaussian'; interp.h): for every channel the
// distinct pixels its taps' samples read (the points), those read with a nonzero coefficient first,
// their merged weights, and for each sample its point, coefficient and derivative in the angle.
// The interpolated families' kernels gather over the points (forward, input gradient) and sum
// dy * x at each point; contract() (interp_contract.cuh) turns those sums into the weight and angle
// gradients. The tables' sizes and the kernels that build them: interp_table_kernels.cuh.
#pragma once

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include "../../interp.h"
#include "common.cuh"
#include "interp_table_kernels.cuh"
#include "launch.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// The tables of one call (build_interp_tables): the views below name their parts.
template <typename acc_t>
struct InterpTables {
  at::Tensor ints,
      accs;         // ints: off | halo | npts_gather | npts_all | spt | scratch; accs: pw | coef | dcoef | scratch
  at::Tensor same;  // (C) ints, when built with_same: channel c has the points of channel c - 1
  int64_t C, R, S;  // channels, row length, samples per channel
  const int2* off() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>()); }
  const int2* halo() const { return reinterpret_cast<const int2*>(ints.data_ptr<int>() + 2 * C * R); }
  const int* npts_gather() const { return ints.data_ptr<int>() + 2 * C * R + 2 * C; }
  const int* npts_all() const { return npts_gather() + C; }
  const int* npts(bool all) const { return all ? npts_all() : npts_gather(); }  // the points a pass reads
  at::Tensor spt() const { return ints.narrow(0, 2 * C * R + 4 * C, C * S).view({C, S}); }
  const acc_t* w() const { return accs.data_ptr<acc_t>(); }
  at::Tensor coef() const { return accs.narrow(0, C * R, C * S).view({C, S}); }
  at::Tensor dcoef() const { return accs.narrow(0, C * R + C * S, C * S).view({C, S}); }
  // As the point kernels read them: the points a pass reads (npts(all)), the same flags if built.
  PointTableView<acc_t> view(bool all) const {
    return PointTableView<acc_t>{off(), w(), npts(all), halo(), same.defined() ? same.data_ptr<int>() : nullptr};
  }
};

template <typename scalar_t, typename acc_t>
InterpTables<acc_t> build_interp_tables(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule,
                                        bool residual, bool with_same = false) {
  const int C = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  const int R = interp_rows(rule, K);
  const int64_t S = int64_t(K) * rule.samples();
  InterpTables<acc_t> t;
  t.C = C;
  t.R = R;
  t.S = S;
  const auto dev = weight.device();
  // ints: off (2CR) | halo (2C) | npts_gather (C) | npts_all (C) | spt (CS) | raw_off (2CR) | raw_nz (CR) | order (CR)
  // (S = K * M with M even: every int2 array starts 8-byte aligned)
  t.ints = at::empty({2 * int64_t(C) * R + 4 * C + C * S + 4 * int64_t(C) * R}, at::TensorOptions(dev).dtype(at::kInt));
  t.accs = at::empty({int64_t(C) * R + 2 * C * S + int64_t(C) * R},
                     at::TensorOptions(dev).dtype(c10::CppTypeToScalarType<acc_t>::value));
  int* ip = t.ints.template data_ptr<int>();
  int* spt = ip + 2 * int64_t(C) * R + 4 * C;
  int* raw = spt + C * S;
  acc_t* ap = t.accs.template data_ptr<acc_t>();
  const at::Tensor angles = theta.to(c10::CppTypeToScalarType<acc_t>::value).contiguous();
  const at::Tensor w = weight.contiguous();
  const InterpTableOutputs<acc_t> out{.off = reinterpret_cast<int2*>(ip),
                                      .pw = ap,
                                      .npts_gather = ip + 2 * int64_t(C) * R + 2 * C,
                                      .npts_all = ip + 2 * int64_t(C) * R + 3 * C,
                                      .halo = reinterpret_cast<int2*>(ip + 2 * int64_t(C) * R),
                                      .spt = spt,
                                      .coef = ap + int64_t(C) * R,
                                      .dcoef = ap + int64_t(C) * R + C * S};
  InterpTablesParams<scalar_t, acc_t> params{.theta = angles.data_ptr<acc_t>(),
                                             .weight = w.data_ptr<scalar_t>(),
                                             .C = C,
                                             .K = K,
                                             .rows = R,
                                             .h = interp_halo(rule, K),
                                             .rule = rule,
                                             .residual = residual,
                                             .out = out,
                                             .scratch = {}};
  if (interp_warp_builder<acc_t>(rule, K)) {
    launch_on_stream(build_interp_tables_warp_kernel<scalar_t, acc_t>, C, 32, interp_warp_smem<acc_t>(rule, K), params);
  } else {
    constexpr int kThreads = 64;
    params.scratch = {.raw_off = reinterpret_cast<int2*>(raw),
                      .raw_w = ap + int64_t(C) * R + 2 * C * S,
                      .raw_nz = raw + 2 * int64_t(C) * R,
                      .order = raw + 3 * int64_t(C) * R};
    launch_on_stream(build_interp_tables_kernel<scalar_t, acc_t>, ceil_div(C, kThreads), kThreads, 0, params);
  }
  if (with_same) {
    t.same = at::empty({C}, t.ints.options());
    launch_on_stream(interp_same_kernel, ceil_div(C, 128), 128, 0, t.off(), t.npts_gather(), t.npts_all(), C, R,
                     t.same.template data_ptr<int>());
  }
  return t;
}

}  // namespace cuda
}  // namespace mmo1d
