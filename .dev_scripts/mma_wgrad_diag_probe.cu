// A probe of a tensor-core weight gradient for the channels_last 16-bit oriented convolution over the
// channels_last tile itself (no per-channel planes), standalone (not part of the extension):
//   nvcc -arch=sm_90 -O3 -std=c++17 .dev_scripts/mma_wgrad_diag_probe.cu -o wprobe
//   ./wprobe check                 # dw and db against float64 sums
//   ./wprobe time [N C S K]        # kernel time: the 8 directions, 0, 22.5, 45, 67.5, 90 degrees
// Rounded (truncated) taps, each tap's sum on its own (the op sums each distinct pixel once).
//
// dw(n, t) = sum_p dy(p, n) x(p + o_t, n). For 16 pixels p_k, 8 channels and two taps, the product
//   C[(t, c)][n] = sum_k A[(t, c)][k] B[k][n],   A[(t, c)][k] = x(p_k + o_t, c),   B[k][n] = dy(p_k, n)
// (mma.m16n8k16, float32 sums) holds the wanted sums on its diagonal c = n; the other entries pair one
// channel's x with another's dy and are dropped, so no channel's value reaches another's sum. A is the
// transpose of the forward's A: `ldmatrix.trans` of the tile's 16-byte pixel pieces at any tap offset;
// B is dy's pieces (`ldmatrix.trans`), loaded once per 16 pixels for every tap. A warp keeps 8 tap pairs'
// products in registers over its pixels (passes of 8 pairs over the tile), then the diagonals of its 4
// warps are added in order into one partial row per block; a second kernel adds the rows (tiles and
// images) in order. db: one more product per 16 pixels with A all ones. Tiles as the forward probe's
// (mma_probe_common.cuh); x with its halo and dy by bulk tensor copies, dy's plane padded with zero pixels
// to whole blocks of 16. Results: benchmarks/results/op_passes_wgrad_ab_h200.md.
#include "mma_probe_common.cuh"

constexpr int kPassPairs = 8;  // tap pairs a warp holds at once (32 float32 registers)

struct WParams {
  const uint16_t* x;
  const uint16_t* dy;
  float* partial;   // (N * max_tiles, C, K): a block's sums
  float* bpartial;  // (N * max_tiles, C)
  const int2* taps; // (C / 16, K)
  const Plan* plans;
  int N, H, W, C, max_tiles;
};

// The dy plane of a plan: th x tw pixels of 16 bytes, then zero pixels up to whole blocks of 16.
__host__ __device__ inline int dy_plane_bytes(const Plan& pl) { return ((pl.th * pl.tw + 15) / 16 * 256 + 127) / 128 * 128; }

// The shared memory of a block: two x planes, two dy planes, the pixel tables, the warps' sums.
__host__ __device__ inline int wgrad_smem(const Plan& pl, int K) {
  const int xplane = (pl.bh * pl.bw * 16 + 127) / 128 * 128, nblk = (pl.th * pl.tw + 15) / 16;
  return 2 * xplane + 2 * dy_plane_bytes(pl) + nblk * 16 * 8 + 2 * 4 * (K + 1) * 8 * 4;
}

