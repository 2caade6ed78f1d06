"""tools/analysis_tools/benchmark_op_cpu.py: a tiny run per label writes every case to the results file
(a label run again replaces its run), and the markdown's ratios are those of the stored times."""
import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_op_cpu.py'
_spec = importlib.util.spec_from_file_location('benchmark_op_cpu', TOOL)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

ARGS = ['--batch', '1', '--channels', '16', '--size', '9', '--kernel-sizes', '3', '5', '--threads', '1',
        '--repeats', '2', '--rounds', '2', '--warmup', '0']


def test_runs_per_label_and_ratios(tmp_path):
    for label in ('before', 'after', 'before'):
        tool.main(ARGS + ['--label', label, '--out-dir', str(tmp_path)])
    (json_path, ) = tmp_path.glob('cpu_op_*.json')
    runs = json.loads(json_path.read_text())['runs']
    assert list(runs) == ['after', 'before']  # the repeated label replaced its run and moved last
    for run in runs.values():
        keys = sorted((r['impl'], r['layout'], r['K'], r['pass'], str(r['angle_deg'])) for r in run['records'])
        impls = [('torch_horizontal', None)] + [('mmo1d', a) for a in tool.ANGLES + ['mixed8']]
        expected = sorted((impl, layout, k, pas, str(a)) for layout in ('nchw', 'channels_last') for k in (3, 5)
                          for pas in ('fwd', 'fwdbwd') for impl, a in impls)
        assert keys == expected and all(r['ms'] > 0 for r in run['records'])
        assert run['env']['threads'] == 1 and run['env']['channels'] == 16 and run['env']['repeats'] == 2
    md = json_path.with_suffix('.md').read_text()
    assert '## Change: after -> before' in md and md.index('## after') < md.index('## before')
    # Every row of the last run's table: the slowest single angle and mixed8 over PyTorch's time.
    recs = runs['before']['records']
    section = md[md.index('## before'):]
    for layout in ('nchw', 'channels_last'):
        for pas in ('fwd', 'fwdbwd'):
            for k in (3, 5):
                ours = {r['angle_deg']: r['ms'] for r in recs
                        if (r['impl'], r['layout'], r['pass'], r['K']) == ('mmo1d', layout, pas, k)}
                ref = next(r['ms'] for r in recs
                           if (r['impl'], r['layout'], r['pass'], r['K']) == ('torch_horizontal', layout, pas, k))
                row = next(line for line in section.splitlines() if line.startswith(f'| {layout} | {pas} | {k} |'))
                cells = row.strip('| ').split(' | ')
                assert float(cells[-2].rstrip('x')) == pytest.approx(max(ours[a] for a in tool.ANGLES) / ref,
                                                                     abs=0.006)
                assert float(cells[-1].rstrip('x')) == pytest.approx(ours['mixed8'] / ref, abs=0.006)


def test_results_name():
    assert tool.results_name('AMD EPYC 9R14 96-Core Processor') == 'cpu_op_AMD_EPYC_9R14_96_Core_Processor'
    assert tool.results_name('???') == 'cpu_op_cpu'
