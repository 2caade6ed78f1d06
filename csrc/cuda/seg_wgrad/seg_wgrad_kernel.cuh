// The NCHW segment-window weight gradient (float32, float16, bfloat16; stride 1): the tasks and
// windows of the segment gather over a staged plane tile.
#pragma once

#include "../seg_gather/seg_gather_kernel.cuh"

namespace mmo1d {
namespace cuda {

// acc[l * stride] += sum_r g[r] * S[a + (r + l) * axis_step] for l < L (the window of run_segment;
// r < OUTPUTS, the outputs a thread owns).
// SHARE = 2: lanes l and l + 16 of a warp (all 32 walking the same points) add their sums with a
// shuffle first, and lane l adds them to the column both share.
template <int OUTPUTS, int SHARE>
__device__ __forceinline__ void run_segment_wgrad(const float* __restrict__ S, int a, int axis_step, int L,
                                                  float* __restrict__ acc, int stride, const float (&g)[OUTPUTS]) {
  float v[OUTPUTS];
  walk_segment<OUTPUTS, false>(
      S + a, axis_step, L, v, [](const float* p, float& dst) { dst = *p; },
      [&](int l, auto i) {
        constexpr int I = decltype(i)::value;
        float part = 0.0f;
#pragma unroll
        for (int r = 0; r < OUTPUTS; ++r) part += g[r] * v[(I + r) % OUTPUTS];
        if constexpr (SHARE == 2) {
          part += __shfl_xor_sync(0xffffffffu, part, 16);
          if ((threadIdx.x & 16) == 0) acc[l * stride] += part;
        } else {
          acc[l * stride] += part;
        }
      });
}

// run_segment_wgrad for two tasks at once, whose windows start `delta` apart in S: one column of
// sums for both (one shared-memory update per point for 2 x OUTPUTS multiply-adds).
template <int OUTPUTS>
__device__ __forceinline__ void run_segment_wgrad2(const float* __restrict__ S, int a, int delta, int axis_step, int L,
                                                   float* __restrict__ acc, int stride, const float (&g0)[OUTPUTS],
                                                   const float (&g1)[OUTPUTS]) {
  float2 v[OUTPUTS];
  walk_segment<OUTPUTS, false>(
      S + a, axis_step, L, v,
      [delta](const float* p, float2& dst) {
        dst.x = p[0];
        dst.y = p[delta];
      },
      [&](int l, auto i) {
        constexpr int I = decltype(i)::value;
        float part0 = 0.0f, part1 = 0.0f;
#pragma unroll
        for (int r = 0; r < OUTPUTS; ++r) {
          part0 += g0[r] * v[(I + r) % OUTPUTS].x;
          part1 += g1[r] * v[(I + r) % OUTPUTS].y;
        }
        acc[l * stride] += part0 + part1;
      });
}

// Weight-gradient partial sums, NCHW fast path (stride 1): the tasks and windows of the forward
// kernel, with dy in registers; every thread (SHARE = 1), or every pair of lanes l and l + 16 of a
// warp (SHARE = 2: half the shared memory, more blocks per multiprocessor, for long tables),
// accumulates its own column of per-point sums in shared memory, a block adds the columns in a
// fixed order and writes partial[c][part][point] (points in segment order, part = tile * chunks +
// chunk). TASKS = 2: a thread walks tasks k and k + blockDim.x together (for tiles of two or more
// rounds of tasks), one shared-memory update per point for both. blockIdx.y is a slice of pcap
// points, [blockIdx.y * pcap, + pcap), of tables of g.K rows: long tables, whose columns would not
// fit the shared memory of several blocks at once, are summed slice by slice, each block walking
// the parts of the runs that fall in its slice. x, dy and partial are parameters of their own,
// __restrict__, for the reason seg_gather_nchw_kernel gives.
template <typename scalar_t, int SHARE, int TASKS = 1>
__global__ void __launch_bounds__(kFastThreads)
    seg_wgrad_nchw_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ dy, float* __restrict__ partial,
                          const SegWgradTables tables, const FastGeometry g, int N, int chunk, int pcap) {
  const SegInfo* __restrict__ info = tables.info;
  const int4* __restrict__ segs = tables.segs;
  const int2* __restrict__ halo = tables.halo;
  constexpr int OUTPUTS = kSegR;
  extern __shared__ __align__(16) unsigned char smem[];
  const WgradPart part = wgrad_part(g.tiles, N, chunk);
  const int c = part.c;
  const auto [p0, q0, th, tw] = output_tile(g, part.tile);
  const SegInfo inf = info[c];
  const int j0 = blockIdx.y * pcap, np = min(inf.npts - j0, pcap);  // the slice's points
  if (np <= 0) return;
  const int2 hl = halo[c];
  const int EH = seg_tile_rows(th, hl.x);
  const int EW = seg_tile_cols(tw, hl.y);
  const int pitch = EW | 1;
  const int nthreads = blockDim.x;
  const int ncols = nthreads / SHARE;  // columns of sums
  const int col = SHARE == 1 ? threadIdx.x : (threadIdx.x >> 5) * 16 + (threadIdx.x & 15);
  int4* seg_smem = reinterpret_cast<int4*>(smem);
  float* acc = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K));
  float* S = reinterpret_cast<float*>(smem + align16(sizeof(int4) * g.K) + align16(sizeof(float) * pcap * ncols));
  for (int s = threadIdx.x; s < inf.nseg; s += nthreads) {
    seg_smem[s] = staged_segment(segs[int64_t(c) * g.K + s], pitch);
  }
  for (int e = threadIdx.x; e < np * ncols; e += nthreads) acc[e] = 0.0f;
  int ui, uj;
  mode_step(inf.mode, &ui, &uj);
  const int axis_step = ui * pitch + uj;
  const int ntasks = seg_ntasks(inf.mode, th, tw);
  const bool vec_rows = inf.mode == 0 && rows_vectorizable<scalar_t>(dy, g.W, q0);
  const int n_end = part.end_image(N, chunk);
  for (int n = part.first_image(chunk); n < n_end; ++n) {
    const int64_t plane = int64_t(n) * g.C + c;
    __syncthreads();  // the previous image's reads of S are done
    stage_plane<scalar_t>(S, pitch, x + plane * g.H * g.W, g.H, g.W, p0 - hl.x, q0 - hl.y - (OUTPUTS - 1), EH,
                          EW);
    __syncthreads();
    const scalar_t* dyp = dy + plane * g.H * g.W;
    // SHARE = 2: whole warps take part in every round (a lane past the last task has dy = 0).
    const int kend = SHARE == 1 ? ntasks : round_up(ntasks, 32);
    for (int k = threadIdx.x; k < kend; k += TASKS * nthreads) {
      float gr[TASKS][OUTPUTS];
      int b0[TASKS];
#pragma unroll
      for (int t = 0; t < TASKS; ++t) {
        const int kt = k + t * nthreads;
        const bool task = (SHARE == 1 && t == 0) || kt < ntasks;
        int p, q;
        seg_task(inf.mode, min(kt, ntasks - 1), th, tw, &p, &q);
        if (task && vec_rows && q + OUTPUTS <= tw) {
          load8<scalar_t>(dyp + int64_t(p0 + p) * g.W + q0 + q, gr[t]);
        } else {
#pragma unroll
          for (int r = 0; r < OUTPUTS; ++r) {
            const int pr = p + r * ui, qr = q + r * uj;
            gr[t][r] = (task && pr < th && qr >= 0 && qr < tw)
                           ? static_cast<float>(dyp[int64_t(p0 + pr) * g.W + q0 + qr])
                           : 0.0f;
          }
        }
        b0[t] = (p + hl.x) * pitch + q + hl.y + (OUTPUTS - 1);
      }
      for (int s = 0; s < inf.nseg; ++s) {
        const int4 e = seg_smem[s];
        // Points [lo, hi) of the run fall in the slice.
        const int lo = max(j0 - e.z, 0), hi = min(e.y, j0 + pcap - e.z);
        if (lo >= hi) continue;
        float* column = acc + (e.z + lo - j0) * ncols + col;
        if constexpr (TASKS == 2) {
          run_segment_wgrad2<OUTPUTS>(S, b0[0] + e.x + lo * axis_step, b0[1] - b0[0], axis_step, hi - lo, column, ncols,
                                      gr[0], gr[1]);
        } else {
          run_segment_wgrad<OUTPUTS, SHARE>(S, b0[0] + e.x + lo * axis_step, axis_step, hi - lo, column, ncols, gr[0]);
        }
      }
    }
  }
  __syncthreads();
  // Point j: the columns of all threads, lane-strided then a butterfly, in a fixed order.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = nthreads >> 5;
  for (int j = warp; j < np; j += nwarps) {
    float v = 0.0f;
    for (int t = lane; t < ncols; t += 32) v += acc[j * ncols + t];
    v = warp_sum(v);
    if (lane == 0) partial[part.row(c) * g.K + j0 + j] = v;
  }
}

}  // namespace cuda
}  // namespace mmo1d
