"""The tensor-core path on a GPU: error against the float64 reference next to the exact path's, and
same-run times of the ++ blocks' 4C convolution (forward, forward + backward) with tensor cores on
and off, against cuDNN's 7x7 depthwise convolution and the copy bandwidth.

    python .dev_scripts/mma_probe.py [--quick]
"""
import argparse
import math

import torch
import torch.nn.functional as F

from mmo1d.ops import (
    oriented_angles,
    oriented_dwconv1d,
    oriented_dwconv1d_path,
    oriented_dwconv1d_reference,
    set_tensor_cores,
)

SHAPES = [(2, 384, 56, 56, 31), (3, 96, 28, 28, 31), (2, 64, 7, 7, 31), (1, 32, 200, 334, 31),
          (2, 16, 13, 50, 63), (2, 48, 9, 100, 7), (1, 768, 14, 14, 31), (2, 32, 64, 65, 15), (1, 16, 1, 1, 5)]


def errors(shape, dtype, angles, residual, seed):
    n, c, h, w, k = shape
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g)
    gy = torch.randn(n, c, h, w, generator=g)
    wt = torch.randn(c, k, generator=g) / math.sqrt(k)
    b = torch.randn(c, generator=g)
    theta = {'8dir': oriented_angles(c), 'rot': oriented_angles(c, 8, 0.5),
             'rand': torch.rand(c, generator=g, dtype=torch.float64).mul(math.pi).float()}[angles].cuda()
    cast = dict(device='cuda', dtype=dtype)
    xs, gys = (t.to(**cast).contiguous(memory_format=torch.channels_last) for t in (x, gy))
    ws, bs = wt.to(**cast), b.to(**cast)
    xd, wd, bd = xs.double().requires_grad_(), ws.double(), bs.double()
    ref = oriented_dwconv1d_reference(xd, wd, theta, bd, 1, 'trunc', residual)
    (rdx,) = torch.autograd.grad(ref, xd, gys.double())
    scale = oriented_dwconv1d_reference(xd.detach().abs(), wd.abs(), theta, bd.abs(), 1, 'trunc', residual)
    out = {}
    for tc in (True, False):
        set_tensor_cores(tc)
        xr = xs.detach().requires_grad_()
        y = oriented_dwconv1d(xr, ws, theta, bs, 1, 'trunc', residual)
        (dx,) = torch.autograd.grad(y, xr, gys)
        path = oriented_dwconv1d_path(xs, ws, 1, 'forward', theta)
        ey = ((y.double() - ref).abs() / (scale + 1e-30)).max().item()
        edx = ((dx.double() - rdx).abs() / (rdx.abs().max() + 1e-30)).max().item()
        ulp = ((y.double() - ref).abs() / (ref.abs() * 2.0**(-8 if dtype == torch.bfloat16 else -11) + 1e-30)).max()
        out[tc] = (path, ey, edx, ulp.item(), y.detach(), dx)
    set_tensor_cores(True)
    same = (out[True][4] - out[False][4]).abs().max().item(), (out[True][5] - out[False][5]).abs().max().item()
    return out, same


def timed(fn, reps):
    for _ in range(5):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return sorted(a.elapsed_time(b) for a, b in ev)[reps // 2]


def bench(dtype, reps, rounds):
    n, c, h, w, k = 64, 384, 56, 56, 31
    cast = dict(device='cuda', dtype=dtype)
    x = torch.randn(n, c, h, w, **cast).contiguous(memory_format=torch.channels_last)
    gy = torch.randn_like(x)
    wt = (torch.randn(c, k) / math.sqrt(k)).to(**cast)
    b = torch.randn(c, **cast)
    w7 = torch.randn(c, 1, 7, 7, **cast)
    xg, wg, bg, w7g = (t.detach().requires_grad_() for t in (x, wt, b, w7))
    cases = {}
    for name, theta in [('8dir', oriented_angles(c)), ('0', torch.zeros(c)), ('22.5', torch.full((c,), math.pi / 8)),
                        ('45', torch.full((c,), math.pi / 4)), ('90', torch.full((c,), math.pi / 2))]:
        theta = theta.cuda()
        for tc in (True, False):
            def fwd(theta=theta, tc=tc):
                set_tensor_cores(tc)
                return oriented_dwconv1d(x, wt, theta, b, 1, 'trunc', True)

            def fb(theta=theta, tc=tc):
                set_tensor_cores(tc)
                y = oriented_dwconv1d(xg, wg, theta, bg, 1, 'trunc', True)
                torch.autograd.grad(y, [xg, wg, bg], gy)
            cases[f'{name} {"tc" if tc else "exact"} fwd'] = fwd
            cases[f'{name} {"tc" if tc else "exact"} fwd+bwd'] = fb

    def c7():
        return F.conv2d(x, w7, None, 1, 3, 1, c)

    def c7fb():
        y = F.conv2d(xg, w7g, None, 1, 3, 1, c)
        torch.autograd.grad(y, [xg, w7g], gy)
    cases['cudnn7x7 fwd'] = c7
    cases['cudnn7x7 fwd+bwd'] = c7fb
    dst = torch.empty_like(x)
    cases['copy x->y'] = lambda: dst.copy_(x)
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(timed(fn, reps))
    set_tensor_cores(True)
    print(f'\n## {dtype} channels_last, N={n} C={c} {h}x{w} K={k}, residual, bias; median ms per round '
          f'({rounds} rounds x {reps} reps)')
    for name, t in times.items():
        print(f'{name:28s} ' + ' '.join(f'{v:.3f}' for v in t))
    copy = min(times['copy x->y'])
    for name in cases:
        if name.endswith('fwd') and 'tc' in name:
            print(f'{name}: {copy / min(times[name]) * 100:.0f}% of copy bandwidth; '
                  f'exact/tc {min(times[name.replace("tc", "exact")]) / min(times[name]):.2f}x; '
                  f'vs cudnn7x7 {min(times[name]) / min(times["cudnn7x7 fwd"]):.2f}x')
        if name.endswith('fwd+bwd') and 'tc' in name:
            print(f'{name}: exact/tc {min(times[name.replace("tc", "exact")]) / min(times[name]):.2f}x; '
                  f'vs cudnn7x7 {min(times[name]) / min(times["cudnn7x7 fwd+bwd"]):.2f}x')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--no-bench', action='store_true')
    args = parser.parse_args()
    print(torch.cuda.get_device_name())
    seed = 0
    for shape in SHAPES:
        for dtype in (torch.bfloat16, torch.float16):
            for angles in ('8dir', 'rot', 'rand'):
                residual = seed % 2 == 0
                out, same = errors(shape, dtype, angles, residual, seed)
                seed += 1
                (pt, eyt, edt, ut, *_), (pe, eye, ede, ue, *_) = out[True], out[False]
                print(f'{shape} {str(dtype)[6:]} {angles} res={int(residual)}: {pt}: out {eyt:.2e} (x{ut:.2f} ulp) '
                      f'dx {edt:.2e} | {pe}: out {eye:.2e} (x{ue:.2f} ulp) dx {ede:.2e} | tc-exact {same[0]:.2e} '
                      f'{same[1]:.2e}', flush=True)
    if not args.no_bench:
        for dtype in (torch.bfloat16, torch.float16):
            bench(dtype, 10 if args.quick else 25, 2 if args.quick else 4)


if __name__ == '__main__':
    main()
