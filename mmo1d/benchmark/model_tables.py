"""The markdown of the model benchmark (``tools/analysis_tools/benchmark_model.py``): the tables of a
run (throughput, peak memory, kernel time and CUDA graphs against timm's ConvNeXt of the same size),
the README's speed table from one or several results files, and the kernel time ratios the records
keep."""
from typing import Dict, List, Optional

from mmo1d.benchmark.names import by_case, model_size
from mmo1d.benchmark.timing import env_line, round_spread

PASSES = ('infer', 'train')
#: Largest kernels of each case listed in the markdown (the JSON keeps all of ``top_kernels``).
MD_TOP_KERNELS = 5
def summarize(result: Dict) -> str:
    """Markdown: one table per mode, throughput relative to timm's ConvNeXt of the same size; with
    kernel times or CUDA graphs, a second table per mode, the largest kernels and the failed cases."""
    env, recs = result['env'], result['records']
    timm = f"timm {env['timm'] or 'not installed'}"
    lines = [f"# OrientedConvNeXt classifiers on {env['gpu']}", '',
             f"{env_line(env, timm)}; batch {env['batch_size']} at "
             f"{env['img_size']}x{env['img_size']}; {env['rounds']} interleaved rounds over the models of one "
             f"size (every model once per round), each the median of {env['repeats']} steps after warm-up "
             f"({env['warmup']} steps before the first round); the median over rounds is reported.", '',
             f"Command: `{env['command']}`", '',
             'Inference: forward without gradients. Training: forward, cross-entropy, backward, AdamW step. '
             'fp32: float32, NCHW. bf16: bfloat16 autocast, channels_last model and input. fp16: float16 '
             'autocast, channels_last model and input, loss scaled by torch.amp.GradScaler (dynamic, as '
             'mmengine\'s AmpOptimWrapper). Peak memory: torch.cuda.max_memory_allocated over the steps of one '
             'model, mode and pass (weights, AdamW state, activations). '
             '*vs timm*: throughput relative to timm\'s ConvNeXt of the same size in the same mode. '
             '*round spread*: slowest / fastest round of the model and pass.', '']
    has_kernels = any('kernel_ms' in r for r in recs)
    has_graphs = any('graph_ms' in r for r in recs)
    if has_kernels:
        lines += ['*kernel ms*: sum of the GPU self-times of the kernels (and memcpy / memset) of one step as '
                  f"timed above, the mean of {env.get('kernel_steps')} steps under torch.profiler after the last "
                  'round. *kernel vs timm*: that sum relative to timm\'s ConvNeXt of the same size, mode and pass '
                  '(below 1: less GPU time).', '']
    if has_graphs:
        lines += ['*graph img/s*: throughput of the step captured in a CUDA graph (static input; replays timed '
                  'with CUDA events, median over rounds as above). Inference as above; the captured training step '
                  'is forward, cross-entropy and backward only, without the AdamW step and without loss scaling, '
                  'so compare it with the other models\' graph column, not with the training column above. '
                  '*graph vs timm*: relative to timm\'s graph throughput.', '']
    by_key = by_case(recs)
    models = list(dict.fromkeys(r['model'] for r in recs))
    for mode in dict.fromkeys(r['mode'] for r in recs):
        lines += [f'## {mode}', '', '| model | infer img/s | train img/s | infer vs timm | train vs timm | '
                  'infer peak MiB | train peak MiB | round spread infer / train |', '|---|---|---|---|---|---|---|---|']
        for model in models:
            infer, train = by_key.get((model, mode, 'infer')), by_key.get((model, mode, 'train'))
            lines.append(f"| {model} | {_fmt(_get(infer, 'img_per_s'))} | {_fmt(_get(train, 'img_per_s'))} | "
                         f"{_fmt(vs_timm(by_key, infer, 'img_per_s'), digits=2)} | "
                         f"{_fmt(vs_timm(by_key, train, 'img_per_s'), digits=2)} | "
                         f"{_fmt(_get(infer, 'peak_mem_bytes'), 2**20, 0)} | "
                         f"{_fmt(_get(train, 'peak_mem_bytes'), 2**20, 0)} | "
                         f"{_fmt(round_spread(infer or {}), digits=2)} / {_fmt(round_spread(train or {}), digits=2)} |")
        lines.append('')
        if has_kernels or has_graphs:
            lines += [' and '.join(['Kernel time'] * has_kernels + ['CUDA graphs'] * has_graphs) + f' ({mode}):', '']
            lines += steady_table(by_key, models, mode, has_kernels, has_graphs) + ['']
    if any(r.get('top_kernels') for r in recs):
        lines += ['## Largest kernels', '', 'Milliseconds per step and launches per step of the largest kernels '
                  'of each case.', '']
        lines += [f"- {r['model']}, {r['mode']}, {r['pass']}: " + '; '.join(
            f"`{k['name'][:70]}` {k['total_ms'] / r['kernel_steps']:.2f} ms x{k['count'] / r['kernel_steps']:g}"
            for k in r['top_kernels'][:MD_TOP_KERNELS]) for r in recs if r.get('top_kernels')]
        lines.append('')
    failures = [f"- {r['model']}, {r['mode']}, {r['pass']}, {label}: {r[key]}" for r in recs
                for key, label in (('kernel_error', 'kernel times'), ('graph_error', 'CUDA graph')) if r.get(key)]
    if failures:
        lines += ['## Failed cases', ''] + failures + ['']
    return '\n'.join(lines)


