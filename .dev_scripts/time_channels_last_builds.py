"""Times of the channels_last fast paths of two builds of the op, side by side.

``run TAG`` times, with the build of mmo1d on ``PYTHONPATH``, the three passes of the rounded op
(forward with bias and residual, input gradient, weight + bias gradient) on channels_last tensors
at the shapes of the T models' oriented convolutions (K=31 "++" convolutions at 56, 28 and 14; the
K=15 and K=13 ones; a 128x128 and a 200x200 plane), angles the 8 directions and, for bfloat16 at
64 x 384 x 56 x 56, single angles; bfloat16, float16 and float32. Each time is the median of 20
back-to-back calls timed with CUDA events; one JSON line per case goes to stdout. Run it a few
times for each build, alternating, and ``summarize`` the lines:

    for r in 1 2 3; do
      PYTHONPATH=old python .dev_scripts/time_channels_last_builds.py run old >> ab.jsonl
      PYTHONPATH=. python .dev_scripts/time_channels_last_builds.py run new >> ab.jsonl
    done
    python .dev_scripts/time_channels_last_builds.py summarize ab.jsonl old new
"""
import argparse
import collections
import json
import math
import statistics

CASES = [((64, 384, 56, 31), ('0', '22.5', '45', '67.5', '90', 'mixed')), ((64, 768, 28, 31), ('mixed', )),
         ((64, 1536, 14, 27), ('mixed', )), ((64, 3072, 7, 13), ('mixed', )), ((64, 96, 56, 15), ('mixed', )),
         ((64, 192, 28, 15), ('mixed', )), ((16, 384, 128, 31), ('mixed', )), ((2, 384, 200, 31), ('mixed', ))]
PASSES = ('fwd', 'bwd_input', 'bwd_weight')


def back_to_back_ms(fn, reps: int = 20) -> float:
    """Median of ``reps`` calls issued back to back, each timed between two CUDA events."""
    import torch
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    fn()
    torch.cuda.synchronize()
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps))


def time_passes(x, w, th, b):
    """Forward (bias, residual), input gradient and weight + bias gradient times of one case."""
    import torch

    from mmo1d.ops import oriented_dwconv1d
    ops = torch.ops.mmo1d
    g = torch.randn_like(x)
    return (back_to_back_ms(lambda: oriented_dwconv1d(x, w, th, b, residual=True)),
            back_to_back_ms(lambda: ops.oriented_dwconv1d_backward_input(g, x, w, th, 1, False, True)),
            back_to_back_ms(lambda: ops.oriented_dwconv1d_backward_weight_bias(g, x, w, th, 1, False)))


def run(tag: str) -> None:
    import torch

    from mmo1d.ops import oriented_angles, oriented_dwconv1d_path
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for (n, c, h, k), angles in CASES:
            for a in angles:
                if dtype != torch.bfloat16 and a != 'mixed':
                    continue
                x = torch.randn(n, c, h, h, device='cuda', dtype=dtype).contiguous(memory_format=torch.channels_last)
                w = (torch.randn(c, k, device='cuda') / math.sqrt(k)).to(dtype)
                b = torch.randn(c, device='cuda', dtype=dtype)
                th = (torch.full((c, ), math.radians(float(a))) if a != 'mixed' else oriented_angles(c)).cuda()
                times = time_passes(x, w, th, b)
                record = {'tag': tag, 'dtype': str(dtype).split('.')[-1], 'case': [n, c, h, k, a],
                          'path': oriented_dwconv1d_path(x, w, theta=th)}
                record.update(zip(PASSES, times))
                print(json.dumps(record), flush=True)


def summarize(path: str, old: str, new: str) -> None:
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            times[(r['dtype'], tuple(r['case']))][r['tag']].append(r)
    print(f'ms, median over runs: {old} -> {new} (ratio)')
    for (dtype, case), by_tag in times.items():
        cells = []
        for p in PASSES:
            if p not in by_tag[old][0]:
                continue
            a = statistics.median(r[p] for r in by_tag[old])
            b = statistics.median(r[p] for r in by_tag[new])
            cells.append(f'{p} {a:.3f} -> {b:.3f} ({b / a:.3f})')
        print(f'{dtype:9s} {str(case):28s} ' + '  '.join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='cmd', required=True)
    r = sub.add_parser('run')
    r.add_argument('tag')
    s = sub.add_parser('summarize')
    s.add_argument('jsonl')
    s.add_argument('old')
    s.add_argument('new')
    args = parser.parse_args()
    if args.cmd == 'run':
        run(args.tag)
    else:
        summarize(args.jsonl, args.old, args.new)


if __name__ == '__main__':
    main()
