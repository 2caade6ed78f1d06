// How the ops are registered with the dispatcher, and how their nodes call the backward ops.
// - Every op's schema is defined together with its Autograd kernel, the apply of its C++
//   torch::autograd::Function (def_with_autograd); the backward ops have no Autograd kernel.
// - Every device entry file of the oriented convolution (cpu/ops.cpp, cuda/oriented_dwconv1d_cuda.cpp)
//   defines forward_<dev>, backward_input_<dev>, backward_params_<dev> and path_<dev> in namespace
//   mmo1d::<dev> and registers them with
//   `TORCH_LIBRARY_IMPL(mmo1d, <DEV>, m) { MMO1D_IMPL_ORIENTED_DWCONV1D(m, <dev>); }`.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/GradMode.h>
#include <c10/util/Optional.h>
#include <torch/library.h>

namespace mmo1d {

// Defines the op of `schema` in `m`, with `autograd` as its Autograd kernel.
template <typename Fn>
void def_with_autograd(torch::Library& m, const char* schema, Fn* autograd) {
  m.def(schema, torch::dispatch(c10::DispatchKey::Autograd, autograd));
}

// For a backward op (no Autograd kernel) called from a node's backward: when that backward builds
// no graph, dispatch below autograd, skipping the dispatcher's autograd fallback (a boxed call per op).
class BelowAutogradWithoutGraph {
 public:
  BelowAutogradWithoutGraph() {
    if (!c10::GradMode::is_enabled()) guard_.emplace();
  }

 private:
  c10::optional<at::AutoDispatchBelowADInplaceOrView> guard_;
};

}  // namespace mmo1d

#define MMO1D_IMPL_ORIENTED_DWCONV1D(m, dev)                                \
  m.impl("oriented_dwconv1d", &dev::forward_##dev);                         \
  m.impl("oriented_dwconv1d_backward_input", &dev::backward_input_##dev);   \
  m.impl("oriented_dwconv1d_backward_params", &dev::backward_params_##dev); \
  m.impl("oriented_dwconv1d_path", &dev::path_##dev)
