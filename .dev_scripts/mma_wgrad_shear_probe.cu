// A probe of the tensor-core weight gradient for lines along the diagonals (45 and 135 degrees, rounded
// or bilinear taps) on sheared tiles, standalone (not part of the extension):
//   nvcc -arch=sm_90a -O3 -std=c++17 .dev_scripts/mma_wgrad_shear_probe.cu -o sprobe
//   ./sprobe check                        # each point's sums and db against float64 sums
//   ./sprobe time [N C S K]               # kernel time per tile shape: rounded and bilinear diagonals
// against the op's kernels on the same calls, e.g. `python tools/analysis_tools/profile_model.py --op --op-angle 45
// --op-passes bwd_weight --op-rounding trunc bilinear` (its weight gradient's vector kernel on every block).
//
// The extension's tensor-core weight gradient (csrc/cuda/mma_wgrad/) stages tiles of output lines along
// the rows or the columns with a halo across them, and leaves lines more than 22.5 degrees off an axis to
// the vector kernel: a diagonal's square halo (K/2 sin 45 degrees each side) leaves few lines a tile. On
// the diagonals the learned angles' vector kernel takes 12 instructions per multiply-add where the
// tensor cores take 2.6 (ncu, op_passes_wgrad_ab_h200.md). Here a diagonal line is an axis: with
// s = +1 (45 degrees: taps (dh, dw) = (-d sin, d cos), h + w constant along a line) or -1 (135), a pixel
// (h, w) has the sheared coordinates (h, u = w + s h). A tile is nv rows h by tu lines u; row h' of its x
// tile holds lines [u0 - pu, u0 - pu + bx) of image row h', one bulk tensor copy (bx pixels along the
// image row from w = u0 - pu - s h', zeros outside the image), so a point (dh, dw) of a line sits at (dh,
// dw + s dh) in the tile: ra = max |dh| rows of halo along the line, pu = max |dw + s dh| (0 for rounded
// 45-degree taps, 1-2 for bilinear ones) across. The tile's outputs inside the image (a band of the
// sheared plane) are listed row by row, lines fastest (8 neighbouring outputs are 8 neighbouring 16-byte
// pieces), and summed as the extension's kernel sums them: for 16 outputs, 8 channels and two points one
// mma.m16n8k16 of ldmatrix.trans pieces of x at the point's offset by dy's pieces, the sums on its
// diagonal, the bias with A all ones; both groups of 8 channels walk one list, the union of the block's
// 16 channels' points. Shared pieces: .dev_scripts/mma_probe_common.cuh.
#include <set>
#include <utility>

#include "mma_probe_common.cuh"

constexpr int kPairs = 8;     // pairs of points a warp's products hold at once (32 float32 registers)
constexpr int kMaxPts = 128;  // a block's union of points

struct SParams {
  float* partial;     // (parts, C, kMaxPts): a block's sums per point, part = n * ntiles + tile
  float* bpartial;    // (parts, C)
  const int2* pts;    // (C / 16, kMaxPts): each block's points (dh, dw)
  const int* npts;    // (C / 16)
  const int4* tiles;  // (ntiles): h0, nv, u0
  int N, H, W, C, ntiles;
  int s, ra, pu;      // the shear, the halos along (rows) and across (lines)
  int tv, tu, bx;     // rows and lines a tile (tu a multiple of 8), the x rows' width (a multiple of 8)
  int maxp;           // the most points of a block: the warps' rows of sums hold maxp + 1 (the bias last)
};

__host__ __device__ inline int a128(int v) { return (v + 127) / 128 * 128; }
__host__ __device__ inline int x_plane(const SParams& p) { return a128((p.tv + 2 * p.ra) * p.bx * 16); }
__host__ __device__ inline int dy_plane(const SParams& p) { return a128((p.tv * p.tu + 1) * 16); }
__host__ __device__ inline int slots(const SParams& p) { return (p.tv * p.tu + 15) / 16 * 16; }
__host__ __device__ inline int shear_smem(const SParams& p) {
  return 2 * x_plane(p) + 2 * dy_plane(p) + 2 * slots(p) * 4 + kThreads / 32 * (p.maxp + 1) * 8 * 4 +
         (kMaxPts + 2) * 4 + (p.tv + 1) * 4;
}

