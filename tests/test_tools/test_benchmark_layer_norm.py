"""tools/analysis_tools/benchmark_layer_norm.py: the summary table (what it shares with
the other pair benchmark: test_pair_benchmarks.py)."""
import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_layer_norm.py'
_spec = importlib.util.spec_from_file_location('benchmark_layer_norm', TOOL)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_summary_pairs_each_case_with_its_baseline():
    env = {'gpu': 'Test GPU', 'torch': 'x', 'cuda': 'x', 'driver': 'x', 'date': 'x', 'repeats': 51, 'rounds': 3,
           'copy_bandwidth_GBps': 3000.0, 'command': 'python tools/analysis_tools/benchmark_layer_norm.py'}
    base = dict(site='block norm, stage 1', shape=[64, 56, 56, 96], dtype='bfloat16', gelu=False, mode='bf16')
    records = [dict(base, impl='mmo1d', ms=0.1, **{'pass': 'fwd'}), dict(base, impl='aten', ms=0.4, **{'pass': 'fwd'}),
               dict(base, impl='mmo1d', ms=0.5, **{'pass': 'fwdbwd'}),
               dict(base, impl='aten', ms=0.8, **{'pass': 'fwdbwd'})]
    md = bench.summarize({'env': env, 'records': records})
    # bf16 in and out: 4 bytes per element in 0.1 ms.
    gbps = 64 * 56 * 56 * 96 * 4 / 1e-4 / 1e9
    assert f'| fwd | 0.100 | 0.400 | 0.25x | {gbps:.0f} |' in md
    assert '| fwdbwd | 0.500 | 0.800 | 0.62x |  |' in md
    assert md.count('block norm, stage 1') == 2
