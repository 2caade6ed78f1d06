"""Two builds' classifier runs side by side: the model-level A/B of a kernel change.

``benchmark_model.py`` times the models of one build in one process; a kernel change is judged on the
models by running it once in each build (the earlier tree first on ``PYTHONPATH``; ``gpu.sh models-ab``
does both) and setting the two results files side by side. Summed kernel time is the measure (it holds
steady from run to run where the wall clock of a shared machine does not); each model's wall-clock
median is listed beside it, and timm's ConvNeXt, the same in both builds, shows how far the machine
itself moved between the runs.
"""
from typing import Dict, List, Optional, Tuple

Key = Tuple[str, str, str]


def _by_key(result: Dict) -> Dict[Key, Dict]:
    return {(r['model'], r['mode'], r['pass']): r for r in result['records']}


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
    olds = _by_key(old)
    rows = []
    for key, rec in _by_key(new).items():
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
    return '\n'.join(lines)
