// A probe of a tensor-core weight gradient for the channels_last 16-bit oriented convolution, standalone
// (not part of the extension):
//   nvcc -arch=sm_90 -O3 -std=c++17 .dev_scripts/mma_wgrad_probe.cu -o probe
//   ./probe check                                   # point sums against float64, small shapes
//   ./probe time|time-bilinear [C S TV CHUNK HALF PHASES]   # N=64, S x S, K=31: the 8 directions, 0, 22.5, 45
// PHASES 1 times the staging alone, 2 the products alone (one tile staged, then reused), 3 both. It
// sums dy x x at every point of truncated taps, or of the union of the bilinear points of 16 angles
// within 0.05 rad of each direction; results and findings: benchmarks/results/op_passes_wgrad_ab_h200.md.
//
// The weight gradient of a point (dv, du) of a channel is S = sum_o dy(o) x(o + (dv, du)). Chunk the
// outputs of a line (a row, a column or a diagonal of the plane, the "u" axis) by 8: o = (l, 8a + b).
// For one line offset dv and a column base (a multiple of 8),
//   G[m][b] = sum_(l, a) x(l + dv, 8a + base + m) dy(l, 8a + b)
// is a matrix product whose inner dimension runs over the (line, chunk) pairs, and
// S(dv, du) = sum_b G[du - base + b][b]. Both operands are rows of 8 contiguous elements of planes
// staged per channel (ldmatrix.trans), so the product runs as mma.m16n8k16 with float32 sums; the
// diagonal sums come at the end. A direction's points are grouped by dv in the orientation of the
// staged plane (rows, columns, or the two diagonals) that needs the fewest products.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../csrc/cuda/mma_wgrad/mma_ptx.cuh"  // mma_16816, ldsm_x4_trans

using namespace mmo1d::cuda;  // NOLINT: a standalone program

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

constexpr int kMaxBlk = 128;  // m8 blocks of a direction
constexpr int kMaxPts = 160;  // points of a direction
constexpr int kThreads = 256;
constexpr int kCB = 8;  // channels a block, one warp each

// One direction's plan: the orientation of its staged planes, its m8 blocks and its points.
struct DirPlan {
  int mode;         // 0 rows, 1 columns, 2 anti-diagonals (r + c), 3 diagonals (c - r)
  int nblk;         // m8 blocks, even
  int dvmin, dvmax;
  int ulo, uhi;     // staged x columns, relative to the outputs' u
  int blk_dv[kMaxBlk], blk_u[kMaxBlk];  // each block: line offset and column base (multiple of 8)
  int npts;
  int pt_gb0[kMaxPts], pt_t0[kMaxPts];  // each point: its group's first block, du - base
  int pt_dr[kMaxPts], pt_dc[kMaxPts];   // image offsets (for the reference)
};

struct Params {
  const uint16_t* x;
  const uint16_t* dy;
  float* partial;  // [part][C][kMaxPts]
  const DirPlan* plans;
  const int* dir_of_cb;
  int N, H, W, C, chunk, TV;
  int phases;  // 3: both; 1: staging only; 2: products only (the first tile staged, then reused)
};

__device__ __forceinline__ void map_image(int mode, int H, int v, int u, int& r, int& c) {
  if (mode == 0) {
    r = v, c = u;
  } else if (mode == 1) {
    r = u, c = v;
  } else if (mode == 2) {
    r = u, c = v - u;
  } else {
    r = u, c = v + u - (H - 1);
  }
}

__host__ __device__ inline void plane_extent(int mode, int H, int W, int& V, int& U) {
  if (mode == 0) {
    V = H, U = W;
  } else if (mode == 1) {
    V = W, U = H;
  } else {
    V = H + W - 1, U = H;
  }
}

// A row pitch in elements: rows 16 B aligned, an odd number of 16-byte units (8 rows of ldmatrix or of
// 16-byte stores in distinct banks).
__host__ __device__ inline int pad_pitch(int e) {
  e = (e + 7) / 8 * 8;
  return (e / 8) % 2 ? e : e + 8;
}

