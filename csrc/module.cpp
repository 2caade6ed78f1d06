// The Python module mmo1d._C: loading it registers the mmo1d ops (their schemas, CPU kernels and,
// when compiled in, CUDA kernels) with the dispatcher. The module itself defines one function and needs
// pybind11 alone (with torch/extension.h, all of torch's C++ API, this file took 54 s to build, not 12).
#include <pybind11/pybind11.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mmo1d compiled ops (oriented depthwise 1D convolution, channels-last layer norm)";
  m.def(
      "cuda_compiled",
      []() {
#ifdef MMO1D_WITH_CUDA
        return true;
#else
        return false;
#endif
      },
      "Whether the CUDA kernels were compiled into this module.");
}
