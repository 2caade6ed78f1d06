"""Figures of the committed benchmark results (``benchmarks/results/*.json``).

Two result formats, both ``{'env': {...}, 'records': [...]}``:

- the op benchmark (``tools/analysis_tools/benchmark_op.py``, ``<gpu>.json``): records with ``impl``
  (``mmo1d``, ``torch_horizontal``, ``torch_2d_7x7``, ``masked_2d``), ``dtype``, ``layout``,
  ``pass`` (``fwd`` / ``fwdbwd``), ``H``, ``K``, ``angle_deg`` (degrees, ``'mixed8'`` for the
  models' 8-direction layout, None for the baselines) and ``ms``;
- the model benchmark (``tools/analysis_tools/benchmark_model.py``, ``models_<gpu>.json``): records
  with ``model``, ``mode`` (``fp32`` / ``bf16`` / ``fp16``), ``pass`` (``infer`` / ``train``), ``ms`` and
  ``img_per_s`` (None when the step ran out of memory).

Figures are drawn on :class:`matplotlib.figure.Figure` objects (no pyplot state, no display
needed) and saved at exactly ``figsize * dpi`` pixels.
"""
import json
import os
import os.path as osp
import re
from typing import Dict, List, Optional

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from mmo1d.benchmark.names import by_case, model_size

_OP_ROWS = tuple((dtype, pas) for dtype in ('float32', 'bfloat16', 'float16') for pas in ('fwd', 'fwdbwd'))
_PASS_NAMES = {'fwd': 'forward', 'fwdbwd': 'forward + backward', 'infer': 'inference', 'train': 'training'}
# Where the 8-direction layout of the models is drawn on the angle axis.
_MIXED_X = 195.0
# Bar colours of the model variants (matplotlib's C0..C4).
_VARIANT_COLOUR = {'2D': 0, '1D': 1, '1D++': 2, '2D++': 3}


def save_figure(fig: Figure, path: str, dpi: int = 100) -> None:
    """Write ``fig`` as a PNG of exactly ``figsize * dpi`` pixels, creating its folder."""
    folder = osp.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    fig.savefig(path, dpi=dpi, format='png')


def benchmark_kind(result: Dict) -> Optional[str]:
    """``'op'`` or ``'models'`` for the two plotted result formats, None for any other JSON."""
    records = result.get('records') if isinstance(result, dict) else None
    if not isinstance(records, list) or not records or not isinstance(records[0], dict):
        return None
    if {'impl', 'H', 'K', 'angle_deg', 'ms'} <= set(records[0]):
        return 'op'
    if {'model', 'mode', 'pass', 'img_per_s'} <= set(records[0]):
        return 'models'
    return None