// 8 pixels of 8 channels (uint4 each) into 8 channel rows of 8 pixels, stored at dst + ch * plane.
__device__ __forceinline__ void store_transposed(const uint4 (&px)[8], uint16_t* dst, int plane) {
#pragma unroll
  for (int ch = 0; ch < 8; ++ch) {
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t* a = reinterpret_cast<const uint32_t*>(&px[2 * q]);
      const uint32_t* b = reinterpret_cast<const uint32_t*>(&px[2 * q + 1]);
      w[q] = __byte_perm(a[ch >> 1], b[ch >> 1], (ch & 1) ? 0x7632 : 0x5410);
    }
    *reinterpret_cast<uint4*>(dst + ch * plane) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// MB: products (m16 tiles) a batch; a direction of more runs the k loop once per batch and tile.
template <bool HALF, int MB>
__global__ void __launch_bounds__(kThreads, 2) mma_wgrad_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int cb = blockIdx.x, part = blockIdx.y;
  const DirPlan& d = p.plans[p.dir_of_cb[cb]];
  const int mode = d.mode, H = p.H, W = p.W, C = p.C, TV = p.TV;
  int V, U;
  plane_extent(mode, H, W, V, U);
  const int C8 = (U + 7) / 8, U8 = C8 * 8;
  const int XL = TV + d.dvmax - d.dvmin, XW = d.uhi - d.ulo;
  const int XP = pad_pitch(XW), DP = pad_pitch(U8);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nmma = d.nblk / 2, nbatch = (nmma + MB - 1) / MB;

  uint16_t* Xs = reinterpret_cast<uint16_t*>(smem);
  uint16_t* Ds = Xs + 8 * XL * XP;
  // dy's planes have a zero line TV, which the k beyond the tile's (line, chunk) pairs read.
  float* scratch = reinterpret_cast<float*>(Ds + 8 * (TV + 1) * DP);  // [warp][min(MB, nmma) * 128]
  const int kpairs = TV * C8, ksteps = (kpairs + 15) / 16;
  int2* ktab = reinterpret_cast<int2*>(scratch + 8 * min(MB, nmma) * 128);  // per k: x and dy offsets
  for (int e = threadIdx.x; e < 8 * DP; e += kThreads) Ds[((e / DP) * (TV + 1) + TV) * DP + e % DP] = 0;
  for (int k = threadIdx.x; k < ksteps * 16; k += kThreads) {
    const int l = k / C8, a = k - l * C8;
    ktab[k] = k < kpairs ? make_int2(l * XP + 8 * a, l * DP + 8 * a) : make_int2(0, TV * DP);
  }

  const uint32_t xs_a = static_cast<uint32_t>(__cvta_generic_to_shared(Xs + warp * XL * XP));
  const uint32_t ds_a = static_cast<uint32_t>(__cvta_generic_to_shared(Ds + warp * (TV + 1) * DP));
  // ldmatrix.x4 of A: lanes 0-7 give the rows k 0-7 of m 0-7, lanes 8-15 those of m 8-15, lanes
  // 16-31 k 8-15 likewise. B is read with x4 too, lanes 8-15 and 24-31 repeating the rows of lanes 0-7
  // and 16-23, so that a lane's A row and B row have the same k.
  const int mhalf = (lane >> 3) & 1, klane = ((lane >> 4) << 3) + (lane & 7);

  float acc[MB][4];
  float P[kMaxPts / 32];
#pragma unroll
  for (int i = 0; i < kMaxPts / 32; ++i) P[i] = 0.f;

  // The diagonal sums of batch `bt`'s products into P (each lane its points, b in order).
  auto flush = [&](int bt) {
    float* scr = scratch + warp * min(MB, nmma) * 128;
    const int g = lane >> 2, q = lane & 3;
    const int nm = min(MB, nmma - bt * MB);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < nm) {
        *reinterpret_cast<float2*>(scr + i * 128 + g * 8 + 2 * q) = make_float2(acc[i][0], acc[i][1]);
        *reinterpret_cast<float2*>(scr + i * 128 + (g + 8) * 8 + 2 * q) = make_float2(acc[i][2], acc[i][3]);
      }
    }
    __syncwarp();
    const int b0 = bt * MB * 2, b1 = b0 + MB * 2;
#pragma unroll
    for (int s = 0; s < kMaxPts / 32; ++s) {
      const int j = s * 32 + lane;
      if (j < d.npts) {
        float v = 0.f;
        for (int b = 0; b < 8; ++b) {
          const int t = d.pt_t0[j] + b, blk = d.pt_gb0[j] + (t >> 3);
          if (blk >= b0 && blk < b1) {
            const int lb = blk - b0;
            v += scr[(lb >> 1) * 128 + ((lb & 1) * 8 + (t & 7)) * 8 + b];
          }
        }
        P[s] += v;
      }
    }
    __syncwarp();
  };

  const int n0 = part * p.chunk, n1 = min(p.N, n0 + p.chunk);
  const int c0 = cb * kCB;
  const int xitems = XL * (XW / 8), ditems = TV * C8;