// One block: image blockIdx.z, channels [16 blockIdx.y, + 16), tile blockIdx.x of its direction's plan.
// Warps 0-3 take channels 0-7, warps 4-7 channels 8-15; each warp every fourth block of 16 pixels.
template <bool HALF, int K>
__global__ void __launch_bounds__(kThreads, 3) mma_wgrad_kernel(const __grid_constant__ WParams p,
                                                                const __grid_constant__ Maps maps) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t mbar_s;
  constexpr int KP = (K + 1) / 2, PASSES = (KP + kPassPairs - 1) / kPassPairs;
  const int cb = blockIdx.y, c0 = cb * kCB, n = blockIdx.z, tile = blockIdx.x;
  const Plan pl = p.plans[cb];
  if (tile >= pl.ntiles) return;
  const int th = pl.th, tw = pl.tw, ph = pl.ph, pw = pl.pw, bw = pl.bw;
  const int h0 = (tile / pl.tiles_w) * th, w0 = (tile % pl.tiles_w) * tw;
  const int npix = th * tw, nblk = (npix + 15) / 16;
  const int xplane = (pl.bh * bw * 16 + 127) / 128 * 128, dplane = dy_plane_bytes(pl);
  const uint32_t s0 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t mbar = static_cast<uint32_t>(__cvta_generic_to_shared(&mbar_s));
  if (threadIdx.x == 0) {
    mbar_init(mbar);
    mbar_arrive_expect(mbar, 2 * pl.bh * bw * 16 + 2 * npix * 16);
    tma_load_4d(s0, &maps.x[pl.map], c0, w0 - pw, h0 - ph, n, mbar);
    tma_load_4d(s0 + xplane, &maps.x[pl.map], c0 + 8, w0 - pw, h0 - ph, n, mbar);
    tma_load_4d(s0 + 2 * xplane, &maps.y[pl.map], c0, w0, h0, n, mbar);
    tma_load_4d(s0 + 2 * xplane + dplane, &maps.y[pl.map], c0 + 8, w0, h0, n, mbar);
  }
  int* pix_s = reinterpret_cast<int*>(smem + 2 * xplane + 2 * dplane);
  int* pix_o = pix_s + nblk * 16;
  float* red = reinterpret_cast<float*>(pix_o + nblk * 16);  // [group][warp][K + 1][8]: taps, then db
  for (int i = threadIdx.x; i < nblk * 16; i += kThreads) {
    int r, c;
    tile_pixel(pl, i, r, c);
    pix_s[i] = ((r + ph) * bw + c + pw) * 16;
    pix_o[i] = i < npix ? (r * tw + c) * 16 : i * 16;  // past the plane: its zero pixels
    if (i >= npix) {
      *reinterpret_cast<uint4*>(smem + 2 * xplane + i * 16) = make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(smem + 2 * xplane + dplane + i * 16) = make_uint4(0, 0, 0, 0);
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = warp >> 2, wq = warp & 3;
  const int gq = lane >> 2, tq = lane & 3;
  // Lane l's ldmatrix row for A: matrix l / 8 holds pixels 8 ((l / 16) % 2) + l % 8 of the block at tap
  // 2j + (l / 8) % 2 (rows t, columns the 16 pixels); a tap past K repeats K - 1 (its sums are dropped).
  int off[KP];
  const int2* taps = p.taps + int64_t(cb) * K;
#pragma unroll
  for (int j = 0; j < KP; ++j) {
    const int2 t = taps[min(2 * j + ((lane >> 3) & 1), K - 1)];
    off[j] = (t.x * bw + t.y) * 16;
  }
  const int apix = 8 * ((lane >> 4) & 1) + (lane & 7);
  const uint32_t xg = s0 + grp * xplane, dg = s0 + 2 * xplane + grp * dplane;
  const uint32_t ones = HALF ? 0x3c003c00u : 0x3f803f80u;
  const uint32_t fones[4] = {ones, ones, ones, ones};
  __syncthreads();  // tables, zero pixels, the barrier's initialisation
  mbar_wait(mbar, 0);
  const bool diag = (gq >> 1) == tq;
  float accb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int pass = 0; pass < PASSES; ++pass) {
    float acc[kPassPairs][4];
#pragma unroll
    for (int jj = 0; jj < kPassPairs; ++jj) acc[jj][0] = acc[jj][1] = acc[jj][2] = acc[jj][3] = 0.f;
    for (int blk = wq; blk < nblk; blk += 4) {
      uint32_t b0, b1;
      ldsm_x2_trans(b0, b1, dg + pix_o[blk * 16 + (lane & 15)]);
      const uint32_t xa = xg + pix_s[blk * 16 + apix];
#pragma unroll
      for (int jj = 0; jj < kPassPairs; ++jj) {
        const int j = pass * kPassPairs + jj;
        if (j < KP) {
          uint32_t a[4];
          ldsm_x4_trans(a, xa + off[j]);
          mma_16816<HALF>(acc[jj], a, b0, b1);
        }
      }
      if (pass == 0) mma_16816<HALF>(accb, fones, b0, b1);
    }
    // The diagonal: lane (gq, tq) with gq / 2 == tq holds channel gq's sums, tap 2j in acc[.][gq % 2],
    // tap 2j + 1 in acc[.][2 + gq % 2].
    if (diag) {
#pragma unroll
      for (int jj = 0; jj < kPassPairs; ++jj) {
        const int j = pass * kPassPairs + jj;
        float* row = red + ((grp * 4 + wq) * (K + 1)) * 8 + gq;
        const bool odd = gq & 1;
        if (2 * j < K) row[(2 * j) * 8] = odd ? acc[jj][1] : acc[jj][0];
        if (2 * j + 1 < K) row[(2 * j + 1) * 8] = odd ? acc[jj][3] : acc[jj][2];
      }
    }
  }
  if (gq == 0) {  // db: every row of accb holds the column sums
    float* row = red + ((grp * 4 + wq) * (K + 1) + K) * 8;
    row[2 * tq] = accb[0];
    row[2 * tq + 1] = accb[1];
  }
  __syncthreads();
  const int64_t part = int64_t(n) * p.max_tiles + tile;
  for (int e = threadIdx.x; e < 2 * (K + 1) * 8; e += kThreads) {
    const int g = e / ((K + 1) * 8), rest = e - g * (K + 1) * 8, t = rest / 8, ch = rest - t * 8;
    float v = 0.f;
    for (int w = 0; w < 4; ++w) v += red[((g * 4 + w) * (K + 1) + t) * 8 + ch];
    const int c = c0 + 8 * g + ch;
    if (t < K) {
      p.partial[(part * p.C + c) * K + t] = v;
    } else {
      p.bpartial[part * p.C + c] = v;
    }
  }
}

