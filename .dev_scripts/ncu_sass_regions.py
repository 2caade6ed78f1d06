"""Where a kernel's instructions and stall samples go, from ncu's per-instruction source counters.

Reads the SASS page that ncu exports for one profiled kernel,

    ncu --kernel-name regex:win_gather --launch-skip 2 --launch-count 1 --section SourceCounters \
        --section WarpStateStats --import-source yes -o win python .dev_scripts/profile_op_case.py
    ncu --import win.ncu-rep --page source --csv --print-source sass > win_sass.csv

and groups consecutive instructions that executed the same number of times (a loop body, a
prologue, a tail) into regions. Prints the largest regions by executed warp instructions with their
share of the instructions and of the warp stall samples, then the instructions with the most stall
samples.

    python .dev_scripts/ncu_sass_regions.py win_sass.csv [--regions 14] [--top 8]
"""
import argparse
import csv
from typing import List, Optional


def load(path: str):
    with open(path, newline='') as f:
        rows = list(csv.reader(f))
    kernel = rows[0][1] if len(rows[0]) > 1 else ''
    header = rows[1]
    body = [r for r in rows[2:] if len(r) == len(header)]
    names = ('Source', 'Instructions Executed', 'Warp Stall Sampling (All Samples)')
    col = {name: header.index(name) for name in names}
    source = [r[col['Source']].strip() for r in body]
    executed = [int(r[col['Instructions Executed']]) for r in body]
    samples = [int(r[col['Warp Stall Sampling (All Samples)']]) for r in body]
    return kernel, source, executed, samples


def regions(executed: List[int]) -> List[List[int]]:
    """[first, last, count] runs of consecutive instructions with the same execution count."""
    out: List[List[int]] = []
    for i, c in enumerate(executed):
        if out and out[-1][2] == c:
            out[-1][1] = i
        else:
            out.append([i, i, c])
    return out


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('csv')
    parser.add_argument('--regions', type=int, default=14)
    parser.add_argument('--top', type=int, default=8)
    args = parser.parse_args(argv)
    kernel, source, executed, samples = load(args.csv)
    total, total_samples = sum(executed), max(1, sum(samples))
    print(f'{kernel}\n{total:,} warp instructions executed, {sum(samples):,} stall samples')
    print('region (SASS lines)   length  times run  instructions  stall samples  first instruction')
    runs = sorted(regions(executed), key=lambda r: -(r[1] - r[0] + 1) * r[2])[:args.regions]
    for first, last, count in sorted(runs):
        n = last - first + 1
        share = 100 * n * count / max(1, total)
        stall = 100 * sum(samples[first:last + 1]) / total_samples
        print(f'{first:6d}-{last:<6d}       {n:6d} {count:10d}  {share:10.1f}%  {stall:12.1f}%  {source[first][:48]}')
    print('most stall samples:')
    for i in sorted(range(len(samples)), key=lambda i: -samples[i])[:args.top]:
        print(f'{i:6d} {samples[i]:7d}  {source[i][:60]}')


if __name__ == '__main__':
    main()
