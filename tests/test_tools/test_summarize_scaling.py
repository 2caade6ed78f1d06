""".dev_scripts/summarize_scaling.py on run folders laid out as mmengine writes them (scalars.json, the
training log's environment block)."""
import importlib.util
import json
import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location('summarize_scaling', REPO / '.dev_scripts' / 'summarize_scaling.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def _write_run(work: Path, processes: int, times, losses, memory) -> None:
    """A finished run: one logged window per (time, loss), 5 iterations apart."""
    vis = work / 'train' / '20261125_120000' / 'vis_data'
    vis.mkdir(parents=True)
    records = [dict(lr=1e-4, data_time=0.01, loss=loss, time=t, memory=memory + i, iter=5 * (i + 1), step=5 * (i + 1))
               for i, (t, loss) in enumerate(zip(times, losses))]
    (vis / 'scalars.json').write_text('\n'.join(json.dumps(r) for r in records) + '\n')
    (work / 'train.log').write_text(f'Runtime environment:\n    seed: 0\n    GPU number: {processes}\n')


RUNS = {
    # name: processes, iteration times (first window: warm-up), losses
    '1gpu-b2': (1, [2.0, 0.30, 0.32, 0.31, 0.29], [3.0, 2.5, 2.0, 1.8, 1.6]),
    '2gpu-b2': (2, [2.5, 0.34, 0.33, 0.35, 0.36], [3.0, 2.4, 2.0, 1.7, 1.5]),
    '1gpu-b4': (1, [2.2, 0.50, 0.52, 0.51, 0.53], [3.0, 2.4, 2.0, 1.75, 1.55]),
    '1gpu-b4-order2': (1, [2.2, 0.50, 0.52, 0.51, 0.53], [3.0, 2.5, 2.1, 1.9, 1.7]),
}


def test_ratios_memory_and_loss_check(tmp_path: Path) -> None:
    tool = _tool()
    for model in ('seg', 'det'):
        for name, (processes, times, losses) in RUNS.items():
            _write_run(tmp_path / 'work' / model / name, processes, times, losses, memory=1000 * processes)
    summary = tool.main([str(tmp_path), '--iters', '25'])
    assert json.loads((tmp_path / 'scaling.json').read_text()) == summary
    assert '| per-GPU throughput, 2 GPUs / 1 GPU |' in (tmp_path / 'scaling.md').read_text()
    seg = summary['models']['seg']
    one, two = seg['runs']['1gpu-b2'], seg['runs']['2gpu-b2']
    t1, t2 = statistics.median(RUNS['1gpu-b2'][1][1:]), statistics.median(RUNS['2gpu-b2'][1][1:])
    assert one['iter_time_s_median'] == t1 and two['iter_time_s_median'] == t2
    assert two['processes'] == 2 and two['images_per_s'] == pytest.approx(4 / t2)
    # Per GPU, 2 images per iteration on either machine size: the ratio of the iteration times.
    assert seg['per_gpu_throughput_ratio'] == pytest.approx(t1 / t2)
    assert seg['meets_0_90'] == (t1 / t2 >= 0.90)
    assert one['max_memory_mb'] == 1004 and two['max_memory_mb'] == 2004
    # The loss check compares the means of the second half of the windows (steps 15-25).
    late = {name: statistics.fmean(losses[2:]) for name, (_, _, losses) in RUNS.items()}
    assert seg['runs']['1gpu-b4']['late_iterations'] == [15, 25]
    assert seg['loss_gap_2gpu_vs_1gpu_same_batch'] == pytest.approx(abs(late['2gpu-b2'] - late['1gpu-b4']))
    assert seg['loss_gap_between_data_orders'] == pytest.approx(abs(late['1gpu-b4'] - late['1gpu-b4-order2']))
    assert seg['loss_within_data_order_noise'] is True


def test_a_missing_run_is_named(tmp_path: Path) -> None:
    tool = _tool()
    for name, (processes, times, losses) in RUNS.items():
        if name != '2gpu-b2':
            _write_run(tmp_path / 'work' / 'seg' / name, processes, times, losses, memory=1000)
    with pytest.raises(FileNotFoundError, match='2gpu-b2'):
        tool.main([str(tmp_path), '--iters', '25'])