#pragma unroll
  for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  for (int n = n0; n < n1; ++n) {
    const uint16_t* xn = p.x + int64_t(n) * H * W * C + c0;
    const uint16_t* dyn = p.dy + int64_t(n) * H * W * C + c0;
    for (int v0 = 0; v0 < V; v0 += TV) {
      const bool stage = (p.phases & 1) || (n == n0 && v0 == 0);
      __syncthreads();
      // Stage x's lines [v0 + dvmin, v0 + TV + dvmax) over u in [ulo, uhi), and dy's lines.
      for (int it = threadIdx.x; stage && it < xitems + ditems; it += kThreads) {
        const bool isx = it < xitems;
        const int e = isx ? it : it - xitems;
        const int lines = isx ? XL : TV, octs = isx ? XW / 8 : C8;
        int l, o;
        if (mode == 0) {
          l = e / octs, o = e - l * octs;
        } else {
          o = e / lines, l = e - o * lines;
        }
        const int v = v0 + l + (isx ? d.dvmin : 0), u = 8 * o + (isx ? d.ulo : 0);
        const uint16_t* src = isx ? xn : dyn;
        int r, c;
        map_image(mode, H, v, u, r, c);
        const int sr = mode == 0 ? 0 : 1, sc = mode == 0 ? 1 : mode == 1 ? 0 : mode == 2 ? -1 : 1;
        const int ulim = isx ? 1 << 30 : (v < V ? U - u : 0);  // dy: its lines and columns only
        const uint16_t* px0 = src + (int64_t(r) * W + c) * C;
        const int64_t step = int64_t(sr * W + sc) * C;
        uint4 px[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int ri = r + i * sr, ci = c + i * sc;
          const bool in = ri >= 0 && ri < H && ci >= 0 && ci < W && i < ulim;
          px[i] = in ? *reinterpret_cast<const uint4*>(px0 + i * step) : make_uint4(0, 0, 0, 0);
        }
        if (isx) {
          store_transposed(px, Xs + l * XP + 8 * o, XL * XP);
        } else {
          store_transposed(px, Ds + l * DP + 8 * o, (TV + 1) * DP);
        }
      }
      __syncthreads();
      for (int bt = 0; (p.phases & 2) && bt < nbatch; ++bt) {
        if (nbatch > 1) {
#pragma unroll
          for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
        }
        int boff[MB];
#pragma unroll
        for (int i = 0; i < MB; ++i) {
          const int blk = min(bt * MB * 2 + 2 * i + mhalf, d.nblk - 1);
          boff[i] = 2 * ((d.blk_dv[blk] - d.dvmin) * XP + (d.blk_u[blk] - d.ulo));
        }
        const int nm = min(MB, nmma - bt * MB);
#pragma unroll 2
        for (int s = 0; s < ksteps; ++s) {
          const int2 ko = ktab[16 * s + klane];
          uint32_t bb[4];
          ldsm_x4_trans(bb, ds_a + 2 * ko.y);
          const uint32_t rowA = xs_a + 2 * ko.x;
#pragma unroll
          for (int i = 0; i < MB; ++i) {
            if (i < nm) {
              uint32_t a[4];
              ldsm_x4_trans(a, rowA + boff[i]);
              mma_16816<HALF>(acc[i], a, bb[0], bb[2]);
            }
          }
        }
        if (nbatch > 1) flush(bt);
      }
    }
  }
  if (nbatch == 1) flush(0);
  float* out = p.partial + (int64_t(part) * C + c0 + warp) * kMaxPts;
#pragma unroll
  for (int s = 0; s < kMaxPts / 32; ++s) {
    const int j = s * 32 + lane;
    if (j < d.npts) out[j] = P[s];
  }
}

// ---------------------------------------------------------------------------------------------
// Host: the points of a direction and its plan.

struct Pt {
  int dr, dc;
};

std::vector<Pt> trunc_points(double theta, int K) {
  std::vector<Pt> v;
  for (int t = 0; t < K; ++t) {
    const double dd = t - K / 2;
    v.push_back({static_cast<int>(std::trunc(-dd * std::sin(theta))),
                 static_cast<int>(std::trunc(dd * std::cos(theta)))});
  }
  return v;  // duplicates kept: each tap is a point
}

