"""Do learned angles pay off where orientation matters? Fixed against learned angles on oriented textures.

Writes the oriented-texture demo data (``make_demo_data.py --which textures``), then trains and
evaluates the texture demo UperNet (``configs/demo/*textures-64x64.py``, same schedule for every run)
with ``tools/train.py`` under each setting and seed:

- ``trunc-fixed``: the paper's op (8 fixed directions, taps by truncation);
- ``bilinear-fixed``: the same 8 directions, taps read bilinearly;
- ``bilinear-learned``: bilinear taps, angles learned from the 8 directions;
- ``gaussian-learned``: gaussian taps (radius 1.5, sigma 0.5), angles learned;

and a sweep of the angles' learning-rate multiplier (``bilinear-learned`` at each of ``--sweep``, on
``--sweep-seeds``) and of a warm-up of their own (held for the first 100 iterations).
Per setting it reports mIoU mean, sample standard deviation and per-seed values; for learned angles
how far they moved and whether towards the textures' orientations
(:func:`mmo1d.analysis.angle_study.texture_alignment`), and a histogram of them
(``draw_texture_angles``). Runs already done (their ``result.json``) are not repeated.

Outputs go to ``--out-dir`` (default ``work_dirs/learnable_angles_study``); ``--write-reference``
writes the committed files instead: ``benchmarks/results/learned_angles_textures_<device>.{md,json}``
and ``docs/figures/learned_angles_textures.png``.

Example (CPU, two runs at a time)::

    python tools/analysis_tools/learnable_angles_study.py --jobs 2
"""
import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]
CONFIGS = 'configs/demo'
BASE = f'{CONFIGS}/oriented-convnext-demo-1d_upernet_1xb8-300iter_ade20k-textures-64x64.py'
LA = f'{CONFIGS}/oriented-convnext-demo-1d-la_upernet_1xb8-300iter_ade20k-textures-64x64.py'
LA_WARMUP = f'{CONFIGS}/oriented-convnext-demo-1d-la-thetawarmup_upernet_1xb8-300iter_ade20k-textures-64x64.py'
LR_KEY = 'optim_wrapper.paramwise_cfg.custom_keys.theta.lr_mult'
GAUSSIAN = ['model.backbone.rounding=gaussian', 'model.backbone.radius=1.5', 'model.backbone.sigma=0.5']
SETTINGS = ('trunc-fixed', 'bilinear-fixed', 'bilinear-learned', 'gaussian-learned')
REFERENCE_RESULTS = 'benchmarks/results/learned_angles_textures_{device}'
REFERENCE_FIGURE = 'docs/figures/learned_angles_textures.png'


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--out-dir', default='work_dirs/learnable_angles_study',
                        help='data, runs and results (default: work_dirs/learnable_angles_study)')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='seeds of every setting (default: 0 1 2)')
    parser.add_argument('--settings', nargs='+', choices=SETTINGS, default=list(SETTINGS),
                        help='settings to run (default: all)')
    parser.add_argument('--theta-lr-mult', type=float,
                        help="learning-rate multiplier of the learned angles (default: the -la config's)")
    parser.add_argument('--sweep', type=float, nargs='*', default=[1.0, 30.0],
                        help='further theta learning-rate multipliers tried with bilinear-learned (default: 1 30; '
                        'none: no sweep)')
    parser.add_argument('--sweep-seeds', type=int, nargs='+', help='seeds of the sweep (default: the first two '
                        'of --seeds)')
    parser.add_argument('--warmup', action=argparse.BooleanOptionalAction, default=True,
                        help='also try bilinear-learned with the angles held for the first 100 iterations '
                        '(AngleWarmupHook), on the sweep seeds (default: yes)')
    parser.add_argument('--iters', type=int, help="training iterations (default: the config's, 300)")
    parser.add_argument('--device', choices=['cpu', 'cuda'], default='cpu',
                        help='cpu (hides any GPU) or cuda (run i on GPU i modulo the GPUs) (default: cpu)')
    parser.add_argument('--jobs', type=int, default=1, help='runs at a time (default: 1)')
    parser.add_argument('--write-reference', action='store_true',
                        help=f'write {REFERENCE_RESULTS}.{{md,json}} and {REFERENCE_FIGURE} instead of '
                        'results in --out-dir')
    parser.add_argument('--summarize', action='store_true', help='train nothing: summarize the runs in --out-dir')
    parser.add_argument('--dry-run', action='store_true', help='print the commands without running them')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f'--jobs must be at least 1, got {args.jobs}')
    if args.iters is not None and args.iters < 1:
        parser.error(f'--iters must be at least 1, got {args.iters}')
    if any(m <= 0 for m in args.sweep + ([args.theta_lr_mult] if args.theta_lr_mult is not None else [])):
        parser.error('theta learning-rate multipliers must be positive')
    return args


