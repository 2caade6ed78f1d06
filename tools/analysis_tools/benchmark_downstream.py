"""Time training iterations of the downstream configs against the stock OpenMMLab ConvNeXt configs.

For each config (mmo1d.benchmark.downstream_configs): mmseg's UperNet ConvNeXt-T and mmdet's Cascade
Mask R-CNN ConvNeXt-T configs from the installed packages (mmpretrain's ConvNeXt, no pretrained
checkpoint), and our T-1D, T-1D++ and T-2D++ recipes of configs/mmseg and configs/mmdet, all on the
demo data of tools/dataset_converters/make_demo_data.py with 2 images per GPU and each config's own
pipeline (512x512 crops; multi-scale 480-800 + crop), optim wrapper (AMP: float16 unless the config
says otherwise) and cudnn.benchmark setting. Each config runs in a process of its own (``--in-process``:
one after another in this one): mmengine's Runner builds the model, the dataloader and the optim wrapper,
then ``--warmup`` untimed and ``--iters`` timed iterations of ``model.train_step`` run, each timed between
two ``torch.cuda.synchronize()``. Reported: the median seconds per iteration and its ratio to the stock
config of the same task (< 1.0 = faster), the peak memory of the timed iterations
(``torch.cuda.max_memory_allocated``, reset after the warm-up, a fresh process per config) and its ratio.
Writes ``<out-dir>/downstream_<tag>.json`` and ``.md`` with the environment and the command (the tag from
:func:`mmo1d.benchmark.names.machine_tag`: ``downstream_h100``; ``downstream_dry_run_<tag>`` with ``--dry-run``).

``--kernel-times N`` adds the GPU kernel time of N more iterations (against the wall clock: is the
iteration bound by the GPU or by the host?), ``--host-profile N`` the host time of each phase of N more
(mmo1d.benchmark.host_profile) and, on a GPU, where the GPU waits for the host in N more
(mmo1d.benchmark.gpu_waits), and ``--rounds N`` runs the whole list of configs N times in turn, so
that each ratio to the stock config comes with its range over the rounds.

With ``--device cpu`` the default configs are the small demo ones (fp32), a check of the code path
(no timings worth reading); ``--dry-run`` only resolves and builds each config (model, dataloader, one
batch) and records its backbone.

Examples::

    python tools/dataset_converters/make_demo_data.py --out data/demo
    python tools/analysis_tools/benchmark_downstream.py --data-root data/demo     # the 8 configs on the GPU
    python tools/analysis_tools/benchmark_downstream.py --configs det-stock det-t-1d --iters 50
    python tools/analysis_tools/benchmark_downstream.py --device cpu --warmup 0 --iters 1 --out-dir /tmp/out
"""
import argparse
import gc
import importlib
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import torch

