#pragma once
// The CUDA runtime side of ATen that the kernels' host code uses: the current stream, the device's
// properties and the launch checks. ATen/cuda/CUDAContext.h adds ATen's global context and logging to
// these, which the sources do not use and every .cu file would parse (about 4 s of a file's build for
// the default architectures).
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