def _mult_name(mult: float) -> str:
    return f'{mult:g}'.replace('.', 'p')


def plan_runs(args: argparse.Namespace, default_mult: float) -> List[dict]:
    """Every run: its setting, seed, config and options (data root, seed, iterations, angles)."""
    mult = args.theta_lr_mult if args.theta_lr_mult is not None else default_mult
    data_root = f'{args.out_dir}/data/textures/ADEChallengeData2016'
    common = [f'{split}_dataloader.dataset.data_root={data_root}' for split in ('train', 'val', 'test')]
    if args.iters is not None:
        common += [f'train_cfg.max_iters={args.iters}', f'train_cfg.val_interval={args.iters}',
                   f'default_hooks.checkpoint.interval={args.iters}', f'param_scheduler.1.end={args.iters}']
    options = {'trunc-fixed': (BASE, []),
               'bilinear-fixed': (LA, ['model.backbone.learnable_angles=False']),
               'bilinear-learned': (LA, [f'{LR_KEY}={mult:g}']),
               'gaussian-learned': (LA, GAUSSIAN + [f'{LR_KEY}={mult:g}'])}
    settings = [(name, *options[name], mult if name.endswith('learned') else None) for name in args.settings]
    sweep = [(f'bilinear-learned-lr{_mult_name(m)}', LA, [f'{LR_KEY}={m:g}'], m)
             for m in args.sweep if m != mult or 'bilinear-learned' not in args.settings]
    if args.warmup:
        sweep.append(('bilinear-learned-warmup100', LA_WARMUP, [f'{LR_KEY}={mult:g}'], mult))
    sweep_seeds = args.sweep_seeds if args.sweep_seeds is not None else args.seeds[:2]
    # Seed by seed, every setting of a seed before the next seed: a partial study compares them all.
    return [dict(setting=name, seed=seed, config=config, theta_lr_mult=m,
                 options=common + [f'randomness.seed={seed}'] + extra,
                 run_dir=f'{args.out_dir}/runs/{name}/seed{seed}')
            for group, seeds in ((settings, args.seeds), (sweep, sweep_seeds))
            for seed in seeds for name, config, extra, m in group]


def _final_metrics(run_dir: Path) -> Dict[str, float]:
    """The last evaluation of a training run, from mmengine's scalars.json files."""
    metrics = {}
    for scalars in sorted(run_dir.glob('*/vis_data/scalars.json')):
        for line in scalars.read_text().splitlines():
            record = json.loads(line)
            if 'mIoU' in record:
                metrics = {k: record[k] for k in ('mIoU', 'mAcc', 'aAcc') if k in record}
    if not metrics:
        raise RuntimeError(f'no evaluation (mIoU) in {run_dir}/*/vis_data/scalars.json: the run did not finish')
    return metrics


