"""A/B timing of the window gather's inner-loop variants (MMO1D_WIN_VARIANT), one process per
variant and round, interleaved; outputs must be bit-identical to variant 0.

    python .dev_scripts/window_variants.py OUT_DIR            # driver: runs the variants, writes the table
    python .dev_scripts/window_variants.py --worker OUT.json  # one variant (from the environment)
"""
import argparse
import hashlib
import json
import math
import os
import os.path as osp
import statistics
import subprocess
import sys

VARIANTS = (0, 1, 2)
ROUNDS = 2
# (label, N, C, H, K, dtype, angle in degrees or None for the 8-direction layout)
CASES = [('T ++ stage 1, 8 dirs', 64, 384, 56, 31, 'bfloat16', None),
         ('T ++ stage 1, 0 deg', 64, 384, 56, 31, 'bfloat16', 0.0),
         ('T ++ stage 1, 22.5 deg', 64, 384, 56, 31, 'bfloat16', 22.5),
         ('T ++ stage 1, 8 dirs, fp16', 64, 384, 56, 31, 'float16', None),
         ('T ++ stage 2, 8 dirs', 64, 768, 28, 31, 'bfloat16', None),
         ('T ++ stage 3, 8 dirs', 64, 1536, 14, 31, 'bfloat16', None),
         ('T stage 1 K=15 (1D++ first conv)', 64, 96, 56, 15, 'bfloat16', None),
         ('T-1D stage 1 K=31', 64, 96, 56, 31, 'bfloat16', None),
         ('C=512 H=56 K=31, 8 dirs', 64, 512, 56, 31, 'bfloat16', None),
         ('C=512 H=56 K=7, 8 dirs', 64, 512, 56, 7, 'bfloat16', None)]


def worker(out: str) -> None:
    import torch

    from mmo1d.ops import oriented_angles
    ops = torch.ops.mmo1d
    results = {}
    for label, n, c, h, k, dt, angle in CASES:
        dtype = getattr(torch, dt)
        g = torch.Generator(device='cuda').manual_seed(0)
        x = torch.randn(n, c, h, h, device='cuda', generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
        w = (torch.randn(c, k, device='cuda', generator=g) / math.sqrt(k)).to(dtype)
        theta = (torch.full((c, ), math.radians(angle)) if angle is not None else oriented_angles(c)).cuda()
        calls = {'forward': (ops.oriented_dwconv1d, (x, w, theta, None, 1, False, True)),
                 'backward_input': (ops.oriented_dwconv1d_backward_input, (x, x, w, theta, 1, False, True))}
        row = {}
        for name, (op, op_args) in calls.items():
            def fn(op=op, op_args=op_args):
                return op(*op_args)

            y = fn()
            digest = hashlib.sha1(y.float().cpu().numpy().tobytes()).hexdigest()
            for _ in range(5):
                fn()
            times = []
            for _ in range(25):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            row[name] = {'ms': statistics.median(times), 'sha1': digest}
        results[label] = row
    with open(out, 'w') as f:
        json.dump(results, f)


def driver(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    runs = {v: [] for v in VARIANTS}
    for r in range(ROUNDS):
        for v in VARIANTS:
            path = osp.join(out_dir, f'variant{v}_round{r}.json')
            env = dict(os.environ, MMO1D_WIN_VARIANT=str(v))
            subprocess.run([sys.executable, __file__, '--worker', path], env=env, check=True)
            with open(path) as f:
                runs[v].append(json.load(f))
    lines = ['| case | pass | ' + ' | '.join(f'variant {v} ms' for v in VARIANTS) + ' | ' +
             ' | '.join(f'{v} / 0' for v in VARIANTS[1:]) + ' | bit-identical |',
             '|---|---|' + '---|' * (2 * len(VARIANTS))]
    ratios = {v: [] for v in VARIANTS[1:]}
    identical = True
    for label, *_ in CASES:
        for name in ('forward', 'backward_input'):
            ms = {v: statistics.median(run[label][name]['ms'] for run in runs[v]) for v in VARIANTS}
            same = all(run[label][name]['sha1'] == runs[0][0][label][name]['sha1'] for v in VARIANTS for run in runs[v])
            identical = identical and same
            for v in VARIANTS[1:]:
                ratios[v].append(ms[v] / ms[0])
            lines.append(f'| {label} | {name} | ' + ' | '.join(f'{ms[v]:.3f}' for v in VARIANTS) + ' | ' +
                         ' | '.join(f'{ms[v] / ms[0]:.3f}' for v in VARIANTS[1:]) + f' | {same} |')
    geo = {v: math.exp(statistics.fmean(math.log(x) for x in ratios[v])) for v in ratios}
    best = min([0] + list(geo), key=lambda v: 1.0 if v == 0 else geo[v])
    lines += ['', 'geometric mean vs variant 0: ' + ', '.join(f'variant {v}: {geo[v]:.3f}' for v in geo),
              f'all outputs bit-identical to variant 0: {identical}', f'fastest: {best if identical else 0}']
    text = '\n'.join(lines)
    print(text)
    with open(osp.join(out_dir, 'window_variants.md'), 'w') as f:
        f.write(text + '\n')
    with open(osp.join(out_dir, 'best_variant'), 'w') as f:
        f.write(str(best if identical else 0))


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('path')
    parser.add_argument('--worker', action='store_true')
    args = parser.parse_args()
    worker(args.path) if args.worker else driver(args.path)