// The union of the bilinear neighbours of every tap over angles theta + jitter * [-1, 1] (16 samples).
std::vector<Pt> bilinear_union(double theta, int K, double jitter) {
  std::set<std::pair<int, int>> s;
  for (int k = 0; k < 16; ++k) {
    const double th = theta + jitter * (2.0 * k / 15 - 1);
    for (int t = 0; t < K; ++t) {
      const double dd = t - K / 2, y = -dd * std::sin(th), xx = dd * std::cos(th);
      const int y0 = static_cast<int>(std::floor(y)), x0 = static_cast<int>(std::floor(xx));
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) s.insert({y0 + a, x0 + b});
    }
  }
  std::vector<Pt> v;
  for (auto [a, b] : s) v.push_back({a, b});
  return v;
}

void to_plane(int mode, int dr, int dc, int& dv, int& du) {
  if (mode == 0) {
    dv = dr, du = dc;
  } else if (mode == 1) {
    dv = dc, du = dr;
  } else if (mode == 2) {
    dv = dr + dc, du = dr;
  } else {
    dv = dc - dr, du = dr;
  }
}

static int floor8(int v) { return (v >= 0 ? v / 8 : -((-v + 7) / 8)) * 8; }

bool make_plan(const std::vector<Pt>& pts, int mode, DirPlan& d) {
  memset(&d, 0, sizeof(d));
  d.mode = mode;
  std::map<int, std::pair<int, int>> groups;  // dv -> (du min, du max)
  for (const Pt& p : pts) {
    int dv, du;
    to_plane(mode, p.dr, p.dc, dv, du);
    auto it = groups.find(dv);
    if (it == groups.end()) {
      groups[dv] = {du, du};
    } else {
      it->second.first = std::min(it->second.first, du);
      it->second.second = std::max(it->second.second, du);
    }
  }
  std::map<int, std::pair<int, int>> first;  // dv -> (first block, base)
  int nb = 0;
  d.dvmin = groups.begin()->first, d.dvmax = groups.rbegin()->first;
  int umin = 0, umax = 0;
  for (auto& [dv, r] : groups) {
    const int base = floor8(r.first), cnt = (r.second - base + 8 + 7) / 8;
    first[dv] = {nb, base};
    for (int i = 0; i < cnt; ++i) {
      if (nb >= kMaxBlk) return false;
      d.blk_dv[nb] = dv, d.blk_u[nb] = base + 8 * i, ++nb;
    }
    umin = std::min(umin, base), umax = std::max(umax, base + 8 * cnt);
  }
  if (nb % 2) d.blk_dv[nb] = d.blk_dv[nb - 1], d.blk_u[nb] = d.blk_u[nb - 1], ++nb;
  d.nblk = nb;
  d.ulo = umin;
  d.uhi = umax - 8;  // + U8 at use: the last chunk starts at U8 - 8
  if ((int)pts.size() > kMaxPts) return false;
  d.npts = pts.size();
  for (int j = 0; j < d.npts; ++j) {
    int dv, du;
    to_plane(mode, pts[j].dr, pts[j].dc, dv, du);
    d.pt_gb0[j] = first[dv].first, d.pt_t0[j] = du - first[dv].second;
    d.pt_dr[j] = pts[j].dr, d.pt_dc[j] = pts[j].dc;
  }
  return true;
}

// The cheapest orientation (products times the staged plane's area).
DirPlan plan_direction(const std::vector<Pt>& pts, int H, int W) {
  DirPlan best;
  double best_cost = 1e30;
  for (int mode = 0; mode < 4; ++mode) {
    DirPlan d;
    if (!make_plan(pts, mode, d)) continue;
    int V, U;
    plane_extent(mode, H, W, V, U);
    const double cost = (d.nblk / 2 + 1.0) * V * ((U + 7) / 8 * 8) / (double(H) * W);
    if (cost < best_cost) best_cost = cost, best = d;
  }
  return best;
}

static uint16_t to16(float f, bool half) {
  if (half) {
    __half h = __float2half_rn(f);
    return *reinterpret_cast<uint16_t*>(&h);
  }
  __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<uint16_t*>(&b);
}
static double from16(uint16_t v, bool half) {
  if (half) {
    __half h = *reinterpret_cast<__half*>(&v);
    return __half2float(h);
  }
  __nv_bfloat16 b = *reinterpret_cast<__nv_bfloat16*>(&v);
  return __bfloat162float(b);
}

