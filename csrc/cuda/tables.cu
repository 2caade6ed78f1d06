// Host builders of the per-call tables (tables.cuh): one small kernel per call, one thread per
// channel (and parity class).
#include <ATen/cuda/CUDAContext.h>

#include "tables.cuh"

namespace mmo1d {
namespace cuda {

template <typename scalar_t, typename acc_t>
TablesT<acc_t> build_tables(const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual,
                            bool with_weights, int classes) {
  const int channels = static_cast<int>(weight.size(0)), K = static_cast<int>(weight.size(1));
  const int C = channels * classes;
  TablesT<acc_t> t;
  t.C = C;
  t.K = K;
  t.ints = at::empty({int64_t(C) * K * 3 + int64_t(C) * 4}, weight.options().dtype(at::kInt));
  if (with_weights) {
    t.weights = at::empty({int64_t(C) * K}, weight.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  }
  const at::Tensor th = theta.to(at::kFloat).contiguous();
  const at::Tensor w = weight.contiguous();
  at::Tensor& ints_t = t.ints;
  int* ints = ints_t.data_ptr<int>();
  int2* off = reinterpret_cast<int2*>(ints);
  int* same = ints + 3 * int64_t(C) * K + 3 * C;
  int2* halo = reinterpret_cast<int2*>(ints + 2 * int64_t(C) * K);
  int* npts = ints + 2 * int64_t(C) * K + 2 * C;
  int* tap_pt = npts + C;
  acc_t* pw = nullptr;
  if (with_weights) {
    at::Tensor& w_t = t.weights;
    pw = w_t.data_ptr<acc_t>();
  }
  build_tables_kernel<scalar_t, acc_t><<<ceil_div(C, 128), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      th.data_ptr<float>(), w.data_ptr<scalar_t>(), channels, K, floor_rounding, residual, classes, off, pw, npts,
      tap_pt, halo, same);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return t;
}

template <typename scalar_t>
SegTables build_segments(const at::Tensor& theta, const at::Tensor& weight, bool floor_rounding, bool residual,
                         int sign, int classes) {
  SegTables t;
  const int C = static_cast<int>(weight.size(0));
  t.C = C * classes;
  t.K = static_cast<int>(weight.size(1));
  const int64_t head = (6 * int64_t(t.C) + 3) / 4 * 4;
  t.head = head;
  t.ints = at::empty({head + 5 * int64_t(t.C) * t.K}, weight.options().dtype(at::kInt));
  t.weights = at::empty({int64_t(t.C) * t.K}, weight.options().dtype(at::kFloat));
  const at::Tensor th = theta.to(at::kFloat).contiguous();
  const at::Tensor w = weight.contiguous();
  int* ints = t.ints.data_ptr<int>();
  // One thread per channel, 32 per block (the channels spread over many SMs: the per-thread work is
  // a serial walk over the taps), with K floats + K ints of shared-memory scratch each when they fit.
  const int threads = 32;
  const int64_t scratch = int64_t(threads) * t.K * (sizeof(float) + sizeof(int));
  const int scratch_bytes = scratch <= 32 * 1024 ? static_cast<int>(scratch) : 0;
  build_segments_kernel<scalar_t><<<ceil_div(t.C, threads), threads, scratch_bytes, at::cuda::getCurrentCUDAStream()>>>(
      th.data_ptr<float>(), w.data_ptr<scalar_t>(), C, t.K, floor_rounding, residual, sign, classes,
      reinterpret_cast<SegInfo*>(ints), reinterpret_cast<int4*>(ints + head), t.weights.data_ptr<float>(),
      reinterpret_cast<int2*>(ints + 4 * int64_t(t.C)), ints + head + 4 * int64_t(t.C) * t.K, scratch_bytes);
  MMO1D_CUDA_CHECK(cudaGetLastError());
  return t;
}

template TablesT<double> build_tables<double, double>(const at::Tensor&, const at::Tensor&, bool, bool, bool, int);
template TablesT<float> build_tables<float, float>(const at::Tensor&, const at::Tensor&, bool, bool, bool, int);
template TablesT<float> build_tables<c10::Half, float>(const at::Tensor&, const at::Tensor&, bool, bool, bool, int);
template TablesT<float> build_tables<c10::BFloat16, float>(const at::Tensor&, const at::Tensor&, bool, bool, bool, int);
template SegTables build_segments<float>(const at::Tensor&, const at::Tensor&, bool, bool, int, int);
template SegTables build_segments<c10::Half>(const at::Tensor&, const at::Tensor&, bool, bool, int, int);
template SegTables build_segments<c10::BFloat16>(const at::Tensor&, const at::Tensor&, bool, bool, int, int);

}  // namespace cuda
}  // namespace mmo1d