def _angles(run: dict, checkpoint: Path, orientations: Sequence[float]) -> Optional[dict]:
    """Initial and learned angles of a run's backbone and their alignment with the textures."""
    from mmengine.config import Config, DictAction

    from mmo1d.analysis import angle_study, angles
    from mmo1d.registry import MODELS
    from mmo1d.utils import load_checkpoint_file

    cfg = Config.fromfile(str(REPO / run['config']))
    action = DictAction(option_strings=[], dest='x')
    namespace = argparse.Namespace()
    action(None, namespace, run['options'])
    cfg.merge_from_dict(namespace.x)
    backbone_cfg = cfg.model.backbone.copy()
    backbone_cfg.pop('init_cfg', None)
    backbone = MODELS.build(backbone_cfg)
    layers = angles.oriented_layers(backbone, learnable_only=True)
    if not layers:
        return None
    initial = angles.initial_angles(layers)
    state = load_checkpoint_file(checkpoint)['state_dict']
    learned = {name: state[f'backbone.{name}.theta'].double() for name in layers}
    groups = {name: angles.layer_group(name) for name in layers}
    return dict(alignment=angle_study.texture_alignment(initial, learned, orientations, groups),
                learned={name: theta.tolist() for name, theta in learned.items()}, groups=groups)


def train(run: dict, args: argparse.Namespace, index: int, orientations: Sequence[float]) -> Optional[dict]:
    """Train (and evaluate) one run unless its result.json exists; returns that result."""
    run_dir = REPO / run['run_dir'] if not Path(run['run_dir']).is_absolute() else Path(run['run_dir'])
    result_path = run_dir / 'result.json'
    command = [sys.executable, 'tools/train.py', run['config'], '--work-dir', str(run_dir),
               '--cfg-options', *run['options']]
    if args.dry_run:
        print(shlex.join(command))
        return None
    if result_path.exists():
        return json.loads(result_path.read_text())
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '1'))
    if args.device == 'cpu':
        env['CUDA_VISIBLE_DEVICES'] = ''
    else:
        import torch
        env['CUDA_VISIBLE_DEVICES'] = str(index % max(torch.cuda.device_count(), 1))
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(run_dir / 'train.log', 'w') as log:
        status = subprocess.run(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f'{run["setting"]} seed {run["seed"]} failed (exit {status}): see {run_dir}/train.log')
    checkpoints = sorted(run_dir.glob('iter_*.pth'), key=lambda p: int(re.findall(r'\d+', p.name)[0]))
    result = dict(run, **_final_metrics(run_dir), train_seconds=round(seconds, 1),
                  angles=_angles(run, checkpoints[-1], orientations))
    result_path.write_text(json.dumps(result) + '\n')
    print(f'{run["setting"]:<28} seed {run["seed"]}: mIoU {result["mIoU"]:.2f} ({seconds:.0f} s)', flush=True)
    return result


def _device_name(device: str) -> str:
    if device == 'cpu':
        cpuinfo = Path('/proc/cpuinfo')
        for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
        return platform.processor() or platform.machine()
    import torch
    return torch.cuda.get_device_name(0)


def summarize(results: List[dict], orientations: Sequence[float]) -> Dict[str, dict]:
    """Per setting: mIoU / mAcc statistics over seeds, mean training time and the angles' alignment."""
    from mmo1d.analysis.angle_study import seed_stats

    settings: Dict[str, dict] = {}
    for result in results:
        settings.setdefault(result['setting'], dict(runs=[]))['runs'].append(result)
    summary = {}
    for name, entry in settings.items():
        runs = sorted(entry['runs'], key=lambda r: r['seed'])
        row = dict(config=runs[0]['config'], theta_lr_mult=runs[0]['theta_lr_mult'],
                   options=[o for o in runs[0]['options'] if 'data_root' not in o and 'randomness' not in o],
                   seeds=[r['seed'] for r in runs], mIoU=seed_stats([r['mIoU'] for r in runs]),
                   mAcc=seed_stats([r['mAcc'] for r in runs]),
                   train_seconds=round(sum(r['train_seconds'] for r in runs) / len(runs), 1))
        baseline = {r['seed']: r['mIoU'] for r in settings.get('trunc-fixed', {}).get('runs', [])}
        if name != 'trunc-fixed' and all(r['seed'] in baseline for r in runs):
            # Paired by seed: the same initial weights of everything but the angles, the same batches.
            row['mIoU_minus_trunc_fixed'] = seed_stats([r['mIoU'] - baseline[r['seed']] for r in runs])
        aligned = [r['angles']['alignment'] for r in runs if r.get('angles')]
        if aligned:
            row['angles'] = {group: {key: seed_stats([a[group][key] for a in aligned])['mean']
                                     for key in aligned[0][group] if aligned[0][group][key] is not None}
                             for group in aligned[0]}
        summary[name] = row
    return summary


