"""CUDA time of the interpolated weight-gradient op alone, for sweeping its slice sizes.

The tensors of ``time_interp_passes.py`` (bfloat16 channels_last C=384 and float32 / bfloat16 NCHW,
N=64, 56x56, K=31), the angles moved by up to 0.05 rad and exactly on the 8 directions; the op
``oriented_dwconv1d_interp_backward_params`` (weight, bias and angle gradients) for 'bilinear' and
'gaussian', median of 3 rounds of 10 calls after 3 warm-up calls. A sweep rebuilds in place with
each slice size:

    for pair in "48 36" "64 80"; do set -- $pair
      sed -i "s/kInterpWgradPoints = [0-9]*;/kInterpWgradPoints = $1;/" csrc/cuda/interp_vec.cu
      sed -i "s/kInterpSegWgradPoints = [0-9]*;/kInterpSegWgradPoints = $2;/" csrc/cuda/interp_seg.cu
      python setup.py build_ext --inplace && python .dev_scripts/time_interp_wgrad.py "vec$1/seg$2"
    done
"""
import argparse

import torch
from time_interp_passes import RADIUS, SIGMA, op_inputs  # this folder is the script's sys.path[0]

from mmo1d.benchmark.timing import time_samples

CONFIGS = {'cl': (torch.bfloat16, 384, True), 'nchw32': (torch.float32, 512, False),
           'nchw16': (torch.bfloat16, 384, False)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('label', help='printed before each line (e.g. the slice sizes)')
    parser.add_argument('--configs', nargs='+', default=['cl', 'nchw32'], choices=sorted(CONFIGS))
    args = parser.parse_args()
    for name in args.configs:
        dtype, c, cl = CONFIGS[name]
        for jitter in (0.05, 0.0):
            inputs = op_inputs(dtype, c, cl, jitter)
            out = [f'{r} {median_ms(inputs, r):.3f}' for r in ('bilinear', 'gaussian')]
            layout = 'CL' if cl else 'NCHW'
            print(f'{args.label} {str(dtype)[6:]:9s} {layout:4s} jitter {jitter}: dw ms', ', '.join(out), flush=True)


def median_ms(inputs, rounding: str) -> float:
    x, dy, w, _, th = inputs

    def call(_):
        torch.ops.mmo1d.oriented_dwconv1d_interp_backward_params(dy, x, w, th, 1, rounding, SIGMA, RADIUS, True)

    t = []
    for _ in range(3):
        t += time_samples(call, 10, 3)
    return sorted(t)[len(t) // 2]

if __name__ == '__main__':
    main()
