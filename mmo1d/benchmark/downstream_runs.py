"""The iteration times, peak memory and test metrics of ``.dev_scripts/gpu_downstream.sh``'s short
train-and-test runs (modes ``single``, ``dist`` and ``cpu-check``).

Reads, for every finished run ``NAME CONFIG``, the training scalars
(``OUT/work/MODE/NAME/train/<timestamp>/vis_data/scalars.json``), the test metrics
(``.../test/<timestamp>/<timestamp>.json``) and the two logs, and writes them with the environment
to ``OUT/downstream_train_test_<N>gpu_<machine>.json`` (``downstream_train_test_cpu.json`` for
``cpu-check``), the names of ``benchmarks/results``::

    python -m mmo1d.benchmark.downstream_runs OUT MODE GPUS ITERS COMPLETED 'NAME CONFIG' ...
"""
import argparse
import json
import statistics
from pathlib import Path
from typing import Dict, List, Optional

from mmo1d.benchmark.names import machine_tag, results_stem
from mmo1d.benchmark.run_logs import ddp_errors, environment, latest_run, train_records, world_size


def run_record(work: Path, name: str, config: str, iters: int, gpus: int) -> Dict:
    """Times, memory, final loss, process counts and test metrics of one run in ``work``."""
    train = train_records(work / 'train')
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


def summarize(out: Path, mode: str, gpus: int, iters: int, completed: bool, runs: List[str]) -> Dict:
    """The summary of the finished ``runs`` (``'NAME CONFIG'`` each) of ``mode`` under ``out``."""
    results = []
    for run in runs:
        name, config = run.split(' ', 1)
        results.append(run_record(out / 'work' / mode / name, name, config, iters, gpus))
    return dict(
        mode=mode,
        gpus=gpus,
        **environment(),
        command=f'bash .dev_scripts/gpu_downstream.sh OUT_DIR {mode}',
        completed=completed,
        runs=results,
    )


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('out', type=Path, help='OUT_DIR of gpu_downstream.sh')
    parser.add_argument('mode', help='single, dist or cpu-check')
    parser.add_argument('gpus', type=int)
    parser.add_argument('iters', type=int, help='training iterations of each run')
    parser.add_argument('completed', choices=('true', 'false'), help='whether every run of the mode finished')
    parser.add_argument('runs', nargs='*', help="the finished runs, 'NAME CONFIG' each")
    args = parser.parse_args(argv)
    summary = summarize(args.out, args.mode, args.gpus, args.iters, args.completed == 'true', args.runs)
    stem = results_stem('downstream_train_test', f'{args.gpus}gpu' if args.gpus else None,
                        tag=machine_tag(summary['device']))
    path = args.out / f'{stem}.json'
    path.write_text(json.dumps(summary, indent=2) + '\n')
    print(f'wrote {path}')
    for r in summary['runs']:
        mem = f'{r["max_memory_mb"]} MB' if r['max_memory_mb'] is not None else 'n/a'
        print(f'{r["name"]:<12} {r["iter_time_s_median"]:.3f} s/iter  peak {mem}  {r["test_metrics"]}')
    return summary


if __name__ == '__main__':
    main()
