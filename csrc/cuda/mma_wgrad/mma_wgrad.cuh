// The tensor-core weight gradient's planning and launch for any point tables (offsets, point counts,
// halos and same-as-previous flags per channel): the tensor-core family (mma_wgrad.cu) runs it on the
// tables of the rounded taps, the interpolated one (mma_interp_wgrad/) on the united points of its
// taps' samples. Every launch here needs a CUDA 12 toolkit (mma_wgrad_runs_here is false without it).
#pragma once

#include <ATen/core/Tensor.h>

#include "../common/tables.cuh"
#include "../plan.cuh"
#include "mma_wgrad_tiles.cuh"

namespace mmo1d {
namespace cuda {

// The tiles and chunks of a call: its two views, its points, the halo across the lines that a taken
// block may have (ph_cap), the most tiles of a block at that halo, the shared memory of a block, and
// the images of a chunk (each block of the grid takes its tiles of every image of its chunk).
struct MmaWgradShape {
  MmaWgradView view[2];
  MmaWgradPoints pts{};
  int ph_cap = 0, max_tiles = 0, budget = 0;
  int images = 0, chunks = 0;
  // Blocks a (chunk, 16 channels): half the most tiles, so that blocks of few tiles leave few blocks
  // empty and the others take two.
  int grid_tiles() const { return (max_tiles + 1) / 2; }
  int64_t parts() const { return int64_t(chunks) * grid_tiles(); }
};

// Whether the current device runs the tensor-core kernel: sm_90 or later, and machine code built from
// sm_90 PTX or later (a build for older architectures holds an empty kernel). Asked once per device.
template <typename scalar_t>
bool mma_wgrad_runs_here();

// Whether call p is in the domain both tensor-core families share: the weight gradient, channels_last,
// stride 1, C a multiple of 16, 16-byte aligned tensors, planes of at least min_pixels pixels, a device
// and build that run the kernel (mma_wgrad_runs_here).
template <typename scalar_t>
bool mma_wgrad_domain(const Problem& p, Pass pass, int min_pixels);

// The plan `path` of call p at points pts (halo across the lines up to ph_max) whose blocks not taken go
// to the plan rest: plan->rest, the output geometry, the kernel's launch, parts, chunk and tile, and
// plan->mma, the shape that the launches below read: the largest halo across the lines up to ph_max for
// which both views fit a tile in a block's shared memory, and images per chunk so that the grid fills the
// device and the partial sums stay within the weight-gradient workspace. False where no tile fits, a
// line's box is too wide for a bulk tensor copy or the launch does not fit the device.
template <typename scalar_t>
bool plan_mma_wgrad(const Problem& p, const char* path, const MmaWgradPoints& pts, int ph_max, const Plan& rest,
                    Plan* plan);

// What the sums' launch leaves: per block of 16 channels its MmaWgradBlock and whether it was taken
// (the skip array of the kernels that sum the other blocks), and the partial sums (C, pts.points,
// s.parts()) and, with the bias, (C, s.parts()).
struct MmaWgradSums {
  at::Tensor info, partial, bpartial;
  int64_t cblocks = 0;
  const MmaWgradBlock* blocks() const { return reinterpret_cast<const MmaWgradBlock*>(info.data_ptr<int>()); }
  const int* taken() const { return info.data_ptr<int>() + cblocks * (sizeof(MmaWgradBlock) / sizeof(int)); }
};

// The blocks' kernel (which blocks of 16 channels this family takes) and the sums' kernel, for x and dy
// (N, C, H, W) channels_last and tables of C entries of pts.rows rows, as planned (plan_mma_wgrad).
template <typename scalar_t>
MmaWgradSums launch_mma_wgrad_sums(const Plan& plan, const at::Tensor& x, const at::Tensor& dy,
                                   const PointWgradTables& tables, bool with_bias);

// The reduction of the taken blocks' partial sums: with tap_pt (C, E: each tap's point) into dw (C, E);
// without, each point's sum into sums (C, E) for the first npts[c] points; db (C), when not null, the
// bias gradient. The blocks not taken are left as they are.
template <typename scalar_t>
void launch_mma_wgrad_reduce(const Plan& plan, const MmaWgradSums& m, int E, const int* tap_pt, const int* npts,
                             scalar_t* dw, float* sums, scalar_t* db);

}  // namespace cuda
}  // namespace mmo1d
