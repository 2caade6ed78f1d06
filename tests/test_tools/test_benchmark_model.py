"""tools/analysis_tools/benchmark_model.py: the CPU smoke path writes complete results (the median over
rounds) in the fp32, bf16 and fp16 modes, scales the fp16 training loss as AmpOptimWrapper does, and skips
a missing timm."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_model.py'
_spec = importlib.util.spec_from_file_location('benchmark_model', TOOL)
benchmark_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchmark_tool)


def test_cpu_smoke(tmp_path, capsys, monkeypatch):
    # Hide timm whether or not it is installed: the baseline must be skipped with a message.
    monkeypatch.setitem(sys.modules, 'timm', None)
    result = benchmark_tool.main(['--device', 'cpu', '--batch-size', '2', '--img-size', '64', '--archs', 'tiny',
                                  '--variants', '1dpp', '--repeats', '1', '--rounds', '3', '--warmup', '0',
                                  '--out-dir', str(tmp_path)])
    out = capsys.readouterr().out
    assert 'timm is not installed: skipping the timm ConvNeXt baseline' in out
    records = result['records']
    assert {(r['model'], r['mode'], r['pass']) for r in records} == {
        ('ConvNeXt-T-1D++ (mmo1d)', mode, pas) for mode in ('fp32', 'bf16', 'fp16') for pas in ('infer', 'train')}
    assert all(r['ms'] > 0 and abs(r['img_per_s'] - 2 / (r['ms'] * 1e-3)) < 0.1 for r in records)
    # One time per round; the reported time is their median.
    assert all(len(r['round_ms']) == 3 and r['ms'] == sorted(r['round_ms'])[1] for r in records)
    # Only the fp16 training step scales its loss: a dynamic GradScaler's scale, a power of two that
    # starts at 2**16 and only halves (on overflow) or doubles after 2000 clean steps.
    scaled = {(r['mode'], r['pass']): r['loss_scale'] for r in records if 'loss_scale' in r}
    assert list(scaled) == [('fp16', 'train')]
    scale = scaled['fp16', 'train']
    assert 0 < scale <= 2.0**16 and math.log2(scale) == int(math.log2(scale))
    saved = json.loads((tmp_path / 'models_cpu.json').read_text())
    assert saved['records'] == records and saved['env']['gpu'] == 'cpu' and saved['env']['timm'] is None
    assert saved['env']['command'].startswith('python ')
    md = (tmp_path / 'models_cpu.md').read_text()
    assert '| ConvNeXt-T-1D++ (mmo1d) |' in md and '## bf16' in md and '## fp16' in md and 'timm not installed' in md
    assert f"Command: `{saved['env']['command']}`" in md


def test_no_gpu_message():
    if benchmark_tool.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    result = subprocess.run([sys.executable, str(TOOL), '--archs', 'tiny'], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and 'no CUDA device' in result.stderr


def test_readme_table_from_committed_results(capsys):
    """The README table is the committed results file's ratios to timm: every cell recomputed here."""
    path = Path(__file__).resolve().parents[2] / 'benchmarks' / 'results' / 'models_NVIDIA_H100_80GB_HBM3.json'
    result = json.loads(path.read_text())
    assert benchmark_tool.main(['--readme-table', str(path)]) == {}
    lines = capsys.readouterr().out.strip().splitlines()
    table = lines[4:lines.index('', 4)]
    rows = {line.split(' | ')[0].lstrip('| '): line.strip('| ').split(' | ')[1:] for line in table}
    recs = {(r['model'], r['mode'], r['pass']): r for r in result['records']}
    modes = list(dict.fromkeys(r['mode'] for r in result['records']))
    ours = [m for m in dict.fromkeys(r['model'] for r in result['records']) if '(mmo1d)' in m]
    assert sorted(rows) == sorted(m.replace(' (mmo1d)', '') for m in ours)
    for model in ours:
        timm = 'timm convnext_' + ('tiny' if model.startswith('ConvNeXt-T') else 'base')
        cells = rows[model.replace(' (mmo1d)', '')]
        for i, mode in enumerate(modes):
            expected = [recs[model, mode, p]['img_per_s'] / recs[timm, mode, p]['img_per_s']
                        for p in ('infer', 'train')]
            assert [float(v) for v in cells[i].split(' / ')] == pytest.approx(expected, abs=0.005)
        memory = [recs[model, m, 'train']['peak_mem_bytes'] / recs[timm, m, 'train']['peak_mem_bytes'] for m in modes]
        assert [float(v) for v in cells[-1].split(' / ')] == pytest.approx(memory, abs=0.005)
    # Under the table: the largest slowest / fastest round ratio of each mode.
    spreads = {m: max(max(r['round_ms']) / min(r['round_ms']) for r in result['records'] if r['mode'] == m)
               for m in modes}
    assert lines[-1] == (f"Slowest / fastest of the {result['env']['rounds']} rounds of one model and pass, at most: "
                         + ', '.join(f'{m} {v:.2f}' for m, v in spreads.items()) + '.')


def test_summarize_rewrites_the_committed_markdown(capsys):
    """--summarize prints the markdown that the run wrote next to its results file."""
    path = Path(__file__).resolve().parents[2] / 'benchmarks' / 'results' / 'models_NVIDIA_H100_80GB_HBM3.json'
    assert benchmark_tool.main(['--summarize', str(path)]) == {}
    assert capsys.readouterr().out == path.with_suffix('.md').read_text()
