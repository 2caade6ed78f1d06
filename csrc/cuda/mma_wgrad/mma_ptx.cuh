// The instructions of the tensor-core weight gradient that CUDA C++ does not name: bulk tensor copies
// into shared memory that complete on an mbarrier (sm_90), ldmatrix and the 16 x 8 x 16 product of
// 16-bit operands with float32 sums. Declared in every compilation pass; their instructions are
// emitted for sm_90 and later only (MMO1D_MMA_ARCH), below which the kernels that use them compile to
// nothing, and their plan refuses a build without sm_90 code. Tensor
// maps and bulk tensor copies need a CUDA 12 toolkit (MMO1D_MMA_TOOLKIT): built with CUDA 11, the
// family's plan declines every call.
#pragma once

#include <cstdint>

#ifndef MMO1D_MMA_TOOLKIT
#define MMO1D_MMA_TOOLKIT (__CUDACC_VER_MAJOR__ >= 12)
#endif

#if MMO1D_MMA_TOOLKIT
#include <cuda.h>  // CUtensorMap
#endif

#if MMO1D_MMA_TOOLKIT && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MMO1D_MMA_ARCH 1
#else
#define MMO1D_MMA_ARCH 0
#endif

namespace mmo1d {
namespace cuda {

#if MMO1D_MMA_TOOLKIT

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An mbarrier of one arrival, initialised and made visible to the bulk copies.
__device__ __forceinline__ void mbar_init(uint32_t mbar) {
#if MMO1D_MMA_ARCH
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(mbar) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The one arrival of the phase, expecting `bytes` from the copies.
__device__ __forceinline__ void mbar_arrive_expect(uint32_t mbar, uint32_t bytes) {
#if MMO1D_MMA_ARCH
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(mbar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void mbar_wait(uint32_t mbar, int parity) {
#if MMO1D_MMA_ARCH
  asm volatile(
      "{\n .reg .pred P;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n @!P bra WAIT_%=;\n}\n" ::
          "r"(mbar),
      "r"(parity)
      : "memory");
#endif
}

// The box of `map` at coordinates (c, w, h, n) into shared memory at dst (128-byte aligned), its bytes
// counted on mbar; zeros where the box lies outside the tensor.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c, int w, int h, int n,
                                            uint32_t mbar) {
#if MMO1D_MMA_ARCH
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(dst),
      "l"(map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(mbar)
      : "memory");
#endif
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if MMO1D_MMA_ARCH
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

__device__ __forceinline__ void ldsm_x2_trans(uint32_t& r0, uint32_t& r1, uint32_t addr) {
#if MMO1D_MMA_ARCH
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
#endif
}

// d += a b for a 16 x 16 A (row-major fragments), a 16 x 8 B (column-major), float32 d; HALF: float16
// operands, else bfloat16.
template <bool HALF>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if MMO1D_MMA_ARCH
  if constexpr (HALF) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

#endif  // MMO1D_MMA_TOOLKIT

}  // namespace cuda
}  // namespace mmo1d
