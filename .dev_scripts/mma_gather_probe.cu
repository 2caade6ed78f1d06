// A probe of a tensor-core forward for the channels_last 16-bit oriented convolution, standalone
// (not part of the extension):
//   nvcc -arch=sm_90 -O3 -std=c++17 .dev_scripts/mma_gather_probe.cu -o probe
//   ./probe check                       # against a direct float32 kernel and a float64 host sum
//   ./probe time [N C S K [IMAGES]]     # kernel time: the 8 directions, 0, 22.5, 45, 67.5, 90 degrees
// It gathers rounded (truncated) taps, every tap on its own (no merging of taps on one pixel); `time`
// adds the residual (y = x + b + conv(x), the "++" blocks' form) as one more tap of weight 1.
//
// For 16 output pixels p_m and 8 channels, y(p_m, n) = b(n) + sum_t w(n, t) x(p_m + o_t, n) is one
// matrix product whose inner dimension runs over (tap, channel) pairs:
//   A[m][(t, c)] = x(p_m + o_t, c),   B[(t, c)][n] = w(n, t) if c == n, else 0.
// Each row of A's 8 x 8 blocks is one pixel's 8 channels, 16 contiguous bytes of a channels_last tile,
// so ldmatrix reads A at any tap offsets (no runs, no per-channel planes); B is block-diagonal (an
// eighth of its entries wanted) and constant over the block, so it stays in registers. Two taps per
// mma.m16n8k16 (the last of an odd K by m16n8k8), float32 sums; the products of 16-bit values are exact.
// The tile is staged once per block by two bulk tensor copies (TMA, cp.async.bulk.tensor, zero outside
// the image), one plane of 8 channels each, 16 bytes a pixel, so the 8 rows of an ldmatrix block (8
// neighbouring pixels) hit 32 distinct banks; the outputs go through shared memory and two bulk
// tensor stores. Neither passes through the load/store unit (a first version's per-pixel cp.async copies
// were 40% of its shared-memory wavefronts, which bound it). Each direction has its own tiles: rows
// of the plane for lines nearer the rows (halo mostly left and right), columns otherwise. Lines along
// an axis (0, 90 degrees) take mma_axis_kernel, which reads each A block once for two products.
// Shared pieces: .dev_scripts/mma_probe_common.cuh. Results and findings:
// benchmarks/results/op_passes_pp_conv_ab_h200.md.
#include "mma_probe_common.cuh"

struct Params {
  const uint16_t* x;      // for the direct kernel
  const uint16_t* w;      // (C, K), the input's dtype
  const float* bias;      // (C)
  uint16_t* y;            // for the direct kernel
  const int2* taps;       // (C / 16, K): (dh, dw) of each tap, one direction per block of 16 channels
  const Plan* plans;      // (C / 16)
  int N, H, W, C;
  int images;             // images a block, one after the other over the same tables
  int wstride;            // w's row: K, and one more for the residual tap
};

