"""Summarise ``gpu_scaling.sh``: per model, the per-GPU throughput of 2 GPUs against 1, peak memory,
and the loss check of the 2-GPU run against a 1-GPU run with the same total batch and data order.

Reads ``OUT/work/MODEL/RUN/train/<timestamp>/vis_data/scalars.json`` and ``train.log`` of the runs
1gpu-b2, 2gpu-b2, 1gpu-b4 and 1gpu-b4-order2 of the models seg and det, and writes
``OUT/scaling.json`` and ``OUT/scaling.md``::

    python .dev_scripts/summarize_scaling.py OUT --iters 40
"""
import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from summarize_downstream import latest_run, source_commit, versions, world_size  # noqa: E402

MODELS = {'seg': 'UperNet T-1D++ (512x512, AMP)', 'det': 'Cascade Mask R-CNN T-1D++ (multi-scale, AMP)'}
RUNS = ('1gpu-b2', '2gpu-b2', '1gpu-b4', '1gpu-b4-order2')
IMAGES_PER_GPU = {'1gpu-b2': 2, '2gpu-b2': 2, '1gpu-b4': 4, '1gpu-b4-order2': 4}


def train_records(work: Path) -> List[Dict]:
    """The logged training windows (those with a loss) of the newest run in ``work/train``."""
    lines = (latest_run(work / 'train') / 'vis_data' / 'scalars.json').read_text().splitlines()
    records = [r for r in map(json.loads, lines) if 'loss' in r]
    if not records:
        raise ValueError(f'no training record with a loss under {work}/train')
    return records


def run_summary(work: Path, name: str) -> Dict:
    """Iteration time (median of the windows after the first, which holds the warm-up), peak
    memory, the processes, and the mean loss of the second half of the windows."""
    records = train_records(work)
    steady = records[1:] or records
    late = records[len(records) // 2:]
    memory = [r['memory'] for r in records if 'memory' in r]
    processes = world_size(work / 'train.log')
    time = statistics.median(r['time'] for r in steady)
    images = IMAGES_PER_GPU[name] * (processes or 1)
    return dict(
        name=name,
        processes=processes,
        images_per_gpu=IMAGES_PER_GPU[name],
        iter_time_s_median=time,
        iter_time_s_spread=[min(r['time'] for r in steady), max(r['time'] for r in steady)],
        images_per_s=images / time,
        max_memory_mb=max(memory) if memory else None,
        late_loss_mean=statistics.fmean(r['loss'] for r in late),
        late_iterations=[late[0]['step'], late[-1]['step']],
        final_loss=records[-1]['loss'],
    )


def model_summary(runs: Dict[str, Dict]) -> Dict:
    """The figures of one model from its four runs."""
    one, two = runs['1gpu-b2'], runs['2gpu-b2']
    ref, other = runs['1gpu-b4'], runs['1gpu-b4-order2']
    # Per-GPU throughput of 2 GPUs relative to 1 GPU, both at 2 images per GPU.
    per_gpu_ratio = (two['images_per_s'] / 2) / one['images_per_s']
    loss_gap = abs(two['late_loss_mean'] - ref['late_loss_mean'])
    order_noise = abs(ref['late_loss_mean'] - other['late_loss_mean'])
    return dict(
        per_gpu_throughput_ratio=per_gpu_ratio,
        meets_0_90=per_gpu_ratio >= 0.90,
        loss_gap_2gpu_vs_1gpu_same_batch=loss_gap,
        loss_gap_between_data_orders=order_noise,
        loss_within_data_order_noise=loss_gap <= order_noise,
        runs=runs,
    )


def summarize(out: Path, iters: int) -> Dict:
    models = {}
    for model in MODELS:
        runs = {name: run_summary(out / 'work' / model / name, name) for name in RUNS}
        models[model] = dict(description=MODELS[model], **model_summary(runs))
    commit = source_commit()
    return dict(
        device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu',
        gpus_seen=torch.cuda.device_count(),
        torch=torch.__version__,
        cuda=torch.version.cuda,
        **versions(),
        commit=commit,
        command='bash .dev_scripts/gpu_scaling.sh OUT_DIR',
        iterations=iters,
        models=models,
    )


def markdown(summary: Dict) -> str:
    lines = [
        f'# Data-parallel scaling on {summary["device"]} ({summary["gpus_seen"]} GPUs)',
        '',
        f'`{summary["command"]}` at commit {summary["commit"][:7]}: torch {summary["torch"]}, CUDA '
        f'{summary["cuda"]}, mmengine {summary["mmengine"]}, mmdet {summary["mmdet"]}, mmseg {summary["mmseg"]}; '
        f'{summary["iterations"]} iterations per run on the demo data, logged every 5; iteration times are '
        'medians of the windows after the first (warm-up); memory is the logged peak of rank 0.',
        '',
        '| model | run | processes | images / GPU | s / iter (range) | images / s | peak memory (MB) | '
        'mean loss, 2nd half |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for m in summary['models'].values():
        for r in m['runs'].values():
            lo, hi = r['iter_time_s_spread']
            lines.append(f'| {m["description"]} | {r["name"]} | {r["processes"]} | {r["images_per_gpu"]} | '
                         f'{r["iter_time_s_median"]:.3f} ({lo:.3f}-{hi:.3f}) | {r["images_per_s"]:.1f} | '
                         f'{r["max_memory_mb"]} | {r["late_loss_mean"]:.4f} |')
    lines += ['', '| model | per-GPU throughput, 2 GPUs / 1 GPU | loss gap, 2 GPUs vs 1 GPU at 4 images | '
              'loss gap between two data orders (1 GPU, 4 images) |', '|---|---|---|---|']
    for m in summary['models'].values():
        lines.append(f'| {m["description"]} | {m["per_gpu_throughput_ratio"]:.3f} | '
                     f'{m["loss_gap_2gpu_vs_1gpu_same_batch"]:.4f} | {m["loss_gap_between_data_orders"]:.4f} |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out', type=Path, help='OUT_DIR of gpu_scaling.sh')
    parser.add_argument('--iters', type=int, required=True, help='training iterations of each run')
    args = parser.parse_args(argv)
    summary = summarize(args.out, args.iters)
    (args.out / 'scaling.json').write_text(json.dumps(summary, indent=2) + '\n')
    text = markdown(summary)
    (args.out / 'scaling.md').write_text(text)
    print(text)
    return summary


if __name__ == '__main__':
    main()