// dw[c][t] and db[c]: the blocks' rows added in order (images, then tiles).
__global__ void wgrad_reduce_kernel(const WParams p, int K, float* dw, float* db) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= p.C * (K + 1)) return;
  const int c = e / (K + 1), t = e - c * (K + 1);
  const int ntiles = p.plans[c / kCB].ntiles;
  float v = 0.f;
  for (int n = 0; n < p.N; ++n) {
    for (int tile = 0; tile < ntiles; ++tile) {
      const int64_t part = int64_t(n) * p.max_tiles + tile;
      v += t < K ? p.partial[(part * p.C + c) * K + t] : p.bpartial[part * p.C + c];
    }
  }
  if (t < K) {
    dw[c * K + t] = v;
  } else {
    db[c] = v;
  }
}

template <bool HALF, int K>
static void launch(const WParams& p, const Maps& maps, dim3 grid, int smem) {
  auto kern = mma_wgrad_kernel<HALF, K>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kern<<<grid, kThreads, smem>>>(p, maps);
}

template <bool HALF>
static void launch_k(const WParams& p, const Maps& maps, dim3 grid, int K, int smem) {
  switch (K) {
    case 7: launch<HALF, 7>(p, maps, grid, smem); break;
    case 15: launch<HALF, 15>(p, maps, grid, smem); break;
    case 31: launch<HALF, 31>(p, maps, grid, smem); break;
    default: fprintf(stderr, "K=%d not instantiated\n", K); exit(2);
  }
}

struct Case {
  int N, C, H, W, K;
  bool half;
  double angle;  // degrees; < 0: the 8 directions in groups of C / 8 channels
};