def steady_table(by_key: Dict, models: List[str], mode: str, kernels: bool, graphs: bool) -> List[str]:
    """The kernel time and CUDA graph table of one mode (the columns of what was measured)."""
    columns = []  # (header, cell of one record)
    if kernels:
        columns += [('kernel ms', lambda r: _fmt(_get(r, 'kernel_ms'), digits=2)),
                    ('kernel vs timm', lambda r: _fmt(_get(r, 'kernel_ms_vs_timm'), digits=2))]
    if graphs:
        columns += [('graph img/s', lambda r: _fmt(_get(r, 'graph_img_per_s'))),
                    ('graph vs timm', lambda r: _fmt(vs_timm(by_key, r, 'graph_img_per_s'), digits=2))]
    header = [f'{pas} {title}' for title, _ in columns for pas in PASSES]
    lines = ['| model | ' + ' | '.join(header) + ' |', '|---|' + '---|' * len(header)]
    for model in models:
        cells = [cell(by_key.get((model, mode, pas))) for _, cell in columns for pas in PASSES]
        lines.append(f'| {model} | ' + ' | '.join(cells) + ' |')
    return lines


def _get(rec: Optional[Dict], key: str):
    return None if rec is None else rec.get(key)


def _fmt(value, scale=1.0, digits=1):
    return '-' if value is None else f'{value / scale:.{digits}f}'


def timm_name(model: str) -> str:
    """The timm ConvNeXt of the size of a benchmark model ('ConvNeXt-T-1D (mmo1d)', 'timm convnext_base')."""
    return f"timm convnext_{'tiny' if model_size(model) == 'T' else 'base'}"


def vs_timm(by_key: Dict, rec: Optional[Dict], key: str) -> Optional[float]:
    """``rec[key]`` relative to the timm ConvNeXt of the same size, mode and pass (None if either is missing)."""
    if rec is None:
        return None
    base = by_key.get((timm_name(rec['model']), rec['mode'], rec['pass']))
    if not base or not base.get(key) or rec.get(key) is None:
        return None
    return rec[key] / base[key]


