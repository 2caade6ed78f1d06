"""Throughput and peak memory of the OrientedConvNeXt classifiers against timm's ConvNeXt.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023), built
from ``configs/mmpretrain`` (mmpretrain ImageClassifier: backbone, final norm, linear head), and
timm's ``convnext_tiny`` / ``convnext_base`` with the same stochastic depth as the baseline, timed in
the same process. For every model: inference (no grad) and a training step (forward,
cross-entropy, backward, AdamW step), in float32 (NCHW), in bfloat16 autocast and in float16
autocast, both with channels_last model and input; float16 training scales the loss with
``torch.amp.GradScaler`` (dynamic scale), as mmengine's ``AmpOptimWrapper`` does in the float16 AMP
of mmdet's and mmseg's configs. Times: CUDA events (or ``perf_counter`` on CPU), warm-up, median of repeats. The
models of one size are timed in interleaved rounds (every model once per round) and each reports
the median over rounds, so that a slow phase of a shared GPU affects the baseline and the models
alike. Throughput in images/s; peak memory with ``torch.cuda.max_memory_allocated`` (reset before
each model, mode and pass; weights, optimizer state and activations). Writes
``<out-dir>/models_<gpu>.json`` and ``.md`` with the environment and the command, and the figure ``.png``.

Examples::

    python tools/analysis_tools/benchmark_model.py      # T and B, batch 64 at 224, on the GPU
    python tools/analysis_tools/benchmark_model.py --device cpu --batch-size 2 --img-size 64 --archs tiny \\
        --repeats 2 --rounds 1
"""
import argparse
import importlib
import json
import os
import os.path as osp
import platform
import statistics
import time
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from mmo1d.analysis.plots import plot_model_benchmark
from mmo1d.benchmark.classifiers import (
    LOSS_SCALED_MODES,
    MODES,
    VARIANTS,
    build_classifier,
    display_name,
    drop_path_rate,
)
from mmo1d.benchmark.timing import command_line, nvidia_driver, round_spread, utc_now
from mmo1d.utils.quiet import quiet_upstream

CONFIG_DIR = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs', 'mmpretrain')
PASSES = ('infer', 'train')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cuda', help='cuda (default) or cpu (a smoke test)')
    parser.add_argument('--archs', nargs='+', default=['tiny', 'base'], choices=('tiny', 'base'))
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument('--modes', nargs='+', default=list(MODES), choices=list(MODES))
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--repeats', type=int, default=10, help='timed steps per round (their median)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='interleaved rounds over the models of one size (median over rounds reported)')
    parser.add_argument('--warmup', type=int,
                        help='untimed steps before the first round (default: 10 on GPU, 1 on CPU); 3 before later '
                        'rounds, at most this')
    parser.add_argument('--no-timm', action='store_true', help='skip the timm ConvNeXt baseline')
    parser.add_argument('--out-dir', default='benchmarks/results')
    parser.add_argument('--readme-table', metavar='JSON',
                        help='print the README speed table of a results file and exit')
    parser.add_argument('--summarize', metavar='JSON', help='print the markdown summary of a results file and exit')
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error('--rounds and --repeats must be >= 1')
    if args.warmup is None:
        args.warmup = 1 if args.device == 'cpu' else 10
    return args


class Timer:
    """Median milliseconds of a step: CUDA events on a GPU, ``perf_counter`` on the CPU."""

    def __init__(self, device: torch.device, repeats: int, warmup: int) -> None:
        self.device, self.repeats, self.warmup = device, repeats, warmup

    def __call__(self, step: Callable[[], None]) -> float:
        for _ in range(self.warmup):
            step()
        times = []
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            for _ in range(self.repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(self.repeats):
                start = time.perf_counter()
                step()
                times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)


