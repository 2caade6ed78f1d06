// Choice of the instruction set of the CPU kernels (see simd.h).
#include "simd.h"

#include <ATen/Version.h>

#include <string>

namespace mmo1d {
namespace cpu {
namespace {

Isa detect_isa() {
#if MMO1D_CPU_X86
  // ATen's choice: the CPU's features, lowered by ATEN_CPU_CAPABILITY when set.
  const std::string aten = at::get_cpu_capability();
  // The CPU's own features, checked here as well (a forced ATEN_CPU_CAPABILITY may name more than
  // the CPU has); __builtin_cpu_supports also requires the OS to save the wider registers.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (aten == "AVX512" && avx512) {
    return Isa::kAvx512;
  }
  if ((aten == "AVX512" || aten == "AVX2") && avx2) {
    return Isa::kAvx2;
  }
#endif
  return Isa::kDefault;
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect_isa();
  return isa;
}

}  // namespace cpu
}  // namespace mmo1d
