"""Times of the NCHW stride-1 paths of two builds of the op, side by side (float32, K=31).

``run TAG`` times, with the build of mmo1d on ``PYTHONPATH``, the forward pass (no gradients) and
forward + backward (input and weight gradients) of the rounded op on float32 NCHW tensors: 64 x 512
at 14, 28 and 56 and 8 x 96 at 224, at 0, 22.5 and 45 degrees and the 8 directions. Each time is
the median of 25 calls, each timed between two CUDA events and synchronised, after 5 warm-up calls;
one JSON line per case goes to stdout. Alternate the builds a few times and ``summarize``:

    for r in 1 2 3; do
      (cd old && PYTHONPATH=. python ../.dev_scripts/time_nchw_builds.py run old) >> ab.jsonl
      PYTHONPATH=. python .dev_scripts/time_nchw_builds.py run new >> ab.jsonl
    done
    python .dev_scripts/time_nchw_builds.py summarize ab.jsonl
"""
import argparse
import collections
import json
import math
import statistics

SHAPES = ((64, 512, 14), (64, 512, 28), (64, 512, 56), (8, 96, 224))
ANGLES = ('0', '22.5', '45', 'mixed8')


def case_ms(x, w, th, gy, pas: str) -> float:
    """Median of 25 calls of one pass ('fwd' without gradients, or 'fwdbwd'), each between two CUDA
    events and synchronised, after 5 warm-up calls."""
    import torch

    from mmo1d.ops import oriented_dwconv1d
    times = []
    for i in range(30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        if pas == 'fwd':
            with torch.no_grad():
                oriented_dwconv1d(x, w, th)
        else:
            oriented_dwconv1d(x, w, th).backward(gy)
        end.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def run(tag: str) -> None:
    import torch

    from mmo1d.ops import oriented_angles
    torch.backends.cudnn.benchmark = True
    for n, c, h in SHAPES:
        x = torch.randn(n, c, h, h, device='cuda', requires_grad=True)
        w = torch.randn(c, 1, 1, 31, device='cuda', requires_grad=True)
        for angle in ANGLES:
            if angle == 'mixed8':
                th = oriented_angles(c).cuda()
            else:
                th = torch.full((c, ), float(angle) * math.pi / 180, device='cuda')
            gy = torch.randn(n, c, h, h, device='cuda')
            for pas in ('fwd', 'fwdbwd'):
                ms = case_ms(x, w, th, gy, pas)
                print(json.dumps(dict(tag=tag, shape=f'{n}x{c}x{h}', angle=angle, pas=pas, ms=ms)))


def summarize(path: str) -> str:
    """Per case: the median over rounds of each build (old, new), their ratio, and every round."""
    by_key = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.startswith('{'):
                r = json.loads(line)
                by_key[(r['shape'], r['angle'], r['pas'], r['tag'])].append(r['ms'])
    lines = ['shape angle pass old_ms new_ms new/old (each the median of its rounds; rounds old | new)']
    for key in sorted({k[:3] for k in by_key}):
        old, new = by_key[key + ('old', )], by_key[key + ('new', )]
        lines.append(f'{key[0]:12s} {key[1]:6s} {key[2]:6s} {statistics.median(old):8.4f} '
                     f'{statistics.median(new):8.4f} {statistics.median(new) / statistics.median(old):6.3f}   '
                     f"{' '.join(f'{v:.4f}' for v in old)} | {' '.join(f'{v:.4f}' for v in new)}")
    return '\n'.join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='cmd', required=True)
    sub.add_parser('run').add_argument('tag')
    sub.add_parser('summarize').add_argument('path')
    args = parser.parse_args(argv)
    if args.cmd == 'run':
        run(args.tag)
    else:
        print(summarize(args.path))


if __name__ == '__main__':
    main()