def measure(name: str, model: nn.Module, args: argparse.Namespace, device: torch.device,
            warmup: int) -> List[Dict]:
    """Inference and training step time and peak memory of one model in every mode (one round)."""
    timer = Timer(device, args.repeats, warmup)
    records = []
    for mode in args.modes:
        dtype, memory_format = MODES[mode]
        model.to(device, memory_format=memory_format)
        x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
        x = x.contiguous(memory_format=memory_format)
        y = torch.randint(0, 1000, (args.batch_size, ), device=device)
        for pas in PASSES:
            model.train(pas == 'train')
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4) if pas == 'train' else None
            scaler = torch.amp.GradScaler(device.type) if optimizer and mode in LOSS_SCALED_MODES else None

            def step(x=x, y=y, optimizer=optimizer, scaler=scaler, dtype=dtype) -> None:
                with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    if optimizer is None:
                        with torch.no_grad():
                            model(x)
                        return
                    loss = F.cross_entropy(model(x).float(), y)
                optimizer.zero_grad(set_to_none=True)
                if scaler is None:
                    loss.backward()
                    optimizer.step()
                else:
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()

            if device.type == 'cuda':
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            try:
                ms = timer(step)
            except torch.cuda.OutOfMemoryError:
                ms = None
            peak = torch.cuda.max_memory_allocated(device) if device.type == 'cuda' else None
            record = dict(model=name, mode=mode, **{'pass': pas}, ms=ms, peak_mem_bytes=peak)
            if scaler is not None:
                record['loss_scale'] = scaler.get_scale()
            records.append(record)
            print(f"{name:26s} {mode:5s} {pas:5s} "
                  + ('out of memory' if ms is None else f'{ms:9.2f} ms {args.batch_size / (ms * 1e-3):9.1f} img/s')
                  + ('' if peak is None else f'  peak {peak / 2**20:9.1f} MiB'), flush=True)
            del optimizer, scaler, step
            model.zero_grad(set_to_none=True)
    # Off the device between measurements: the next model's peak memory must not include this one.
    model.to('cpu')
    return records


def env_info(args: argparse.Namespace, device: torch.device, timm_version: Optional[str]) -> Dict:
    cuda = device.type == 'cuda'
    return {
        'gpu': torch.cuda.get_device_name(device) if cuda else 'cpu', 'driver': nvidia_driver() if cuda else None,
        'torch': torch.__version__, 'cuda': torch.version.cuda,
        'cudnn': torch.backends.cudnn.version() if cuda else None, 'timm': timm_version,
        'python': platform.python_version(), 'cpu_threads': torch.get_num_threads(),
        'tf32_matmul': torch.backends.cuda.matmul.allow_tf32, 'tf32_cudnn': torch.backends.cudnn.allow_tf32,
        'date': utc_now(), 'command': command_line(),
        'batch_size': args.batch_size, 'img_size': args.img_size, 'repeats': args.repeats,
        'rounds': args.rounds, 'warmup': args.warmup,
    }


