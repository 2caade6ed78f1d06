"""Throughput and peak memory of the OrientedConvNeXt classifiers against timm's ConvNeXt.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023), built
from ``configs/mmpretrain`` (mmpretrain ImageClassifier: backbone, final norm, linear head), and
timm's ``convnext_tiny`` / ``convnext_base`` with the same stochastic depth as the baseline, timed in
the same process. For every model: inference (no grad) and a training step (forward,
cross-entropy, backward, AdamW step), in float32 (NCHW), in bfloat16 autocast and in float16
autocast, both with channels_last model and input; float16 training scales the loss with
``torch.amp.GradScaler`` (dynamic scale), as mmengine's ``AmpOptimWrapper`` does in the float16 AMP
of mmdet's and mmseg's configs. Times: CUDA events (or ``perf_counter`` on CPU), warm-up, median of repeats. The
models of one size are timed in interleaved rounds: in every round, each mode and pass times every
model in turn, so that a slow phase of a shared GPU affects the baseline and the models alike; each
reports the median over rounds. Throughput in images/s; peak memory with
``torch.cuda.max_memory_allocated`` (reset before each model, mode and pass; weights, optimizer state
and activations). Writes, per model size, ``<out-dir>/models_<size>_<tag>.json`` and ``.md`` with the
environment and the command, and the figure ``.png`` (``models_tiny_h100``; ``models_tiny_la_h200`` when
the learnable-angle variants are timed; the tag from :func:`mmo1d.benchmark.names.machine_tag`).

Two steadier figures on request, next to the wall clock: ``--kernel-times`` sums the GPU kernel
times of a few more steps of every case under ``torch.profiler`` (after the last round; with the
largest kernels and the ratio to timm's sum), ``--cuda-graph`` also times every case's step captured
in a CUDA graph (replays without host launch overhead; inference as timed, the training step as
forward, cross-entropy and backward, without the optimizer step). A case whose profile or capture
fails records the error in its record, and the run goes on.

Examples::

    python tools/analysis_tools/benchmark_model.py      # T and B, batch 64 at 224, on the GPU
    python tools/analysis_tools/benchmark_model.py --archs tiny --variants 1dpp --modes bf16 --passes train \\
        --kernel-times --cuda-graph
    python tools/analysis_tools/benchmark_model.py --device cpu --batch-size 2 --img-size 64 --archs tiny \\
        --repeats 2 --rounds 1
    python tools/analysis_tools/benchmark_model.py --readme-table benchmarks/results/models_tiny_h100.json \\
        benchmarks/results/models_base_h100.json
    python tools/analysis_tools/benchmark_model.py --compare OLD/models_tiny_h200.json NEW/models_tiny_h200.json
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
    OPTIONAL_VARIANTS,
    VARIANTS,
    build_classifier,
    display_name,
    drop_path_rate,
)
from mmo1d.benchmark.kernels import profile_kernels
from mmo1d.benchmark.model_builds import summarize_builds
from mmo1d.benchmark.model_tables import PASSES, add_kernel_ratios, readme_table, summarize
from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.timing import (
    capture_cuda_graph,
    command_line,
    git_commit,
    nvidia_driver,
    utc_now,
)
from mmo1d.utils.quiet import quiet_upstream

CONFIG_DIR = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), 'configs', 'mmpretrain')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cuda', help='cuda (default) or cpu (a smoke test)')
    parser.add_argument('--archs', nargs='+', default=['tiny', 'base'], choices=('tiny', 'base'))
    parser.add_argument('--variants', nargs='+', default=list(VARIANTS), choices=VARIANTS + OPTIONAL_VARIANTS)
    parser.add_argument('--modes', nargs='+', default=list(MODES), choices=list(MODES))
    parser.add_argument('--passes', nargs='+', default=list(PASSES), choices=PASSES)
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--repeats', type=int, default=10, help='timed steps per round (their median)')
    parser.add_argument('--rounds', type=int, default=6,
                        help='interleaved rounds over the models of one size, each mode and pass timing every '
                        'model in turn (median over rounds reported)')
    parser.add_argument('--warmup', type=int,
                        help='untimed steps before the first round (default: 10 on GPU, 1 on CPU); 3 before later '
                        'rounds, at most this')
    parser.add_argument('--kernel-times', action='store_true',
                        help='after the last round, run --kernel-steps more steps of every model, mode and pass '
                        'under torch.profiler and record the sum of their GPU kernel self-times per step '
                        '(kernel_ms), the largest kernels and the ratio to timm\'s sum (needs a GPU)')
    parser.add_argument('--kernel-steps', type=int, default=5, help='profiled steps per case (default 5)')
    parser.add_argument('--cuda-graph', action='store_true',
                        help='also time every step captured in a CUDA graph (static input, replays timed with CUDA '
                        'events, in every round): inference as timed; training as forward, cross-entropy and '
                        'backward only, without the optimizer step and without loss scaling. A failed capture '
                        'records its error (graph_error) and that case is not captured again (needs a GPU)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of each model\'s initialisation and of the input batch (default 0), so that two '
                        'builds\' runs train the same steps: learned angles move with every optimizer step, and the '
                        'work of their kernels with them')
    parser.add_argument('--no-timm', action='store_true', help='skip the timm ConvNeXt baseline')
    parser.add_argument('--out-dir', default='benchmarks/results')
    parser.add_argument('--readme-table', metavar='JSON', nargs='+',
                        help='print the README speed table of one results file, or of several of one GPU '
                        '(e.g. models_tiny_h100.json models_base_h100.json), and exit')
    parser.add_argument('--summarize', metavar='JSON', help='print the markdown summary of a results file and exit')
    parser.add_argument('--compare', metavar=('OLD_JSON', 'NEW_JSON'), nargs=2,
                        help='print two builds\' results files of one size side by side (kernel ms and wall '
                        'clock, new / old; bash .dev_scripts/gpu.sh models-ab makes them) and exit')
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1 or args.kernel_steps < 1:
        parser.error('--rounds, --repeats and --kernel-steps must be >= 1')
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


def make_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: Optional[torch.dtype], train: bool,
              optimizer: Optional[torch.optim.Optimizer] = None, scaler: Optional[torch.amp.GradScaler] = None,
              autocast_cache: bool = True) -> Callable[[], None]:
    """One step of ``model`` on the batch ``(x, y)``, under autocast to ``dtype`` (None: float32).

    Inference: forward without gradients. Training: forward, cross-entropy, backward and, with an
    ``optimizer``, its step (the loss scaled by ``scaler`` if given); without one, the gradients are
    set to None before the backward, so that a captured step writes fresh ones (no optimizer step).
    ``autocast_cache=False`` for a step captured in a CUDA graph.
    """
    device_type = x.device.type

    def step() -> None:
        with torch.autocast(device_type, dtype=dtype or torch.float32, enabled=dtype is not None,
                            cache_enabled=autocast_cache):
            if not train:
                with torch.no_grad():
                    model(x)
                return
            loss = F.cross_entropy(model(x).float(), y)
        if optimizer is None:
            model.zero_grad(set_to_none=True)
            loss.backward()
        elif scaler is None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        else:
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    return step


def error_text(err: BaseException, limit: int = 1000) -> str:
    """``'<type>: <message>'`` on one line, at most ``limit`` characters (for a results file)."""
    return ' '.join(f'{type(err).__name__}: {err}'.split())[:limit]


def kernel_case(step: Callable[[], None], steps: int, device: torch.device) -> Dict:
    """The kernel time of ``steps`` profiled calls of ``step`` (:func:`mmo1d.benchmark.kernels.kernel_summary`),
    or ``kernel_ms`` None and ``kernel_error`` where the profile fails."""
    try:
        if device.type != 'cuda':
            raise RuntimeError('kernel times need a CUDA device (--device cuda)')
        return profile_kernels(step, steps)
    except Exception as err:  # one case's failed profile must not end the run
        return {'kernel_ms': None, 'kernel_error': error_text(err)}


def graph_case(step: Callable[[], None], timer: Callable[[Callable[[], None]], float], device: torch.device,
               capture: Callable = capture_cuda_graph) -> Dict:
    """``graph_ms``: ``timer`` over the replays of ``step`` captured in a CUDA graph, or ``graph_ms``
    None and ``graph_error`` where the capture or a replay fails."""
    try:
        if device.type != 'cuda':
            raise RuntimeError('CUDA graphs need a CUDA device (--device cuda)')
        graph = capture(step)
        return {'graph_ms': timer(graph.replay)}
    except Exception as err:  # one model's failed capture must not end the run
        return {'graph_ms': None, 'graph_error': error_text(err)}


def measure(name: str, model: nn.Module, mode: str, pas: str, args: argparse.Namespace, device: torch.device,
            warmup: int, kernel_times: bool = False, cuda_graph: bool = False) -> Dict:
    """Step time and peak memory of one model, mode and pass in one round; with ``kernel_times``, the
    kernel time of ``args.kernel_steps`` more steps; with ``cuda_graph``, the time of the step's
    replays in a CUDA graph (after the peak memory is read)."""
    timer = Timer(device, args.repeats, warmup)
    dtype, memory_format = MODES[mode]
    train = pas == 'train'
    model.to(device, memory_format=memory_format).train(train)
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, generator=g).to(device)
    x = x.contiguous(memory_format=memory_format)
    y = torch.randint(0, 1000, (args.batch_size, ), generator=g).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    scaler = torch.amp.GradScaler(device.type) if optimizer and mode in LOSS_SCALED_MODES else None
    step = make_step(model, x, y, dtype, train, optimizer, scaler)
    if device.type == 'cuda':
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    try:
        ms = timer(step)
    except torch.cuda.OutOfMemoryError:
        ms = None
    peak = torch.cuda.max_memory_allocated(device) if device.type == 'cuda' else None
    record = dict(model=name, mode=mode, **{'pass': pas}, ms=ms, peak_mem_bytes=peak)
    not_run = 'not run: the step ran out of memory'
    if kernel_times:
        record.update(kernel_case(step, args.kernel_steps, device) if ms is not None else
                      {'kernel_ms': None, 'kernel_error': not_run})
    if scaler is not None:
        record['loss_scale'] = scaler.get_scale()
    del optimizer, scaler, step
    model.zero_grad(set_to_none=True)
    if cuda_graph:
        record.update(graph_case(make_step(model, x, y, dtype, train, autocast_cache=False), timer, device)
                      if ms is not None else {'graph_ms': None, 'graph_error': not_run})
        model.zero_grad(set_to_none=True)
    notes = _case_note(record, 'kernel_ms', 'kernel_error', 'kernels') + _case_note(record, 'graph_ms', 'graph_error',
                                                                                     'graph')
    print(f"{name:26s} {mode:5s} {pas:5s} "
          + ('out of memory' if ms is None else f'{ms:9.2f} ms {args.batch_size / (ms * 1e-3):9.1f} img/s')
          + ('' if peak is None else f'  peak {peak / 2**20:9.1f} MiB') + notes, flush=True)
    # Off the device between measurements: the next model's peak memory must not include this one.
    model.to('cpu')
    return record


def _case_note(record: Dict, key: str, error_key: str, label: str) -> str:
    if key not in record:
        return ''
    if record[key] is None:
        return f'  {label} failed: {record.get(error_key, "")[:120]}'
    return f'  {label} {record[key]:9.2f} ms'


def env_info(args: argparse.Namespace, device: torch.device, timm_version: Optional[str]) -> Dict:
    cuda = device.type == 'cuda'
    return {
        'gpu': torch.cuda.get_device_name(device) if cuda else 'cpu', 'driver': nvidia_driver() if cuda else None,
        'torch': torch.__version__, 'cuda': torch.version.cuda,
        'cudnn': torch.backends.cudnn.version() if cuda else None, 'timm': timm_version,
        'python': platform.python_version(), 'cpu_threads': torch.get_num_threads(),
        'tf32_matmul': torch.backends.cuda.matmul.allow_tf32, 'tf32_cudnn': torch.backends.cudnn.allow_tf32,
        'date': utc_now(), 'command': command_line(), 'commit': git_commit(),
        'batch_size': args.batch_size, 'img_size': args.img_size, 'repeats': args.repeats,
        'rounds': args.rounds, 'warmup': args.warmup, 'passes': list(args.passes),
        'kernel_steps': args.kernel_steps if args.kernel_times else None, 'cuda_graph': args.cuda_graph,
    }


#: Fields of the profiled round that a combined record keeps.
KERNEL_KEYS = ('kernel_ms', 'kernel_steps', 'top_kernels', 'own_kernels', 'kernel_error')


def combine_rounds(rounds: List[Dict], batch_size: int) -> List[Dict]:
    """One record per (model, mode, pass), ordered by model, then mode, then pass (in order of first
    appearance): the median step time over rounds (None if any round ran out of memory), its
    throughput, each round's time and the largest peak memory; for a loss-scaled training step, the
    GradScaler's scale after the last round. With CUDA graphs, the same for the replays
    (``graph_ms``, ``graph_img_per_s``, ``graph_round_ms``; None if any round failed, with the first
    ``graph_error``); with kernel times, the fields of the round that profiled."""
    by_key: Dict[tuple, List[Dict]] = {}
    for rec in rounds:
        by_key.setdefault((rec['model'], rec['mode'], rec['pass']), []).append(rec)
    order = [list(dict.fromkeys(k[i] for k in by_key)) for i in range(3)]
    records = []
    for key in sorted(by_key, key=lambda k: tuple(order[i].index(k[i]) for i in range(3))):
        (model, mode, pas), recs = key, by_key[key]
        times = [r['ms'] for r in recs]
        ms = None if None in times else statistics.median(times)
        peaks = [r['peak_mem_bytes'] for r in recs if r['peak_mem_bytes'] is not None]
        record = dict(model=model, mode=mode, **{'pass': pas}, ms=None if ms is None else round(ms, 3),
                      img_per_s=None if ms is None else round(batch_size / (ms * 1e-3), 1),
                      round_ms=[None if t is None else round(t, 3) for t in times],
                      peak_mem_bytes=max(peaks) if peaks else None)
        if 'loss_scale' in recs[-1]:
            record['loss_scale'] = recs[-1]['loss_scale']
        if any('graph_ms' in r for r in recs):
            graph_times = [r.get('graph_ms') for r in recs]
            gms = None if None in graph_times else statistics.median(graph_times)
            record.update(graph_ms=None if gms is None else round(gms, 3),
                          graph_img_per_s=None if gms is None else round(batch_size / (gms * 1e-3), 1),
                          graph_round_ms=[None if t is None else round(t, 3) for t in graph_times])
            errors = [r['graph_error'] for r in recs if r.get('graph_error')]
            if errors:
                record['graph_error'] = errors[0]
        for rec in recs:
            record.update({k: rec[k] for k in KERNEL_KEYS if k in rec})
        records.append(record)
    return records


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict]:
    """Run the benchmark and write the files of each model size; return ``{arch: result}`` (empty after
    ``--readme-table``, ``--summarize`` and ``--compare``)."""
    args = parse_args(argv)
    if args.compare:
        loaded = []
        for path in args.compare:
            with open(path) as f:
                loaded.append(json.load(f))
        try:
            print(summarize_builds(*loaded))
        except ValueError as err:
            raise SystemExit(f'--compare: {err}') from None
        return {}
    if args.readme_table:
        results = []
        for path in args.readme_table:
            with open(path) as f:
                results.append(json.load(f))
        print(readme_table(*results))
        return {}
    if args.summarize:
        with open(args.summarize) as f:
            print(summarize(json.load(f)))
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
    os.makedirs(args.out_dir, exist_ok=True)  # before the timed runs, not after them
    results = {}
    for arch in args.archs:
        models = {}
        torch.manual_seed(args.seed)
        if timm is not None:
            models[f'timm convnext_{arch}'] = timm.create_model(f'convnext_{arch}', pretrained=False,
                                                                drop_path_rate=drop_path_rate(CONFIG_DIR, arch))
        for variant in args.variants:
            models[display_name(arch, variant)] = build_classifier(CONFIG_DIR, arch, variant)
        rounds = []
        graph_errors: Dict[tuple, str] = {}  # a case whose capture failed is not captured again
        for r in range(args.rounds):
            print(f'[{arch}] round {r + 1} of {args.rounds}', flush=True)
            for mode in args.modes:
                for pas in args.passes:
                    for name, model in models.items():
                        key = (name, mode, pas)
                        rec = measure(name, model, mode, pas, args, device, args.warmup if r == 0 else
                                      min(3, args.warmup), kernel_times=args.kernel_times and r == args.rounds - 1,
                                      cuda_graph=args.cuda_graph and key not in graph_errors)
                        if args.cuda_graph and 'graph_ms' not in rec:
                            rec.update(graph_ms=None, graph_error=graph_errors[key])
                        elif rec.get('graph_error'):
                            graph_errors[key] = rec['graph_error']
                        rounds.append(rec)
        records = add_kernel_ratios(combine_rounds(rounds, args.batch_size))
        del models
        # Each size's files as soon as it is done: a later size that fails leaves them written.
        results[arch] = {'env': env_info(args, device, getattr(timm, '__version__', None)), 'records': records}
        write_results(results[arch], osp.join(args.out_dir, results_name(arch, args.variants,
                                                                         results[arch]['env']['gpu'])))
    return results


def results_name(arch: str, variants: List[str], device: str) -> str:
    """``models_<arch>_<tag>``, or ``models_<arch>_la_<tag>`` with a learnable-angle variant among ``variants``
    (``models_tiny_h100``, ``models_tiny_la_h200``)."""
    la = 'la' if set(variants) & set(OPTIONAL_VARIANTS) else None
    return results_stem('models', arch, la, tag=machine_tag(device))


def write_results(result: Dict, stem: str) -> None:
    """``<stem>.json``, ``<stem>.md`` (:func:`summarize`) and the figure ``<stem>.png``."""
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    plot_model_benchmark(result, stem + '.png')
    print(md)
    print(f'wrote {stem}.json, .md and .png')


if __name__ == '__main__':
    quiet_upstream()
    main()
