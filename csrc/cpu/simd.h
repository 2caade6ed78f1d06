// SIMD building blocks of the CPU kernels and their dispatch to the instruction set of the CPU.
//
// Kernels are written once with GCC/Clang vector extensions (Vec<T, Bytes>) as always-inline
// templates over the vector width. Each kernel family is compiled three times on x86-64: inside a
// function with __attribute__((target("avx512..."))), one with target("avx2,fma"), and one for the
// build's baseline (SSE2); on other architectures (aarch64: NEON) for the baseline only. The
// build flags stay at the baseline, so a library built anywhere runs on any CPU of its
// architecture: the wider variants are only called after the CPU (and the OS's register state)
// was checked for them at run time. ATEN_CPU_CAPABILITY (default, avx2, avx512) lowers the choice
// as it does for ATen's own kernels.
#pragma once

#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

#if !defined(__GNUC__) && !defined(__clang__)
#error "mmo1d's CPU kernels need GCC or Clang (vector extensions and target attributes)"
#endif

#define MMO1D_CPU_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__) || defined(__i386__)
#define MMO1D_CPU_X86 1
#define MMO1D_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define MMO1D_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define MMO1D_CPU_X86 0
#endif

namespace mmo1d {
namespace cpu {

// Vector of `Bytes` bytes of T; operators act lane by lane.
template <typename T, int Bytes>
struct VecType {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <typename T, int Bytes>
using Vec = typename VecType<T, Bytes>::type;

// Loads and stores are unaligned; values are passed by reference so that no vector crosses a
// function boundary (ABIs differ between instruction sets).
template <typename V, typename T>
MMO1D_CPU_INLINE void vload(V& v, const T* p) {
  std::memcpy(&v, p, sizeof(V));
}
template <typename V, typename T>
MMO1D_CPU_INLINE void vstore(T* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}
template <typename V, typename T>
MMO1D_CPU_INLINE void vbroadcast(V& v, T s) {
  v = V{} + s;
}

// Integer of the size of T, for lane masks.
template <typename T>
struct MaskInt;
template <>
struct MaskInt<float> {
  using type = int32_t;
};
template <>
struct MaskInt<double> {
  using type = int64_t;
};

// mask = lanes [lo, hi) of a vector of T set (all bits), the others clear.
template <typename T, typename I>
MMO1D_CPU_INLINE void lane_mask(I& mask, int64_t lo, int64_t hi) {
  constexpr int kLanes = sizeof(I) / sizeof(T);
  typename MaskInt<T>::type bits[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    bits[l] = (l >= lo && l < hi) ? -1 : 0;
  }
  vload(mask, bits);
}

// v with the lanes outside `mask` cleared (bitwise: an infinity or NaN there becomes 0 too).
template <typename V, typename I>
MMO1D_CPU_INLINE void vkeep(V& v, const I& mask) {
  I bits;
  std::memcpy(&bits, &v, sizeof(V));
  bits &= mask;
  std::memcpy(&v, &bits, sizeof(V));
}

// Stores the lanes of v inside `mask` to p, keeping the other lanes of p.
template <typename V, typename I, typename T>
MMO1D_CPU_INLINE void vstore_masked(T* p, const V& v, const I& mask) {
  I old_bits, new_bits;
  std::memcpy(&old_bits, p, sizeof(V));
  std::memcpy(&new_bits, &v, sizeof(V));
  const I merged = (new_bits & mask) | (old_bits & ~mask);
  std::memcpy(p, &merged, sizeof(V));
}

// Zeros that a load may read in place of a tap outside the image (two vectors of the widest width).
template <typename T>
struct Zeros {
  alignas(64) static constexpr T values[128 / sizeof(T)] = {};
};

// Accumulator vectors a register block may hold: half of the vector registers of the instruction
// set (16 of 32 with AVX-512, 8 of 16 with AVX2 and SSE2/NEON), the rest for operands.
template <int VB>
constexpr int kAccumulators = VB >= 64 ? 16 : 8;

enum class Isa { kDefault, kAvx2, kAvx512 };

// The widest instruction set that this CPU supports, this build can use and ATEN_CPU_CAPABILITY
// allows (decided once).
Isa cpu_isa();

// A kernel family is a struct with
// `template <int VB> static MMO1D_CPU_INLINE void run(const Args&, int64_t begin, int64_t end)`,
// which processes the work items [begin, end) described by its arguments (Args) with vectors of VB
// bytes.
template <typename Args>
using RangeFn = void (*)(const Args&, int64_t, int64_t);

template <class Kernel, typename Args>
void run_baseline(const Args& args, int64_t begin, int64_t end) {
  Kernel::template run<16>(args, begin, end);
}

#if MMO1D_CPU_X86
template <class Kernel, typename Args>
MMO1D_TARGET_AVX2 void run_avx2(const Args& args, int64_t begin, int64_t end) {
  Kernel::template run<32>(args, begin, end);
}

template <class Kernel, typename Args>
MMO1D_TARGET_AVX512 void run_avx512(const Args& args, int64_t begin, int64_t end) {
  Kernel::template run<64>(args, begin, end);
}
#endif

// The variant of `Kernel` for the instruction set of this CPU.
template <class Kernel, typename Args>
RangeFn<Args> select_kernel() {
#if MMO1D_CPU_X86
  switch (cpu_isa()) {
    case Isa::kAvx512:
      return &run_avx512<Kernel, Args>;
    case Isa::kAvx2:
      return &run_avx2<Kernel, Args>;
    case Isa::kDefault:
      break;
  }
#endif
  return &run_baseline<Kernel, Args>;
}

// Runs the variant of `Kernel` for this CPU over the work items [0, items), in tasks of at least
// `grain` items (at::parallel_for).
template <class Kernel, typename Args>
void parallel_run(const Args& args, int64_t items, int64_t grain) {
  const RangeFn<Args> kernel = select_kernel<Kernel, Args>();
  at::parallel_for(0, items, grain, [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
}

}  // namespace cpu
}  // namespace mmo1d
