"""Where a kernel's instructions and stall samples go, from ncu's per-instruction source counters.

Reads the SASS page that ncu exports for one profiled kernel,

    ncu --kernel-name regex:win_gather --launch-skip 2 --launch-count 1 --section SourceCounters \\
        --section WarpStateStats --import-source yes -o win \\
        python tools/analysis_tools/profile_model.py --op --external
    ncu --import win.ncu-rep --page source --csv --print-source sass > win_sass.csv

and groups consecutive instructions that executed the same number of times (a loop body, a
prologue, a tail) into regions (``python tools/analysis_tools/profile_model.py --ncu-sass win_sass.csv``).
"""
import csv
from typing import List, Tuple


def load(path: str) -> Tuple[str, List[str], List[int], List[int]]:
    """The kernel name, and per SASS line its source, times executed and warp stall samples."""
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


def report(path: str, n_regions: int = 14, top: int = 8) -> str:
    """The largest regions by executed warp instructions with their share of the instructions and of the
    stall samples, then the ``top`` instructions with the most stall samples."""
    kernel, source, executed, samples = load(path)
    total, total_samples = sum(executed), max(1, sum(samples))
    lines = [kernel, f'{total:,} warp instructions executed, {sum(samples):,} stall samples',
             'region (SASS lines)   length  times run  instructions  stall samples  first instruction']
    runs = sorted(regions(executed), key=lambda r: -(r[1] - r[0] + 1) * r[2])[:n_regions]
    for first, last, count in sorted(runs):
        n = last - first + 1
        share = 100 * n * count / max(1, total)
        stall = 100 * sum(samples[first:last + 1]) / total_samples
        lines.append(f'{first:6d}-{last:<6d}       {n:6d} {count:10d}  {share:10.1f}%  {stall:12.1f}%  '
                     f'{source[first][:48]}')
    lines.append('most stall samples:')
    for i in sorted(range(len(samples)), key=lambda i: -samples[i])[:top]:
        lines.append(f'{i:6d} {samples[i]:7d}  {source[i][:60]}')
    return '\n'.join(lines)