def add_kernel_ratios(records: List[Dict]) -> List[Dict]:
    """Set ``kernel_ms_vs_timm`` on every record with a ``kernel_ms`` field: its kernel time over that
    of timm's ConvNeXt of the same size, mode and pass (None where either is missing). Returns ``records``."""
    by_key = by_case(records)
    for rec in records:
        if 'kernel_ms' in rec:
            ratio = vs_timm(by_key, rec, 'kernel_ms')
            rec['kernel_ms_vs_timm'] = None if ratio is None else round(ratio, 4)
    return records


def _sizes(recs: List[Dict]) -> str:
    """The model sizes of some records, as the README names them ('T', 'B')."""
    names = [r['model'] for r in recs if not r['model'].startswith('timm ')]
    return '/'.join(dict.fromkeys(model_size(m) for m in names))


def readme_table(*results: Dict) -> str:
    """The README's speed table: throughput of every mmo1d model relative to timm (infer / train) per
    mode, and its training peak memory relative to timm's; from one results file or several of one
    GPU and batch (e.g. a run per model size), in the order given."""
    env = results[0]['env']
    for other in results[1:]:
        for key in ('gpu', 'batch_size', 'img_size'):
            if other['env'][key] != env[key]:
                raise ValueError(f"results of different runs disagree on {key}: {env[key]!r} and "
                                 f"{other['env'][key]!r}; a README table takes results of one GPU and batch")
    recs = [r for result in results for r in result['records']]
    by_key = by_case(recs)
    modes = list(dict.fromkeys(r['mode'] for r in recs))
    models = [m for m in dict.fromkeys(r['model'] for r in recs) if not m.startswith('timm ')]
    lines = [f"{env['gpu']}, batch {env['batch_size']} at {env['img_size']}x{env['img_size']}, throughput "
             'relative to timm\'s ConvNeXt of the same size (infer / train), training peak memory relative to '
             'timm\'s:', '',
             '| model | ' + ' | '.join(f'{m} infer / train' for m in modes) + ' | train memory '
             + ' / '.join(modes) + ' |', '|---|' + '---|' * (len(modes) + 1)]
    for model in models:
        cells = [' / '.join(_fmt(vs_timm(by_key, by_key.get((model, m, p)), 'img_per_s'), digits=2) for p in PASSES)
                 for m in modes]
        mem = ' / '.join(_fmt(vs_timm(by_key, by_key.get((model, m, 'train')), 'peak_mem_bytes'), digits=2)
                         for m in modes)
        lines.append(f"| {model.replace(' (mmo1d)', '')} | " + ' | '.join(cells) + f' | {mem} |')
    spreads = {m: [round_spread(r) for r in recs if r['mode'] == m] for m in modes}
    cells = [f'{m} {max(v):.2f}' for m, v in spreads.items() if None not in v]
    if cells:
        if len({result['env']['rounds'] for result in results}) == 1:
            rounds = f"the {env['rounds']} rounds"
        else:
            rounds = 'the ' + ' and '.join(f"{result['env']['rounds']} rounds ({_sizes(result['records'])})"
                                           for result in results)
        lines += ['', f'Slowest / fastest of {rounds} of one model and pass, at most: ' + ', '.join(cells) + '.']
    if all(r.get('kernel_ms') for r in recs):
        lines += ['', 'GPU kernel time per step (sum of the profiled steps\' kernel self-times) as a speed relative '
                  'to timm\'s: timm\'s kernel time / ours (above 1: less GPU time than timm):', '',
                  '| model | ' + ' | '.join(f'{m} infer / train' for m in modes) + ' |', '|---|' + '---|' * len(modes)]
        for model in models:
            cells = []
            for m in modes:
                ratios = [vs_timm(by_key, by_key.get((model, m, p)), 'kernel_ms') for p in PASSES]
                cells.append(' / '.join(_fmt(None if r is None else 1.0 / r, digits=2) for r in ratios))
            lines.append(f"| {model.replace(' (mmo1d)', '')} | " + ' | '.join(cells) + ' |')
    return '\n'.join(lines)