struct Run {
  int N, C, H, W, K;
  bool half, bilinear;
  int chunk, TV;
  double angle_deg;  // < 0: the 8 directions over contiguous channel groups
  int phases = 3;
};

size_t smem_bytes(const DirPlan& d, int H, int W, int TV, int MB) {
  int V, U;
  plane_extent(d.mode, H, W, V, U);
  const int U8 = (U + 7) / 8 * 8;
  const int XL = TV + d.dvmax - d.dvmin, XW = d.uhi - d.ulo;
  const int ksteps = (TV * (U8 / 8) + 15) / 16;
  return size_t(8) * XL * pad_pitch(XW) * 2 + size_t(8) * (TV + 1) * pad_pitch(U8) * 2 +
         size_t(8) * std::min(MB, d.nblk / 2) * 128 * 4 + size_t(ksteps) * 16 * 8;
}

template <bool HALF, int MB>
void launch(const Params& p, dim3 grid, size_t smem) {
  static size_t set = 0;
  if (smem > set) {
    CK(cudaFuncSetAttribute(mma_wgrad_kernel<HALF, MB>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    set = smem;
  }
  mma_wgrad_kernel<HALF, MB><<<grid, kThreads, smem>>>(p);
}

int run(const Run& R, bool check, int iters) {
  const int ndir = R.angle_deg < 0 ? 8 : 1;
  std::vector<DirPlan> plans(ndir);
  std::vector<std::vector<Pt>> pts(ndir);
  int MBneed = 0;
  for (int k = 0; k < ndir; ++k) {
    const double th = (R.angle_deg < 0 ? 22.5 * k : R.angle_deg) * M_PI / 180;
    pts[k] = R.bilinear ? bilinear_union(th, R.K, 0.05) : trunc_points(th, R.K);
    plans[k] = plan_direction(pts[k], R.H, R.W);
    int V, U;
    plane_extent(plans[k].mode, R.H, R.W, V, U);
    plans[k].uhi += (U + 7) / 8 * 8;
    MBneed = std::max(MBneed, plans[k].nblk / 2);
  }
  const int MB = MBneed <= 4 ? 4 : MBneed <= 8 ? 8 : 16;
  int TV = R.TV;
  size_t smem = 0;
  for (int k = 0; k < ndir; ++k) smem = std::max(smem, smem_bytes(plans[k], R.H, R.W, TV, MB));
  std::vector<int> dir_of(R.C / kCB);
  for (int cb = 0; cb < R.C / kCB; ++cb) {
    const int c = cb * kCB;
    dir_of[cb] = ndir == 1 ? 0 : (8 * (c + 1) - 1) / R.C;  // contiguous groups
  }
  const size_t nel = size_t(R.N) * R.H * R.W * R.C;
  std::vector<uint16_t> hx(nel), hdy(nel);
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd;
  for (size_t i = 0; i < nel; ++i) hx[i] = to16(nd(rng), R.half), hdy[i] = to16(nd(rng), R.half);
  uint16_t *x, *dy;
  float* partial;
  DirPlan* dplans;
  int* ddir;
  const int parts = (R.N + R.chunk - 1) / R.chunk;
  CK(cudaMalloc(&x, nel * 2));
  CK(cudaMalloc(&dy, nel * 2));
  CK(cudaMalloc(&partial, size_t(parts) * R.C * kMaxPts * 4));
  CK(cudaMalloc(&dplans, sizeof(DirPlan) * ndir));
  CK(cudaMalloc(&ddir, sizeof(int) * dir_of.size()));
  CK(cudaMemcpy(x, hx.data(), nel * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dy, hdy.data(), nel * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dplans, plans.data(), sizeof(DirPlan) * ndir, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ddir, dir_of.data(), sizeof(int) * dir_of.size(), cudaMemcpyHostToDevice));
  Params p{x, dy, partial, dplans, ddir, R.N, R.H, R.W, R.C, R.chunk, TV, R.phases};
  dim3 grid(R.C / kCB, parts);
  auto go = [&]() {
    if (R.half) {
      if (MB == 4) launch<true, 4>(p, grid, smem);
      else if (MB == 8) launch<true, 8>(p, grid, smem);
      else launch<true, 16>(p, grid, smem);
    } else {
      if (MB == 4) launch<false, 4>(p, grid, smem);
      else if (MB == 8) launch<false, 8>(p, grid, smem);
      else launch<false, 16>(p, grid, smem);
    }
  };
  go();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::string modes;
  for (int k = 0; k < ndir; ++k) modes += std::to_string(plans[k].mode) + "/" + std::to_string(plans[k].nblk / 2) + " ";
  printf("N=%d C=%d %dx%d K=%d %s %s angle=%s TV=%d chunk=%d phases=%d MB=%d smem=%zu modes/mma: %s\n", R.N, R.C,
         R.H, R.W, R.K, R.half ? "fp16" : "bf16", R.bilinear ? "bilinear-union" : "trunc",
         R.angle_deg < 0 ? "8dirs" : std::to_string(R.angle_deg).c_str(), TV, R.chunk, R.phases, MB, smem,
         modes.c_str());
  int bad = 0;
  if (check) {
    std::vector<float> hp(size_t(parts) * R.C * kMaxPts);
    CK(cudaMemcpy(hp.data(), partial, hp.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int c = 0; c < R.C; ++c) {
      const DirPlan& d = plans[dir_of[c / kCB]];
      for (int j = 0; j < d.npts; ++j) {
        double ref = 0, mag = 0, got = 0;
        for (int pp = 0; pp < parts; ++pp) got += hp[(size_t(pp) * R.C + c) * kMaxPts + j];
        for (int n = 0; n < R.N; ++n)
          for (int r = 0; r < R.H; ++r)
            for (int q = 0; q < R.W; ++q) {
              const int rr = r + d.pt_dr[j], qq = q + d.pt_dc[j];
              if (rr < 0 || rr >= R.H || qq < 0 || qq >= R.W) continue;
              const double a = from16(hdy[((size_t(n) * R.H + r) * R.W + q) * R.C + c], R.half);
              const double b = from16(hx[((size_t(n) * R.H + rr) * R.W + qq) * R.C + c], R.half);
              ref += a * b, mag += std::fabs(a * b);
            }
        const double err = std::fabs(got - ref) / std::max(mag, 1e-30);
        worst = std::max(worst, err);
        if (err > 2e-5 && bad++ < 5) {
          printf("  channel %d point %d (%d,%d): %.8g against %.8g\n", c, j, d.pt_dr[j], d.pt_dc[j], got, ref);
        }
      }
    }
    printf("  check: %s, worst |err| / sum|dy x| = %.3g\n", bad ? "FAILED" : "ok", worst);
  }
  if (iters > 0) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) go();
    std::vector<float> ts;
    for (int round = 0; round < 5; ++round) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < iters; ++i) go();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ts.push_back(ms / iters);
    }
    std::sort(ts.begin(), ts.end());
    printf("  time per call: median %.4f ms (min %.4f, max %.4f) over 5 rounds of %d\n", ts[2], ts[0], ts[4], iters);
  }
  cudaFree(x), cudaFree(dy), cudaFree(partial), cudaFree(dplans), cudaFree(ddir);
  return bad;
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "check";
  int bad = 0;
  if (what == "check") {
    for (int half = 0; half < 2; ++half)
      for (int bil = 0; bil < 2; ++bil) {
        bad += run({2, 64, 56, 56, 31, bool(half), bool(bil), 1, 8, -1}, true, 0);
        bad += run({2, 64, 29, 31, 15, bool(half), bool(bil), 2, 4, -1}, true, 0);
        bad += run({1, 64, 13, 9, 31, bool(half), bool(bil), 1, 8, -1}, true, 0);
      }
    for (double a : {0.0, 22.5, 45.0, 67.5, 90.0, 135.0, 10.0}) {
      bad += run({2, 16, 20, 27, 31, false, false, 1, 8, a}, true, 0);
    }
  } else {
    const int N = 64, C = argc > 2 ? atoi(argv[2]) : 384, S = argc > 3 ? atoi(argv[3]) : 56;
    const int TV = argc > 4 ? atoi(argv[4]) : 8, chunk = argc > 5 ? atoi(argv[5]) : 8;
    const bool bil = what == "time-bilinear";
    const int half = argc > 6 ? atoi(argv[6]) : 0;
    const int phases = argc > 7 ? atoi(argv[7]) : 3;
    for (double a : {-1.0, 0.0, 22.5, 45.0}) run({N, C, S, S, 31, bool(half), bil, chunk, TV, a, phases}, false, 20);
  }
  printf("%s\n", bad ? "SOME CHECKS FAILED" : "all checks passed");
  return bad ? 1 : 0;
}
