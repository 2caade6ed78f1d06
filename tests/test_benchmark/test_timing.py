"""mmo1d.benchmark.timing: the interleaved rounds of one group of cases, the spread of the rounds, the
command record, and a step captured in a CUDA graph (on a GPU)."""
import re
import statistics
import sys

import pytest
import torch

from mmo1d.benchmark import timing
from mmo1d.benchmark.timing import capture_cuda_graph, command_line, measure_cases, round_spread


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


def test_failed_capture_ends_the_allocators_capture(monkeypatch):
    """After a capture that failed before its end, the pool stops receiving allocations and is released
    once; after one that ended (and failed later), the graph releases it, so nothing is done."""
    calls = []

    def end(device, pool):
        calls.append(('end', device, pool))
        if pool == (0, 2):
            raise RuntimeError('endAllocatePool: not currently recording to mempool_id')

    monkeypatch.setattr(torch.cuda, 'current_device', lambda: 0)
    monkeypatch.setattr(torch._C, '_cuda_endAllocateToPool', end, raising=False)
    monkeypatch.setattr(torch._C, '_cuda_releasePool', lambda device, pool: calls.append(('release', device, pool)),
                        raising=False)
    timing._end_failed_capture((0, 1))
    timing._end_failed_capture((0, 2))
    assert calls == [('end', 0, (0, 1)), ('release', 0, (0, 1)), ('end', 0, (0, 2))]
    monkeypatch.delattr(torch._C, '_cuda_releasePool')
    timing._end_failed_capture((0, 3))  # a torch without the bindings: nothing to call
    assert len(calls) == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_captured_step_replays_on_its_static_input():
    x = torch.ones(1024, device='cuda')
    out = torch.zeros_like(x)
    calls = []

    def step():
        calls.append(1)
        out.copy_(x * 2 + 1)

    caller = torch.cuda.current_stream()
    graph = capture_cuda_graph(step, warmup=2)
    assert len(calls) == 3  # two warm-up calls and the capture; replays do not run Python
    assert torch.cuda.current_stream() == caller
    x.fill_(5.0)
    graph.replay()
    torch.cuda.synchronize()
    assert len(calls) == 3 and torch.equal(out, torch.full_like(x, 11.0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_failed_capture_raises_and_restores_the_stream():
    x = torch.ones(16, device='cuda')
    caller = torch.cuda.current_stream()
    with pytest.raises(RuntimeError):
        capture_cuda_graph(lambda: (x + 1).sum().item(), warmup=1)  # a host sync cannot be captured
    assert torch.cuda.current_stream() == caller
    # The device and the allocator still work after the failed capture, and so does a new capture.
    assert (x + 1).sum().item() == 32.0
    torch.cuda.empty_cache()
    out = torch.zeros_like(x)
    graph = capture_cuda_graph(lambda: out.copy_(x + 2), warmup=1)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full_like(x, 3.0))
    del graph
    torch.cuda.empty_cache()


def test_cpu_samples_and_host_time_call_as_told(monkeypatch):
    calls = []
    times = iter(range(0, 1000, 2))  # every perf_counter reading 2 s after the last
    monkeypatch.setattr(timing.time, 'perf_counter', lambda: next(times))
    assert timing.cpu_samples(calls.append, repeats=3, warmup=2) == [2000.0] * 3
    assert calls == [0, 1, 0, 1, 2]
    synced = []
    us = timing.host_us_per_call(lambda: calls.append('c'), calls=4, rounds=2, warmup=1, sync=lambda: synced.append(1))
    assert us == [2 / 4 * 1e6] * 2 and calls.count('c') == 1 + 2 * 4 and len(synced) == 3


def test_git_commit_and_cpu_env(tmp_path, monkeypatch):
    monkeypatch.delenv('SOURCE_COMMIT', raising=False)
    assert timing.git_commit(str(tmp_path)) == 'unknown'
    monkeypatch.setenv('SOURCE_COMMIT', '1234abc')  # a copy of the tree names the commit it was made from
    assert timing.git_commit(str(tmp_path)) == '1234abc'
    # ... also where the copy carries a .git of another commit: the named commit is the one built.
    assert timing.git_commit() == '1234abc'
    monkeypatch.delenv('SOURCE_COMMIT')
    short, full = timing.git_commit(), timing.git_commit(full=True)
    assert short != '1234abc'
    # The records of runs (downstream, scaling) name all 40 digits; the others the short form.
    assert re.fullmatch(r'[0-9a-f]{40}(\+dirty)?', full) and full.startswith(short.split('+')[0])
    env = timing.device_env('cpu')
    assert env['gpu'] == 'cpu' and env['driver'] is None and env['threads'] == torch.get_num_threads()
    assert env['command'].startswith('python ')
