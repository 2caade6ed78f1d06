"""Data-parallel scaling of the downstream recipes: the summary of ``.dev_scripts/gpu_downstream.sh
OUT_DIR scaling``.

For each model (``seg``: UperNet, ``det``: Cascade Mask R-CNN) and each GPU count ``n`` the script
trains, at 2 images per GPU, with ``randomness.seed=0`` and the sampler's seed 0:

- ``1gpu-b2``: 1 GPU, alone on the machine: the throughput baseline;
- ``{n}gpu-b2``: ``n`` GPUs, the recipe as it is (SyncBN in the heads);
- ``{n}gpu-b2-bn``: the same with the heads' ``norm_cfg`` switched to plain BN, which shows what
  synchronising the statistics costs;
- ``1gpu-b{2n}``: 1 GPU with the ``n``-GPU run's total batch and data order (the sampler gives rank
  ``r`` the ``r``-th of every ``n`` indices), the reference of the loss check;
- ``1gpu-b{2n}-order2``: the same with sampler seed 1: another data order, the noise of that check.

Reads ``OUT/work/MODEL/RUN/train/<timestamp>/vis_data/scalars.json`` and ``train.log`` and writes
``OUT/scaling_t1dpp_<machine>.json`` and ``.md`` (the names of ``benchmarks/results``, e.g.
``scaling_t1dpp_h200x4``)::

    python -m mmo1d.benchmark.scaling OUT --iters 40 --counts 1 2 4
"""
import argparse
import json
import re
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.run_logs import environment, train_records, world_size

MODELS = {'seg': 'UperNet T-1D++ (512x512, AMP)', 'det': 'Cascade Mask R-CNN T-1D++ (multi-scale, AMP)'}
IMAGES_PER_GPU = 2
_NAME = re.compile(r'^(\d+)gpu-b(\d+)(-bn|-order2)?$')


def run_names(counts: Sequence[int]) -> List[str]:
    """Every run the summary of ``counts`` reads, in the order the script trains them."""
    names = [f'1gpu-b{IMAGES_PER_GPU}']
    for n in sorted(set(counts) - {1}):
        total = n * IMAGES_PER_GPU
        names += [f'{n}gpu-b{IMAGES_PER_GPU}', f'{n}gpu-b{IMAGES_PER_GPU}-bn',
                  f'1gpu-b{total}', f'1gpu-b{total}-order2']
    return names


def check_counts(counts: Sequence[int]) -> List[int]:
    """``counts`` sorted, each once, with 1 (the baseline) included.

    Raises:
        ValueError: for a count below 1.
    """
    bad = [n for n in counts if n < 1]
    if bad:
        raise ValueError(f'GPU counts must be at least 1, got {bad}')
    return sorted(set(counts) | {1})