// Row h's lines inside the image: w = u - s h in [0, W), within [u0, u0 + tu).
__device__ inline void row_lines(const SParams& p, int h, int u0, int& lo, int& hi) {
  lo = max(u0, p.s * h);
  hi = min(u0 + p.tu, p.s * h + p.W);
}

// One block: image blockIdx.z, channels [16 blockIdx.y, + 16), tile blockIdx.x. Warps 0-3 take channels
// 0-7, warps 4-7 channels 8-15; each warp every fourth block of 16 listed outputs, the points in passes of
// kPairs pairs; the 4 warps' rows of sums are added in order into the block's partial row.
template <bool HALF>
__global__ void __launch_bounds__(kThreads, 2) shear_wgrad_kernel(const __grid_constant__ SParams p,
                                                                  const __grid_constant__ Maps maps) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t mbar_s;
  const int tile = blockIdx.x, cb = blockIdx.y, n = blockIdx.z, c0 = cb * kCB;
  const int4 t = p.tiles[tile];
  const int h0 = t.x, nv = t.y, u0 = t.z, ra = p.ra, pu = p.pu, bx = p.bx, tu = p.tu, s = p.s;
  const int P = p.npts[cb], P1 = p.maxp + 1, xrows = nv + 2 * ra;
  const int xp = x_plane(p), dp = dy_plane(p), sl = slots(p);
  int* pix_s = reinterpret_cast<int*>(smem + 2 * xp + 2 * dp);
  int* pix_o = pix_s + sl;
  float* red = reinterpret_cast<float*>(pix_o + sl);        // [warp][maxp + 1][8]
  int* offs = reinterpret_cast<int*>(red + kThreads / 32 * P1 * 8);  // [kMaxPts + 2]
  int* first = offs + kMaxPts + 2;                           // [tv + 1]: the rows' first listed output
  const uint32_t s0 = smem_addr(smem), mbar = smem_addr(&mbar_s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, grp = warp >> 2, wq = warp & 3;
  const int gq = lane >> 2, tq = lane & 3;
  if (threadIdx.x == 0) {
    mbar_init(mbar);
    mbar_arrive_expect(mbar, uint32_t(2 * xrows * bx * 16 + 2 * nv * tu * 16));
  }
  __syncthreads();  // the barrier's initialisation before any copy completes on it
  if (warp == 0) {
    for (int i = lane; i < 2 * (xrows + nv); i += 32) {
      const bool is_x = i < 2 * xrows;
      const int k = is_x ? i : i - 2 * xrows, rows = is_x ? xrows : nv, g = k / rows, r = k - g * rows;
      const int h = is_x ? h0 - ra + r : h0 + r;
      const int w = (is_x ? u0 - pu : u0) - s * h;
      const uint32_t dst = is_x ? s0 + g * xp + r * bx * 16 : s0 + 2 * xp + g * dp + r * tu * 16;
      tma_load_4d(dst, is_x ? &maps.x[0] : &maps.y[0], c0 + 8 * g, w, h, n, mbar);
    }
  }
  for (int i = threadIdx.x; i < kThreads / 32 * P1 * 8; i += blockDim.x) red[i] = 0.f;
  for (int j = threadIdx.x; j < kMaxPts + 2; j += blockDim.x) {
    const int2 d = p.pts[int64_t(cb) * kMaxPts + min(j, P - 1)];
    offs[j] = (d.x * bx + d.y + s * d.x) * 16;
  }
  if (threadIdx.x < 2) {  // each dy plane's zero pixel, past its tile
    *reinterpret_cast<uint4*>(smem + 2 * xp + threadIdx.x * dp + p.tv * tu * 16) = make_uint4(0, 0, 0, 0);
  }
  if (threadIdx.x == 0) {
    int acc = 0;
    for (int r = 0; r < nv; ++r) {
      int lo, hi;
      row_lines(p, h0 + r, u0, lo, hi);
      first[r] = acc;
      acc += max(0, hi - lo);
    }
    first[nv] = acc;
  }
  __syncthreads();
  const int npix = first[nv], nblk = (npix + 15) / 16;
  for (int i = threadIdx.x; i < nblk * 16; i += blockDim.x) {
    const int e = min(i, npix - 1);
    int r = 0;
    while (first[r + 1] <= e) ++r;
    int lo, hi;
    row_lines(p, h0 + r, u0, lo, hi);
    const int u = lo + e - first[r] - u0;
    pix_s[i] = ((r + ra) * bx + u + pu) * 16;
    pix_o[i] = i < npix ? (r * tu + u) * 16 : p.tv * tu * 16;
  }
  __syncthreads();
  mbar_wait(mbar, 0);
  const uint32_t xg = s0 + grp * xp, dg = s0 + 2 * xp + grp * dp;
  const int apix = 8 * ((lane >> 4) & 1) + (lane & 7), sel = (lane >> 3) & 1;
  const bool diag = (gq >> 1) == tq, odd = gq & 1;
  float* row = red + warp * P1 * 8;
  constexpr uint32_t kOne = HALF ? 0x3c003c00u : 0x3f803f80u;
  const uint32_t ones[4] = {kOne, kOne, kOne, kOne};
  float accb[4] = {0.f, 0.f, 0.f, 0.f};
  const int pairs = (P + 1) / 2;
  for (int j0 = 0; j0 < pairs; j0 += kPairs) {
    int off[kPairs];
#pragma unroll
    for (int jj = 0; jj < kPairs; ++jj) off[jj] = offs[min(2 * (j0 + jj) + sel, kMaxPts + 1)];
    float acc[kPairs][4];
#pragma unroll
    for (int jj = 0; jj < kPairs; ++jj) acc[jj][0] = acc[jj][1] = acc[jj][2] = acc[jj][3] = 0.f;
    for (int blk = wq; blk < nblk; blk += 4) {
      uint32_t b0, b1;
      ldsm_x2_trans(b0, b1, dg + pix_o[blk * 16 + (lane & 15)]);
      const uint32_t xa = xg + pix_s[blk * 16 + apix];
#pragma unroll
      for (int jj = 0; jj < kPairs; ++jj) {
        uint32_t f[4];
        ldsm_x4_trans(f, xa + off[jj]);
        mma_16816<HALF>(acc[jj], f, b0, b1);
      }
      if (j0 == 0) mma_16816<HALF>(accb, ones, b0, b1);
    }
    if (diag) {
#pragma unroll
      for (int jj = 0; jj < kPairs; ++jj) {
        const int j = 2 * (j0 + jj);
        if (j < P) row[j * 8 + gq] += odd ? acc[jj][1] : acc[jj][0];
        if (j + 1 < P) row[(j + 1) * 8 + gq] += odd ? acc[jj][3] : acc[jj][2];
      }
    }
  }
  if (gq == 0) {  // the bias: every row of accb holds the column sums
    row[p.maxp * 8 + 2 * tq] += accb[0];
    row[p.maxp * 8 + 2 * tq + 1] += accb[1];
  }
  __syncthreads();
  const int64_t part = int64_t(n) * p.ntiles + tile;
  for (int i = threadIdx.x; i < kCB * P1; i += blockDim.x) {
    const int cl = i / P1, j = i - cl * P1, g = cl >> 3, k = cl & 7, c = c0 + cl;
    if (j != p.maxp && j >= P) continue;
    float v = 0.f;
    for (int w = 0; w < 4; ++w) v += red[((4 * g + w) * P1 + j) * 8 + k];
    if (j == p.maxp) {
      p.bpartial[part * p.C + c] = v;
    } else {
      p.partial[(part * p.C + c) * kMaxPts + j] = v;
    }
  }
}

