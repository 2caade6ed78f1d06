// CPU kernels of the oriented depthwise 1D convolution.
//
// Every (n, c) plane is independent and handled by one thread (at::parallel_for over N*C), which
// keeps the input gradient's scatter free of races. Half and bfloat16 are computed in float32,
// float64 in float64. The weight gradient is reduced per channel in a fixed order (deterministic).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../oriented_dwconv1d.h"

namespace mmo1d {
namespace {

// Table of (dh, dw) for every channel and tap, shape (C, K, 2), int32.
at::Tensor offsets_table(const at::Tensor& theta, int64_t K, bool floor_rounding) {
  const at::Tensor th = theta.to(at::kCPU, at::kFloat).contiguous();
  const int64_t C = th.size(0);
  at::Tensor table = at::empty({C, K, 2}, at::TensorOptions().dtype(at::kInt));
  const float* t_ptr = th.data_ptr<float>();
  int* o_ptr = table.data_ptr<int>();
  for (int64_t c = 0; c < C; ++c) {
    float s, co;
    angle_sincos(t_ptr[c], &s, &co);
    for (int64_t t = 0; t < K; ++t) {
      tap_offset(static_cast<int>(t), static_cast<int>(K), s, co, floor_rounding, &o_ptr[(c * K + t) * 2],
                 &o_ptr[(c * K + t) * 2 + 1]);
    }
  }
  return table;
}

// Outputs [lo, hi) along one axis whose tap at offset o stays inside an input of length L.
inline void valid_range(int64_t o, int64_t s, int64_t L, int64_t Lo, int64_t* lo, int64_t* hi) {
  *lo = o >= 0 ? 0 : (-o + s - 1) / s;
  *hi = std::min(L - 1 - o >= 0 ? (L - 1 - o) / s + 1 : int64_t{0}, Lo);
}

struct Geometry {
  int64_t N, C, H, W, K, Ho, Wo, s;
};

Geometry geometry(const at::Tensor& input, int64_t K, int64_t stride) {
  const int64_t H = input.size(2), W = input.size(3);
  return {input.size(0), input.size(1), H, W, K, out_size(H, stride), out_size(W, stride), stride};
}

void check_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "oriented_dwconv1d (CPU kernel): ", name, " is on ", t.device());
}

int64_t grain(const Geometry& g) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.H * g.W * g.K));
}

template <typename T>
void forward_planes(const T* x, const T* w, const T* b, const int* table, T* y, const Geometry& g, bool residual) {
  at::parallel_for(0, g.N * g.C, grain(g), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.C;
      const T* xp = x + plane * g.H * g.W;
      T* yp = y + plane * g.Ho * g.Wo;
      std::fill(yp, yp + g.Ho * g.Wo, b != nullptr ? b[c] : T(0));
      if (residual) {
        for (int64_t p = 0; p < g.Ho; ++p)
          for (int64_t q = 0; q < g.Wo; ++q) yp[p * g.Wo + q] += xp[p * g.s * g.W + q * g.s];
      }
      for (int64_t t = 0; t < g.K; ++t) {
        const int64_t dh = table[(c * g.K + t) * 2], dw = table[(c * g.K + t) * 2 + 1];
        const T wt = w[c * g.K + t];
        int64_t p0, p1, q0, q1;
        valid_range(dh, g.s, g.H, g.Ho, &p0, &p1);
        valid_range(dw, g.s, g.W, g.Wo, &q0, &q1);
        for (int64_t p = p0; p < p1; ++p) {
          const T* xr = xp + (p * g.s + dh) * g.W + dw;
          T* yr = yp + p * g.Wo;
          for (int64_t q = q0; q < q1; ++q) yr[q] += wt * xr[q * g.s];
        }
      }
    }
  });
}

template <typename T>
void backward_input_planes(const T* dy, const T* w, const int* table, T* dx, const Geometry& g, bool residual) {
  at::parallel_for(0, g.N * g.C, grain(g), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % g.C;
      const T* dyp = dy + plane * g.Ho * g.Wo;
      T* dxp = dx + plane * g.H * g.W;
      std::fill(dxp, dxp + g.H * g.W, T(0));
      if (residual) {
        for (int64_t p = 0; p < g.Ho; ++p)
          for (int64_t q = 0; q < g.Wo; ++q) dxp[p * g.s * g.W + q * g.s] += dyp[p * g.Wo + q];
      }
      for (int64_t t = 0; t < g.K; ++t) {
        const int64_t dh = table[(c * g.K + t) * 2], dw = table[(c * g.K + t) * 2 + 1];
        const T wt = w[c * g.K + t];
        int64_t p0, p1, q0, q1;
        valid_range(dh, g.s, g.H, g.Ho, &p0, &p1);
        valid_range(dw, g.s, g.W, g.Wo, &q0, &q1);
        for (int64_t p = p0; p < p1; ++p) {
          T* dxr = dxp + (p * g.s + dh) * g.W + dw;
          const T* dyr = dyp + p * g.Wo;
          for (int64_t q = q0; q < q1; ++q) dxr[q * g.s] += wt * dyr[q];
        }
      }
    }
  });
}

