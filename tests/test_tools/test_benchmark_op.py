"""tools/analysis_tools/benchmark_op.py: the summary's ratios, the README table, float16 next to bfloat16 in
the tables and the figure, the message without a GPU."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_op.py'
_spec = importlib.util.spec_from_file_location('benchmark_op', TOOL)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _record(impl, ms, angle=None, pass_='fwd', peak=100, dtype='bfloat16'):
    return dict(impl=impl, dtype=dtype, layout='channels_last', H=56, K=31, angle_deg=angle,
                **{'pass': pass_}, ms=ms, peak_mem_bytes=peak)


def _env():
    return {'gpu': 'Test GPU', 'batch': 64, 'channels': 512, 'rounds': 3, 'repeats': 51,
            'copy_bandwidth_GBps': 3000.0, 'torch': 'x', 'cuda': 'x', 'cudnn': 1, 'driver': 'x',
            'date': 'x', 'command': 'python tools/analysis_tools/benchmark_op.py --dtypes float16'}


def test_readme_table_uses_the_slowest_angle(tmp_path):
    records = [_record('torch_horizontal', 2.0), _record('torch_2d_7x7', 0.8), _record('masked_2d', 90.0)]
    records += [_record('mmo1d', 0.5 + 0.05 * i, angle=22.5 * i) for i in range(8)]
    records.append(_record('mmo1d', 0.6, angle='mixed8'))
    result = {'env': _env(), 'records': records}
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(result))
    table = bench.readme_table(json.loads(path.read_text()))
    slowest = 0.5 + 0.05 * 7
    assert f'| {slowest:.2f} | 2.00 ({slowest / 2.0:.2f}x) | 0.80 ({slowest / 0.8:.2f}x) |' in table
    summary = bench.summarize(result)
    assert 'median of 51 repeats in 3 interleaved rounds' in summary
    assert f'{slowest / 0.5:.2f}' in summary  # spread: slowest / fastest angle


def test_float16_is_benchmarked_like_bfloat16(tmp_path):
    assert bench.CONFIGS['float16'] == (bench.torch.float16, 'channels_last')
    assert bench.parse_args([]).dtypes == ['float32', 'bfloat16', 'float16']
    records = []
    for dtype, ms in (('bfloat16', 1.0), ('float16', 0.8)):
        for pass_, scale in (('fwd', 1.0), ('fwdbwd', 3.0)):
            records += [_record('torch_horizontal', 2.0 * scale, pass_=pass_, dtype=dtype),
                        _record('torch_2d_7x7', 0.5 * scale, pass_=pass_, dtype=dtype),
                        _record('mmo1d', ms * scale, angle='mixed8', pass_=pass_, dtype=dtype)]
            records += [_record('mmo1d', ms * scale, angle=22.5 * i, pass_=pass_, dtype=dtype) for i in range(8)]
    result = {'env': _env(), 'records': records}
    summary = bench.summarize(result)
    assert '## float16, channels_last, forward\n' in summary
    assert '## float16, channels_last, forward + backward\n' in summary
    assert 'Command: `python tools/analysis_tools/benchmark_op.py --dtypes float16`' in summary
    # Roofline of 2-byte elements: x and y of N*C*H*H halves over the slowest angle's time.
    roof = 100 * 2 * 64 * 512 * 56 * 56 * 2 / 0.8e-3 / 3000e9
    fp16_fwd = summary.split('## float16, channels_last, forward\n')[1].split('\n\n')[0].strip().splitlines()[2]
    assert fp16_fwd.startswith('| 56 | 31 | 0.800 |') and f'| {roof:.0f}% |' in fp16_fwd
    table = bench.readme_table(result)
    assert '| float16, channels_last | fwd | 56 | 0.80 | 2.00 (0.40x) | 0.50 (1.60x) |' in table
    assert '| float16, channels_last | fwdbwd | 56 | 2.40 | 6.00 (0.40x) | 1.50 (1.60x) |' in table
    fig = bench.plot_op_benchmark(result, str(tmp_path / 'op.png'))
    assert [ax.get_title() for ax in fig.axes] == [
        f'{dtype} channels_last, {name}, H=56' for dtype in ('bfloat16', 'float16')
        for name in ('forward', 'forward + backward')]


def test_no_gpu_message():
    if bench.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    proc = subprocess.run([sys.executable, str(TOOL), '--sizes', '14'], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'no CUDA device' in proc.stderr and 'Traceback' not in proc.stderr


def test_results_go_to_a_new_out_dir(tmp_path, monkeypatch):
    """The output folder is made before the timed run (a missing one used to fail after it)."""
    out = tmp_path / 'new' / 'dir'
    records = [_record('torch_horizontal', 2.0), _record('torch_2d_7x7', 0.8)]
    records += [_record('mmo1d', 0.5, angle=22.5 * i) for i in range(8)] + [_record('mmo1d', 0.6, angle='mixed8')]

    def fake_run(args):
        assert out.is_dir()
        return {'env': _env(), 'records': records}

    monkeypatch.setattr(bench, 'run', fake_run)
    bench.main(['--out-dir', str(out)])
    assert sorted(p.name for p in out.iterdir()) == ['Test_GPU.json', 'Test_GPU.md', 'Test_GPU.png']
    assert json.loads((out / 'Test_GPU.json').read_text())['records'] == records