// Each point's sum and db: the blocks' rows added in order (images, then tiles).
__global__ void shear_reduce_kernel(const SParams p, float* sums, float* db) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= p.C * (kMaxPts + 1)) return;
  const int c = e / (kMaxPts + 1), j = e - c * (kMaxPts + 1);
  if (j != kMaxPts && j >= p.npts[c / kCB]) return;
  float v = 0.f;
  for (int64_t part = 0; part < int64_t(p.N) * p.ntiles; ++part) {
    v += j < kMaxPts ? p.partial[(part * p.C + c) * kMaxPts + j] : p.bpartial[part * p.C + c];
  }
  if (j < kMaxPts) {
    sums[c * kMaxPts + j] = v;
  } else {
    db[c] = v;
  }
}

struct Case {
  int N, C, H, W, K;
  bool half, bilinear;
  double angle, jitter;  // degrees (45 or 135); each channel's angle moved by up to jitter radians
  int tv, tu;
};

// The union of block cb's channels' points: rounded taps (trunc_taps) or the nonzero samples of bilinear
// ones at float32 positions (-d sin, d cos), as the op's tables; returns the count.
static int block_points(const Case& cs, int cb, std::mt19937& rng, int2* out) {
  std::uniform_real_distribution<float> ud(-float(cs.jitter), float(cs.jitter));
  std::set<std::pair<int, int>> pts;
  for (int k = 0; k < kCB; ++k) {
    const float a = float(cs.angle * M_PI / 180) + ud(rng);
    if (!cs.bilinear) {
      std::vector<int2> taps(cs.K);
      trunc_taps(a, cs.K, taps.data());
      for (const int2& o : taps) pts.insert({o.x, o.y});
      continue;
    }
    const float sn = float(std::sin(double(a))), cs_ = float(std::cos(double(a)));
    for (int t = 0; t < cs.K; ++t) {
      const float d = float(t - cs.K / 2), py = -d * sn, px = d * cs_;
      const float fy = std::floor(py), fx = std::floor(px);
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          const float wy = i ? py - fy : 1.f - (py - fy), wx = j ? px - fx : 1.f - (px - fx);
          if (wy * wx != 0.f) pts.insert({int(fy) + i, int(fx) + j});
        }
      }
    }
  }
  if (int(pts.size()) > kMaxPts) {
    fprintf(stderr, "block %d: %zu points, more than %d\n", cb, pts.size(), kMaxPts);
    exit(2);
  }
  int i = 0;
  for (const auto& q : pts) out[i++] = make_int2(q.first, q.second);
  return i;
}

