// The kernel families of the CUDA op, and their order: for each call dispatch.cpp runs the first
// family of FamilyList that serves its kind of taps (rounded or interpolated) and whose plan
// succeeds, so faster, narrower families come first and the general family, which serves every
// rounded call, comes last. A family lives in its folder, named after it (SegGather: seg_gather/,
// paths "seg_gather..."): a header with its kernels, a launcher (.cu) that defines its plan and run;
// and one MMO1D_FAMILY line and list entry here. What several families share is in common/.
#pragma once

#include "plan.cuh"

namespace mmo1d {
namespace cuda {

//           name        float64  fused bias grad  interpolated  paths
// Channels_last polyphase stride-2 forward (s2_gather/).
MMO1D_FAMILY(S2Gather, false, false, false, "s2_gather")
// Channels_last segment windows: stride-1 gathers, the stride-2 input gradient per parity class
// (win_gather/).
MMO1D_FAMILY(WinGather, false, false, false, "win_gather", "win_gather_classes")
// Channels_last vector gather for any C, stride 1 (vec_gather/).
MMO1D_FAMILY(VecGather, false, false, false, "vec_gather")
// NCHW segment windows, stride 1 (seg_gather/).
MMO1D_FAMILY(SegGather, false, false, false, "seg_gather")
// Tensor-core weight gradient, float16 and bfloat16 channels_last at stride 1, large planes; the blocks
// of channels it leaves go to the vector weight gradient (mma_wgrad/).
MMO1D_FAMILY(MmaWgrad, false, true, false, "mma_wgrad")
// Channels_last weight gradient at stride 1 and, per parity class, 2 (vec_wgrad/).
MMO1D_FAMILY(VecWgrad, false, true, false, "vec_wgrad", "vec_wgrad_classes")
// NCHW weight gradient, stride 1 (seg_wgrad/).
MMO1D_FAMILY(SegWgrad, false, false, false, "seg_wgrad")
// Interpolated taps ('bilinear', 'gaussian'), channels_last, C a multiple of the channel block,
// stride 1: the window gathers over the runs of the taps' samples (interp_win/).
MMO1D_FAMILY(InterpWin, false, false, true, "interp_win")
// Tensor-core weight gradient of interpolated taps ('bilinear', 'gaussian'), float16 and bfloat16
// channels_last at stride 1, large planes, over the united points of each block of 16 channels; the
// blocks it leaves go to the interpolated vector weight gradient (mma_interp_wgrad/).
MMO1D_FAMILY(MmaInterpWgrad, false, true, true, "mma_interp_wgrad")
// Interpolated taps ('bilinear', 'gaussian'), NCHW, stride 1: the segment-window gathers and weight
// gradient over the runs of the taps' samples (interp_seg/).
MMO1D_FAMILY(InterpSeg, false, false, true, "interp_seg", "interp_seg_wgrad")
// Interpolated taps ('bilinear', 'gaussian'), channels_last, stride 1: the vector gathers and
// weight gradient on the taps' samples, the bias gradient in the same pass; the weight gradient at
// stride 2 per parity class (interp_vec/).
MMO1D_FAMILY(InterpVec, false, true, true, "interp_vec", "interp_vec_wgrad", "interp_vec_wgrad_classes")
// Interpolated taps ('bilinear', 'gaussian'), every dtype, stride, K and layout: the general kernels
// on the taps' samples, and the angle gradient; the bias gradient summed in slices of images
// (interp/).
MMO1D_FAMILY(Interp, true, true, true, "interp_gather_nchw", "interp_gather_nhwc", "interp_wgrad_nchw",
             "interp_wgrad_nhwc")
// Every dtype, stride, K and layout: gathers and weight gradients (general/).
MMO1D_FAMILY(General, true, false, false, "general_gather_nchw", "general_gather_nhwc", "general_wgrad_nchw",
             "general_wgrad_nhwc")

template <typename... F>
struct FamilyList {
  static constexpr int kSize = sizeof...(F);
};

using Families = FamilyList<S2Gather, WinGather, VecGather, SegGather, MmaWgrad, VecWgrad, SegWgrad, InterpWin,
                            MmaInterpWgrad, InterpSeg, InterpVec, Interp, General>;

}  // namespace cuda
}  // namespace mmo1d
