"""The GPU work of a downstream iteration (``benchmark_downstream.py --kernel-times``): launches and the
part in mmo1d's kernels from profiler events, and the table that sets kernel time against the wall clock."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from mmo1d.benchmark.kernels import kernel_summary

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_downstream.py'
CUDA, CPU = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU


def event(name, us, count, device_type=CUDA):
    return SimpleNamespace(key=name, count=count, device_type=device_type, self_device_time_total=us)


def test_launches_and_own_kernel_time_per_step():
    events = [event('void mmo1d::cuda::win_gather_nhwc_kernel<c10::Half, 4, 1, false>(...)', 6000.0, 6),
              event('sm90_xmma_gemm', 3000.0, 12), event('Memcpy HtoD (Pageable -> Device)', 200.0, 4),
              event('aten::linear', 9e6, 12, device_type=CPU)]
    out = kernel_summary(events, steps=2)
    assert out['launches'] == pytest.approx((6 + 12 + 4) / 2)
    assert out['own_kernel_ms'] == pytest.approx(3.0)
    assert out['kernel_ms'] == pytest.approx(4.6)


def _tool():
    spec = importlib.util.spec_from_file_location('benchmark_downstream_kernels', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_kernel_table_sets_kernel_time_against_the_wall_clock():
    pytest.importorskip('mmseg')
    tool = _tool()
    recs = [dict(name='seg-stock', task='seg', baseline=True, s_per_iter_median=0.080, kernel_ms=40.0,
                 own_kernel_ms=0.0, launches=2000.0, kernel_steps=5),
            dict(name='seg-t-1dpp', task='seg', baseline=False, s_per_iter_median=0.100, kernel_ms=50.0,
                 own_kernel_ms=12.5, launches=2500.0, kernel_steps=5),
            dict(name='seg-t-1d', task='seg', baseline=False, s_per_iter_median=0.070)]
    tool.add_ratios(recs)
    assert recs[0]['gpu_busy'] == pytest.approx(0.5)
    assert recs[1]['gpu_busy'] == pytest.approx(0.5) and recs[1]['kernel_ms_ratio'] == pytest.approx(1.25)
    assert 'gpu_busy' not in recs[2]
    lines = tool.kernel_table(recs, 'seg-stock')
    assert '| seg-t-1dpp | 50.0 | 1.25 | 12.5 | 2500 | 0.50 |' in lines
    assert not any(line.startswith('| seg-t-1d |') for line in lines)
    assert tool.kernel_table(recs[2:], 'seg-stock') == []


def test_kernel_times_option_reaches_each_config_process():
    pytest.importorskip('mmseg')
    tool = _tool()
    args = tool.parse_args(['--device', 'cpu', '--kernel-times', '3'])
    argv = tool.worker_argv(args, 'seg-demo-1d', 'rec.json', 'work')
    assert argv[argv.index('--kernel-times') + 1] == '3'
    with pytest.raises(SystemExit):
        tool.parse_args(['--kernel-times', '-1'])
