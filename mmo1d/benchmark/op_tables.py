"""Markdown of the GPU op benchmark (:func:`mmo1d.benchmark.op_baselines.run_gpu`): the tables of every
dtype, layout and pass, and the short speed table of the README."""
from typing import Dict, List, Tuple

import torch

from .op_inputs import DTYPES, LAYOUTS, MIXED
from .timing import env_line


def configs(records: List[Dict]) -> List[Tuple[str, str]]:
    """The (dtype, layout) pairs of the mmo1d records, in the order of ``DTYPES`` and ``LAYOUTS``."""
    pairs = {(r['dtype'], r['layout']) for r in records if r['impl'] == 'mmo1d'}
    return sorted(pairs, key=lambda p: (list(DTYPES).index(p[0]), list(LAYOUTS).index(p[1])))


def summarize(result: Dict) -> str:
    """Markdown tables: times, ratios to the baselines, angle spread, roofline, peak memory."""
    env, recs = result['env'], result['records']
    bw = env['copy_bandwidth_GBps']

    def find(**kw):
        return [r for r in recs if all(r[k] == v for k, v in kw.items())]

    rounds = f" in {env['rounds']} interleaved rounds" if env.get('rounds', 1) > 1 else ''
    lines = [f"# Oriented depthwise 1D convolution on {env['gpu']}", '',
             f"{env_line(env)}; N={env['batch']}, C={env['channels']}; median of {env['repeats']} repeats"
             f"{rounds}; "
             f"copy bandwidth {bw} GB/s.", '', f"Command: `{env['command']}`", '',
             'Times in ms. *any angle* = slowest of the 8 single-angle runs; ratios use it. '
             '*horizontal* = PyTorch depthwise 1xK conv (NCHW, same dtype); *7x7* = PyTorch depthwise 7x7 '
             '(same layout); *masked* = KxK depthwise conv zero off the lines; spread = slowest / fastest '
             'angle; roofline = bytes of x and y / time / copy bandwidth (forward); memory = peak of mmo1d '
             '(mixed8) / peak of horizontal.', '']
    for dtype_name, layout in configs(recs):
        for pas in ('fwd', 'fwdbwd'):
            rows = find(impl='mmo1d', dtype=dtype_name, layout=layout, **{'pass': pas})
            if not rows:
                continue
            lines += [f'## {dtype_name}, {layout}, {"forward" if pas == "fwd" else "forward + backward"}', '',
                      '| H | K | mmo1d any angle | mmo1d mixed8 | horizontal | 7x7 | masked | vs horizontal '
                      '| vs 7x7 | spread | roofline | memory |',
                      '|---|---|---|---|---|---|---|---|---|---|---|---|']
            for h in sorted({r['H'] for r in rows}):
                for k in sorted({r['K'] for r in rows}):
                    single = [r for r in rows if r['H'] == h and r['K'] == k and r['angle_deg'] != MIXED]
                    if not single:
                        continue
                    worst = max(r['ms'] for r in single)
                    best = min(r['ms'] for r in single)
                    mixed = find(impl='mmo1d', dtype=dtype_name, layout=layout, H=h, K=k, angle_deg=MIXED,
                                 **{'pass': pas})
                    hor = find(impl='torch_horizontal', dtype=dtype_name, H=h, K=k, **{'pass': pas})[0]
                    d2 = find(impl='torch_2d_7x7', dtype=dtype_name, layout=layout, H=h, **{'pass': pas})[0]
                    masked = find(impl='masked_2d', dtype=dtype_name, layout=layout, H=h, K=k, **{'pass': pas})
                    elem = torch.finfo(DTYPES[dtype_name]).bits // 8
                    xy_bytes = 2 * env['batch'] * env['channels'] * h * h * elem
                    memory = (f"{mixed[0]['peak_mem_bytes'] / max(1, hor['peak_mem_bytes']):.2f}x" if mixed
                              else '-')
                    roof = f"{100 * xy_bytes / (worst * 1e-3) / (bw * 1e9):.0f}%" if pas == 'fwd' else '-'
                    lines.append(
                        f"| {h} | {k} | {worst:.3f} | {mixed[0]['ms'] if mixed else float('nan'):.3f} | "
                        f"{hor['ms']:.3f} | {d2['ms']:.3f} | "
                        f"{masked[0]['ms'] if masked else float('nan'):.3f} | {worst / hor['ms']:.2f}x | "
                        f"{worst / d2['ms']:.2f}x | {worst / best:.2f} | {roof} | "
                        f"{memory} |")
            lines.append('')
    return '\n'.join(lines)


def readme_table(result: Dict) -> str:
    """Short table: mmo1d's slowest angle against the baselines at K=31, per size and pass."""
    env, recs = result['env'], result['records']
    lines = [f"{env['gpu']}, N={env['batch']}, C={env['channels']}, K=31, ms (ratio to the baseline):", '',
             '| dtype, layout | pass | H | mmo1d, slowest angle | PyTorch 1x31 | PyTorch 7x7 |',
             '|---|---|---|---|---|---|']
    for dtype_name, layout in configs(recs):
        for pas in ('fwd', 'fwdbwd'):
            for h in sorted({r['H'] for r in recs}):
                sel = [r for r in recs if r['dtype'] == dtype_name and r['H'] == h and r['pass'] == pas]
                ours = [r['ms'] for r in sel if r['impl'] == 'mmo1d' and r['layout'] == layout and r['K'] == 31
                        and r['angle_deg'] != MIXED]
                hor = [r['ms'] for r in sel if r['impl'] == 'torch_horizontal' and r['K'] == 31]
                d2 = [r['ms'] for r in sel if r['impl'] == 'torch_2d_7x7' and r['layout'] == layout]
                if not (ours and hor and d2):
                    continue
                worst = max(ours)
                lines.append(f'| {dtype_name}, {layout} | {pas} | {h} | {worst:.2f} | {hor[0]:.2f} '
                             f'({worst / hor[0]:.2f}x) | {d2[0]:.2f} ({worst / d2[0]:.2f}x) |')
    return '\n'.join(lines)
