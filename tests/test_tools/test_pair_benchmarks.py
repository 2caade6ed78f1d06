"""What the pair benchmarks (tools/analysis_tools/benchmark_{layer_norm,residual}.py) share: the message
without a GPU, and an output folder made before the timed run (a missing one used to fail after it).
Each tool's summary table is tested in its own file."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools'
# (tool, GPU name, the files it writes for that GPU)
CASES = [('benchmark_layer_norm', 'NVIDIA H100 80GB HBM3', ['layer_norm_h100.json', 'layer_norm_h100.md']),
         ('benchmark_residual', 'NVIDIA H200', ['residual_h200.json', 'residual_h200.md'])]


def _load(tool):
    spec = importlib.util.spec_from_file_location(tool, TOOLS / f'{tool}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('tool', [case[0] for case in CASES])
def test_no_gpu_message(tool):
    if _load(tool).torch.cuda.is_available():
        pytest.skip('a GPU is present')
    proc = subprocess.run([sys.executable, str(TOOLS / f'{tool}.py')], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert 'no CUDA device' in proc.stderr and 'Traceback' not in proc.stderr


@pytest.mark.parametrize('tool,gpu,files', CASES)
def test_results_go_to_a_new_out_dir(tmp_path, monkeypatch, tool, gpu, files):
    bench = _load(tool)
    out = tmp_path / 'new' / 'dir'
    env = {'gpu': gpu, 'torch': 'x', 'cuda': 'x', 'driver': 'x', 'commit': 'abc1234', 'date': 'x', 'repeats': 51,
           'rounds': 3, 'copy_bandwidth_GBps': 3000.0, 'command': f'python tools/analysis_tools/{tool}.py'}

    def fake_run(args):
        assert out.is_dir()
        return {'env': env, 'records': []}

    monkeypatch.setattr(bench, 'run', fake_run)
    bench.main(['--out-dir', str(out)])
    assert sorted(p.name for p in out.iterdir()) == files
