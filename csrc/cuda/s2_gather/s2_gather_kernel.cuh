// The stride-2 channels_last forward, polyphase: four parity-class window gathers summed in an
// fp32 shared-memory tile.
#pragma once

#include "../win_gather/win_tables.cuh"
#include "../win_gather/win_tasks.cuh"

namespace mmo1d {
namespace cuda {

// The arguments of s2_gather_nhwc_kernel, built by its launcher: io.src is x, of Hx x Wx pixels.
template <typename scalar_t>
struct S2GatherParams {
  GatherIO<scalar_t> io;
  SegTableView tables;
  FastGeometry g;
  int Hx, Wx;
};

// Stride-2 forward, polyphase: y[i, j] = sum over the parity classes (a, b) of a stride-1 window
// gather over the phase plane x[a::2, b::2] with the class's taps at halved offsets. One block:
// image n, an output tile, CB channels (C % CB == 0, 16-byte aligned tensors). The four classes'
// sums meet in an fp32 tile in shared memory (bias first), so the output is rounded once; each
// class is staged in turn into one buffer whose halo (the largest over the classes and the block's
// channels) and pitch serve all four.
template <typename scalar_t, int OUTPUTS>
__global__ void __launch_bounds__(kFastThreads, 3) s2_gather_nhwc_kernel(const S2GatherParams<scalar_t> params) {
  const scalar_t* __restrict__ bias = params.io.bias;
  const SegInfo* __restrict__ info = params.tables.info;
  const int2* __restrict__ halo = params.tables.halo;
  const FastGeometry g = params.g;
  constexpr int CB = VecTraits<scalar_t>::kCB, V = VecTraits<scalar_t>::kV;
  extern __shared__ __align__(16) unsigned char smem[];
  // g: the output plane
  const auto [c0, n, p0, q0, th, tw, lane, quarter, slot, slots] = fast_block<CB>(g);

  __shared__ int s_mode[4][CB], s_nseg[4][CB], s_uniform[4][4], s_ph, s_pw;
  if (threadIdx.x < 32) {
    int ph = 0, pw = 0;
    for (int cls = 0; cls < 4; ++cls) {
      bool same_k = false;  // channel c0 + threadIdx.x has the previous channel's segments
      if (threadIdx.x < CB) {
        const SegInfo f = info[int64_t(cls) * g.C + c0 + threadIdx.x];
        s_mode[cls][threadIdx.x] = f.mode;
        s_nseg[cls][threadIdx.x] = f.nseg;
        same_k = f.same != 0;
        const int2 hl = halo[int64_t(cls) * g.C + c0 + threadIdx.x];
        ph = max(ph, hl.x);
        pw = max(pw, hl.y);
      }
      const bool uniform = quarter_uniform<V>(same_k, c0, g.C);
      if (threadIdx.x < 4) s_uniform[cls][threadIdx.x] = uniform;
    }
    ph = warp_max(ph);
    pw = warp_max(pw);
    if (threadIdx.x == 0) {
      s_ph = ph;
      s_pw = pw;
    }
  }
  // Shared memory: tables of one class (seg_smem[channel][s], sw[point][channel]), the fp32 sums of
  // the tile (CB per pixel, tw | 1 pixels per row: win_tasks), the staged phase-plane tile.
  int4* seg_smem = reinterpret_cast<int4*>(smem);
  float* sw = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K * CB));
  float* accs = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K * CB) + align16(sizeof(float) * g.K * CB));
  const int64_t accs_bytes = align16(sizeof(float) * g.TH * (g.TW | 1) * CB);
  scalar_t* S = reinterpret_cast<scalar_t*>(reinterpret_cast<unsigned char*>(accs) + accs_bytes);
  const int apitch = tw | 1;
  for (int e = threadIdx.x; e < th * apitch * CB; e += blockDim.x) {
    const int k = e % CB;
    accs[e] = bias != nullptr ? static_cast<float>(bias[c0 + k]) : 0.0f;
  }
  __syncthreads();
  const int ph = s_ph, pw = s_pw;
  const int pitch = seg_tile_cols<OUTPUTS>(tw, pw) | 1;
  const int k0 = quarter * V;
  const float zero[V] = {};
  const int Hx = params.Hx, Wx = params.Wx;  // the size of x
  const scalar_t* img = params.io.src + n * int64_t(Hx) * Wx * g.C;
  for (int cls = 0; cls < 4; ++cls) {
    const int a = cls >> 1, b = cls & 1;
    bool any = false;
#pragma unroll
    for (int k = 0; k < CB; ++k) any = any || s_nseg[cls][k] > 0;
    if (!any) continue;  // no tap of the block's channels has these parities
    const int64_t base = int64_t(cls) * g.C;
    __syncthreads();  // the previous class's reads of S and the tables are done
    // The class's tile copies in flight while the block stages its tables.
    const int Hs = (Hx - a + 1) / 2, Ws = (Wx - b + 1) / 2;  // phase plane x[a::2, b::2]
    issue_nhwc_tile<scalar_t>(S, img + (int64_t(a) * Wx + b) * g.C, g.C, Hs, Ws, c0, p0 - ph, q0 - pw - (OUTPUTS - 1),
                              seg_tile_rows<OUTPUTS>(th, ph), seg_tile_cols<OUTPUTS>(tw, pw), pitch, 2 * int64_t(Wx),
                              2);
    stage_segment_tables<CB>(seg_smem, sw, params.tables.segs + base * g.K, params.tables.segw + base * g.K,
                             s_nseg[cls], c0, g.K, pitch);
    cp_async_wait_all();
    __syncthreads();
    if (s_uniform[cls][quarter]) {
      win_tasks<scalar_t, OUTPUTS, 1, V, true>(S, nullptr, k0, c0 + k0, s_mode[cls][k0], s_nseg[cls][k0],
                                               seg_smem + k0 * g.K, sw, zero, th, tw, p0, q0, ph, pw, pitch, g.H, g.W,
                                               0, 0, g.C, slot, slots, accs);
    } else {
#pragma unroll
      for (int kk = 0; kk < V; ++kk) {
        const int kc = k0 + kk;
        const float z1[1] = {0.0f};
        win_tasks<scalar_t, OUTPUTS, 1, 1, true>(S, nullptr, kc, c0 + kc, s_mode[cls][kc], s_nseg[cls][kc],
                                                 seg_smem + kc * g.K, sw, z1, th, tw, p0, q0, ph, pw, pitch, g.H, g.W,
                                                 0, 0, g.C, slot, slots, accs);
      }
    }
  }
  __syncthreads();
  // The tile's sums, rounded once: a lane's V channels per store.
  scalar_t* op = params.io.out + n * int64_t(g.H) * g.W * g.C;
  for (int e = threadIdx.x; e < th * tw * 4; e += blockDim.x) {
    const int pix = e >> 2, qd = e & 3;
    const int i = pix / tw, j = pix - i * tw;
    float v[V];
    load_floats<V>(accs + (i * apitch + j) * CB + qd * V, v);
    store_vec<scalar_t, V>(op + (int64_t(p0 + i) * g.W + q0 + j) * g.C + c0 + qd * V, v);
  }
}

}  // namespace cuda
}  // namespace mmo1d
