"""mmo1d.benchmark.timing: the interleaved rounds of one group of cases, the spread of the rounds, and the
command record."""
import statistics
import sys

from mmo1d.benchmark.timing import command_line, measure_cases, round_spread


def test_cases_of_a_group_run_in_interleaved_rounds():
    calls = []
    values = {'a': [3.0, 1.0, 2.0], 'b': [9.0, 7.0, 8.0], 'masked': [50.0, 40.0]}

    def timer(fn, repeats, warmup):
        calls.append((fn, repeats, warmup))
        return [values[fn][len([c for c in calls if c[0] == fn]) - 1]] * repeats

    def rec(impl):
        return dict(impl=impl, dtype='bfloat16', layout='channels_last', H=14, K=7, angle_deg=None)

    cases = [(rec('mmo1d'), 'a'), (rec('masked_2d'), 'masked'), (rec('torch_horizontal'), 'b')]
    out = measure_cases(cases, repeats=10, rounds=3, warmup=5, timer=timer, peak=lambda fn: len(fn))
    # Round-robin over the cases, 4 calls each per round (ceil(10 / 3)); the masked baseline once.
    assert calls == [('a', 4, 5), ('masked', 10, 5), ('b', 4, 5), ('a', 4, 2), ('b', 4, 2), ('a', 4, 2),
                     ('b', 4, 2)]
    assert [r['ms'] for r in out] == [statistics.median([3.0] * 4 + [1.0] * 4 + [2.0] * 4), 50.0,
                                      statistics.median([9.0] * 4 + [7.0] * 4 + [8.0] * 4)]
    assert [r['peak_mem_bytes'] for r in out] == [1, 6, 1]
    assert [r['round_ms'] for r in out] == [[3.0, 1.0, 2.0], [50.0], [9.0, 7.0, 8.0]]
    assert [round_spread(r) for r in out] == [3.0, None, 9.0 / 7.0]
    assert round_spread({'round_ms': [2.0, None, 1.0]}) is None


def test_command_line_names_the_script_and_its_arguments(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'argv', [str(tmp_path / 'tools' / 'bench.py'), '--out-dir', 'x'])
    assert command_line() == 'python tools/bench.py --out-dir x'
