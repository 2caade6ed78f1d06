// Per-call tables of the interpolated taps ('bilinear', 'gaussian'; interp.h): for every channel the
// distinct pixels its taps' samples read (the points), those read with a nonzero coefficient first,
// their merged weights, and for each sample its point, coefficient and derivative in the angle.
// The interpolated families' kernels gather over the points (forward, input gradient) and sum
// dy * x at each point; contract() (interp_contract.cuh) turns those sums into the weight and angle
// gradients. The tables' sizes and the kernels that build them: interp_table_kernels.cuh.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "../../interp.h"
#include "../../kept_tables.h"
#include "common.cuh"
#include "cuda_context.h"
#include "interp_table_kernels.cuh"
#include "launch.cuh"
#include "table_cache.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

// The tables of one call (build_interp_tables): the views below name their parts.
template <typename acc_t>
struct InterpTables {
  at::Tensor ints, accs;  // ints: off | halo | npts_gather | npts_all | spt; accs: pw | coef | dcoef
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

// The key of a call's tables beside theta's buffer: everything they depend on but theta and the
// weight (which the cache checks) and the residual form (the cache's variant: it changes the merged
// weights alone).
template <typename scalar_t, typename acc_t>
std::string interp_table_key(const TapRule& rule, int K, bool with_same) {
  auto bits = [](double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof(u));
    return std::to_string(u);
  };
  return "interp:" + std::to_string(static_cast<int>(c10::CppTypeToScalarType<scalar_t>::value)) + ':' +
         std::to_string(sizeof(acc_t)) + ':' + std::to_string(K) + ':' + std::to_string(static_cast<int>(rule.mode)) +
         ':' + bits(rule.sigma) + ':' + bits(rule.radius) + ':' + std::to_string(int(with_same));
}

// The tables of theta and weight, built on the current stream.
template <typename scalar_t, typename acc_t>
InterpTables<acc_t> make_interp_tables(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule,
                                       bool residual, bool with_same) {
  const int C = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  const int R = interp_rows(rule, K);
  const int64_t S = int64_t(K) * rule.samples();
  InterpTables<acc_t> t;
  t.C = C;
  t.R = R;
  t.S = S;
  const auto dev = weight.device();
  const auto acc_type = c10::CppTypeToScalarType<acc_t>::value;
  // ints: off (2CR) | halo (2C) | npts_gather (C) | npts_all (C) | spt (CS); accs: pw (CR) | coef (CS) |
  // dcoef (CS). (S = K * M with M even: every int2 array starts 8-byte aligned.)
  t.ints = at::empty({2 * int64_t(C) * R + 4 * C + C * S}, at::TensorOptions(dev).dtype(at::kInt));
  t.accs = at::empty({int64_t(C) * R + 2 * C * S}, at::TensorOptions(dev).dtype(acc_type));
  int* ip = t.ints.template data_ptr<int>();
  acc_t* ap = t.accs.template data_ptr<acc_t>();
  const at::Tensor angles = theta.to(acc_type).contiguous();
  const at::Tensor w = weight.contiguous();
  const InterpTableOutputs<acc_t> out{.off = reinterpret_cast<int2*>(ip),
                                      .pw = ap,
                                      .npts_gather = ip + 2 * int64_t(C) * R + 2 * C,
                                      .npts_all = ip + 2 * int64_t(C) * R + 3 * C,
                                      .halo = reinterpret_cast<int2*>(ip + 2 * int64_t(C) * R),
                                      .spt = ip + 2 * int64_t(C) * R + 4 * C,
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
    // The thread-per-channel builder's scratch, freed after the call: raw_off (2CR) | raw_nz (CR) |
    // order (CR) ints, raw_w (CR).
    constexpr int kThreads = 64;
    const at::Tensor raw = at::empty({4 * int64_t(C) * R}, t.ints.options());
    const at::Tensor raw_w = at::empty({int64_t(C) * R}, t.accs.options());
    int* rp = raw.data_ptr<int>();
    params.scratch = {.raw_off = reinterpret_cast<int2*>(rp),
                      .raw_w = raw_w.data_ptr<acc_t>(),
                      .raw_nz = rp + 2 * int64_t(C) * R,
                      .order = rp + 3 * int64_t(C) * R};
    launch_on_stream(build_interp_tables_kernel<scalar_t, acc_t>, ceil_div(C, kThreads), kThreads, 0, params);
  }
  if (with_same) {
    t.same = at::empty({C}, t.ints.options());
    launch_on_stream(interp_same_kernel, ceil_div(C, 128), 128, 0, t.off(), t.npts_gather(), t.npts_all(), C, R,
                     t.same.template data_ptr<int>());
  }
  return t;
}

// How a pass uses the tables a training forward keeps (table_cache.cuh): a forward keeps them when
// it records its backward (kept_tables.h); the input gradient (sign -1) reuses them, the weight
// gradient takes them.
inline TablesUse interp_tables_use(bool weight_grad, int sign) {
  if (weight_grad) return TablesUse::kTake;
  if (sign < 0) return TablesUse::kReuse;
  return forward_keeps_tables() ? TablesUse::kKeep : TablesUse::kBuild;
}

// The tables of a call (make_interp_tables), kept from a training forward to its backward.
template <typename scalar_t, typename acc_t>
InterpTables<acc_t> build_interp_tables(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule,
                                        bool residual, TablesUse use, bool with_same = false) {
  const int K = static_cast<int>(weight.size(1));
  InterpTables<acc_t> t;
  const std::vector<at::Tensor> parts =
      call_tables(theta, {weight}, interp_table_key<scalar_t, acc_t>(rule, K, with_same), int(residual), use, [&] {
        t = make_interp_tables<scalar_t, acc_t>(theta, weight, rule, residual, with_same);
        return std::vector<at::Tensor>{t.ints, t.accs, t.same};
      });
  t.C = weight.size(0);
  t.R = interp_rows(rule, K);
  t.S = int64_t(K) * rule.samples();
  t.ints = parts[0];
  t.accs = parts[1];
  t.same = parts[2];
  return t;
}

}  // namespace cuda
}  // namespace mmo1d
