// The registration of one device's kernels of the op: every device entry file (cpu/ops.cpp,
// cuda/oriented_dwconv1d_cuda.cu) defines forward_<dev>, backward_input_<dev>, backward_params_<dev>
// and path_<dev> in namespace mmo1d::<dev> and registers them with
// `TORCH_LIBRARY_IMPL(mmo1d, <DEV>, m) { MMO1D_IMPL_ORIENTED_DWCONV1D(m, <dev>); }`.
#pragma once

#define MMO1D_IMPL_ORIENTED_DWCONV1D(m, dev)                                  \
  m.impl("oriented_dwconv1d", &dev::forward_##dev);                           \
  m.impl("oriented_dwconv1d_backward_input", &dev::backward_input_##dev);     \
  m.impl("oriented_dwconv1d_backward_params", &dev::backward_params_##dev);   \
  m.impl("oriented_dwconv1d_path", &dev::path_##dev)