def run_summary(work: Path, name: str) -> Dict:
    """Iteration time (median of the windows after the first, which holds the warm-up), its range,
    throughput, peak memory, the processes, and the mean loss of the second half of the windows."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f'not a scaling run name: {name!r} (expected e.g. 2gpu-b2, 2gpu-b2-bn, 1gpu-b4-order2)')
    gpus, images_per_gpu = int(match.group(1)), int(match.group(2))
    records = train_records(work / 'train')
    steady = records[1:] or records
    late = records[len(records) // 2:]
    memory = [r['memory'] for r in records if 'memory' in r]
    processes = world_size(work / 'train.log')
    if processes is not None and processes != gpus:
        raise ValueError(f'{work}: run {name} should have {gpus} processes, its log reports {processes}')
    time = statistics.median(r['time'] for r in steady)
    return dict(
        name=name,
        processes=processes,
        images_per_gpu=images_per_gpu,
        iter_time_s_median=time,
        iter_time_s_spread=[min(r['time'] for r in steady), max(r['time'] for r in steady)],
        images_per_s=images_per_gpu * gpus / time,
        max_memory_mb=max(memory) if memory else None,
        late_loss_mean=statistics.fmean(r['loss'] for r in late),
        late_iterations=[late[0]['step'], late[-1]['step']],
        final_loss=records[-1]['loss'],
    )


def count_summary(runs: Dict[str, Dict], n: int) -> Dict:
    """The figures of ``n`` GPUs against 1 GPU, from the runs of one model."""
    base = runs[f'1gpu-b{IMAGES_PER_GPU}']
    if n == 1:
        return dict(gpus=1, per_gpu_throughput_ratio=1.0, max_memory_mb=base['max_memory_mb'])
    total = n * IMAGES_PER_GPU
    sync, plain = runs[f'{n}gpu-b{IMAGES_PER_GPU}'], runs[f'{n}gpu-b{IMAGES_PER_GPU}-bn']
    ref, other = runs[f'1gpu-b{total}'], runs[f'1gpu-b{total}-order2']
    loss_gap = abs(sync['late_loss_mean'] - ref['late_loss_mean'])
    order_noise = abs(ref['late_loss_mean'] - other['late_loss_mean'])
    return dict(
        gpus=n,
        # Per GPU, at 2 images per GPU on either side.
        per_gpu_throughput_ratio=sync['images_per_s'] / n / base['images_per_s'],
        per_gpu_throughput_ratio_bn_heads=plain['images_per_s'] / n / base['images_per_s'],
        # The share of the recipe's iteration that synchronising the heads' statistics takes.
        syncbn_share_of_iteration=1.0 - plain['iter_time_s_median'] / sync['iter_time_s_median'],
        max_memory_mb=sync['max_memory_mb'],
        max_memory_mb_bn_heads=plain['max_memory_mb'],
        loss_gap_vs_1gpu_same_batch=loss_gap,
        loss_gap_between_data_orders=order_noise,
        loss_within_data_order_noise=loss_gap <= order_noise,
        late_loss_syncbn=sync['late_loss_mean'],
        late_loss_bn_heads=plain['late_loss_mean'],
    )


def summarize(out: Path, iters: int, counts: Sequence[int], models: Sequence[str] = tuple(MODELS)) -> Dict:
    """The summary of the runs of ``models`` at ``counts`` under ``out`` (see the module docstring).

    Raises:
        FileNotFoundError: naming the run folder that is missing.
    """
    counts = check_counts(counts)
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        raise ValueError(f'unknown models {unknown}; known: {sorted(MODELS)}')
    summary_models = {}
    for model in models:
        runs = {name: run_summary(out / 'work' / model / name, name) for name in run_names(counts)}
        summary_models[model] = dict(description=MODELS[model], counts=[count_summary(runs, n) for n in counts],
                                     runs=runs)
    return dict(
        **environment(),
        gpus_seen=torch.cuda.device_count(),
        command=f'bash .dev_scripts/gpu_downstream.sh OUT_DIR scaling (GPU_COUNTS="{" ".join(map(str, counts))}")',
        iterations=iters,
        gpu_counts=counts,
        models=summary_models,
    )


def _fmt(value: Optional[float], spec: str) -> str:
    return '' if value is None else format(value, spec)


def markdown(summary: Dict) -> str:
    """The summary as a markdown page: the figures per GPU count, then every run."""
    lines = [
        f'# Data-parallel scaling on {summary["device"]}',
        '',
        f'`{summary["command"]}` at commit {summary["commit"][:7]}: torch {summary["torch"]}, CUDA '
        f'{summary["cuda"]}, mmengine {summary["mmengine"]}, mmdet {summary["mmdet"]}, mmseg {summary["mmseg"]}; '
        f'{summary["iterations"]} iterations per run on the demo data at {IMAGES_PER_GPU} images per GPU; '
        'iteration times are medians of the logged windows after the first (warm-up); memory is the '
        'logged peak of rank 0. "BN heads": the same run with the heads\' `norm_cfg` switched from '
        'SyncBN to BN. The loss check compares the mean loss of the second half of the windows with a '
        '1-GPU run of the same total batch and data order, against the gap between two data orders of '
        'that 1-GPU run (rank 0 logs the loss of its own images only).',
        '',
        '| model | GPUs | per-GPU throughput vs 1 GPU | with BN heads | SyncBN share of the iteration | '
        'peak memory (MB) | loss gap vs 1 GPU, same batch | gap between data orders |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for m in summary['models'].values():
        for c in m['counts']:
            lines.append(
                f'| {m["description"]} | {c["gpus"]} | {c["per_gpu_throughput_ratio"]:.3f} | '
                f'{_fmt(c.get("per_gpu_throughput_ratio_bn_heads"), ".3f")} | '
                f'{_fmt(c.get("syncbn_share_of_iteration"), ".1%")} | {c["max_memory_mb"]} | '
                f'{_fmt(c.get("loss_gap_vs_1gpu_same_batch"), ".4f")} | '
                f'{_fmt(c.get("loss_gap_between_data_orders"), ".4f")} |')
    lines += ['', '| model | run | processes | images / GPU | s / iter (range) | images / s | peak memory (MB) | '
              'mean loss, 2nd half |', '|---|---|---|---|---|---|---|---|']
    for m in summary['models'].values():
        for r in m['runs'].values():
            lo, hi = r['iter_time_s_spread']
            lines.append(f'| {m["description"]} | {r["name"]} | {r["processes"]} | {r["images_per_gpu"]} | '
                         f'{r["iter_time_s_median"]:.3f} ({lo:.3f}-{hi:.3f}) | {r["images_per_s"]:.1f} | '
                         f'{r["max_memory_mb"]} | {r["late_loss_mean"]:.4f} |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out', type=Path, help='OUT_DIR of gpu_downstream.sh scaling')
    parser.add_argument('--iters', type=int, required=True, help='training iterations of each run')
    parser.add_argument('--counts', type=int, nargs='+', required=True, help='the GPU counts that were run')
    parser.add_argument('--models', nargs='+', default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args(argv)
    summary = summarize(args.out, args.iters, args.counts, args.models)
    gpus = max(summary['gpu_counts']) if summary['device'] != 'cpu' else 1
    stem = results_stem('scaling', 't1dpp', tag=machine_tag(summary['device'], gpus))
    (args.out / f'{stem}.json').write_text(json.dumps(summary, indent=2) + '\n')
    text = markdown(summary)
    (args.out / f'{stem}.md').write_text(text)
    print(text)
    return summary


if __name__ == '__main__':
    main()
