"""tools/analysis_tools/benchmark_residual.py: the summary table (what it shares with
the other pair benchmark: test_pair_benchmarks.py)."""
import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_residual.py'
_spec = importlib.util.spec_from_file_location('benchmark_residual', TOOL)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_summary_pairs_each_case_with_its_baseline():
    env = {'gpu': 'Test GPU', 'torch': 'x', 'cuda': 'x', 'driver': 'x', 'commit': 'abc1234', 'date': 'x',
           'repeats': 51, 'rounds': 3, 'copy_bandwidth_GBps': 3000.0,
           'command': 'python tools/analysis_tools/benchmark_residual.py'}
    base = dict(site='stage 1', shape=[64, 96, 56, 56], dtype='bfloat16', per_image=False)
    records = [dict(base, impl='mmo1d', ms=0.1, **{'pass': 'fwd'}), dict(base, impl='aten', ms=0.4, **{'pass': 'fwd'}),
               dict(base, impl='mmo1d', ms=0.5, **{'pass': 'fwdbwd'}),
               dict(base, impl='aten', ms=0.8, **{'pass': 'fwdbwd'})]
    md = bench.summarize({'env': env, 'records': records})
    # float32 shortcut and output, bf16 branch: 10 bytes per element in 0.1 ms.
    gbps = 64 * 96 * 56 * 56 * 10 / 1e-4 / 1e9
    assert f'| fwd | 0.100 | 0.400 | 0.25x | {gbps:.0f} |' in md
    assert '| fwdbwd | 0.500 | 0.800 | 0.62x |  |' in md
    assert md.count('| stage 1 |') == 2
    assert 'commit abc1234' in md
