// The interpolated taps' points at stride 2, split into the four parity classes of the channels_last
// weight gradient (vec_wgrad_nhwc_kernel with P = 2): a point (dh, dw) of an output at (2p, 2q)
// reads x[2p + dh, 2q + dw], the pixel (p + (dh >> 1), q + (dw >> 1)) of the phase plane
// x[dh & 1::2, dw & 1::2]. The classes' tables hold the points in their channel's order, and a map
// gives the place of each of the channel's own points in the kernel's partial sums, as contract()
// (interp_contract.cuh) reads them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <limits>

#include "../common/cuda_context.h"
#include "../common/launch.cuh"
#include "../common/tables.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of interp_classes_kernel, built by its launcher.
struct InterpClassesParams {
  PointWgradTables rows;  // per channel c: rows.npts[c] points, R a channel (the union's or its own)
  const int* rows_of;     // (C, R): the row in `rows` of each of a channel's own points, or null (the same)
  const int* own;         // (C): the channel's own points
  int C, R;
  int64_t parts;
  int2* coff;    // (4 C, R): entry cls * C + c, the class's points at halved offsets
  int* cnpts;    // (4 C)
  int2* chalo;   // (4 C)
  int* csame;    // (4 C)
  int* place;    // (C, R): each row's place in the partial sums (4, C, parts, R), less c * parts * R
  int* map;      // (C, R): each own point's place, as contract() reads it
};

// One thread per channel, its points in order.
__global__ void interp_classes_kernel(const InterpClassesParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.C) return;
  int count[4] = {0, 0, 0, 0};
  int2 halo[4] = {make_int2(0, 0), make_int2(0, 0), make_int2(0, 0), make_int2(0, 0)};
  const int64_t base = int64_t(c) * p.R;
  const int n = p.rows.npts[c];
  for (int r = 0; r < n; ++r) {
    const int2 o = p.rows.off[base + r];
    const int cls = ((o.x & 1) << 1) | (o.y & 1);
    const int2 half = make_int2(o.x >> 1, o.y >> 1);
    const int row = count[cls]++;
    p.coff[(int64_t(cls) * p.C + c) * p.R + row] = half;
    halo[cls] = make_int2(max(halo[cls].x, abs(half.x)), max(halo[cls].y, abs(half.y)));
    p.place[base + r] = static_cast<int>(int64_t(cls) * p.C * p.parts * p.R + row);
  }
  for (int cls = 0; cls < 4; ++cls) {
    const int64_t e = int64_t(cls) * p.C + c;
    p.cnpts[e] = count[cls];
    p.chalo[e] = halo[cls];
    p.csame[e] = p.rows.same != nullptr ? p.rows.same[c] : 0;  // the same rows split the same way
  }
  for (int q = 0; q < p.own[c]; ++q) {
    p.map[base + q] = p.place[base + (p.rows_of != nullptr ? p.rows_of[base + q] : q)];
  }
}

// The classes' tables of a call and the map of its own points.
struct InterpClasses {
  at::Tensor ints;  // coff (8 C R) | chalo (8 C) | cnpts (4 C) | csame (4 C) | place (C R) | map (C R)
  int64_t C = 0, R = 0;
  int* base() const { return ints.data_ptr<int>(); }
  int2* coff() const { return reinterpret_cast<int2*>(base()); }
  int2* chalo() const { return reinterpret_cast<int2*>(base() + 8 * C * R); }
  int* cnpts() const { return base() + 8 * C * R + 8 * C; }
  int* csame() const { return base() + 8 * C * R + 12 * C; }
  int* place() const { return base() + 8 * C * R + 16 * C; }
  at::Tensor map() const { return ints.narrow(0, 8 * C * R + 16 * C + C * R, C * R).view({C, R}); }
  PointTableView<float> view() const { return PointTableView<float>{coff(), nullptr, cnpts(), chalo(), csame()}; }
};

// rows: the points the weight gradient sums (the union of each block's, or each channel's own), R a
// channel; rows_of: the row of each own point in them (null: the own points themselves); own: the
// own points' counts; parts: the kernel's partial sums a channel and class.
inline InterpClasses split_interp_classes(const PointTableView<float>& rows, const int* rows_of, const int* own,
                                          int64_t C, int64_t R, int64_t parts, const at::TensorOptions& ints) {
  TORCH_CHECK(4 * C * parts * R <= std::numeric_limits<int>::max(), "oriented_dwconv1d: ", std::to_string(C),
              " channels in ", std::to_string(parts), " parts of ", std::to_string(R),
              " points are too many partial sums for a stride-2 weight gradient's 32-bit places");
  InterpClasses k;
  k.C = C;
  k.R = R;
  k.ints = at::empty({8 * C * R + 16 * C + 2 * C * R}, ints);
  const InterpClassesParams params{.rows = rows.wgrad(),
                                   .rows_of = rows_of,
                                   .own = own,
                                   .C = static_cast<int>(C),
                                   .R = static_cast<int>(R),
                                   .parts = parts,
                                   .coff = k.coff(),
                                   .cnpts = k.cnpts(),
                                   .chalo = k.chalo(),
                                   .csame = k.csame(),
                                   .place = k.place(),
                                   .map = k.map().data_ptr<int>()};
  constexpr int kThreads = 64;
  launch_on_stream(interp_classes_kernel, ceil_div(C, int64_t(kThreads)), kThreads, 0, params);
  return k;
}

}  // namespace cuda
}  // namespace mmo1d
