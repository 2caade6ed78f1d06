"""Fingerprints of the CUDA op's outputs and gradients over a matrix of calls, to show that two
builds compute bit for bit the same (e.g. before and after a restructuring of the sources).

    python .dev_scripts/op_matrix.py dump OUT.json       # with one build importable
    python .dev_scripts/op_matrix.py dump --grown OUT.json   # grids whose window-gather blocks grow
    python .dev_scripts/op_matrix.py compare A.json B.json

Every case runs forward, input gradient and weight gradient (and, for learned interpolated angles,
the angle gradient) from fixed seeds; a case records the SHA-1 of each result's bytes, or the error
it raised.
"""
import argparse
import hashlib
import itertools
import json
import math
import sys

import torch

SHAPES = [(2, 64, 56, 56), (2, 20, 30, 31), (4, 96, 28, 28), (1, 512, 14, 14), (2, 48, 97, 61), (1, 64, 224, 224)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTERP_SHAPES = [(2, 64, 56, 56), (2, 20, 30, 31), (1, 512, 14, 14)]


def cases():
    for (n, c, h, w), dtype, layout, stride, k in itertools.product(SHAPES, DTYPES, ('nchw', 'channels_last'),
                                                                    (1, 2, 3), (7, 15, 31, 63)):
        if h * w > 60_000 and (k != 15 or stride != 2):
            continue  # the large plane only as the 1D stems use it
        yield dict(n=n, c=c, h=h, w=w, dtype=dtype, layout=layout, stride=stride, k=k,
                   residual=stride == 1 and k == 31, floor=k == 7)
    # Learned interpolated angles (K=15): every interpolated family and its weight and angle gradients.
    for (n, c, h, w), dtype, layout, stride, interp in itertools.product(INTERP_SHAPES, DTYPES,
                                                                        ('nchw', 'channels_last'), (1, 2),
                                                                        ('bilinear', 'gaussian')):
        yield dict(n=n, c=c, h=h, w=w, dtype=dtype, layout=layout, stride=stride, k=15,
                   residual=stride == 1 and interp == 'bilinear', floor=False, interp=interp)


# Training batches of the models' stage planes, whose window-gather blocks grow their regions
# beyond the allocation's tile (and take their share of shared memory): residual form, stride 1,
# channels_last, each single canonical angle and the 8 directions; two with learned bilinear angles,
# and learned bilinear angles on the small planes that blocks of several images cover.
GROWN_SHAPES = [((64, 384, 56, 56, 31), torch.bfloat16), ((64, 384, 56, 56, 31), torch.float16),
                ((64, 768, 28, 28, 31), torch.bfloat16), ((16, 288, 33, 33, 31), torch.float16),
                ((32, 192, 112, 112, 15), torch.bfloat16), ((64, 384, 56, 56, 31), torch.float32)]
GROWN_ANGLES = (None, 0.0, 22.5, 45.0, 67.5, 90.0)  # None: the 8 directions
SMALL_PLANES = (((64, 1536, 14, 14, 31), torch.bfloat16), ((64, 3072, 7, 7, 31), torch.float16))


def grown_cases():
    def case(shape, dtype, **extra):
        n, c, h, w, k = shape
        return dict(n=n, c=c, h=h, w=w, dtype=dtype, layout='channels_last', stride=1, k=k, residual=True,
                    floor=False, **extra)

    for shape, dtype in GROWN_SHAPES:
        for angle in GROWN_ANGLES:
            yield case(shape, dtype, angle=angle)
    for shape, dtype in (GROWN_SHAPES[0], GROWN_SHAPES[3]) + SMALL_PLANES:
        yield case(shape, dtype, bilinear=True)


def case_id(cs: dict) -> str:
    extra = ('' if cs.get('angle') is None else f'-a{cs["angle"]}') + ('-bilinear' if cs.get('bilinear') else '')
    extra += f'-{cs["interp"]}' if cs.get('interp') else ''
    return '{n}x{c}x{h}x{w}-{dt}-{layout}-s{stride}-k{k}-r{residual:d}-f{floor:d}'.format(
        dt=str(cs['dtype']).replace('torch.', ''), **cs) + extra


def digest(t: torch.Tensor) -> str:
    return hashlib.sha1(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()


def run(cs: dict) -> dict:
    from mmo1d.ops import oriented_angles, oriented_dwconv1d  # the build on the path (not needed to compare)

    g = torch.Generator().manual_seed(cs['n'] * 1000 + cs['c'] + cs['k'])
    n, c, h, w, k, s = cs['n'], cs['c'], cs['h'], cs['w'], cs['k'], cs['stride']
    cast = dict(device='cuda', dtype=cs['dtype'])
    x = torch.randn(n, c, h, w, generator=g).to(**cast)
    gy = torch.randn(n, c, -(-h // s), -(-w // s), generator=g).to(**cast)
    if cs['layout'] == 'channels_last':
        x, gy = x.contiguous(memory_format=torch.channels_last), gy.contiguous(memory_format=torch.channels_last)
    weight = (torch.randn(c, k, generator=g) / math.sqrt(k)).to(**cast).requires_grad_()
    bias = torch.randn(c, generator=g).to(**cast)
    theta = oriented_angles(c, 8, 0.5 if k == 15 else 0.0)
    if cs.get('angle') is not None:
        theta = torch.full((c, ), math.radians(cs['angle']))
    rounding = 'floor' if cs['floor'] else 'trunc'
    if cs.get('bilinear') or cs.get('interp'):
        theta, rounding = theta + 0.05 * torch.randn(c, generator=g), cs.get('interp', 'bilinear')
    theta = theta.cuda().requires_grad_(rounding in ('bilinear', 'gaussian'))
    x.requires_grad_()
    out = oriented_dwconv1d(x, weight, theta, bias, s, rounding, cs['residual'])
    inputs = [x, weight] + ([theta] if theta.requires_grad else [])
    grads = torch.autograd.grad(out, inputs, gy)
    names = ('dx', 'dw', 'dtheta')
    return {'out': digest(out), **{name: digest(t) for name, t in zip(names, grads)}}


def dump(path: str, grown: bool = False) -> None:
    results = {}
    for cs in (grown_cases() if grown else cases()):
        try:
            results[case_id(cs)] = run(cs)
        except RuntimeError as e:  # recorded: a build may fail a call the other serves
            results[case_id(cs)] = {'error': str(e).splitlines()[0]}
    torch.cuda.synchronize()
    with open(path, 'w') as f:
        json.dump({'gpu': torch.cuda.get_device_name(), 'torch': torch.__version__, 'cases': results}, f, indent=0)
    print(f'{len(results)} cases, {sum("error" in r for r in results.values())} errors -> {path}')


def compare(a_path: str, b_path: str) -> int:
    a, b = (json.load(open(p))['cases'] for p in (a_path, b_path))
    same = differ = 0
    only_a_errors, only_b_errors = [], []
    for cid in sorted(a.keys() & b.keys()):
        ra, rb = a[cid], b[cid]
        if 'error' in ra or 'error' in rb:
            if 'error' not in rb:
                only_a_errors.append(f'{cid}: {ra["error"]}')
            elif 'error' not in ra:
                only_b_errors.append(f'{cid}: {rb["error"]}')
            continue
        if ra == rb:
            same += 1
        else:
            differ += 1
            print(f'DIFFERENT {cid}: ' + ', '.join(k for k in ra if ra[k] != rb[k]))
    print(f'{same} cases bit-identical, {differ} different; errors only in {a_path}: {len(only_a_errors)}, '
          f'only in {b_path}: {len(only_b_errors)}')
    for line in only_a_errors + only_b_errors:
        print('  error:', line)
    return 1 if differ or only_b_errors else 0


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('mode', choices=['dump', 'compare'])
    parser.add_argument('paths', nargs='+')
    parser.add_argument('--grown', action='store_true', help='dump: the grids whose window-gather blocks grow')
    args = parser.parse_args()
    if args.mode == 'dump':
        dump(args.paths[0], args.grown)
    else:
        sys.exit(compare(*args.paths[:2]))
