// Schema, argument checks, composite (CPU) implementation of the channels-last layer norm.
// The CUDA kernels live in cuda/layer_norm_cuda.cu.
#include "layer_norm.h"

#include <torch/autograd.h>
#include <torch/library.h>

#include "op_registration.h"

namespace mmo1d {

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward_cpu(const at::Tensor& input, const at::Tensor& weight,
                                                           const at::Tensor& bias, double eps, bool gelu,
                                                           at::ScalarType out_dtype) {
  check_layer_norm_args("layer_norm_last", input, weight, bias, eps, out_dtype);
  return layer_norm_last_composite(input, weight, bias, eps, gelu, out_dtype);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_cpu(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& mean, const at::Tensor& rstd,
                                                            const at::Tensor& weight, const at::Tensor& bias, bool gelu,
                                                            std::array<bool, 3> output_mask) {
  TORCH_CHECK(grad_output.sizes() == input.sizes(),
              "layer_norm_last_backward: grad_output must have the input's shape");
  return layer_norm_last_backward_composite(grad_output, input, mean, rstd, weight, bias, gelu, output_mask);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Autograd in C++ (see OrientedDWConv1dFunction): gradients for input, weight and bias.
class LayerNormLastFunction : public torch::autograd::Function<LayerNormLastFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                               const at::Tensor& bias, double eps, bool gelu, at::ScalarType out_dtype) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmo1d::layer_norm_last", "")
                         .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                             const at::Tensor&, const at::Tensor&, const at::Tensor&, double, bool, at::ScalarType)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, mean, rstd] = op.call(input, weight, bias, eps, gelu, out_dtype);
    ctx->save_for_backward({input, mean, rstd, weight, bias});
    ctx->saved_data["gelu"] = gelu;
    ctx->mark_non_differentiable({mean, rstd});
    // mean and rstd never get a gradient: no zero tensors for them in backward (two fills per call).
    ctx->set_materialize_grads(false);
    return {y, mean, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mmo1d::layer_norm_last_backward", "")
                         .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                             const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, const at::Tensor&, bool, std::array<bool, 3>)>();
    const auto saved = ctx->get_saved_variables();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)};
    if ((!mask[0] && !mask[1] && !mask[2]) || !grad_outputs[0].defined()) {
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const BelowAutogradWithoutGraph below_autograd;
    auto [grad_input, grad_weight, grad_bias] = op.call(grad_outputs[0].contiguous(), saved[0], saved[1], saved[2],
                                                        saved[3], saved[4], ctx->saved_data["gelu"].toBool(), mask);
    return {grad_input, grad_weight, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> forward_autograd(const at::Tensor& input, const at::Tensor& weight,
                                                                const at::Tensor& bias, double eps, bool gelu,
                                                                at::ScalarType out_dtype) {
  auto out = LayerNormLastFunction::apply(input, weight, bias, eps, gelu, out_dtype);
  return {out[0], out[1], out[2]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(mmo1d, m) {
  def_with_autograd(m,
                    "layer_norm_last(Tensor input, Tensor weight, Tensor bias, float eps, bool gelu, "
                    "ScalarType out_dtype) -> (Tensor, Tensor, Tensor)",
                    forward_autograd);
  m.def(
      "layer_norm_last_backward(Tensor grad_output, Tensor input, Tensor mean, Tensor rstd, "
      "Tensor weight, Tensor bias, bool gelu, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mmo1d, CPU, m) {
  m.impl("layer_norm_last", &forward_cpu);
  m.impl("layer_norm_last_backward", &backward_cpu);
}

}  // namespace mmo1d