def _pm(stats: dict) -> str:
    return f'{stats["mean"]:.2f} ± {stats["std"]:.2f}'


def markdown(report: dict) -> str:
    """The result file: how it was run, the comparison, the sweep and the angles' statistics."""
    rows = report['settings']
    lines = ['# Learned angles on oriented textures', '',
             f'Command: `{report["command"]}`  ',
             f'Commit {report["commit"]}, torch {report["torch"]}, {report["device"]} '
             f'({report["device_name"]}), OMP_NUM_THREADS={report["omp_num_threads"]}, {report["jobs"]} runs at '
             f'a time. {len(report["runs"])} runs of {report["run_seconds"] / 60:.1f} min in all (train and '
             f'evaluation, each run\'s own wall time); this call took {report["wall_seconds"] / 60:.1f} min '
             '(runs already done are not repeated).', '',
             f'Data: `make_demo_data.py --which textures` ({report["data"]["split_sizes"]["training"]} + '
             f'{report["data"]["split_sizes"]["validation"]} images of {report["data"]["size"][0]}x'
             f'{report["data"]["size"][1]}, orientations {", ".join(f"{a:g}" for a in report["orientations"])} '
             f'degrees, noise {report["data"]["noise"]:g}). Model: `{BASE}` and its `-la` config, same '
             'schedule; mIoU of the validation images after the last iteration, mean ± sample standard '
             'deviation over seeds.', '',
             '| setting | theta lr mult | mIoU | per seed (seed) | minus trunc-fixed, same seed | mAcc '
             '| train s / run |',
             '|---|---|---|---|---|---|---|']
    for name, row in rows.items():
        mult = f'{row["theta_lr_mult"]:g}' if row['theta_lr_mult'] is not None else '-'
        seeds = ', '.join(f'{v:.2f} ({s})' for v, s in zip(row['mIoU']['values'], row['seeds']))
        paired = _pm(row['mIoU_minus_trunc_fixed']) if 'mIoU_minus_trunc_fixed' in row else '-'
        lines.append(f'| {name} | {mult} | {_pm(row["mIoU"])} | {seeds} | {paired} | {_pm(row["mAcc"])} | '
                     f'{row["train_seconds"]:.0f} |')
    lines += ['', '## Where the learned angles went', '',
              'Per channel, its *target* is the texture orientation nearest its initial direction (unique '
              'for the default orientations). *Moved*: share of channels turned by more than 0.5 degrees; '
              '*toward*: share of the moved channels that ended nearer their target than they started '
              '(chance: 0.5); *gap*: mean distance to the nearest texture orientation, 11.25 degrees '
              'before training. Means over seeds.', '',
              '| setting | part | channels | mean abs change (deg) | moved | toward | gap after (deg) |',
              '|---|---|---|---|---|---|---|']
    for name, row in rows.items():
        for group, stats in row.get('angles', {}).items():
            toward = f'{stats["toward_share"]:.2f}' if 'toward_share' in stats else '-'
            lines.append(f'| {name} | {group} | {stats["count"]:.0f} | {stats["mean_abs_change_deg"]:.2f} | '
                         f'{stats["moved_share"]:.2f} | {toward} | {stats["mean_gap_end_deg"]:.2f} |')
    lines += ['', f'Figure: `{report["figure"]}`.', '']
    return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> dict:
    args = parse_args(argv)
    os.chdir(REPO)
    from mmengine.config import Config

    from mmo1d.benchmark.timing import git_commit

    la_cfg = Config.fromfile(LA, import_custom_modules=False)
    default_mult = la_cfg.optim_wrapper.paramwise_cfg.custom_keys['theta']['lr_mult']
    runs = plan_runs(args, default_mult)
    data_dir = Path(args.out_dir) / 'data'
    data_meta = data_dir / 'textures' / 'ADEChallengeData2016' / 'textures.json'
    start = time.perf_counter()
    if not args.summarize:
        make_data = [sys.executable, 'tools/dataset_converters/make_demo_data.py', '--which', 'textures',
                     '--out', str(data_dir)]
        if args.dry_run:
            print(shlex.join(make_data))
        elif not data_meta.exists():
            subprocess.run(make_data, check=True)
    if args.dry_run:
        for i, run in enumerate(runs):
            train(run, args, i, [])
        return {}
    if not data_meta.exists():
        sys.exit(f'no texture data in {data_dir}: run without --summarize first')
    meta = json.loads(data_meta.read_text())
    orientations = meta['orientations_deg']
    if args.summarize:
        missing = [r['run_dir'] for r in runs if not (Path(r['run_dir']) / 'result.json').exists()]
        if missing:
            sys.exit(f'{len(missing)} runs have no result.json (e.g. {missing[0]}): run without --summarize first')
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda ir: train(ir[1], args, ir[0], orientations), enumerate(runs)))
    wall = time.perf_counter() - start

    import torch

    from mmo1d.analysis.angle_study import draw_texture_angles

    device = args.device
    tag = 'cpu' if device == 'cpu' else re.sub(r'[^A-Za-z0-9]+', '_', _device_name(device)).strip('_')
    if args.write_reference:
        stem, figure = Path(REFERENCE_RESULTS.format(device=tag)), Path(REFERENCE_FIGURE)
    else:
        out = Path(args.out_dir)
        stem, figure = out / f'learned_angles_textures_{tag}', out / 'learned_angles_textures.png'
    summary = summarize(results, orientations)
    panels = {}
    for result in results:
        if result.get('angles') and result['setting'] in ('bilinear-learned', 'gaussian-learned'):
            groups = panels.setdefault(f'{result["setting"]} (theta lr x{result["theta_lr_mult"]:g}, '
                                       f'{len(args.seeds)} seeds)', {})
            for name, theta in result['angles']['learned'].items():
                groups.setdefault(result['angles']['groups'][name], []).append(torch.tensor(theta))
    report = dict(command='python tools/analysis_tools/learnable_angles_study.py ' + shlex.join(argv or sys.argv[1:]),
                  commit=git_commit(), torch=torch.__version__, device=device, device_name=_device_name(device),
                  omp_num_threads=os.environ.get('OMP_NUM_THREADS', '1'), jobs=args.jobs, wall_seconds=round(wall, 1),
                  run_seconds=round(sum(r['train_seconds'] for r in results), 1),
                  runs=[{k: r[k] for k in ('setting', 'seed', 'mIoU', 'mAcc', 'aAcc', 'train_seconds')}
                        for r in results],
                  orientations=orientations, data=meta, figure=figure.as_posix(), settings=summary)
    if panels:
        draw_texture_angles(str(figure), panels, orientations,
                            title='Learned orientations (all layers, all seeds) against the textures\' orientations')
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix('.json').write_text(json.dumps(report, indent=1) + '\n')
    stem.with_suffix('.md').write_text(markdown(report))
    print(markdown(report))
    print(f'wrote {stem}.md, {stem}.json' + (f' and {figure}' if panels else ''))
    return report


if __name__ == '__main__':
    main()
