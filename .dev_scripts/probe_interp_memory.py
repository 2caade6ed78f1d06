"""Peak memory of each piece of the interpolated op's forward and backward (bf16 channels_last)."""
import torch

from mmo1d.ops import oriented_angles, oriented_dwconv1d

n, c, h, k = 64, 384, 56, 31
x = torch.randn(n, c, h, h, device='cuda', dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
g = torch.randn_like(x)
w = torch.randn(c, k, device='cuda', dtype=torch.bfloat16)
b = torch.randn(c, device='cuda', dtype=torch.bfloat16)
th = oriented_angles(c).cuda() + 0.03
ops = torch.ops.mmo1d


def peak(name, fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    print(f'{name:40s} peak +{(torch.cuda.max_memory_allocated() - base) / 2**20:8.1f} MiB', flush=True)
    return out


def probe(r: str) -> None:
    print('==', r)
    if r == 'trunc':
        peak('forward', lambda: ops.oriented_dwconv1d(x, w, th, b, 1, False, False))
        peak('backward_input', lambda: ops.oriented_dwconv1d_backward_input(g, x, w, th, 1, False, False))
        peak('backward_weight_bias', lambda: ops.oriented_dwconv1d_backward_weight_bias(g, x, w, th, 1, False))
    else:
        peak('forward', lambda: ops.oriented_dwconv1d_interp(x, w, th, b, 1, r, 0.5, 1.0, False))
        peak('backward_input', lambda: ops.oriented_dwconv1d_interp_backward_input(g, x, w, th, 1, r, 0.5, 1.0, False))
        peak('backward_params', lambda: ops.oriented_dwconv1d_interp_backward_params(g, x, w, th, 1, r, 0.5, 1.0, True))
        peak('backward_params (no theta)',
             lambda: ops.oriented_dwconv1d_interp_backward_params(g, x, w, th, 1, r, 0.5, 1.0, False))
    peak('bias_grad (sum, dtype float)', lambda: g.sum((0, 2, 3), dtype=torch.float32))
    peak('bias_grad (as (NHW, C), dtype float)',
         lambda: g.permute(0, 2, 3, 1).reshape(-1, c).sum(dim=0, dtype=torch.float32))
    xr, wr, br = x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()
    tr = th.detach().requires_grad_(r != 'trunc')

    def step():
        oriented_dwconv1d(xr, wr, tr, br, 1, r).backward(g)

    peak('autograd fwd+bwd', step)


for rounding in ('trunc', 'bilinear'):
    probe(rounding)
