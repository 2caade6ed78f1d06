// The kernel families of the CUDA op, and their order: for each call dispatch.cu runs the first
// family of FamilyList that serves its kind of taps (rounded or interpolated) and whose plan
// succeeds, so faster, narrower families come first and the general family, which serves every
// rounded call, comes last. A new family is a header with its kernels,
// a launcher (.cu) that defines its plan and run, and one MMO1D_FAMILY line and list entry here.
#pragma once

#include "plan.cuh"

namespace mmo1d {
namespace cuda {

//           name        float64  fused bias grad  interpolated  paths
// Channels_last polyphase stride-2 forward (stride2.cu).
MMO1D_FAMILY(S2Gather, false, false, false, "s2_nhwc")
// Channels_last segment windows: stride-1 gathers, the stride-2 input gradient per parity class
// (nhwc_window.cu).
MMO1D_FAMILY(WinGather, false, false, false, "win_nhwc", "win_classes_nhwc")
// Channels_last vector gather for any C, stride 1 (nhwc_vec.cu).
MMO1D_FAMILY(VecGather, false, false, false, "vec_nhwc")
// NCHW segment windows, stride 1 (nchw_fast.cu).
MMO1D_FAMILY(SegGather, false, false, false, "seg_nchw")
// Channels_last weight gradient at stride 1 and, per parity class, 2 (nhwc_vec.cu).
MMO1D_FAMILY(VecWgrad, false, true, false, "vec_wgrad_nhwc", "vec_wgrad_classes_nhwc")
// NCHW weight gradient, stride 1 (nchw_fast.cu).
MMO1D_FAMILY(SegWgrad, false, false, false, "seg_wgrad_nchw")
// Interpolated taps ('bilinear', 'gaussian'), channels_last, C a multiple of the channel block,
// stride 1: the window gathers over the runs of the taps' samples (interp_win.cu).
MMO1D_FAMILY(InterpWin, false, false, true, "interp_win_nhwc")
// Interpolated taps ('bilinear', 'gaussian'), NCHW, stride 1: the segment-window gathers and weight
// gradient over the runs of the taps' samples (interp_seg.cu).
MMO1D_FAMILY(InterpSeg, false, false, true, "interp_seg_nchw", "interp_seg_wgrad_nchw")
// Interpolated taps ('bilinear', 'gaussian'), channels_last, stride 1: the vector gathers and
// weight gradient on the taps' samples, the bias gradient in the same pass (interp_vec.cu).
MMO1D_FAMILY(InterpVec, false, true, true, "interp_vec_nhwc", "interp_vec_wgrad_nhwc")
// Interpolated taps ('bilinear', 'gaussian'), every dtype, stride, K and layout: the general kernels
// on the taps' samples, and the angle gradient; the bias gradient summed in slices of images
// (interp.cu).
MMO1D_FAMILY(Interp, true, true, true, "interp_gather_nchw", "interp_gather_nhwc", "interp_wgrad_nchw",
             "interp_wgrad_nhwc")
// Every dtype, stride, K and layout: gathers and weight gradients (general.cu).
MMO1D_FAMILY(General, true, false, false, "gather_nchw", "gather_nhwc", "wgrad_nchw", "wgrad_nhwc")

template <typename... F>
struct FamilyList {
  static constexpr int kSize = sizeof...(F);
};

using Families = FamilyList<S2Gather, WinGather, VecGather, SegGather, VecWgrad, SegWgrad, InterpWin, InterpSeg,
                            InterpVec, Interp, General>;

}  // namespace cuda
}  // namespace mmo1d