static int run(const Case& cs, bool check, int reps) {
  const int N = cs.N, C = cs.C, H = cs.H, W = cs.W, ncb = C / kCB;
  const int64_t elems = int64_t(N) * H * W * C;
  std::mt19937 rng(1234 + C + H + cs.K);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> hx(elems), hdy(elems);
  for (auto& v : hx) v = f2h(nd(rng), cs.half);
  for (auto& v : hdy) v = f2h(nd(rng), cs.half);
  std::vector<int2> pts(int64_t(ncb) * kMaxPts);
  std::vector<int> npts(ncb);
  SParams p{};
  p.s = cs.angle < 90 ? 1 : -1;
  int max_pts = 0;
  for (int cb = 0; cb < ncb; ++cb) {
    npts[cb] = block_points(cs, cb, rng, &pts[int64_t(cb) * kMaxPts]);
    max_pts = std::max(max_pts, npts[cb]);
    for (int j = 0; j < npts[cb]; ++j) {
      const int2 d = pts[int64_t(cb) * kMaxPts + j];
      p.ra = std::max(p.ra, std::abs(d.x));
      p.pu = std::max(p.pu, std::abs(d.y + p.s * d.x));
    }
  }
  p.maxp = max_pts, p.N = N, p.H = H, p.W = W, p.C = C, p.tv = cs.tv, p.tu = cs.tu;
  p.bx = (cs.tu + 2 * p.pu + 7) / 8 * 8;
  // Tiles: rows [h0, h0 + nv), then the lines of those rows inside the image in runs of tu.
  std::vector<int4> tiles;
  for (int h0 = 0; h0 < H; h0 += cs.tv) {
    const int nv = std::min(cs.tv, H - h0), hl = h0 + nv - 1;
    const int ulo = p.s > 0 ? h0 : -hl, uhi = p.s > 0 ? hl + W : W - h0;
    for (int u0 = ulo; u0 < uhi; u0 += cs.tu) tiles.push_back(make_int4(h0, nv, u0, 0));
  }
  p.ntiles = int(tiles.size());
  const int smem = shear_smem(p);
  int dev_smem = 0;
  CK(cudaDeviceGetAttribute(&dev_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  if (smem > dev_smem) {
    printf("| %s | %d | %d | %d | %s %g | %dx%d | - | %d | too large |\n", cs.half ? "float16" : "bfloat16", C, H, cs.K,
           cs.bilinear ? "bilinear" : "rounded", cs.angle, cs.tv, cs.tu, smem);
    return 0;
  }
  uint16_t *dx, *ddy;
  float *dpart, *dbpart, *dsums, *ddb;
  int2* dpts;
  int* dnpts;
  int4* dtiles;
  const int64_t parts = int64_t(N) * p.ntiles;
  CK(cudaMalloc(&dx, elems * 2));
  CK(cudaMalloc(&ddy, elems * 2));
  CK(cudaMalloc(&dpart, parts * C * kMaxPts * 4));
  CK(cudaMalloc(&dbpart, parts * C * 4));
  CK(cudaMalloc(&dsums, int64_t(C) * kMaxPts * 4));
  CK(cudaMalloc(&ddb, C * 4));
  CK(cudaMalloc(&dpts, pts.size() * sizeof(int2)));
  CK(cudaMalloc(&dnpts, ncb * 4));
  CK(cudaMalloc(&dtiles, tiles.size() * sizeof(int4)));
  CK(cudaMemcpy(dx, hx.data(), elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ddy, hdy.data(), elems * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dpts, pts.data(), pts.size() * sizeof(int2), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dnpts, npts.data(), ncb * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dtiles, tiles.data(), tiles.size() * sizeof(int4), cudaMemcpyHostToDevice));
  p.partial = dpart, p.bpartial = dbpart, p.pts = dpts, p.npts = dnpts, p.tiles = dtiles;
  Maps maps{};
  maps.x[0] = tensor_map(dx, cs.half, N, H, W, C, p.bx, 1);
  maps.y[0] = tensor_map(ddy, cs.half, N, H, W, C, p.tu, 1);
  const dim3 grid(p.ntiles, ncb, N);
  auto kern = cs.half ? shear_wgrad_kernel<true> : shear_wgrad_kernel<false>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  auto go = [&] {
    kern<<<grid, kThreads, smem>>>(p, maps);
    shear_reduce_kernel<<<(C * (kMaxPts + 1) + 255) / 256, 256>>>(p, dsums, ddb);
  };
  char name[64];
  snprintf(name, sizeof(name), "%s %g%s", cs.bilinear ? "bilinear" : "rounded", cs.angle,
           cs.jitter > 0 ? " moved" : "");
  int bad = 0;
  if (check) {
    go();
    CK(cudaDeviceSynchronize());
    std::vector<float> sums(int64_t(C) * kMaxPts), db(C);
    CK(cudaMemcpy(sums.data(), dsums, sums.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(db.data(), ddb, C * 4, cudaMemcpyDeviceToHost));
    // float64 sums: within 2^-20 of the sum of |dy x| (float32 sums over a few thousand terms a block).
    double worst = 0;
    for (int c = 0; c < C; ++c) {
      const int cb = c / kCB;
      for (int j = 0; j <= npts[cb]; ++j) {
        const bool is_b = j == npts[cb];
        const int2 o = is_b ? make_int2(0, 0) : pts[int64_t(cb) * kMaxPts + j];
        double sm, mag;
        host_wgrad_sum(hx, hdy, cs.half, N, H, W, C, c, o, is_b, sm, mag);
        const double got = is_b ? db[c] : sums[int64_t(c) * kMaxPts + j];
        worst = std::max(worst, std::abs(got - sm) / (mag * std::ldexp(1.0, -20) + 1e-30));
      }
    }
    bad = !(worst <= 1.0);
    printf("check %s %s N=%d C=%d %dx%d K=%d tile %dx%d (ra %d, pu %d, %d points): error %.3f of the bound: %s\n",
           cs.half ? "fp16" : "bf16", name, N, C, H, W, cs.K, cs.tv, cs.tu, p.ra, p.pu, max_pts, worst,
           bad ? "FAIL" : "ok");
  } else {
    const float ms = mean_ms(go, [&] { kern<<<grid, kThreads, smem>>>(p, maps); }, reps);
    // Staged pixels inside the image per output: x rows and dy rows of every tile.
    double staged = 0;
    for (const int4& t : tiles) {
      for (int r = -p.ra; r < t.y + p.ra; ++r) {
        const int h = t.x + r, w0 = t.z - p.pu - p.s * h;
        if (h >= 0 && h < H) staged += std::max(0, std::min(W, w0 + p.bx) - std::max(0, w0));
      }
    }
    printf("| %s | %d | %d | %d | %s | %dx%d | %.4f | %d | %.2f |\n", cs.half ? "float16" : "bfloat16", C, H, cs.K,
           name, cs.tv, cs.tu, ms, smem, staged / (double(H) * W));
  }
  cudaFree(dx), cudaFree(ddy), cudaFree(dpart), cudaFree(dbpart), cudaFree(dsums), cudaFree(ddb);
  cudaFree(dpts), cudaFree(dnpts), cudaFree(dtiles);
  return bad;
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "check";
  int bad = 0;
  if (what == "check") {
    for (int half = 0; half < 2; ++half) {
      for (double a : {45.0, 135.0}) {
        bad += run({2, 32, 29, 23, 31, bool(half), false, a, 0.0, 16, 32}, true, 0);
        bad += run({2, 32, 29, 23, 31, bool(half), true, a, 0.0, 32, 16}, true, 0);
        bad += run({2, 32, 20, 37, 31, bool(half), true, a, 0.05, 8, 24}, true, 0);
        bad += run({3, 16, 7, 9, 15, bool(half), true, a, 0.05, 16, 8}, true, 0);
      }
    }
  } else {
    const int N = argc > 2 ? atoi(argv[2]) : 64, C = argc > 3 ? atoi(argv[3]) : 384;
    const int S = argc > 4 ? atoi(argv[4]) : 56, K = argc > 5 ? atoi(argv[5]) : 31;
    printf("| dtype | C | S | K | taps | tile (rows x lines) | kernel ms | smem | staged pixels per output |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int half = 0; half < 2; ++half) {
      for (const bool bil : {false, true}) {
        for (const double jit : {0.0, 0.05}) {
          if (!bil && jit > 0) continue;
          for (const int2 tile : {make_int2(16, 32), make_int2(32, 16), make_int2(32, 24), make_int2(64, 16),
                                  make_int2(24, 32)}) {
            run({N, C, S, S, K, bool(half), bil, 45.0, jit, tile.x, tile.y}, false, 20);
          }
        }
      }
    }
  }
  printf("%s\n", bad ? "SOME CHECKS FAILED" : "all checks passed");
  return bad ? 1 : 0;
}