template <typename T>
void backward_weight_channels(const T* dy, const T* x, const int* table, double* dwt, const Geometry& g) {
  at::parallel_for(0, g.C, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (int64_t t = 0; t < g.K; ++t) {
        const int64_t dh = table[(c * g.K + t) * 2], dw = table[(c * g.K + t) * 2 + 1];
        int64_t p0, p1, q0, q1;
        valid_range(dh, g.s, g.H, g.Ho, &p0, &p1);
        valid_range(dw, g.s, g.W, g.Wo, &q0, &q1);
        double acc = 0.0;
        for (int64_t n = 0; n < g.N; ++n) {
          const int64_t plane = n * g.C + c;
          const T* dyp = dy + plane * g.Ho * g.Wo;
          const T* xp = x + plane * g.H * g.W;
          for (int64_t p = p0; p < p1; ++p) {
            const T* xr = xp + (p * g.s + dh) * g.W + dw;
            const T* dyr = dyp + p * g.Wo;
            T row = T(0);
            for (int64_t q = q0; q < q1; ++q) row += dyr[q] * xr[q * g.s];
            acc += static_cast<double>(row);
          }
        }
        dwt[c * g.K + t] = acc;
      }
    }
  });
}

at::Tensor forward_cpu(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& theta,
                       const c10::optional<at::Tensor>& bias, int64_t stride, bool floor_rounding, bool residual) {
  check_forward_args(input, weight, theta, bias, stride);
  check_cpu(input, "input");
  const Geometry g = geometry(input, weight.size(1), stride);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor x = input.to(op_t).contiguous();
  const at::Tensor w = weight.to(op_t).contiguous();
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor b = has_bias ? bias->to(op_t).contiguous() : at::Tensor();
  const at::Tensor table = offsets_table(theta, g.K, floor_rounding);
  at::Tensor y = at::empty({g.N, g.C, g.Ho, g.Wo}, x.options());
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_cpu", [&] {
    forward_planes<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(),
                             has_bias ? b.data_ptr<scalar_t>() : nullptr, table.data_ptr<int>(), y.data_ptr<scalar_t>(),
                             g, residual);
  });
  return y.to(input.scalar_type()).contiguous(output_memory_format(input));
}

// Checks the arguments of a backward op and returns the forward geometry.
Geometry backward_geometry(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& theta, int64_t stride) {
  check_forward_args(input, weight, theta, c10::nullopt, stride);
  check_cpu(grad_output, "grad_output");
  check_grad_output(grad_output, input, stride);
  return geometry(input, weight.size(1), stride);
}

at::Tensor backward_input_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& theta, int64_t stride, bool floor_rounding, bool residual) {
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous();
  const at::Tensor w = weight.to(op_t).contiguous();
  const at::Tensor table = offsets_table(theta, g.K, floor_rounding);
  at::Tensor dx = at::empty({g.N, g.C, g.H, g.W}, dy.options());
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_backward_input_cpu", [&] {
    backward_input_planes<scalar_t>(dy.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), table.data_ptr<int>(),
                                    dx.data_ptr<scalar_t>(), g, residual);
  });
  return dx.to(input.scalar_type()).contiguous(output_memory_format(input));
}

at::Tensor backward_weight_cpu(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                               const at::Tensor& theta, int64_t stride, bool floor_rounding) {
  const Geometry g = backward_geometry(grad_output, input, weight, theta, stride);
  const auto op_t = accumulation_type(input.scalar_type());
  const at::Tensor dy = grad_output.to(op_t).contiguous();
  const at::Tensor x = input.to(op_t).contiguous();
  const at::Tensor table = offsets_table(theta, g.K, floor_rounding);
  at::Tensor dw = at::empty({g.C, g.K}, at::TensorOptions().dtype(at::kDouble));
  AT_DISPATCH_FLOATING_TYPES(op_t, "oriented_dwconv1d_backward_weight_cpu", [&] {
    backward_weight_channels<scalar_t>(dy.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), table.data_ptr<int>(),
                                       dw.data_ptr<double>(), g);
  });
  return dw.to(weight.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("oriented_dwconv1d", &forward_cpu);
  m.impl("oriented_dwconv1d_backward_input", &backward_input_cpu);
  m.impl("oriented_dwconv1d_backward_weight", &backward_weight_cpu);
  m.impl("oriented_dwconv1d_path",
         [](const at::Tensor& input, const at::Tensor& weight, int64_t stride, c10::string_view pass) -> std::string {
           check_path_args(input, weight, stride);
           TORCH_CHECK(pass == "forward" || pass == "backward_input" || pass == "backward_weight",
                       "oriented_dwconv1d_path: pass must be 'forward', 'backward_input' or 'backward_weight', got '",
                       std::string(pass), "'");
           return "cpu";  // one kernel per pass on the CPU
         });
}

}  // namespace mmo1d