from mmo1d.benchmark.downstream import merge_rounds, run_config
from mmo1d.benchmark.downstream_configs import DEFAULT_RUNS, RUNS, SMOKE_RUNS, TASK_NAMES
from mmo1d.benchmark.host_profile import host_tables
from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.timing import command_line, git_commit, gpu_env, utc_now
from mmo1d.utils.quiet import quiet_upstream

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG_ROOT = osp.join(REPO, 'configs')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--configs', nargs='+', choices=list(RUNS), metavar='NAME',
                        help=f'configs to time, of {", ".join(RUNS)} (default: {" ".join(DEFAULT_RUNS)}; with '
                        f'--device cpu: {" ".join(SMOKE_RUNS)})')
    parser.add_argument('--device', default='cuda', choices=('cuda', 'cpu'),
                        help='cuda (default) or cpu (a smoke run: no GPU is used)')
    parser.add_argument('--warmup', type=int, help='untimed iterations per config (default: 10; 0 on the CPU)')
    parser.add_argument('--iters', type=int, default=30, help='timed iterations per config (default: 30)')
    parser.add_argument('--max-time', type=float, default=40.0,
                        help='stop a config\'s timed iterations once they took this many seconds in all, '
                        '0 for no limit (default: 40; keeps the default run within about 6 minutes)')
    parser.add_argument('--data-root', default='data/demo',
                        help='the demo data written by tools/dataset_converters/make_demo_data.py --out')
    parser.add_argument('--workers', type=int, help='data loader processes of every config (default: 2; 0 on '
                        'the CPU)')
    parser.add_argument('--init-loss-scale', type=float,
                        help='initial dynamic loss scale of every AMP config, the stock ones included (default: '
                        'each config\'s own). Without pretrained weights, zero-padded pixels give float16 '
                        'gradients that overflow at the usual scales, and skipped steps skip the optimizer; '
                        'e.g. 2**-20 = 9.5367431640625e-07 lets every step run')
    parser.add_argument('--kernel-times', type=int, default=0, metavar='N',
                        help='after the timed iterations, run N more under torch.profiler and report the GPU kernel '
                        'time of an iteration, its kernel launches, the part in mmo1d\'s kernels and the kernel time '
                        'over the wall clock (default: 0, none)')
    parser.add_argument('--host-profile', type=int, default=0, metavar='N',
                        help='after those, run N more with the host time of each phase (data preprocessing, each '
                        'child module\'s forward, backward, optimizer step) profiled: where a host-bound iteration '
                        'spends its time; on a GPU N more for the phases the GPU waits on (default: 0, none)')
    parser.add_argument('--dry-run', action='store_true',
                        help='resolve and build each config (model, dataloader, one batch), time nothing')
    parser.add_argument('--in-process', action='store_true',
                        help='run the configs one after another in this process instead of one process each')
    parser.add_argument('--timeout', type=float, default=300.0, help='seconds a config\'s process may run')
    parser.add_argument('--rounds', type=int, default=1,
                        help='run every config this many times, the configs in turn (A B C A B C), each time in a '
                        'fresh process: s/iter is the median of the rounds\' medians and each ratio to the stock '
                        'config comes with its range over the rounds, so that a slow spell of a shared host shows as '
                        'spread instead of moving one config (default: 1); profiles run in the first round only')
    parser.add_argument('--work-dir', help='logs of the runs (default: a temporary folder, removed)')
    parser.add_argument('--out-dir', default='benchmarks/results')
    parser.add_argument('--readme-table', metavar='JSON',
                        help='print the README table of a results file and exit')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    parser.add_argument('--worker-json', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cpu = args.device == 'cpu'
    args.configs = args.configs or list(SMOKE_RUNS if cpu else DEFAULT_RUNS)
    args.warmup = (0 if cpu else 10) if args.warmup is None else args.warmup
    args.workers = (0 if cpu else 2) if args.workers is None else args.workers
    if args.warmup < 0 or args.iters < 1 or args.workers < 0 or args.kernel_times < 0 or args.host_profile < 0:
        parser.error('--warmup, --workers, --kernel-times and --host-profile must be >= 0, --iters >= 1')
    if args.rounds < 1:
        parser.error(f'--rounds must be >= 1, got {args.rounds}')
    if args.init_loss_scale is not None and not args.init_loss_scale > 0:
        parser.error(f'--init-loss-scale must be positive, got {args.init_loss_scale}')
    return args


def worker_argv(args: argparse.Namespace, name: str, record_path: str, work_dir: str) -> List[str]:
    """The command line that runs one config in a process of its own."""
    argv = [sys.executable, osp.abspath(__file__), '--device', args.device, '--warmup', str(args.warmup),
            '--iters', str(args.iters), '--max-time', str(args.max_time), '--data-root', args.data_root,
            '--workers', str(args.workers), '--work-dir', work_dir, '--worker', name, '--worker-json', record_path]
    if args.init_loss_scale is not None:
        argv += ['--init-loss-scale', repr(args.init_loss_scale)]
    if args.kernel_times:
        argv += ['--kernel-times', str(args.kernel_times)]
    if args.host_profile:
        argv += ['--host-profile', str(args.host_profile)]
    return argv + (['--dry-run'] if args.dry_run else [])


def run_one(args: argparse.Namespace, name: str, work_dir: str) -> Dict:
    """One config, in this process."""
    return run_config(RUNS[name], CONFIG_ROOT, args.data_root, osp.join(work_dir, name), args.warmup, args.iters,
                      args.max_time or None, args.workers, args.dry_run, args.init_loss_scale, args.kernel_times,
                      args.host_profile)


def run_isolated(args: argparse.Namespace, name: str, work_dir: str) -> Dict:
    """One config in a process of its own; its output goes to ``<work_dir>/<name>.log``. A failure is
    recorded with the end of that log."""
    record_path = osp.join(work_dir, f'{name}.json')
    log_path = osp.join(work_dir, f'{name}.log')
    # With --device cpu the process sees no GPU: mmengine's Runner puts the model on one when it can.
    env = {**os.environ, 'CUDA_VISIBLE_DEVICES': ''} if args.device == 'cpu' else None
    start = time.perf_counter()
    with open(log_path, 'w') as log:
        try:
            proc = subprocess.run(worker_argv(args, name, record_path, work_dir), stdout=log,
                                  stderr=subprocess.STDOUT, timeout=args.timeout, env=env)
            error = None if proc.returncode == 0 else f'exit status {proc.returncode}'
        except subprocess.TimeoutExpired:
            error = f'timed out after {args.timeout:.0f} s'
    if error is None and osp.isfile(record_path):
        with open(record_path) as f:
            record = json.load(f)
    else:
        with open(log_path, errors='replace') as f:
            tail = f.read()[-3000:]
        print(f'[{name}] failed ({error or "no record written"}); end of its log:\n{tail}', file=sys.stderr)
        run = RUNS[name]
        record = dict(name=name, task=run.task, baseline=run.baseline, config=run.config,
                      error=error or 'no record written', log_tail=tail)
    record['process_s'] = round(time.perf_counter() - start, 1)
    return record


def versions() -> Dict[str, Optional[str]]:
    """Versions of the packages the runs used (None where one is not installed)."""
    found = {}
    for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain', 'mmo1d'):
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            found[name] = None
    return found


def env_info(args: argparse.Namespace) -> Dict:
    if args.device == 'cuda' and torch.cuda.is_available():
        env = gpu_env()
    else:
        env = dict(gpu='cpu', torch=torch.__version__, cpu_threads=torch.get_num_threads(), date=utc_now(),
                   command=command_line())
    return {**env, **versions(), 'commit': git_commit(full=True), 'data_root': args.data_root, 'warmup': args.warmup,
            'iters': args.iters, 'max_time_s': args.max_time or None, 'workers': args.workers,
            'dry_run': args.dry_run, 'isolated': not args.in_process, 'init_loss_scale': args.init_loss_scale,
            'kernel_steps': args.kernel_times, 'host_steps': args.host_profile, 'rounds': args.rounds}


def add_ratios(records: List[Dict]) -> None:
    """``s_per_iter_ratio`` and ``peak_mem_ratio`` of every timed record against the baseline of its task."""
    base = {r['task']: r for r in records if r.get('baseline') and r.get('s_per_iter_median')}
    for rec in records:
        ref = base.get(rec['task'])
        if ref is None or not rec.get('s_per_iter_median'):
            continue
        rec['baseline_name'] = ref['name']
        rec['s_per_iter_ratio'] = rec['s_per_iter_median'] / ref['s_per_iter_median']
        if len(rec.get('s_per_iter_rounds', [])) > 1 and len(ref.get('s_per_iter_rounds', [])) > 1:
            rec['s_per_iter_ratio_rounds'] = [t / b if t and b else None for t, b in
                                              zip(rec['s_per_iter_rounds'], ref['s_per_iter_rounds'])]
        if rec.get('peak_mem_bytes') and ref.get('peak_mem_bytes'):
            rec['peak_mem_ratio'] = rec['peak_mem_bytes'] / ref['peak_mem_bytes']
        if rec.get('kernel_ms') is not None:
            rec['gpu_busy'] = rec['kernel_ms'] / (1e3 * rec['s_per_iter_median'])
            if ref.get('kernel_ms'):
                rec['kernel_ms_ratio'] = rec['kernel_ms'] / ref['kernel_ms']


def _backbone(rec: Dict) -> str:
    bb = rec.get('backbone')
    if not bb:
        return '-'
    depths = '-'.join(map(str, bb['depths']))
    variant = f", {bb['variant']}" if bb.get('variant') else ''
    return f"{bb['type']} ({depths}{variant})"


def _ratio(rec: Dict) -> str:
    """The s/iter ratio to the baseline, with its range over the rounds when there were several."""
    text = _num(rec, 's_per_iter_ratio', '.2f')
    spread = [r for r in rec.get('s_per_iter_ratio_rounds') or [] if r is not None]
    return f'{text} ({min(spread):.2f}-{max(spread):.2f})' if len(spread) > 1 else text


def _num(rec: Dict, key: str, fmt: str, scale: float = 1.0) -> str:
    value = rec.get(key)
    return '-' if value is None else format(value / scale if scale != 1.0 else value, fmt)


def summarize(result: Dict) -> str:
    """Markdown: one table per task, each config against the task's stock config."""
    env, recs = result['env'], result['records']
    versions_line = ', '.join(f'{k} {env.get(k)}' for k in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain'))
    cuda = ', '.join(f'{k} {env[k]}' for k in ('cuda', 'cudnn', 'driver') if k in env)
    limit = f", at most {env['max_time_s']:g} s of timed iterations per config" if env.get('max_time_s') else ''
    scale = (f"; every AMP config's dynamic loss scale starts at {env['init_loss_scale']:g}"
             if env.get('init_loss_scale') else '')
    lines = [f"# Downstream training iterations on {env['gpu']}", '',
             f"torch {env['torch']}{', ' + cuda if cuda else ''}; {versions_line}; commit {env.get('commit')}; "
             f"{env['date']}.", '',
             f"Command: `{env['command']}`", '',
             f"Demo data ({env['data_root']}, tools/dataset_converters/make_demo_data.py), 2 images per GPU, each "
             'config\'s own train pipeline, optim wrapper (AMP dtype below) and cudnn.benchmark setting; '
             f"{env['warmup']} warm-up + {env['iters']} timed iterations per config{limit}{scale}, "
             + ('each config in a process of its own' if env.get('isolated') else 'all in one process')
             + (f"; {env['rounds']} rounds, the configs in turn, s/iter the median of the rounds' medians and "
                'each ratio with its range over the rounds in parentheses. ' if env.get('rounds', 1) > 1 else '. ')
             + '*s/iter*: median time of `model.train_step` (data preprocessing, forward, backward, optimizer step) '
             'between two `torch.cuda.synchronize()`; *data s*: median time to fetch a batch from the loader (not '
             'in s/iter). *peak MiB*: `torch.cuda.max_memory_allocated` over the timed iterations. *vs*: ratio to '
             'the baseline of the task, the stock config (the demo 2D config in a CPU smoke run); s/iter < 1.0 = '
             'faster. Stock configs: the installed mmseg\'s and mmdet\'s, with mmpretrain\'s ConvNeXt, pretrained '
             'checkpoint removed. *overflow steps*: timed iterations whose dynamic loss scale went down (optimizer '
             'step skipped).', '']
    for task in dict.fromkeys(r['task'] for r in recs):
        base = next((r['name'] for r in recs if r['task'] == task and r.get('baseline')), 'baseline (not run)')
        lines += [f'## {TASK_NAMES[task]}', '',
                  f'| config | backbone | AMP | s/iter | vs {base} | data s | peak MiB | vs {base} | iterations | '
                  'overflow steps | final loss |',
                  '|---|---|---|---|---|---|---|---|---|---|---|']
        for rec in (r for r in recs if r['task'] == task):
            label = f"{rec['name']}: `{rec['config']}`"
            if 'error' in rec:
                lines.append(f"| {label} | - | - | failed: {rec['error']} | | | | | | | |")
                continue
            amp = rec.get('amp_dtype') or 'fp32'
            if 's_per_iter_median' not in rec:
                lines.append(f'| {label} | {_backbone(rec)} | {amp} | (dry run) | | | | | | | |')
                continue
            lines.append(
                f"| {label} | {_backbone(rec)} | {amp} | {_num(rec, 's_per_iter_median', '.4f')} | "
                f"{_ratio(rec)} | {_num(rec, 'data_s_median', '.4f')} | "
                f"{_num(rec, 'peak_mem_bytes', '.0f', 2**20)} | {_num(rec, 'peak_mem_ratio', '.2f')} | "
                f"{rec['iters_timed']} of {rec['iters']} | {_num(rec, 'overflow_skipped_steps', 'd')} | "
                f"{_num(rec, 'loss_final', '.3g')} |")
        lines.append('')
        lines += kernel_table([r for r in recs if r['task'] == task], base)
        lines += host_tables([r for r in recs if r['task'] == task])
    return '\n'.join(lines)


def kernel_table(recs: List[Dict], base: str) -> List[str]:
    """Markdown lines: the GPU work of an iteration of each profiled config (``--kernel-times``)."""
    recs = [r for r in recs if r.get('kernel_ms') is not None]
    if not recs:
        return []
    lines = [f"GPU work of one iteration, {recs[0]['kernel_steps']} iterations under torch.profiler after the timed "
             'ones: *kernel ms*, the sum of the device times of its kernels, memcpy and memset; *mmo1d ms*, the part '
             "in mmo1d's kernels; *launches*, device events; *busy*, kernel ms over the median s/iter (well below 1: "
             'the iteration waits on the host, not on the GPU).', '',
             f'| config | kernel ms | vs {base} | mmo1d ms | launches | busy |', '|---|---|---|---|---|---|']
    for rec in recs:
        lines.append(f"| {rec['name']} | {_num(rec, 'kernel_ms', '.1f')} | {_num(rec, 'kernel_ms_ratio', '.2f')} | "
                     f"{_num(rec, 'own_kernel_ms', '.1f')} | {_num(rec, 'launches', '.0f')} | "
                     f"{_num(rec, 'gpu_busy', '.2f')} |")
    return lines + ['']


def readme_table(result: Dict) -> str:
    """The README's downstream table: per task, each timed config's seconds per iteration and peak
    memory, and their ratios to the task's stock config."""
    env, recs = result['env'], result['records']
    lines = [f"{env['gpu']}, 2 images per GPU, AMP as each config sets it, median of the timed iterations; "
             '*vs stock*: ratio to the stock config of the task (< 1.0: faster or smaller):', '',
             '| task | config | s/iter | vs stock | peak MiB | vs stock |', '|---|---|---|---|---|---|']
    for rec in recs:
        if not rec.get('s_per_iter_median'):
            continue
        lines.append(f"| {TASK_NAMES[rec['task']]} | {rec['name']} | {_num(rec, 's_per_iter_median', '.3f')} | "
                     f"{_ratio(rec)} | {_num(rec, 'peak_mem_bytes', '.0f', 2**20)} | "
                     f"{_num(rec, 'peak_mem_ratio', '.2f')} |")
    return '\n'.join(lines)


def worker_main(args: argparse.Namespace) -> None:
    """Run the config ``--worker`` and write its record to ``--worker-json``."""
    record = run_one(args, args.worker, args.work_dir)
    with open(args.worker_json, 'w') as f:
        json.dump(record, f)


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if args.readme_table:
        with open(args.readme_table) as f:
            print(readme_table(json.load(f)))
        return {}
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('no CUDA device: run on a GPU, or use --device cpu for a smoke run of the demo configs')
    if args.device == 'cpu' and torch.cuda.is_available() and (args.in_process or args.worker):
        raise SystemExit('--device cpu with a GPU visible: mmengine\'s Runner would put the models on it; run '
                         'without --in-process (each config then runs with CUDA_VISIBLE_DEVICES=""), or set '
                         'CUDA_VISIBLE_DEVICES=""')
    if args.worker:
        worker_main(args)
        return {}
    with tempfile.TemporaryDirectory(prefix='downstream_') as tmp:
        work_dir = args.work_dir or tmp
        os.makedirs(work_dir, exist_ok=True)
        rounds = []
        for r in range(args.rounds):
            # The profiles (kernel times, host phases) in the first round only.
            round_args = args if r == 0 else argparse.Namespace(**{**vars(args), 'kernel_times': 0,
                                                                    'host_profile': 0})
            rounds.append([])
            round_dir = work_dir if args.rounds == 1 else osp.join(work_dir, f'round{r + 1}')
            os.makedirs(round_dir, exist_ok=True)
            for name in args.configs:
                print(f'== {name}' + (f' (round {r + 1} of {args.rounds})' if args.rounds > 1 else ''), flush=True)
                rec = (run_one(round_args, name, round_dir) if args.in_process else
                       run_isolated(round_args, name, round_dir))
                rounds[-1].append(rec)
                if args.in_process:
                    gc.collect()  # the runner's reference cycles hold the model
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                if rec.get('s_per_iter_median'):
                    peak = rec['peak_mem_bytes']
                    print(f"{name}: {rec['s_per_iter_median']:.4f} s/iter over {rec['iters_timed']} iterations"
                          + ('' if peak is None else f', peak {peak / 2**20:.0f} MiB'), flush=True)
    records = merge_rounds(rounds)
    add_ratios(records)
    result = {'env': env_info(args), 'records': records}
    os.makedirs(args.out_dir, exist_ok=True)
    stem = osp.join(args.out_dir, results_stem('downstream', 'dry_run' if args.dry_run else None,
                                               tag=machine_tag(result['env']['gpu'])))
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    md = summarize(result)
    with open(stem + '.md', 'w') as f:
        f.write(md + '\n')
    print(md)
    print(f'wrote {stem}.json and .md')
    failed = [r['name'] for r in records if 'error' in r]
    if failed:
        raise SystemExit(f'failed: {", ".join(failed)} (see the records in {stem}.json)')
    return result


if __name__ == '__main__':
    quiet_upstream()
    main()