def plot_op_benchmark(result: Dict, path: str, dpi: int = 100) -> Figure:
    """Time per angle of the oriented op against the PyTorch baselines.

    One panel per (dtype, pass) row and plane size H column: for each kernel length K the time of
    mmo1d at every angle (solid, the 8-direction layout of the models as the point at the right)
    and PyTorch's horizontal 1xK depthwise convolution (dashed, same colour); the depthwise 7x7
    convolution in black (dotted). The KxK masked baseline (tens to hundreds of times slower) is
    left out.

    Args:
        result (dict): A loaded op benchmark JSON.
        path (str): PNG to write.
        dpi (int): Resolution. Default: 100.

    Returns:
        Figure: the figure written.
    """
    if benchmark_kind(result) != 'op':
        raise ValueError('plot_op_benchmark needs the JSON of the op benchmark (records with impl, H, K, '
                         'angle_deg, ms)')
    env, recs = result['env'], result['records']
    rows = [(d, p) for d, p in _OP_ROWS if any(r['dtype'] == d and r['pass'] == p for r in recs)]
    sizes = sorted({r['H'] for r in recs})
    kernels = sorted({r['K'] for r in recs if r['impl'] == 'mmo1d'})
    if not rows or not kernels:
        raise ValueError('the op benchmark JSON has no mmo1d records to plot')
    colours = {k: f'C{i}' for i, k in enumerate(kernels)}
    fig = Figure(figsize=(4.2 * len(sizes), 2.8 * len(rows) + 0.9))
    axes = fig.subplots(len(rows), len(sizes), squeeze=False)
    for (dtype, pas), ax_row in zip(rows, axes):
        for h, ax in zip(sizes, ax_row):
            sel = [r for r in recs if r['dtype'] == dtype and r['pass'] == pas and r['H'] == h]
            for k in kernels:
                ours = sorted((r['angle_deg'], r['ms']) for r in sel if r['impl'] == 'mmo1d' and r['K'] == k
                              and isinstance(r['angle_deg'], (int, float)))
                if ours:
                    ax.plot([a for a, _ in ours], [ms for _, ms in ours], 'o-', ms=3, color=colours[k])
                mixed = [r['ms'] for r in sel if r['impl'] == 'mmo1d' and r['K'] == k and r['angle_deg'] == 'mixed8']
                if mixed:
                    ax.plot([_MIXED_X], mixed, 's', ms=4, color=colours[k])
                for r in sel:
                    if r['impl'] == 'torch_horizontal' and r['K'] == k:
                        ax.axhline(r['ms'], ls='--', lw=1, color=colours[k])
            for r in sel:
                if r['impl'] == 'torch_2d_7x7':
                    ax.axhline(r['ms'], ls=':', lw=1.2, color='black')
            layout = next((r['layout'] for r in sel if r['impl'] == 'mmo1d'), '')
            ax.set_title(f'{dtype} {layout}, {_PASS_NAMES[pas]}, H={h}', fontsize=9)
            ax.set_xticks([0, 45, 90, 135, _MIXED_X], ['0', '45', '90', '135', '8 dirs'], fontsize=8)
            ax.set_xlim(-10, _MIXED_X + 10)
            ax.set_ylim(bottom=0)
            ax.tick_params(axis='y', labelsize=8)
            ax.grid(alpha=0.3)
        ax_row[0].set_ylabel('ms', fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel('angle (degrees)', fontsize=9)
    handles = [Line2D([], [], color=colours[k], marker='o', ms=3, label=f'mmo1d 1x{k}') for k in kernels]
    handles += [Line2D([], [], color=colours[k], ls='--', label=f'PyTorch 1x{k} (NCHW)') for k in kernels]
    handles.append(Line2D([], [], color='black', ls=':', label='PyTorch 7x7 (same layout)'))
    fig.legend(handles=handles, loc='lower center', ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"Oriented depthwise 1D convolution on {env.get('gpu', '?')}: N={env.get('batch', '?')}, "
                 f"C={env.get('channels', '?')}, median ms", fontsize=10)
    fig.subplots_adjust(left=0.06, right=0.99, top=1 - 0.7 / fig.get_figheight(),
                        bottom=0.75 / fig.get_figheight(), hspace=0.45, wspace=0.18)
    save_figure(fig, path, dpi)
    return fig


def _model_label(name: str) -> str:
    if name.startswith('timm'):
        return 'timm'
    variant = re.sub(r' \(mmo1d\)$', '', name).split('-', 2)
    return variant[2] if len(variant) > 2 else '2D'


def plot_model_benchmark(result: Dict, path: str, dpi: int = 100) -> Figure:
    """Throughput of the classifiers against timm's ConvNeXt of the same size.

    One panel per pass (rows) and mode (columns); bars of images/s grouped by model size, timm's
    ConvNeXt hatched; above each mmo1d bar its throughput relative to timm's of the same size
    (when timm was timed), "OOM" where the step ran out of memory.

    Args:
        result (dict): A loaded model benchmark JSON.
        path (str): PNG to write.
        dpi (int): Resolution. Default: 100.

    Returns:
        Figure: the figure written.
    """
    if benchmark_kind(result) != 'models':
        raise ValueError('plot_model_benchmark needs the JSON of the model benchmark (records with model, '
                         'mode, pass, img_per_s)')
    env, recs = result['env'], result['records']
    models: List[str] = list(dict.fromkeys(r['model'] for r in recs))
    modes = list(dict.fromkeys(r['mode'] for r in recs))
    passes = [p for p in ('infer', 'train') if any(r['pass'] == p for r in recs)]
    by_key = by_case(recs)
    sizes = list(dict.fromkeys(model_size(m) for m in models))
    xs, x = {}, 0.0
    for size in sizes:
        for m in models:
            if model_size(m) == size:
                xs[m] = x
                x += 1
        x += 0.8
    fig = Figure(figsize=(max(5.0, 0.45 * x + 1.5) * len(modes), 3.0 * len(passes) + 0.8))
    axes = fig.subplots(len(passes), len(modes), squeeze=False)
    for pas, ax_row in zip(passes, axes):
        for mode, ax in zip(modes, ax_row):
            top = 0.0
            for m in models:
                rec = by_key.get((m, mode, pas))
                if rec is None:
                    continue
                timm = m.startswith('timm')
                value = rec['img_per_s']
                if value is None:
                    ax.text(xs[m], 0, 'OOM', ha='center', va='bottom', fontsize=7, rotation=90)
                    continue
                top = max(top, value)
                colour = 'lightgrey' if timm else f'C{_VARIANT_COLOUR.get(_model_label(m), 4)}'
                ax.bar(xs[m], value, width=0.8, color=colour, hatch='//' if timm else None, edgecolor='black',
                       linewidth=0.5)
                base = next((by_key.get((b, mode, pas)) for b in models
                             if b.startswith('timm') and model_size(b) == model_size(m)), None)
                if not timm and base and base['img_per_s']:
                    ax.text(xs[m], value, f"{value / base['img_per_s']:.2f}x", ha='center', va='bottom',
                            fontsize=7)
            ax.set_ylim(0, top * 1.15 if top else 1)
            ax.set_xticks([xs[m] for m in models], [f'{model_size(m)} {_model_label(m)}' for m in models],
                          fontsize=7, rotation=45, ha='right')
            ax.tick_params(axis='y', labelsize=8)
            ax.set_title(f'{mode}, {_PASS_NAMES[pas]}', fontsize=9)
            ax.grid(axis='y', alpha=0.3)
        ax_row[0].set_ylabel('images / s', fontsize=9)
    fig.suptitle(f"Classifiers on {env.get('gpu', '?')}, batch {env.get('batch_size', '?')} at "
                 f"{env.get('img_size', '?')}x{env.get('img_size', '?')} (labels: throughput / timm ConvNeXt)",
                 fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.99, top=1 - 0.7 / fig.get_figheight(),
                        bottom=0.75 / fig.get_figheight(), hspace=0.6, wspace=0.2)
    save_figure(fig, path, dpi)
    return fig



def plot_benchmark_file(json_path: str, dpi: int = 100) -> Optional[str]:
    """Draw the figure of a benchmark JSON next to it (same name, ``.png``).

    Args:
        json_path (str): An op or model benchmark result.
        dpi (int): Resolution. Default: 100.

    Returns:
        str | None: The PNG written, or None if the JSON is of another format.
    """
    with open(json_path) as f:
        result = json.load(f)
    kind = benchmark_kind(result)
    if kind is None:
        return None
    png = osp.splitext(json_path)[0] + '.png'
    (plot_op_benchmark if kind == 'op' else plot_model_benchmark)(result, png, dpi)
    return png