def summarize(result: Dict) -> str:
    """Markdown: one table per mode, throughput relative to timm's ConvNeXt of the same size."""
    env, recs = result['env'], result['records']
    lines = [f"# OrientedConvNeXt classifiers on {env['gpu']}", '',
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, driver {env['driver']}, "
             f"timm {env['timm'] or 'not installed'}, {env['date']}; batch {env['batch_size']} at "
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
    by_key = {(r['model'], r['mode'], r['pass']): r for r in recs}
    models = list(dict.fromkeys(r['model'] for r in recs))
    for mode in dict.fromkeys(r['mode'] for r in recs):
        lines += [f'## {mode}', '', '| model | infer img/s | train img/s | infer vs timm | train vs timm | '
                  'infer peak MiB | train peak MiB | round spread infer / train |', '|---|---|---|---|---|---|---|---|']
        for model in models:
            infer, train = by_key[model, mode, 'infer'], by_key[model, mode, 'train']
            lines.append(f"| {model} | {_fmt(infer['img_per_s'])} | {_fmt(train['img_per_s'])} | "
                         f"{_fmt(vs_timm(by_key, infer, 'img_per_s'), digits=2)} | "
                         f"{_fmt(vs_timm(by_key, train, 'img_per_s'), digits=2)} | "
                         f"{_fmt(infer['peak_mem_bytes'], 2**20, 0)} | {_fmt(train['peak_mem_bytes'], 2**20, 0)} | "
                         f"{_fmt(round_spread(infer), digits=2)} / {_fmt(round_spread(train), digits=2)} |")
        lines.append('')
    return '\n'.join(lines)


def _fmt(value, scale=1.0, digits=1):
    return '-' if value is None else f'{value / scale:.{digits}f}'


def timm_name(model: str) -> str:
    """The timm ConvNeXt of the size of a benchmark model ('ConvNeXt-T-1D (mmo1d)', 'timm convnext_base')."""
    size = model.split('-')[1][0] if model.startswith('ConvNeXt-') else model.split('_')[-1][0].upper()
    return f"timm convnext_{'tiny' if size == 'T' else 'base'}"


def vs_timm(by_key: Dict, rec: Dict, key: str) -> Optional[float]:
    """``rec[key]`` relative to the timm ConvNeXt of the same size, mode and pass (None if either is missing)."""
    base = by_key.get((timm_name(rec['model']), rec['mode'], rec['pass']))
    if not base or not base.get(key) or rec.get(key) is None:
        return None
    return rec[key] / base[key]


def readme_table(result: Dict) -> str:
    """The README's speed table: throughput of every mmo1d model relative to timm (infer / train) per
    mode, and its training peak memory relative to timm's."""
    env, recs = result['env'], result['records']
    by_key = {(r['model'], r['mode'], r['pass']): r for r in recs}
    modes = list(dict.fromkeys(r['mode'] for r in recs))
    models = [m for m in dict.fromkeys(r['model'] for r in recs) if not m.startswith('timm ')]
    lines = [f"{env['gpu']}, batch {env['batch_size']} at {env['img_size']}x{env['img_size']}, throughput "
             'relative to timm\'s ConvNeXt of the same size (infer / train), training peak memory relative to '
             'timm\'s:', '',
             '| model | ' + ' | '.join(f'{m} infer / train' for m in modes) + ' | train memory '
             + ' / '.join(modes) + ' |', '|---|' + '---|' * (len(modes) + 1)]
    for model in models:
        cells = [' / '.join(_fmt(vs_timm(by_key, by_key[model, m, p], 'img_per_s'), digits=2) for p in PASSES)
                 for m in modes]
        mem = ' / '.join(_fmt(vs_timm(by_key, by_key[model, m, 'train'], 'peak_mem_bytes'), digits=2) for m in modes)
        lines.append(f"| {model.replace(' (mmo1d)', '')} | " + ' | '.join(cells) + f' | {mem} |')
    spreads = {m: [round_spread(r) for r in recs if r['mode'] == m] for m in modes}
    cells = [f'{m} {max(v):.2f}' for m, v in spreads.items() if None not in v]
    if cells:
        lines += ['', f"Slowest / fastest of the {env['rounds']} rounds of one model and pass, at most: "
                  + ', '.join(cells) + '.']
    return '\n'.join(lines)


def combine_rounds(rounds: List[Dict], batch_size: int) -> List[Dict]:
    """One record per (model, mode, pass): the median step time over rounds (None if any round ran
    out of memory), its throughput, each round's time and the largest peak memory; for a loss-scaled
    training step, the GradScaler's scale after the last round."""
    by_key: Dict[tuple, List[Dict]] = {}
    for rec in rounds:
        by_key.setdefault((rec['model'], rec['mode'], rec['pass']), []).append(rec)
    records = []
    for (model, mode, pas), recs in by_key.items():
        times = [r['ms'] for r in recs]
        ms = None if None in times else statistics.median(times)
        peaks = [r['peak_mem_bytes'] for r in recs if r['peak_mem_bytes'] is not None]
        record = dict(model=model, mode=mode, **{'pass': pas}, ms=None if ms is None else round(ms, 3),
                      img_per_s=None if ms is None else round(batch_size / (ms * 1e-3), 1),
                      round_ms=[None if t is None else round(t, 3) for t in times],
                      peak_mem_bytes=max(peaks) if peaks else None)
        if 'loss_scale' in recs[-1]:
            record['loss_scale'] = recs[-1]['loss_scale']
        records.append(record)
    return records


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.readme_table or args.summarize:
        with open(args.readme_table or args.summarize) as f:
            result = json.load(f)
        print(readme_table(result) if args.readme_table else summarize(result))
        return {}
    device = torch.device(args.device)
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise SystemExit('no CUDA device: run on a GPU, or use --device cpu for a smoke test')
        torch.backends.cudnn.benchmark = True
    timm = None
    if not args.no_timm:
        try:
            timm = importlib.import_module('timm')
        except ImportError:
            print('timm is not installed: skipping the timm ConvNeXt baseline (pip install timm to time it)')
    records = []
    for arch in args.archs:
        models = {}
        if timm is not None:
            models[f'timm convnext_{arch}'] = timm.create_model(f'convnext_{arch}', pretrained=False,
                                                                drop_path_rate=drop_path_rate(CONFIG_DIR, arch))
        for variant in args.variants:
            models[display_name(arch, variant)] = build_classifier(CONFIG_DIR, arch, variant)
        rounds = []
        for r in range(args.rounds):
            print(f'[{arch}] round {r + 1} of {args.rounds}', flush=True)
            for name, model in models.items():
                rounds += measure(name, model, args, device, args.warmup if r == 0 else min(3, args.warmup))
        records += combine_rounds(rounds, args.batch_size)
        del models
    result = {'env': env_info(args, device, getattr(timm, '__version__', None)), 'records': records}
    os.makedirs(args.out_dir, exist_ok=True)
    stem = osp.join(args.out_dir, 'models_' + result['env']['gpu'].replace(' ', '_').replace('/', '_'))
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    plot_model_benchmark(result, stem + '.png')
    print(md)
    print(f'wrote {stem}.json, .md and .png')
    return result


if __name__ == '__main__':
    quiet_upstream()
    main()
