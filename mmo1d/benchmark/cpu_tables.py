"""Markdown of the CPU op benchmark (:func:`mmo1d.benchmark.op_baselines.run_cpu`) and its results file,
which keeps each run under a label (e.g. ``before`` and ``after`` a kernel change)."""
import json
import os.path as osp
from typing import Dict, List

from .op_baselines import BASELINE_PASSES
from .op_inputs import LAYOUTS, MIXED


def _single_angles(recs: List[Dict]) -> List[float]:
    return sorted({r['angle_deg'] for r in recs if r['impl'] == 'mmo1d' and r['angle_deg'] != MIXED})


def _find(recs: List[Dict], **kw) -> List[Dict]:
    return [r for r in recs if all(r[k] == v for k, v in kw.items())]


def run_table(result: Dict) -> List[str]:
    """Markdown table of one run: times in ms and the ratios of mmo1d to PyTorch's 1xK conv."""
    recs = result['records']
    single = _single_angles(recs)
    heads = [f'{a:g} deg' for a in single] + [MIXED]
    lines = ['| layout | pass | K | PyTorch 1xK | ' + ' | '.join(heads) + ' | slowest / PyTorch | mixed8 / PyTorch |',
             '|---|---|---|---|' + '---|' * len(heads) + '---|---|']
    for layout in LAYOUTS:
        for pas in BASELINE_PASSES:
            for k in sorted({r['K'] for r in recs}):
                base = _find(recs, impl='torch_horizontal', layout=layout, K=k, **{'pass': pas})
                if not base:
                    continue
                ref = base[0]['ms']
                ours = {r['angle_deg']: r['ms'] for r in _find(recs, impl='mmo1d', layout=layout, K=k, **{'pass': pas})}
                worst = max(ours[a] for a in single)
                cells = ' | '.join(f'{ours[a]:.2f}' for a in single + [MIXED])
                lines.append(f'| {layout} | {pas} | {k} | {ref:.2f} | {cells} | {worst / ref:.2f}x | '
                             f"{ours[MIXED] / ref:.2f}x |")
    return lines


def change_table(first: Dict, last: Dict) -> List[str]:
    """Markdown table: the slowest angle and mixed8 of the first run against the last, with their ratios."""
    lines = ['| layout | pass | K | slowest angle, ms | slowest / PyTorch | mixed8, ms | mixed8 / PyTorch |',
             '|---|---|---|---|---|---|---|']

    def stats(result, layout, pas, k):
        recs = result['records']
        ref = _find(recs, impl='torch_horizontal', layout=layout, K=k, **{'pass': pas})[0]['ms']
        ours = {r['angle_deg']: r['ms'] for r in _find(recs, impl='mmo1d', layout=layout, K=k, **{'pass': pas})}
        worst = max(ours[a] for a in _single_angles(recs))
        return worst, worst / ref, ours[MIXED], ours[MIXED] / ref

    for layout in LAYOUTS:
        for pas in BASELINE_PASSES:
            for k in sorted({r['K'] for r in last['records']}):
                if not (_find(first['records'], layout=layout, K=k, **{'pass': pas})
                        and _find(last['records'], layout=layout, K=k, **{'pass': pas})):
                    continue
                a, b = stats(first, layout, pas, k), stats(last, layout, pas, k)
                lines.append(f'| {layout} | {pas} | {k} | {a[0]:.2f} -> {b[0]:.2f} | {a[1]:.2f}x -> {b[1]:.2f}x | '
                             f'{a[2]:.2f} -> {b[2]:.2f} | {a[3]:.2f}x -> {b[3]:.2f}x |')
    return lines


def summarize(runs: Dict[str, Dict]) -> str:
    """Markdown of every run of a results file (in the order they were added), then first -> last."""
    labels = list(runs)
    env = runs[labels[-1]]['env']
    lines = [f"# Oriented depthwise 1D convolution on the CPU: {env['cpu']}", '',
             f"N={env['batch']}, C={env['channels']}, {env['size']}x{env['size']}, {env['dtype']}; "
             f"median of {env['repeats']} calls in {env['rounds']} interleaved rounds (wall clock). "
             'Times in ms. *PyTorch 1xK* = PyTorch\'s depthwise conv2d with a (1, K) kernel in the same layout '
             'and dtype; *slowest* = slowest of the single angles; *mixed8* = the 8-direction layout of the '
             'models. fwdbwd = forward + input and weight gradients.', '']
    if len(labels) > 1:
        lines += [f'## Change: {labels[0]} -> {labels[-1]}', ''] + change_table(runs[labels[0]], runs[labels[-1]])
        lines.append('')
    for label in labels:
        e = runs[label]['env']
        lines += [f'## {label}', '',
                  f"{e['cpu']}, {e['threads']} threads, torch {e['torch']} (CPU capability {e['cpu_capability']}), "
                  f"commit {e['git_commit']}, {e['date']}.", '', f"Command: `{e['command']}`", '']
        lines += run_table(runs[label]) + ['']
    return '\n'.join(lines)


def check_same_cpu(stem: str, label: str, cpu: str) -> None:
    """Refuse to add a run on ``cpu`` under ``label`` to ``<stem>.json`` if the file holds a run under
    another label on another CPU model: the runs of a file are compared with each other.

    Raises:
        ValueError: naming the file, its runs' CPUs and this one.
    """
    if not osp.exists(stem + '.json'):
        return
    with open(stem + '.json') as f:
        runs = json.load(f)['runs']
    others = {name: run['env']['cpu'] for name, run in runs.items() if name != label and run['env']['cpu'] != cpu}
    if others:
        held = ', '.join(f'{name} on {model}' for name, model in others.items())
        raise ValueError(f'{stem}.json holds runs on another CPU ({held}); this run is on {cpu}: give another '
                         '--out-dir or --config-name, or remove the file')


def add_run(stem: str, label: str, result: Dict) -> Dict[str, Dict]:
    """Store ``result`` under ``label`` in ``<stem>.json`` (a label run again replaces its run and moves
    last) and write ``<stem>.md`` from every run of the file; return the runs.

    Raises:
        ValueError: if the file holds a run on another CPU model (:func:`check_same_cpu`; the file is
            not changed).
    """
    check_same_cpu(stem, label, result['env']['cpu'])
    runs: Dict[str, Dict] = {}
    if osp.exists(stem + '.json'):
        with open(stem + '.json') as f:
            runs = json.load(f)['runs']
    runs.pop(label, None)
    runs[label] = result
    with open(stem + '.json', 'w') as f:
        json.dump({'runs': runs}, f, indent=1)
    with open(stem + '.md', 'w') as f:
        f.write(summarize(runs) + '\n')
    return runs
