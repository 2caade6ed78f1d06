"""Collect the iteration times, peak memory and test metrics of ``gpu_downstream.sh``'s runs.

Reads, for every finished run ``NAME CONFIG``, the training scalars
(``OUT/work/MODE/NAME/train/<timestamp>/vis_data/scalars.json``), the test metrics
(``.../test/<timestamp>/<timestamp>.json``) and the two logs, and writes
``OUT/downstream_MODE.json`` with the environment::

    python .dev_scripts/summarize_downstream.py OUT MODE GPUS ITERS COMPLETED 'NAME CONFIG' ...
"""
import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

import torch


def world_size(log: Path) -> Optional[int]:
    """The number of processes mmengine reports in a train/test log (``GPU number: N``)."""
    found = re.search(r'^\s*GPU number: (\d+)$', log.read_text(errors='replace'), re.M)
    return int(found.group(1)) if found else None


def ddp_errors(log: Path) -> int:
    """Lines of DistributedDataParallel's error for parameters that received no gradient."""
    return sum('Expected to have finished reduction' in line
               for line in log.read_text(errors='replace').splitlines())


def latest_run(folder: Path) -> Path:
    """The newest of mmengine's ``YYYYMMDD_HHMMSS`` run folders in ``folder``.

    Raises:
        FileNotFoundError: if ``folder`` holds no run folder.
    """
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and p.name[:8].isdigit())
    if not runs:
        raise FileNotFoundError(f'no mmengine run folder (YYYYMMDD_HHMMSS) in {folder}')
    return runs[-1]


def run_record(work: Path, name: str, config: str, iters: int, gpus: int) -> Dict:
    """Times, memory, final loss, process counts and test metrics of one run in ``work``."""
    train_run = latest_run(work / 'train')
    lines = (train_run / 'vis_data' / 'scalars.json').read_text().splitlines()
    train = [r for r in map(json.loads, lines) if 'loss' in r]
    if not train:
        raise ValueError(f'no training record with a loss in {train_run}/vis_data/scalars.json')
    # The first logged window holds the warm-up (cudnn autotuning, allocator growth).
    steady = train[1:] or train
    test_run = latest_run(work / 'test')
    test = json.loads((test_run / f'{test_run.name}.json').read_text())
    memory = [r['memory'] for r in train if 'memory' in r]
    return dict(
        name=name,
        config=config,
        iterations=iters,
        images_per_gpu=2 if gpus else None,
        iter_time_s_median=statistics.median(r['time'] for r in steady),
        iter_time_s_first_window=train[0]['time'],
        data_time_s_median=statistics.median(r['data_time'] for r in steady),
        max_memory_mb=max(memory) if memory else None,
        final_loss=train[-1]['loss'],
        train_processes=world_size(work / 'train.log'),
        test_processes=world_size(work / 'test.log'),
        ddp_unused_parameter_errors=ddp_errors(work / 'train.log'),
        test_metrics={k: v for k, v in test.items() if k not in ('time', 'data_time', 'step')},
        test_time_s_per_iter=test.get('time'),
    )


def versions() -> Dict[str, Optional[str]]:
    """Versions of the OpenMMLab packages the runs used (None where one is not installed)."""
    found = {}
    for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg'):
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            found[name] = None
    return found


def source_commit() -> str:
    """The commit that was built: $SOURCE_COMMIT (a checkout without .git), else git's HEAD."""
    return os.environ.get('SOURCE_COMMIT') or subprocess.run(
        ['git', 'rev-parse', 'HEAD'], capture_output=True, text=True).stdout.strip()


def summarize(out: Path, mode: str, gpus: int, iters: int, completed: bool, runs: List[str]) -> Dict:
    """The summary of the finished ``runs`` (``'NAME CONFIG'`` each) of ``mode`` under ``out``."""
    results = []
    for run in runs:
        name, config = run.split(' ', 1)
        results.append(run_record(out / 'work' / mode / name, name, config, iters, gpus))
    commit = source_commit()
    return dict(
        mode=mode,
        gpus=gpus,
        device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu',
        torch=torch.__version__,
        cuda=torch.version.cuda,
        **versions(),
        commit=commit,
        command=f'bash .dev_scripts/gpu_downstream.sh OUT_DIR {mode}',
        completed=completed,
        runs=results,
    )


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out', type=Path, help='OUT_DIR of gpu_downstream.sh')
    parser.add_argument('mode', help='single, dist2 or cpu-check')
    parser.add_argument('gpus', type=int)
    parser.add_argument('iters', type=int, help='training iterations of each run')
    parser.add_argument('completed', choices=('true', 'false'), help='whether every run of the mode finished')
    parser.add_argument('runs', nargs='*', help="the finished runs, 'NAME CONFIG' each")
    args = parser.parse_args(argv)
    summary = summarize(args.out, args.mode, args.gpus, args.iters, args.completed == 'true', args.runs)
    path = args.out / f'downstream_{args.mode}.json'
    path.write_text(json.dumps(summary, indent=2) + '\n')
    print(f'wrote {path}')
    for r in summary['runs']:
        mem = f'{r["max_memory_mb"]} MB' if r['max_memory_mb'] is not None else 'n/a'
        print(f'{r["name"]:<12} {r["iter_time_s_median"]:.3f} s/iter  peak {mem}  {r["test_metrics"]}')
    return summary


if __name__ == '__main__':
    main()
