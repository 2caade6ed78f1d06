// NCHW forward and input gradient, one (n, c) plane per work item (plane_kernels.h).
//
// Forward: each plane is copied into its padded, phase-split buffer and convolved in register
// blocks. Input gradient at stride 1: the same on grad_output with the offsets negated. At stride
// s >= 2 the input gradient scatters each output's taps into its plane (planes are independent,
// so there are no races).
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "kernels.h"
#include "plane_kernels.h"

namespace mmo1d {
namespace cpu {
namespace {

template <typename T>
struct ConvArgs {
  const T* in;
  T* out;
  const T* merged;
  const T* bias;  // nullptr: none
  bool residual;
  const Plan* plan;
  const std::vector<int64_t>* pad_h;  // per run: max |dh|
  const std::vector<int64_t>* pad_w;  // per run: max |dw|
  int64_t C, Hin, Win, Hout, Wout, s;
};

// Planes (n, c): out = bias + sum over entries of w * in at (p*s + dh, q*s + dw) (+ in at (p*s, q*s)).
template <typename T, int VB, int R, int VQ>
struct ConvPlanes {
  static MMO1D_CPU_INLINE void run(const ConvArgs<T>& a, const Block& block, int64_t begin, int64_t end) {
    const Plan& plan = *a.plan;
    std::vector<T> buf;
    std::vector<PlaneTap<T>> taps;
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % a.C;
      const int64_t r = plan.run_of[c];
      const Run& run = plan.runs[r];
      const PlaneLayout lay = make_layout(a.Hin, a.Win, a.Hout, a.s, (*a.pad_h)[r], (*a.pad_w)[r], block);
      buf.resize(std::max<size_t>(buf.size(), lay.size()));
      fill_plane(buf.data(), a.in + plane * a.Hin * a.Win, lay);
      taps.clear();
      for (int64_t e = 0; e < run.ne; ++e) {
        const Offset o = plan.entries[run.e0 + e];
        taps.push_back({lay.tap_offset(o.dh, o.dw), a.merged[run.w0 + e * run.len() + (c - run.c0)]});
      }
      if (a.residual) {
        taps.push_back({lay.tap_offset(0, 0), T(1)});
      }
      conv_plane<T, VB, R, VQ>(buf.data(), lay, taps.data(), static_cast<int64_t>(taps.size()),
                               a.bias != nullptr ? a.bias[c] : T(0), a.out + plane * a.Hout * a.Wout, a.Hout, a.Wout);
    }
  }
};

template <typename T>
void run_conv(const ConvArgs<T>& args, int64_t N, int64_t K) {
  parallel_run<BlockedPlanes<T, ConvPlanes>>(args, N * args.C, grain_for(args.Hout * args.Wout * K));
}

void run_pads(const Plan& plan, std::vector<int64_t>* pad_h, std::vector<int64_t>* pad_w) {
  for (const Run& run : plan.runs) {
    pad_h->push_back(plan.max_abs_dh(run));
    pad_w->push_back(plan.max_abs_dw(run));
  }
}

}  // namespace

template <typename T>
void nchw_forward(const T* x, const Plan& plan, const T* merged, const T* bias, T* y, const Geometry& g,
                  bool residual) {
  std::vector<int64_t> pad_h, pad_w;
  run_pads(plan, &pad_h, &pad_w);
  run_conv<T>({x, y, merged, bias, residual, &plan, &pad_h, &pad_w, g.C, g.H, g.W, g.Ho, g.Wo, g.s}, g.N, g.K);
}

template <typename T>
void nchw_backward_input(const T* dy, const Plan& plan, const T* merged, T* dx, const Geometry& g, bool residual) {
  if (g.s == 1) {
    const Plan transposed = plan.negated();
    std::vector<int64_t> pad_h, pad_w;
    run_pads(transposed, &pad_h, &pad_w);
    run_conv<T>({dy, dx, merged, nullptr, residual, &transposed, &pad_h, &pad_w, g.C, g.H, g.W, g.H, g.W, 1}, g.N, g.K);
    return;
  }
  at::parallel_for(0, g.N * g.C, grain_for(g.Ho * g.Wo * g.K), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.C;
      const Run& run = plan.runs[plan.run_of[c]];
      const T* dyp = dy + plane * g.Ho * g.Wo;
      T* dxp = dx + plane * g.H * g.W;
      std::fill(dxp, dxp + g.H * g.W, T(0));
      if (residual) {
        for (int64_t p = 0; p < g.Ho; ++p) {
          for (int64_t q = 0; q < g.Wo; ++q) {
            dxp[p * g.s * g.W + q * g.s] += dyp[p * g.Wo + q];
          }
        }
      }
      for (int64_t e = 0; e < run.ne; ++e) {
        const Offset o = plan.entries[run.e0 + e];
        const T w = merged[run.w0 + e * run.len() + (c - run.c0)];
        int64_t p0, p1, q0, q1;
        valid_span(o.dh, g.s, g.H, g.Ho, &p0, &p1);
        valid_span(o.dw, g.s, g.W, g.Wo, &q0, &q1);
        for (int64_t p = p0; p < p1; ++p) {
          T* dxr = dxp + (p * g.s + o.dh) * g.W + o.dw;
          const T* dyr = dyp + p * g.Wo;
          for (int64_t q = q0; q < q1; ++q) {
            dxr[q * g.s] += w * dyr[q];
          }
        }
      }
    }
  });
}

MMO1D_CPU_INSTANTIATE_GATHER(nchw, float)
MMO1D_CPU_INSTANTIATE_GATHER(nchw, double)

}  // namespace cpu
}  // namespace mmo1d
