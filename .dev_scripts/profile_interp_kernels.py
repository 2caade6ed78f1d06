"""CUDA kernel time of the interpolated op's training step, by kernel (torch.profiler).

One step is the forward, input gradient and weight + bias + angle gradient ops of
'bilinear' and 'gaussian' (sigma 0.5, radius 1) on bfloat16 channels_last (C=384) and float32 NCHW
(C=512) tensors, N=64, 56x56, K=31, with the angles on the 8 directions and moved by up to 0.05 rad
per channel; prints each kernel's time per step over 10 profiled steps (after 3 warm-up steps).

    python .dev_scripts/profile_interp_kernels.py

The tensors and angles are those of ``time_interp_passes.py``.
"""
import torch
from time_interp_passes import op_inputs  # this folder is the script's sys.path[0]
from torch.profiler import ProfilerActivity, profile


def training_step(x, dy, w, b, th, rounding: str) -> None:
    ops = torch.ops.mmo1d
    ops.oriented_dwconv1d_interp(x, w, th, b, 1, rounding, 0.5, 1.0, True)
    ops.oriented_dwconv1d_interp_backward_input(dy, x, w, th, 1, rounding, 0.5, 1.0, True)
    ops.oriented_dwconv1d_interp_backward_params(dy, x, w, th, 1, rounding, 0.5, 1.0, True)


def main() -> None:
    print(torch.cuda.get_device_name(), 'torch', torch.__version__)
    for jitter in (0.0, 0.05):
        for dtype, c, cl in [(torch.bfloat16, 384, True), (torch.float32, 512, False)]:
            x, dy, w, b, th = op_inputs(dtype, c, cl, jitter)
            for r in ('bilinear', 'gaussian'):
                for _ in range(3):
                    training_step(x, dy, w, b, th, r)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        training_step(x, dy, w, b, th, r)
                    torch.cuda.synchronize()
                print(f'==== jitter {jitter} {dtype} {"CL" if cl else "NCHW"} {r}: per step (10 steps)')
                rows = [(e.key, e.device_time_total / 10, e.count // 10) for e in prof.key_averages()
                        if e.device_time_total > 0]
                for key, t, count in sorted(rows, key=lambda row: -row[1])[:14]:
                    print(f'{t / 1000:8.3f} ms  x{count:<3d} {key[:110]}')


if __name__ == '__main__':
    main()
