"""mmo1d.benchmark.scaling on run folders laid out as mmengine writes them (scalars.json, the
training log's environment block), for any set of GPU counts."""
import json
import statistics
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from mmo1d.benchmark import scaling


def _write_run(work: Path, processes: int, times: Sequence[float], losses: Sequence[float], memory: int) -> None:
    """A finished run: one logged window per (time, loss), 5 iterations apart."""
    vis = work / 'train' / '20261125_120000' / 'vis_data'
    vis.mkdir(parents=True)
    records = [dict(lr=1e-4, data_time=0.01, loss=loss, time=t, memory=memory + i, iter=5 * (i + 1), step=5 * (i + 1))
               for i, (t, loss) in enumerate(zip(times, losses))]
    (vis / 'scalars.json').write_text('\n'.join(json.dumps(r) for r in records) + '\n')
    (work / 'train.log').write_text(f'Runtime environment:\n    seed: 0\n    GPU number: {processes}\n')


def _runs(counts: Sequence[int]) -> Dict[str, Tuple[int, List[float], List[float]]]:
    """name -> (processes, iteration times (first window: warm-up), losses), distinct per run."""
    runs = {'1gpu-b2': (1, [2.0, 0.30, 0.32, 0.31, 0.29], [3.0, 2.5, 2.0, 1.8, 1.6])}
    for n in counts:
        if n == 1:
            continue
        slow = 0.02 * n
        runs[f'{n}gpu-b2'] = (n, [2.5] + [t + slow for t in (0.34, 0.33, 0.35, 0.36)], [3.0, 2.4, 2.0, 1.7, 1.5])
        runs[f'{n}gpu-b2-bn'] = (n, [2.5, 0.31, 0.32, 0.33, 0.31], [3.0, 2.4, 2.0, 1.72, 1.52])
        runs[f'1gpu-b{2 * n}'] = (1, [2.2, 0.5 * n, 0.52 * n, 0.51 * n, 0.53 * n], [3.0, 2.4, 2.0, 1.75, 1.55])
        runs[f'1gpu-b{2 * n}-order2'] = (1, [2.2, 0.5, 0.5, 0.5, 0.5], [3.0, 2.5, 2.1, 1.9, 1.7 + 0.1 * n])
    return runs


def _lay_out(root: Path, counts: Sequence[int], models=('seg', 'det'), skip: str = '') -> Dict:
    runs = _runs(counts)
    for model in models:
        for name, (processes, times, losses) in runs.items():
            if name != skip:
                _write_run(root / 'work' / model / name, processes, times, losses, memory=1000 * processes)
    return runs


def _late(losses: Sequence[float]) -> float:
    return statistics.fmean(losses[len(losses) // 2:])


@pytest.mark.parametrize('counts', [[1, 2], [1, 2, 4], [2, 3]])
def test_ratios_memory_syncbn_share_and_loss_check(tmp_path: Path, counts: List[int]) -> None:
    runs = _lay_out(tmp_path, counts)
    summary = scaling.main([str(tmp_path), '--iters', '25', '--counts', *map(str, counts)])
    # The results names of benchmarks/results: scaling_t1dpp_<machine>, here the CPU.
    assert json.loads((tmp_path / 'scaling_t1dpp_cpu.json').read_text()) == summary
    page = (tmp_path / 'scaling_t1dpp_cpu.md').read_text()
    assert summary['gpu_counts'] == sorted(set(counts) | {1})
    t1 = statistics.median(runs['1gpu-b2'][1][1:])
    for model in ('seg', 'det'):
        figures = {c['gpus']: c for c in summary['models'][model]['counts']}
        assert sorted(figures) == summary['gpu_counts']
        assert figures[1]['per_gpu_throughput_ratio'] == 1.0 and figures[1]['max_memory_mb'] == 1004
        for n in set(counts) - {1}:
            tn = statistics.median(runs[f'{n}gpu-b2'][1][1:])
            tbn = statistics.median(runs[f'{n}gpu-b2-bn'][1][1:])
            c = figures[n]
            # Per GPU, 2 images per iteration on either side: the ratio of the iteration times.
            assert c['per_gpu_throughput_ratio'] == pytest.approx(t1 / tn)
            assert c['per_gpu_throughput_ratio_bn_heads'] == pytest.approx(t1 / tbn)
            assert c['syncbn_share_of_iteration'] == pytest.approx((tn - tbn) / tn)
            assert c['max_memory_mb'] == 1000 * n + 4
            ref, other, sync = (_late(runs[k][2]) for k in (f'1gpu-b{2 * n}', f'1gpu-b{2 * n}-order2', f'{n}gpu-b2'))
            assert c['loss_gap_vs_1gpu_same_batch'] == pytest.approx(abs(sync - ref))
            assert c['loss_gap_between_data_orders'] == pytest.approx(abs(ref - other))
            assert c['loss_within_data_order_noise'] == (abs(sync - ref) <= abs(ref - other))
            assert f'| {scaling.MODELS[model]} | {n} | {t1 / tn:.3f} | {t1 / tbn:.3f} |' in page
            run = summary['models'][model]['runs'][f'{n}gpu-b2']
            assert run['processes'] == n and run['images_per_s'] == pytest.approx(2 * n / tn)


def test_run_names_follow_the_counts() -> None:
    assert scaling.run_names([1]) == ['1gpu-b2']
    assert scaling.run_names([4, 2, 2]) == ['1gpu-b2', '2gpu-b2', '2gpu-b2-bn', '1gpu-b4', '1gpu-b4-order2',
                                            '4gpu-b2', '4gpu-b2-bn', '1gpu-b8', '1gpu-b8-order2']


def test_a_missing_run_is_named(tmp_path: Path) -> None:
    _lay_out(tmp_path, [1, 2, 4], skip='4gpu-b2-bn')
    with pytest.raises(FileNotFoundError, match='4gpu-b2-bn'):
        scaling.main([str(tmp_path), '--iters', '25', '--counts', '1', '2', '4'])


def test_a_run_with_the_wrong_process_count_is_refused(tmp_path: Path) -> None:
    _lay_out(tmp_path, [2], models=('seg',))
    (tmp_path / 'work' / 'seg' / '2gpu-b2' / 'train.log').write_text('    GPU number: 1\n')
    with pytest.raises(ValueError, match='2gpu-b2 should have 2 processes'):
        scaling.main([str(tmp_path), '--iters', '25', '--counts', '2', '--models', 'seg'])


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match='at least 1'):
        scaling.check_counts([0, 2])