// One block: channels [16 blockIdx.y, + 16), output tile blockIdx.x of its direction's plan, images
// [blockIdx.z * images, + images) one after the other (B, the tap offsets and the pixel tables built
// once). Warps 0-3 take channels 0-7 of the block, warps 4-7 channels 8-15; each warp takes every
// fourth block of 16 tile pixels, two blocks at a time. An image's copies are issued as soon as every
// warp is done with the previous image's tile; its outputs' plane is written once the previous bulk
// store has read it.
template <bool HALF, int K>
__global__ void __launch_bounds__(kThreads, 3) mma_gather_kernel(const __grid_constant__ Params p,
                                                                 const __grid_constant__ Maps maps) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t mbar_s;
  constexpr int KP = K / 2;
  const int cb = blockIdx.y, c0 = cb * kCB;
  const int n0 = blockIdx.z * p.images, n1 = min(p.N, n0 + p.images);
  const Plan pl = p.plans[cb];
  const int tile = blockIdx.x;
  if (tile >= pl.ntiles || pl.axis != 0) return;
  const int th = pl.th, tw = pl.tw, ph = pl.ph, pw = pl.pw, bw = pl.bw;
  const int h0 = (tile / pl.tiles_w) * th, w0 = (tile % pl.tiles_w) * tw;
  const int xplane = (pl.bh * bw * 16 + 127) / 128 * 128, yplane = (th * tw * 16 + 127) / 128 * 128;
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t mbar = static_cast<uint32_t>(__cvta_generic_to_shared(&mbar_s));
  if (threadIdx.x == 0) {
    mbar_init(mbar);
  }
  auto issue = [&](int n) {  // thread 0: image n's tile
    mbar_arrive_expect(mbar, 2 * pl.bh * bw * 16);
    tma_load_4d(s0, &maps.x[pl.map], c0, w0 - pw, h0 - ph, n, mbar);
    tma_load_4d(s0 + xplane, &maps.x[pl.map], c0 + 8, w0 - pw, h0 - ph, n, mbar);
  };
  if (threadIdx.x == 0) issue(n0);
  // Per tile pixel i (in the plan's order): its A row's offset in an x plane (tap offset 0) and its
  // place in a y plane; after the planes.
  const int npix = th * tw, nblk = (npix + 15) / 16;
  int* pix_s = reinterpret_cast<int*>(smem + 2 * xplane + 2 * yplane);
  int* pix_o = pix_s + nblk * 16;
  for (int i = threadIdx.x; i < nblk * 16; i += kThreads) {
    int r, c;
    tile_pixel(pl, i, r, c);
    pix_s[i] = ((r + ph) * bw + c + pw) * 16;
    pix_o[i] = (r * tw + c) * 16;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = warp >> 2;
  const int gq = lane >> 2, tq = lane & 3;
  // B in registers: lane (gq, tq) holds B[2tq, 2tq + 1][gq] (tap 2j) and B[2tq + 8, 2tq + 9][gq]
  // (tap 2j + 1), channel gq's weights on the diagonal (DiagB).
  const uint16_t* wrow = p.w + int64_t(c0 + 8 * grp + gq) * K;  // K: the taps, residual included
  const DiagB diag_b(lane);
  uint32_t b[KP][2];
  uint32_t blast = 0;
  int off[KP];
  int offlast = 0;
  const int2* taps = p.taps + int64_t(cb) * K;
#pragma unroll
  for (int j = 0; j < KP; ++j) {
    b[j][0] = diag_b(wrow[2 * j]);
    b[j][1] = diag_b(wrow[2 * j + 1]);
    const int2 t = taps[2 * j + (lane >> 4)];
    off[j] = (t.x * bw + t.y) * 16;
  }
  if constexpr (K % 2 == 1) {
    blast = diag_b(wrow[K - 1]);
    const int2 t = taps[K - 1];
    offlast = (t.x * bw + t.y) * 16;
  }
  float bias[2] = {p.bias[c0 + 8 * grp + 2 * tq], p.bias[c0 + 8 * grp + 2 * tq + 1]};
  __syncthreads();  // the pixel tables (and the barrier's initialisation)
  const uint32_t gbase = s0 + grp * xplane;
  unsigned char* yp = smem + 2 * xplane + grp * yplane + 4 * tq;
  auto store = [&](int blk, const float (&acc)[4]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = blk * 16 + gq + 8 * half;
      if (i < npix) *reinterpret_cast<uint32_t*>(yp + pix_o[i]) = pack2<HALF>(acc[2 * half], acc[2 * half + 1]);
    }
  };
  for (int n = n0; n < n1; ++n) {
    if (n > n0) {
      if (threadIdx.x == 0) {
        issue(n);  // every warp is past the previous image's barrier: its tile is read
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      }
      __syncthreads();  // the previous image's outputs read by its bulk store
    }
    mbar_wait(mbar, (n - n0) & 1);
    for (int blk = warp & 3; blk < nblk; blk += 8) {
      const int blk2 = blk + 4;
      const bool two = blk2 < nblk;
      const uint32_t a0 = gbase + pix_s[blk * 16 + (lane & 15)];
      const uint32_t a1 = gbase + pix_s[(two ? blk2 : blk) * 16 + (lane & 15)];
      float acc0[4] = {bias[0], bias[1], bias[0], bias[1]}, acc1[4] = {bias[0], bias[1], bias[0], bias[1]};
#pragma unroll
      for (int j = 0; j < KP; ++j) {
        uint32_t fa[4], fb[4];
        ldsm_x4(fa, a0 + off[j]);
        ldsm_x4(fb, a1 + off[j]);
        mma_16816<HALF>(acc0, fa, b[j][0], b[j][1]);
        mma_16816<HALF>(acc1, fb, b[j][0], b[j][1]);
      }
      if constexpr (K % 2 == 1) {
        uint32_t f0, f1, g0, g1;
        ldsm_x2(f0, f1, a0 + offlast);
        ldsm_x2(g0, g1, a1 + offlast);
        mma1688<HALF>(acc0, f0, f1, blast);
        mma1688<HALF>(acc1, g0, g1, blast);
      }
      store(blk, acc0);
      if (two) store(blk2, acc1);
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // the outputs written, the tile read
    if (threadIdx.x == 0) {
      tma_store(&maps.y[pl.map], s0 + 2 * xplane, c0, w0, h0, n);
      tma_store(&maps.y[pl.map], s0 + 2 * xplane + yplane, c0 + 8, w0, h0, n);
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Lines along an axis (0 or 90 degrees: the taps one chain o_t = o_0 + t u, o_0 = -(K / 2) u): a block of
// 16 outputs is two segments of 8 pixels across the axis, the second one step u from the first, so the
// second half's A block at tap t is the first half's at tap t + 1. With M(s) the first half's 8 pixels
// moved by o_0 + s u, the product of taps (2j, 2j + 1) reads M(2j), M(2j + 1), M(2j + 1), M(2j + 2): K + 1
// blocks for K taps (one ldmatrix.x4 per four), where the generic kernel reads 2K. The residual (x at
// the output pixel) is M(K / 2) for the first half and M(K / 2 + 1) for the second, read again and
// added. Tiles: axis 1 (u along a row) 8-row segments down columns, pairs of columns; axis 2 the
// transpose. K odd.
template <bool HALF, int K>
__global__ void __launch_bounds__(kThreads, 3) mma_axis_kernel(const __grid_constant__ Params p,
                                                               const __grid_constant__ Maps maps, bool residual) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t mbar_s;
  static_assert(K % 2 == 1 && (K + 1) % 4 == 0, "an odd line of 4k - 1 taps");
  constexpr int KP = K / 2, NM = K + 1;  // products of two taps; A blocks M(0..K)
  const int cb = blockIdx.y, c0 = cb * kCB;
  const Plan pl = p.plans[cb];
  const int tile = blockIdx.x;
  if (tile >= pl.ntiles || pl.axis == 0) return;
  const int th = pl.th, tw = pl.tw, ph = pl.ph, pw = pl.pw, bw = pl.bw;
  const int h0 = (tile / pl.tiles_w) * th, w0 = (tile % pl.tiles_w) * tw;
  const int xplane = (pl.bh * bw * 16 + 127) / 128 * 128, yplane = (th * tw * 16 + 127) / 128 * 128;
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t mbar = static_cast<uint32_t>(__cvta_generic_to_shared(&mbar_s));
  const int n = blockIdx.z;  // one image a block
  if (threadIdx.x == 0) {
    mbar_init(mbar);
    mbar_arrive_expect(mbar, 2 * pl.bh * bw * 16);
    tma_load_4d(s0, &maps.x[pl.map], c0, w0 - pw, h0 - ph, n, mbar);
    tma_load_4d(s0 + xplane, &maps.x[pl.map], c0 + 8, w0 - pw, h0 - ph, n, mbar);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = warp >> 2;
  const int gq = lane >> 2, tq = lane & 3;
  const uint16_t* wrow = p.w + int64_t(c0 + 8 * grp + gq) * p.wstride;
  const DiagB diag_b(lane);
  uint32_t b[KP][2];
#pragma unroll
  for (int j = 0; j < KP; ++j) {
    b[j][0] = diag_b(wrow[2 * j]);
    b[j][1] = diag_b(wrow[2 * j + 1]);
  }
  const uint32_t blast = diag_b(wrow[K - 1]);
  const float bias[2] = {p.bias[c0 + 8 * grp + 2 * tq], p.bias[c0 + 8 * grp + 2 * tq + 1]};
  // Geometry: a block's first-half pixel m (0-7) at its origin plus m steps along the segment (down a
  // column for axis 1, along a row for axis 2), its second half at that plus u; steps in pixels of the
  // staged box (seg_step, u_step) and of the output tile (seg_y, u_y). Each block's origin in the box and
  // in the tile: a table after the planes.
  const bool ax1 = pl.axis == 1;
  const int seg_step = ax1 ? bw : 1, u_step = ax1 ? pl.us : pl.us * bw;
  const int seg_y = ax1 ? tw : 1, u_y = ax1 ? pl.us : pl.us * tw;
  const int bpr = ax1 ? tw / 2 : tw / 8;  // blocks a row of blocks
  const int nblk = (ax1 ? th / 8 : th / 2) * bpr;
  int2* btab = reinterpret_cast<int2*>(smem + 2 * xplane + 2 * yplane);
  for (int blk = threadIdx.x; blk < nblk; blk += kThreads) {
    const int br = blk / bpr, bc = blk - br * bpr;
    const int r = ax1 ? 8 * br : 2 * br + (pl.us < 0 ? 1 : 0), c = ax1 ? 2 * bc + (pl.us < 0 ? 1 : 0) : 8 * bc;
    btab[blk] = make_int2((r + ph) * bw + c + pw, r * tw + c);
  }
  __syncthreads();
  mbar_wait(mbar, 0);
  const uint32_t gbase = s0 + grp * xplane + ((lane & 7) * seg_step + ((lane >> 3) - K / 2) * u_step) * 16;
  unsigned char* yp = smem + 2 * xplane + grp * yplane + 4 * tq + gq * seg_y * 16;
  auto store = [&](int blk, const float (&acc)[4]) {
    unsigned char* o = yp + btab[blk].y * 16;
    *reinterpret_cast<uint32_t*>(o) = pack2<HALF>(acc[0], acc[1]);
    *reinterpret_cast<uint32_t*>(o + u_y * 16) = pack2<HALF>(acc[2], acc[3]);
  };
  // lane l's row address for ldmatrix.x4 of M(l / 8 ..): row l % 8 of the first half
  auto lane_addr = [&](int blk) { return gbase + btab[blk].x * 16; };
  const int q_step = 4 * u_step * 16;  // bytes from M(s) to M(s + 4)
  auto res = [&](uint32_t v, float& lo, float& hi) {
    if constexpr (HALF) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
      lo += f.x, hi += f.y;
    } else {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
      lo += f.x, hi += f.y;
    }
  };
  for (int blk = warp & 3; blk < nblk; blk += 8) {
    const int blk2 = blk + 4;
    const bool two = blk2 < nblk;
    const uint32_t a0 = lane_addr(blk), a1 = lane_addr(two ? blk2 : blk);
    float acc0[4] = {bias[0], bias[1], bias[0], bias[1]}, acc1[4] = {bias[0], bias[1], bias[0], bias[1]};
    // M(4q .. 4q + 3) in cur, the next four in nxt (loaded before the product that needs M(4q + 4)).
    uint32_t cur0[4], cur1[4], nxt0[4] = {0, 0, 0, 0}, nxt1[4] = {0, 0, 0, 0};
    ldsm_x4(cur0, a0);
    ldsm_x4(cur1, a1);
#pragma unroll
    for (int q = 0; q < NM / 4; ++q) {
      if (q + 1 < NM / 4) {
        ldsm_x4(nxt0, a0 + (q + 1) * q_step);
        ldsm_x4(nxt1, a1 + (q + 1) * q_step);
      }
      if (2 * q < KP) {
        const uint32_t fa[4] = {cur0[0], cur0[1], cur0[1], cur0[2]}, fb[4] = {cur1[0], cur1[1], cur1[1], cur1[2]};
        mma_16816<HALF>(acc0, fa, b[2 * q][0], b[2 * q][1]);
        mma_16816<HALF>(acc1, fb, b[2 * q][0], b[2 * q][1]);
      }
      if (2 * q + 1 < KP) {
        const uint32_t fa[4] = {cur0[2], cur0[3], cur0[3], nxt0[0]}, fb[4] = {cur1[2], cur1[3], cur1[3], nxt1[0]};
        mma_16816<HALF>(acc0, fa, b[2 * q + 1][0], b[2 * q + 1][1]);
        mma_16816<HALF>(acc1, fb, b[2 * q + 1][0], b[2 * q + 1][1]);
      } else if (2 * q + 1 == KP) {  // the last tap, K - 1: M(K - 1), M(K)
        mma1688<HALF>(acc0, cur0[2], cur0[3], blast);
        mma1688<HALF>(acc1, cur1[2], cur1[3], blast);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) cur0[i] = nxt0[i], cur1[i] = nxt1[i];
    }
    if (residual) {  // M(K / 2) and M(K / 2 + 1) again (lanes 0-15 address them)
      uint32_t rc0[2], rc1[2];
      ldsm_x2(rc0[0], rc0[1], a0 + (K / 2) * u_step * 16);
      ldsm_x2(rc1[0], rc1[1], a1 + (K / 2) * u_step * 16);
      res(rc0[0], acc0[0], acc0[1]);
      res(rc0[1], acc0[2], acc0[3]);
      res(rc1[0], acc1[0], acc1[1]);
      res(rc1[1], acc1[2], acc1[3]);
    }
    store(blk, acc0);
    if (two) store(blk2, acc1);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store(&maps.y[pl.map], s0 + 2 * xplane, c0, w0, h0, n);
    tma_store(&maps.y[pl.map], s0 + 2 * xplane + yplane, c0 + 8, w0, h0, n);
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
  }
}

// The direct sum, one thread an output element, float32 in tap order.
template <bool HALF>
__global__ void direct_kernel(const Params p, int K) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = int64_t(p.N) * p.H * p.W * p.C;
  if (e >= total) return;
  const int c = e % p.C;
  const int64_t pix = e / p.C;
  const int w = pix % p.W, h = (pix / p.W) % p.H, n = pix / (int64_t(p.W) * p.H);
  float acc = p.bias[c];
  for (int t = 0; t < K; ++t) {
    const int2 o = p.taps[int64_t(c / kCB) * K + t];
    const int hh = h + o.x, ww = w + o.y;
    if (hh < 0 || hh >= p.H || ww < 0 || ww >= p.W) continue;
    acc = fmaf(to_float<HALF>(p.w[int64_t(c) * K + t]), to_float<HALF>(p.x[((int64_t(n) * p.H + hh) * p.W + ww) * p.C + c]), acc);
  }
  if constexpr (HALF) {
    p.y[e] = __half_as_ushort(__float2half_rn(acc));
  } else {
    p.y[e] = __bfloat16_as_ushort(__float2bfloat16_rn(acc));
  }
}

struct Case {
  int N, C, H, W, K;
  bool half;
  double angle;     // degrees; < 0: the 8 directions in groups of C / 8 channels
  bool residual;    // y = x + b + conv(x): one more tap, at the output pixel, of weight 1
  int images = 0;   // images a block (0: the largest divisor of N that keeps 4 waves of blocks)
  bool axis = true; // lines along an axis by mma_axis_kernel
};

template <bool HALF, int K>
static void launch(const Params& p, const Maps& maps, dim3 grid, int smem) {
  auto kern = mma_gather_kernel<HALF, K>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kern<<<grid, kThreads, smem>>>(p, maps);
}

template <bool HALF, int K>
static void launch_axis(const Params& p, const Maps& maps, dim3 grid, int smem, bool residual) {
  auto kern = mma_axis_kernel<HALF, K>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kern<<<grid, kThreads, smem>>>(p, maps, residual);
}

template <bool HALF>
static void launch_axis_k(const Params& p, const Maps& maps, dim3 grid, int K, int smem, bool residual) {
  switch (K) {
    case 7: launch_axis<HALF, 7>(p, maps, grid, smem, residual); break;
    case 15: launch_axis<HALF, 15>(p, maps, grid, smem, residual); break;
    case 31: launch_axis<HALF, 31>(p, maps, grid, smem, residual); break;
    default: fprintf(stderr, "axis K=%d not instantiated\n", K); exit(2);
  }
}

template <bool HALF>
static void launch_k(const Params& p, const Maps& maps, dim3 grid, int K, int smem) {
  switch (K) {
    case 7: launch<HALF, 7>(p, maps, grid, smem); break;
    case 15: launch<HALF, 15>(p, maps, grid, smem); break;
    case 31: launch<HALF, 31>(p, maps, grid, smem); break;
    case 32: launch<HALF, 32>(p, maps, grid, smem); break;
    case 16: launch<HALF, 16>(p, maps, grid, smem); break;
    default: fprintf(stderr, "K=%d not instantiated\n", K); exit(2);
  }
}

// Runs one case: check (against the direct kernel, and on small cases a float64 host sum) or time.
static int run(const Case& cs, bool check, int reps) {
  const int N = cs.N, C = cs.C, H = cs.H, W = cs.W, K = cs.K + (cs.residual ? 1 : 0);
  const int64_t elems = int64_t(N) * H * W * C;
  std::mt19937 rng(1234 + C + H + K);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> hx(elems), hw(int64_t(C) * K);
  std::vector<float> hb(C);
  for (auto& v : hx) v = f2h(nd(rng), cs.half);
  for (int64_t e = 0; e < int64_t(hw.size()); ++e) {
    hw[e] = f2h(cs.residual && e % K == K - 1 ? 1.0f : nd(rng) / K, cs.half);
  }
  for (auto& v : hb) v = nd(rng) * 0.1f;
  const int ncb = C / kCB;
  std::vector<int2> taps(int64_t(ncb) * K);
  std::vector<Plan> plans(ncb);
  std::vector<Plan> shapes;  // distinct plans: one map each
  int smem = 0, grid_x = 0;
  bool any_axis = false, any_generic = false;
  for (int cb = 0; cb < ncb; ++cb) {
    const int2 halo = block_taps(cs.angle, cb, C, cs.K, &taps[int64_t(cb) * K]);
    const int ph = halo.x, pw = halo.y;
    if (cs.residual) taps[int64_t(cb) * K + K - 1] = make_int2(0, 0);
    // An axis line: the line's taps one chain o_0 + t u along an axis through the output pixel.
    const int2* o = &taps[int64_t(cb) * K];
    const int du = o[1].x - o[0].x, dv = o[1].y - o[0].y;
    bool chain = cs.axis && (cs.K + 1) % 4 == 0 && std::abs(du) + std::abs(dv) == 1 && o[cs.K / 2].x == 0 &&
                 o[cs.K / 2].y == 0;
    for (int t = 0; t < cs.K; ++t) chain = chain && o[t].x == o[0].x + t * du && o[t].y == o[0].y + t * dv;
    Plan pl = chain ? make_axis_plan(du == 0 ? 1 : 2, du == 0 ? dv : du, ph, pw, H, W) : make_plan(ph, pw, H, W);
    any_axis = any_axis || chain;
    any_generic = any_generic || !chain;
    assign_map(pl, shapes);
    plans[cb] = pl;
    smem = std::max(smem, plan_smem(pl));
    grid_x = std::max(grid_x, pl.ntiles);
  }
  Params p{};
  p.N = N, p.H = H, p.W = W, p.C = C;
  int64_t tile_blocks = 0;
  for (const Plan& pl : plans) tile_blocks += int64_t(pl.ntiles) * N;
  p.images = cs.images;
  if (p.images <= 0) {
    p.images = 1;
    for (int d = 1; d <= 8; ++d) {
      if (N % d == 0 && tile_blocks / d >= 132 * 3 * 4) p.images = d;
    }
  }
  uint16_t *dx, *dw, *dy, *dref;
  float* db;
  int2* dtaps;
  Plan* dplans;
  CK(cudaMalloc(&dx, elems * 2));
  CK(cudaMalloc(&dy, elems * 2));
  CK(cudaMalloc(&dref, elems * 2));
  CK(cudaMalloc(&dw, hw.size() * 2));
  CK(cudaMalloc(&db, C * 4));
  CK(cudaMalloc(&dtaps, taps.size() * sizeof(int2)));
  CK(cudaMalloc(&dplans, plans.size() * sizeof(Plan)));
  CK(cudaMemcpy(dx, hx.data(), elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), C * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dtaps, taps.data(), taps.size() * sizeof(int2), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dplans, plans.data(), plans.size() * sizeof(Plan), cudaMemcpyHostToDevice));
  p.x = dx, p.w = dw, p.bias = db, p.y = dy, p.taps = dtaps, p.plans = dplans;
  Maps maps{};
  for (size_t i = 0; i < shapes.size(); ++i) {
    maps.x[i] = tensor_map(dx, cs.half, N, H, W, C, shapes[i].bw, shapes[i].bh);
    maps.y[i] = tensor_map(dy, cs.half, N, H, W, C, shapes[i].tw, shapes[i].th);
  }
  const dim3 grid(grid_x, ncb, (N + p.images - 1) / p.images);
  p.wstride = K;
  const dim3 grid1(grid_x, ncb, N);  // the axis kernel: one image a block
  auto go = [&] {
    if (cs.half) {
      if (any_generic) launch_k<true>(p, maps, grid, K, smem);
      if (any_axis) launch_axis_k<true>(p, maps, grid1, cs.K, smem, cs.residual);
    } else {
      if (any_generic) launch_k<false>(p, maps, grid, K, smem);
      if (any_axis) launch_axis_k<false>(p, maps, grid1, cs.K, smem, cs.residual);
    }
  };
  int bad = 0;
  char name[64];
  if (cs.angle < 0) {
    snprintf(name, sizeof(name), "mixed8");
  } else {
    snprintf(name, sizeof(name), "%g deg", cs.angle);
  }
  if (check) {
    CK(cudaMemset(dy, 0xff, elems * 2));
    go();
    CK(cudaGetLastError());
    Params q = p;
    q.y = dref;
    const int64_t blocks = (elems + 255) / 256;
    if (cs.half) {
      direct_kernel<true><<<blocks, 256>>>(q, K);
    } else {
      direct_kernel<false><<<blocks, 256>>>(q, K);
    }
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> y(elems), ref(elems);
    CK(cudaMemcpy(y.data(), dy, elems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref.data(), dref, elems * 2, cudaMemcpyDeviceToHost));
    // Both round float32 sums of exact products: they may differ by one unit in the last place.
    int64_t over1 = 0, diff1 = 0;
    double max64 = 0;
    for (int64_t e = 0; e < elems; ++e) {
      const float a = h2f(y[e], cs.half), b = h2f(ref[e], cs.half);
      const int d = std::abs(int(y[e] & 0x7fffu) - int(ref[e] & 0x7fffu));  // units apart, same sign
      if (!std::isfinite(a) || (std::signbit(a) != std::signbit(b) ? a != b : d > 1)) {
        ++over1;
      } else if (a != b) {
        ++diff1;
      }
    }
    // A float64 sum at a sample of outputs: |y - exact| within one unit of y plus float32's error.
    for (int s = 0; s < 4000; ++s) {
      const int64_t e = int64_t(rng() % uint32_t(elems));
      const int c = e % C;
      const int64_t pix = e / C;
      const int w = pix % W, h = (pix / W) % H, n = pix / (int64_t(W) * H);
      double acc = hb[c], mag = std::abs(hb[c]);
      for (int t = 0; t < K; ++t) {
        const int2 o = taps[int64_t(c / kCB) * K + t];
        const int hh = h + o.x, ww = w + o.y;
        if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
        const double v = double(h2f(hw[int64_t(c) * K + t], cs.half)) *
                         double(h2f(hx[((int64_t(n) * H + hh) * W + ww) * C + c], cs.half));
        acc += v;
        mag += std::abs(v);
      }
      const double a = h2f(y[e], cs.half);
      const double ulp = std::max(std::abs(acc), 1e-30) * (cs.half ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7));
      max64 = std::max(max64, std::abs(a - acc) / (ulp + mag * 64 * std::ldexp(1.0, -24)));
    }
    bad = over1 > 0 || max64 > 1.0;
    printf("check %s %s N=%d C=%d %dx%d K=%d%s images=%d: %lld outputs more than one unit from the direct kernel, %lld one "
           "unit; float64 sample error %.3f of the bound: %s\n",
           cs.half ? "fp16" : "bf16", name, N, C, H, W, cs.K, cs.residual ? "+res" : "", p.images, (long long)over1, (long long)diff1, max64,
           bad ? "FAIL" : "ok");
  } else {
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    for (int i = 0; i < 5; ++i) go();
    CK(cudaEventRecord(t0));
    for (int i = 0; i < reps; ++i) go();
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    ms /= reps;
    // Copy bandwidth: a device-to-device copy of x.
    for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(dref, dx, elems * 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t0));
    for (int i = 0; i < reps; ++i) CK(cudaMemcpyAsync(dref, dx, elems * 2, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float cms;
    CK(cudaEventElapsedTime(&cms, t0, t1));
    cms /= reps;
    CK(cudaGetLastError());
    const double bytes = 2.0 * elems * 2;
    std::string tiles;
    for (const Plan& q : shapes) {
      tiles += (tiles.empty() ? "" : ", ") + std::to_string(q.th) + "x" + std::to_string(q.tw) + (q.col ? "c" : "r");
    }
    printf("| %s | %d | %d | %d%s | %s | %.4f | %.0f | %.0f%% | %d | %s | %d | %s |\n", cs.half ? "float16" : "bfloat16",
           C, H, cs.K, cs.residual ? "+res" : "", name, ms, bytes / ms / 1e6, 100.0 * cms / ms, smem, tiles.c_str(),
           p.images, any_axis ? "axis" : "-");
  }
  cudaFree(dx), cudaFree(dy), cudaFree(dref), cudaFree(dw), cudaFree(db), cudaFree(dtaps), cudaFree(dplans);
  return bad;
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "check";
  int bad = 0;
  if (what == "check") {
    for (int half = 0; half < 2; ++half) {
      bad += run({2, 384, 56, 56, 31, bool(half), -1, true, 2}, true, 0);
      bad += run({3, 64, 29, 31, 15, bool(half), -1, false, 3}, true, 0);
      bad += run({2, 128, 13, 9, 31, bool(half), -1, true, 1}, true, 0);
      bad += run({4, 128, 7, 7, 7, bool(half), -1, false, 2}, true, 0);
      for (double a : {0.0, 22.5, 45.0, 67.5, 90.0, 135.0, 10.0}) {
        bad += run({2, 32, 20, 37, 31, bool(half), a, a == 22.5 || a == 0.0, 2}, true, 0);
      }
      bad += run({2, 32, 27, 19, 15, bool(half), 90.0, true, 1}, true, 0);
      bad += run({2, 32, 9, 12, 7, bool(half), 0.0, false, 1}, true, 0);
    }
  } else {
    const int N = argc > 2 ? atoi(argv[2]) : 64, C = argc > 3 ? atoi(argv[3]) : 384;
    const int S = argc > 4 ? atoi(argv[4]) : 56, K = argc > 5 ? atoi(argv[5]) : 31;
    const int images = argc > 6 ? atoi(argv[6]) : 0;
    for (int half = 0; half < 2; ++half) {
      for (double a : {-1.0, 0.0, 22.5, 45.0, 67.5, 90.0}) run({N, C, S, S, K, bool(half), a, true, images}, false, 50);
      for (double a : {-1.0, 0.0, 90.0}) run({N, C, S, S, K, bool(half), a, true, images, false}, false, 50);
    }
  }
  printf("%s\n", bad ? "SOME CHECKS FAILED" : "all checks passed");
  return bad ? 1 : 0;
}
