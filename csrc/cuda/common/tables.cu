// Host builders of the tables (tables.cuh): the angle-dependent structure from the table cache
// (built by one small kernel, one thread per channel and parity class, the first time a theta buffer
// is seen), the merged weights by one small kernel per call (one thread per table entry and point).
#include <ATen/ops/empty.h>

#include "cuda_context.h"
#include "launch.cuh"
#include "table_cache.cuh"
#include "tables.cuh"

namespace mmo1d {
namespace cuda {

namespace {

// Merged weights of the entries (channels x classes) of a structure whose tap -> point map is
// tap_map: entries * K values of acc_t.
template <typename scalar_t, typename acc_t>
at::Tensor merged_weights(const int* tap_map, const at::Tensor& weight, int entries, bool residual) {
  const int C = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  at::Tensor pw = at::empty({int64_t(entries) * K}, weight.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  const at::Tensor w = weight.contiguous();
  launch_on_stream(merge_weights_kernel<scalar_t, acc_t>, ceil_div(int64_t(entries) * K, 256), 256, 0, tap_map,
                   w.data_ptr<scalar_t>(), C, K, entries, residual, pw.data_ptr<acc_t>());
  return pw;
}

// What the structure builders read: theta's angles and the taps' offsets at this sign and classes, no
// weights (merged_weights adds them at each call).
TapTableSpec<float> structure_spec(const at::Tensor& th, int channels, int K, TapMode mode, int sign, int classes) {
  return TapTableSpec<float>{th.data_ptr<float>(), nullptr, channels, K, mode, false, sign, classes};
}

// Layout of TablesT::ints for C entries of K taps: off (C*K*2) | halo (C*2) | npts (C) | tap_pt (C*K) |
// same (C).
at::Tensor build_point_structure(const at::Tensor& th, int channels, int K, TapMode mode, int classes) {
  const int C = channels * classes;
  at::Tensor ints = at::empty({int64_t(C) * K * 3 + int64_t(C) * 4}, th.options().dtype(at::kInt));
  int* p = ints.data_ptr<int>();
  int* npts = p + 2 * int64_t(C) * K + 2 * C;
  const BuildTablesParams<float, float> params{.spec = structure_spec(th, channels, K, mode, 1, classes),
                                               .off = reinterpret_cast<int2*>(p),
                                               .pw = nullptr,
                                               .npts = npts,
                                               .tap_pt = npts + C,
                                               .halo = reinterpret_cast<int2*>(p + 2 * int64_t(C) * K),
                                               .same = p + 3 * int64_t(C) * K + 3 * C};
  launch_on_stream(build_tables_kernel<float, float>, ceil_div(C, 128), 128, 0, params);
  return ints;
}

// Layout of SegTables::ints (head = 6 * C rounded up to 4): info (C*4) | halo (C*2) | pad | segs (C*K*4) |
// tap -> slot (C*K).
at::Tensor build_segment_structure(const at::Tensor& th, int channels, int K, TapMode mode, int sign,
                                   int classes, int64_t head) {
  const int C = channels * classes;
  at::Tensor ints = at::empty({head + 5 * int64_t(C) * K}, th.options().dtype(at::kInt));
  // The kernel merges (zero) weights as it walks the taps: in shared-memory scratch (K floats + K ints
  // per thread) when it fits, else in this buffer.
  at::Tensor scratch_w = at::empty({int64_t(C) * K}, th.options());
  int* p = ints.data_ptr<int>();
  // One thread per channel, 32 per block (the channels spread over many SMs: the per-thread work is
  // a serial walk over the taps).
  const int threads = 32;
  const int64_t scratch = int64_t(threads) * K * (sizeof(float) + sizeof(int));
  const int scratch_bytes = scratch <= 32 * 1024 ? static_cast<int>(scratch) : 0;
  const BuildSegmentsParams<float> params{.spec = structure_spec(th, channels, K, mode, sign, classes),
                                          .info = reinterpret_cast<SegInfo*>(p),
                                          .segs = reinterpret_cast<int4*>(p + head),
                                          .segw = scratch_w.data_ptr<float>(),
                                          .halo = reinterpret_cast<int2*>(p + 4 * int64_t(C)),
                                          .tap_sp = p + head + 4 * int64_t(C) * K,
                                          .scratch_bytes = scratch_bytes};
  launch_on_stream(build_segments_kernel<float>, ceil_div(C, threads), threads, scratch_bytes, params);
  return ints;
}

}  // namespace

template <typename scalar_t, typename acc_t>
TablesT<acc_t> build_tables(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule, bool residual,
                            bool with_weights, int classes) {
  const int channels = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  TablesT<acc_t> t;
  t.C = channels * classes;
  t.K = K;
  t.ints = cached_table_structure(theta, TableKey{TableKind::kPoints, K, rule.mode, 1, classes},
                                  [&](const at::Tensor& th) {
                                    return build_point_structure(th, channels, K, rule.mode, classes);
                                  });
  if (with_weights) t.weights = merged_weights<scalar_t, acc_t>(t.tap_pt(), weight, t.C, residual);
  return t;
}

template <typename scalar_t>
SegTables build_segments(const at::Tensor& theta, const at::Tensor& weight, const TapRule& rule, bool residual,
                         int sign, int classes, bool with_weights) {
  const int channels = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  SegTables t;
  t.C = channels * classes;
  t.K = K;
  t.head = (6 * int64_t(t.C) + 3) / 4 * 4;
  t.ints = cached_table_structure(theta, TableKey{TableKind::kSegments, K, rule.mode, sign, classes},
                                  [&](const at::Tensor& th) {
                                    return build_segment_structure(th, channels, K, rule.mode, sign, classes,
                                                                   t.head);
                                  });
  if (with_weights) t.weights = merged_weights<scalar_t, float>(t.tap_sp(), weight, t.C, residual);
  return t;
}

template TablesT<double> build_tables<double, double>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, bool, int);
template TablesT<float> build_tables<float, float>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, bool, int);
template TablesT<float> build_tables<c10::Half, float>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, bool, int);
template TablesT<float> build_tables<c10::BFloat16, float>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, bool, int);
template SegTables build_segments<float>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, int, int, bool);
template SegTables build_segments<c10::Half>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, int, int, bool);
template SegTables build_segments<c10::BFloat16>(const at::Tensor&, const at::Tensor&, const TapRule&, bool, int, int, bool);

}  // namespace cuda
}  // namespace mmo1d
