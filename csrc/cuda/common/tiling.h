// Tiling constants of the CUDA kernels: block shapes, output tiles and the shared-memory budgets
// that the tile choosers (tiling.cuh) size tiles against. Budgets are soft targets that leave room
// for several blocks per multiprocessor; the hard limit is always the device's, per kernel
// (launch.cuh), never a constant here.
#pragma once

#include <cstdint>

namespace mmo1d {
namespace cuda {

// ---- General kernels ----
constexpr int kPerThread = 8;       // outputs accumulated per thread per pass
constexpr int kMaxThreads = 256;    // NCHW block size cap (4 blocks per SM at ~60 registers)
constexpr int kNhwcThreads = 256;   // NHWC block size
constexpr int kNhwcChannels = 8;    // channels per NHWC block
// Blocks of kNhwcThreads the NHWC gather's registers must let an SM hold: float32 four (at most 64
// registers a thread; left to itself it takes 80: three blocks), 16-bit types three, float64 two.
template <typename scalar_t>
constexpr int kNhwcGatherMinBlocks = sizeof(scalar_t) == 4 ? 4 : (sizeof(scalar_t) == 2 ? 3 : 2);
constexpr int kNhwcTile = 16;       // NHWC spatial tile (outputs)
constexpr int kNhwcClassTile = 32;  // ... of the input gradient at stride 2 by parity class (16 x 16 of a class)
// Bytes past each staged row of the channels_last gather at stride 2 (its 2 x 2 quads of outputs): a quad's
// lower pair reads two rows down, 8 banks past its upper pair, so that a warp's loads are conflict-free.
constexpr int kGeneralRowPad = 16;
constexpr int kNchwMaxTile = 64;    // NCHW tile side when a plane has more than 64x64 outputs
constexpr int kGeneralMinTile = 4;  // the soft budget never halves a general tile below 4 a side
// Outputs per thread of the NHWC gather on tiles of up to 128 outputs (stride 2 with long lines: a
// K=31 bilinear forward's tile is 8 x 8, on which 32 pixel slots x kPerThread leave 3/4 of them idle).
constexpr int kNhwcRSmall = 2;
// Points a thread of the general channels_last weight gradient on such tiles (the points across the
// slots: 32 slots x 4 cover 128 points, a bilinear K=31 line's 62-94 in one round).
constexpr int kGeneralAcrossPoints = 4;

// ---- Fast paths ----
constexpr int kSegR = 8;           // outputs per thread along the segment axis (NCHW fast path)
constexpr int kFastThreads = 256;  // block size of every fast path
constexpr int kFastMinTile = 8;    // the soft budget never halves a fast-path tile below 8 a side
constexpr int kSegStartTile = 64;  // NCHW fast path: whole planes up to 64 x 64 outputs
constexpr int kVecStartTile = 32;  // channels_last vector and window paths: up to 32 x 32
constexpr int kWinRegion = 32;     // largest output tile side of a window-gather block
constexpr int kS2StartTile = 16;   // stride-2 polyphase forward: up to 16 x 16 outputs
// NHWC vector path: outputs per thread, 8, or 4 for tiles of up to 256 pixels (small planes: 64
// pixel slots x 8 would leave most of them idle).
constexpr int kVecRLarge = 8, kVecRSmall = 4;
// The stride-1 vector weight gradient's outputs per thread: the fewest of these with which the
// block's 64 pixel slots cover its tile (up to 32 x 32) in one round, so that each point's sum over
// a warp's slots runs once per tile and few outputs idle (a 28 x 28 tile: 13, 832 outputs computed
// for 784, where 8 took two rounds of 512).
// Tiles of up to 128 pixels, on which one group of 64 slots x kVecRSmall outputs would leave more
// than half of them idle, instead split the warps into groups that take every groups-th point over
// the whole tile, each with 64 / groups slots of kVecWgradGroupedOutputs outputs covering it in one
// round: the pair of least estimated work, points per group x (outputs + a point's sum over the
// warp's slots, its update and the loop) + outputs x loading dy, in instructions of one output and
// point (10 in the 13-output point loop's SASS, the sum and loop 36). A 7 x 7 plane takes eight
// groups of 7: 0.51-0.53x the time of one group at K=31, 0.83-0.86x at K=15 (H200, bf16 and fp16,
// 64 x 1536); on 14 x 14 planes two groups of 7 took 1.06-1.22x. Above kVecRLarge the kernel is
// bound to kVecWgradWideBlocks blocks per SM, so those are taken only where the tile's shared
// memory leaves room for no more.
constexpr int kVecWgradOutputs[] = {4, 7, 8, 13, 16};
constexpr int kVecWgradGroupedOutputs[] = {7, 8};
constexpr int kVecWgradGroups[] = {2, 4, 8};
constexpr float kVecWgradPointCost = 3.6f;
constexpr float kVecWgradDyCost = 1.0f;
constexpr int kVecWgradWideBlocks = 2;
// The stride-1 slot kernel skips the points of a block's slice that lie beyond the plane for all its
// channels (|dh| >= H or |dw| >= W: sums of zero padding), among its first kVecWgradSkipPoints; on
// 7 x 7 planes a K=31 line keeps 13-19 of its 31 taps, a bilinear union 35-44% of its points.
constexpr int kVecWgradSkipPoints = 256;
// Planes of more than 128 pixels (smaller ones: the grouped kernel) that one block covers instead take
// the points across the pixel slots (vec_wgrad_across_kernel): a block's slice of points is one, two
// or four passes of a warp's eight slots, each summed over the warp's share of the plane's outputs,
// so that no per-point sum over the slots runs. Against the slot kernel (H200, 64 x 1536, 8
// directions, bf16 and fp16 kernel time): 14 x 14 0.67-0.68x at K=31, 0.86-0.88x at K=15; 20 x 20
// 0.82-0.84x at K=31 but 1.06x at K=15, 28 x 28 at K=15 1.16x: larger planes only in slices of 32.
constexpr int kVecWgradAcrossPoints[] = {8, 16, 32};
constexpr int kVecWgradAcrossPixels = 256;
// The tensor-core weight gradient (mma_wgrad/): planes of at least kMmaWgradMinPixels pixels, blocks whose
// halo across their lines is at most kMmaWgradMaxAcross of K/2 (lines up to 22.5 degrees off an axis; the
// diagonals' square halo stays with the vector kernel), K up to kMmaWgradMaxK (a box of 64 + 2 K/2
// pixels), tiles sized for kMmaWgradBlocksPerSM blocks per SM. H200, bf16 and fp16, K=31, against the
// vector kernel, 56 x 56 (C=384): 0.93-0.94x in the 8 directions; with the diagonals taken too, 0.73-0.76x
// at 0 and 90 degrees, 0.86-0.88x at 22.5 and 67.5, 1.65x at 45 and 0.98-1.00x in the 8 directions; 28 x
// 28 (C=768) then 0.89-0.92x at 0 and 90 degrees but 1.23-1.28x at 22.5, 67.5 and in the 8 directions.
constexpr int kMmaWgradMinPixels = 48 * 48;
constexpr float kMmaWgradMaxAcross = 0.5f;
constexpr int kMmaWgradMaxK = 63;
constexpr int kMmaWgradBlocksPerSM = 2;
// Its grid: chunks of images (a block takes its tiles in every image of its chunk, adding into its rows
// of sums) for about kMmaWgradWaves waves of blocks, and partial sums within the workspace below. H200,
// 64 x 384 x 56 x 56, K=31: one image a chunk (16 waves) took 1.03 / 1.14x the kernel time of 8 waves in
// the 8 directions / at 0 degrees (rounded taps), 1.01x (learned angles).
constexpr int kMmaWgradWaves = 8;
// Interpolated taps (mma_interp_wgrad/) on planes of at least kMmaInterpWgradMinPixels: the vector kernel
// they leave sums two to three times a rounded line's points. H200, bf16 and fp16, K=31, 28 x 28 (C=768)
// against that kernel: 0.82x in the 8 directions, 0.77-0.78x at 0 degrees.
constexpr int kMmaInterpWgradMinPixels = 28 * 28;
// Interpolated taps: a block's union of points at most this long (a list that both groups of 8 channels
// walk; the warps' rows of sums take (points + 1) x 256 bytes of shared memory).
constexpr int kMmaInterpPoints = 96;
constexpr int kWinBlocksPerSM = 8;  // window regions grow only while the grid keeps this many
// Window gathers on planes that one block covers: up to this many images per block, so that the
// plane's tasks fill the block's 64 pixel slots (a 7 x 7 plane gives 14 tasks in 16-bit).
constexpr int kWinMaxImages = 8;
// ... and up to this many groups of such images, taken one after the other, so that a block's
// preamble (tables, merged weights) serves several planes and the next group's copies can be in
// flight while a group computes.
constexpr int kWinMaxGroups = 4;
// Blocks per multiprocessor of the window kernel (its __launch_bounds__): tables whose blocks share
// one list take several images a block only where every channel's list staged keeps this many.
constexpr int kWinBlocks = 3;

// ---- Window gather's sub-tile cost model (choose_subtile, win_tables.cuh) ----
// Estimated warp instructions of a candidate sub-tile: one per staged pixel, plus these.
constexpr float kSubtileCostPerTapTask = 3.0f;      // per tap of each task (a warp runs 8 tasks of ~26 K)
constexpr float kSubtileCostPerRound = 2000.0f;     // latency allowance per round of tasks over the slots
constexpr float kSubtileCostPerSubtile = 8000.0f;   // per sub-tile: its staging and two barriers

// ---- Shared-memory budgets (bytes, tables included) ----
constexpr int64_t kKiB = 1024;
constexpr int64_t kStaticLaunchLimit = 48 * kKiB;  // dynamic + static above this needs the opt-in
constexpr int64_t kGeneralBudget = 100 * kKiB;     // general gathers and weight gradients
constexpr int64_t kSegGatherBudget = 100 * kKiB;   // NCHW fast-path gather
// Weight gradients: larger tiles stage less halo per output (on an H100, K=31, bf16: 4-10% faster
// than with 100 KiB; 76 and 64 KiB, for more blocks per SM, were slower).
constexpr int64_t kWgradBudget = 120 * kKiB;
constexpr int64_t kVecGatherBudget = 80 * kKiB;  // channels_last vector and window gathers
constexpr int64_t kS2Budget = 80 * kKiB;         // stride-2 polyphase forward

// ---- Weight-gradient workspace ----
// Partial sums may always take kWgradMinWorkspace, or a sixteenth of x where that is more. With a
// sixteenth of x alone, tables of many points (learned angles: 124 rows at K=31) on small planes had
// one image chunk: at 7 x 7, 48-192 blocks of channels, each looping over all 64 images.
constexpr int kWgradBlocksPerSM = 8;                 // blocks the image chunks aim for, per SM
constexpr int64_t kWgradMinWorkspace = 32 * 1024 * kKiB;
constexpr int kWgradWorkspaceShare = 16;

}  // namespace cuda
}  // namespace mmo1d