static int run(const Case& cs, bool check, int reps) {
  const int N = cs.N, C = cs.C, H = cs.H, W = cs.W, K = cs.K;
  const int64_t elems = int64_t(N) * H * W * C;
  std::mt19937 rng(4321 + C + H + K);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> hx(elems), hdy(elems);
  for (auto& v : hx) v = f2h(nd(rng), cs.half);
  for (auto& v : hdy) v = f2h(nd(rng), cs.half);
  const int ncb = C / kCB;
  std::vector<int2> taps(int64_t(ncb) * K);
  std::vector<Plan> plans(ncb), shapes;
  int smem = 0, max_tiles = 0;
  for (int cb = 0; cb < ncb; ++cb) {
    const int2 halo = block_taps(cs.angle, cb, C, K, &taps[int64_t(cb) * K]);
    Plan pl = make_plan(halo.x, halo.y, H, W);  // the forward probe's tiles
    assign_map(pl, shapes);
    plans[cb] = pl;
    smem = std::max(smem, wgrad_smem(pl, K));
    max_tiles = std::max(max_tiles, pl.ntiles);
  }
  uint16_t *dx, *ddy;
  float *dpart, *dbpart, *ddw, *ddb;
  int2* dtaps;
  Plan* dplans;
  CK(cudaMalloc(&dx, elems * 2));
  CK(cudaMalloc(&ddy, elems * 2));
  CK(cudaMalloc(&dpart, int64_t(N) * max_tiles * C * K * 4));
  CK(cudaMalloc(&dbpart, int64_t(N) * max_tiles * C * 4));
  CK(cudaMalloc(&ddw, int64_t(C) * K * 4));
  CK(cudaMalloc(&ddb, C * 4));
  CK(cudaMalloc(&dtaps, taps.size() * sizeof(int2)));
  CK(cudaMalloc(&dplans, plans.size() * sizeof(Plan)));
  CK(cudaMemcpy(dx, hx.data(), elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ddy, hdy.data(), elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dtaps, taps.data(), taps.size() * sizeof(int2), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dplans, plans.data(), plans.size() * sizeof(Plan), cudaMemcpyHostToDevice));
  WParams p{};
  p.x = dx, p.dy = ddy, p.partial = dpart, p.bpartial = dbpart, p.taps = dtaps, p.plans = dplans;
  p.N = N, p.H = H, p.W = W, p.C = C, p.max_tiles = max_tiles;
  Maps maps{};
  for (size_t i = 0; i < shapes.size(); ++i) {
    maps.x[i] = tensor_map(dx, cs.half, N, H, W, C, shapes[i].bw, shapes[i].bh);
    maps.y[i] = tensor_map(ddy, cs.half, N, H, W, C, shapes[i].tw, shapes[i].th);
  }
  const dim3 grid(max_tiles, ncb, N);
  auto go = [&] {
    if (cs.half) {
      launch_k<true>(p, maps, grid, K, smem);
    } else {
      launch_k<false>(p, maps, grid, K, smem);
    }
    wgrad_reduce_kernel<<<(C * (K + 1) + 255) / 256, 256>>>(p, K, ddw, ddb);
  };
  char name[64];
  if (cs.angle < 0) {
    snprintf(name, sizeof(name), "mixed8");
  } else {
    snprintf(name, sizeof(name), "%g deg", cs.angle);
  }
  int bad = 0;
  if (check) {
    go();
    CK(cudaDeviceSynchronize());
    std::vector<float> dw(int64_t(C) * K), db(C);
    CK(cudaMemcpy(dw.data(), ddw, dw.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(db.data(), ddb, C * 4, cudaMemcpyDeviceToHost));
    // float64 sums: |dw - exact| within 2^-20 of the sum of |dy x| (float32 sums over at most a few
    // thousand terms a block, then over the blocks).
    double worst = 0;
    for (int c = 0; c < C; ++c) {
      for (int t = 0; t <= K; ++t) {
        const int2 o = t < K ? taps[int64_t(c / kCB) * K + t] : make_int2(0, 0);
        double s, mag;
        host_wgrad_sum(hx, hdy, cs.half, N, H, W, C, c, o, t == K, s, mag);
        const double got = t < K ? dw[int64_t(c) * K + t] : db[c];
        worst = std::max(worst, std::abs(got - s) / (mag * std::ldexp(1.0, -20) + 1e-30));
      }
    }
    bad = !(worst <= 1.0);
    printf("check %s %s N=%d C=%d %dx%d K=%d: dw and db error %.3f of the bound: %s\n", cs.half ? "fp16" : "bf16",
           name, N, C, H, W, K, worst, bad ? "FAIL" : "ok");
  } else {
    const float ms = mean_ms(go, go, reps);
    std::string tiles;
    for (const Plan& q : shapes) {
      tiles += (tiles.empty() ? "" : ", ") + std::to_string(q.th) + "x" + std::to_string(q.tw) + (q.col ? "c" : "r");
    }
    printf("| %s | %d | %d | %d | %s | %.4f | %d | %s |\n", cs.half ? "float16" : "bfloat16", C, H, K, name, ms, smem,
           tiles.c_str());
  }
  cudaFree(dx), cudaFree(ddy), cudaFree(dpart), cudaFree(dbpart), cudaFree(ddw), cudaFree(ddb);
  cudaFree(dtaps), cudaFree(dplans);
  return bad;
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "check";
  int bad = 0;
  if (what == "check") {
    for (int half = 0; half < 2; ++half) {
      bad += run({2, 64, 56, 56, 31, bool(half), -1}, true, 0);
      bad += run({3, 64, 29, 31, 15, bool(half), -1}, true, 0);
      bad += run({2, 128, 13, 9, 31, bool(half), -1}, true, 0);
      bad += run({4, 128, 7, 7, 7, bool(half), -1}, true, 0);
      for (double a : {0.0, 22.5, 45.0, 67.5, 90.0, 135.0, 10.0}) bad += run({2, 32, 20, 37, 31, bool(half), a}, true, 0);
    }
  } else {
    const int N = argc > 2 ? atoi(argv[2]) : 64, C = argc > 3 ? atoi(argv[3]) : 384;
    const int S = argc > 4 ? atoi(argv[4]) : 56, K = argc > 5 ? atoi(argv[5]) : 31;
    for (int half = 0; half < 2; ++half) {
      for (double a : {-1.0, 0.0, 22.5, 45.0, 67.5, 90.0}) run({N, C, S, S, K, bool(half), a}, false, 50);
    }
  }
  printf("%s\n", bad ? "SOME CHECKS FAILED" : "all checks passed");
  return bad ? 1 : 0;
}
