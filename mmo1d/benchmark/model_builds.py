"""Two builds' classifier runs side by side: the model-level A/B of a kernel change.

``benchmark_model.py`` times the models of one build in one process; a kernel change is judged on the
models by running it once in each build (the earlier tree first on ``PYTHONPATH``; ``gpu.sh models-ab``
does both) and setting the two results files side by side. Summed kernel time is the measure (it holds
steady from run to run where the wall clock of a shared machine does not); each model's wall-clock
median is listed beside it, and timm's ConvNeXt, the same in both builds, shows how far the machine
itself moved between the runs. Where both runs list this project's kernels (``own_kernels``), the
kernels whose time per step moved most are listed for each case: which kernels a change sped up or
slowed down.
"""
from typing import Dict, List, Optional

from .kernels import short_kernel_name
from .names import by_case

#: Kernels listed per case, largest move first.
KERNEL_MOVES = 6
#: Moves smaller than this (milliseconds per step) are not listed.
MIN_MOVE_MS = 0.01


def _ratio(new: Optional[float], old: Optional[float]) -> Optional[float]:
    return None if new is None or not old else new / old


def _cell(value: Optional[float], digits: int) -> str:
    return '-' if value is None else f'{value:.{digits}f}'


def compare_builds(old: Dict, new: Dict) -> List[Dict]:
    """One row per (model, mode, pass) timed in both results: the kernel ms and wall-clock ms of each
    build and their ratios new / old (None where a build has no kernel time). Rows in the order of
    ``new``'s records.

    Raises:
        ValueError: if the two results share no case, or were measured on different GPUs or batches.
    """
    for key in ('gpu', 'batch_size', 'img_size'):
        if old['env'].get(key) != new['env'].get(key):
            raise ValueError(f"the two runs differ in {key}: {old['env'].get(key)!r} against {new['env'].get(key)!r}")
    olds = by_case(old['records'])
    rows = []
    for key, rec in by_case(new['records']).items():
        if key not in olds:
            continue
        was = olds[key]
        rows.append({'model': key[0], 'mode': key[1], 'pass': key[2], 'old_kernel_ms': was.get('kernel_ms'),
                     'new_kernel_ms': rec.get('kernel_ms'), 'kernel_ratio': _ratio(rec.get('kernel_ms'),
                                                                                   was.get('kernel_ms')),
                     'old_ms': was['ms'], 'new_ms': rec['ms'], 'ms_ratio': _ratio(rec['ms'], was['ms'])})
    if not rows:
        raise ValueError('the two runs have no model, mode and pass in common')
    return rows


def _per_step(rec: Dict) -> Dict[str, float]:
    """Milliseconds per step of each of this project's kernels in a record, by short name."""
    out: Dict[str, float] = {}
    for k in rec['own_kernels']:
        name = short_kernel_name(k['name'])
        out[name] = out.get(name, 0.0) + k['total_ms'] / rec['kernel_steps']
    return out


def kernel_moves(old: Dict, new: Dict, top: int = KERNEL_MOVES) -> List[Dict]:
    """For each case whose records in both runs list this project's kernels, the ``top`` kernels
    whose milliseconds per step moved most (at least :data:`MIN_MOVE_MS`), largest move first; a
    kernel that one build does not launch counts 0 there. Rows of ``model``, ``mode``, ``pass``,
    ``kernel`` (:func:`~mmo1d.benchmark.kernels.short_kernel_name`), ``old_ms``, ``new_ms`` and
    ``delta_ms``, cases in the order of ``new``'s records."""
    olds = by_case(old['records'])
    rows = []
    for key, rec in by_case(new['records']).items():
        was = olds.get(key)
        if was is None or 'own_kernels' not in rec or 'own_kernels' not in was:
            continue
        a, b = _per_step(was), _per_step(rec)
        moves = [(name, a.get(name, 0.0), b.get(name, 0.0)) for name in dict.fromkeys([*a, *b])]
        moves = [m for m in moves if abs(m[2] - m[1]) >= MIN_MOVE_MS]
        moves.sort(key=lambda m: -abs(m[2] - m[1]))
        rows += [{'model': key[0], 'mode': key[1], 'pass': key[2], 'kernel': name, 'old_ms': o, 'new_ms': n,
                  'delta_ms': n - o} for name, o, n in moves[:top]]
    return rows


def summarize_builds(old: Dict, new: Dict) -> str:
    """The markdown of :func:`compare_builds`, headed by both runs' commits, dates and commands."""
    rows = compare_builds(old, new)
    lines = [f"# Two builds of the classifiers on {new['env']['gpu']}", '']
    for name, result in (('old', old), ('new', new)):
        env = result['env']
        lines.append(f"- {name}: commit {env.get('commit', 'unknown')}, {env.get('date', '')}: "
                     f"`{env.get('command', '')}`")
    lines += ['', '*kernel ms*: the summed GPU time of one step\'s kernels (benchmark_model.py --kernel-times); '
              '*ms*: the median step of the wall clock. timm\'s ConvNeXt runs the same code in both builds: '
              'its ratios are how far the machine moved between the runs.', '',
              '| model | mode | pass | old kernel ms | new kernel ms | new / old | old ms | new ms | new / old |',
              '|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['model']} | {r['mode']} | {r['pass']} | {_cell(r['old_kernel_ms'], 2)} | "
                     f"{_cell(r['new_kernel_ms'], 2)} | {_cell(r['kernel_ratio'], 3)} | {r['old_ms']:.2f} | "
                     f"{r['new_ms']:.2f} | {_cell(r['ms_ratio'], 3)} |")
    moves = kernel_moves(old, new)
    if moves:
        lines += ['', f'Our kernels that moved most (ms per step, at most {KERNEL_MOVES} a case; a kernel one build '
                  'does not launch reads 0 there):', '',
                  '| model | mode | pass | kernel | old ms | new ms | new - old |', '|---|---|---|---|---|---|---|']
        lines += [f"| {r['model']} | {r['mode']} | {r['pass']} | `{r['kernel']}` | {r['old_ms']:.3f} | "
                  f"{r['new_ms']:.3f} | {r['delta_ms']:+.3f} |" for r in moves]
    return '\n'.join(lines)
