"""tools/analysis_tools/benchmark_op.py: the summary's ratios, the README table, the message without a GPU."""
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


def _record(impl, ms, angle=None, pass_='fwd', peak=100):
    return dict(impl=impl, dtype='bfloat16', layout='channels_last', H=56, K=31, angle_deg=angle,
                **{'pass': pass_}, ms=ms, peak_mem_bytes=peak)


def test_readme_table_uses_the_slowest_angle(tmp_path):
    records = [_record('torch_horizontal', 2.0), _record('torch_2d_7x7', 0.8), _record('masked_2d', 90.0)]
    records += [_record('mmo1d', 0.5 + 0.05 * i, angle=22.5 * i) for i in range(8)]
    records.append(_record('mmo1d', 0.6, angle='mixed8'))
    result = {'env': {'gpu': 'Test GPU', 'batch': 64, 'channels': 512, 'rounds': 3, 'repeats': 51,
                      'copy_bandwidth_GBps': 3000.0, 'torch': 'x', 'cuda': 'x', 'cudnn': 1, 'driver': 'x',
                      'date': 'x', 'command': 'x'}, 'records': records}
    path = tmp_path / 'r.json'
    path.write_text(json.dumps(result))
    table = bench.readme_table(json.loads(path.read_text()))
    slowest = 0.5 + 0.05 * 7
    assert f'| {slowest:.2f} | 2.00 ({slowest / 2.0:.2f}x) | 0.80 ({slowest / 0.8:.2f}x) |' in table
    summary = bench.summarize(result)
    assert 'median of 51 repeats in 3 interleaved rounds' in summary
    assert f'{slowest / 0.5:.2f}' in summary  # spread: slowest / fastest angle


def test_no_gpu_message():
    if bench.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    proc = subprocess.run([sys.executable, str(TOOL), '--sizes', '14'], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'no CUDA device' in proc.stderr and 'Traceback' not in proc.stderr
