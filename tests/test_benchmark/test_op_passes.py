"""mmo1d.benchmark.op_passes: each pass alone computes what the reference's autograd gives; the cases and the
table; and mmo1d.benchmark.op_host's calls and ratios on the CPU."""
import argparse

import pytest
import torch

from mmo1d.benchmark import op_host, op_passes
from mmo1d.benchmark.op_inputs import angles
from mmo1d.ops import oriented_dwconv1d_reference


@pytest.mark.parametrize('rounding, stride', [('trunc', 1), ('floor', 1), ('trunc', 2), ('floor', 3)])
def test_each_pass_gives_the_references_gradients(rounding, stride):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 9, 9, generator=g, dtype=torch.float64)
    ho = -(-9 // stride)
    dy, b = torch.randn(2, 8, ho, ho, generator=g, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    w = torch.randn(8, 5, generator=g, dtype=torch.float64)
    th = angles('mixed8', 8, 'cpu', 0.05, 0)
    calls = op_passes.pass_calls(x, dy, w, b, th, rounding, stride)
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ref = oriented_dwconv1d_reference(leaves[0], leaves[1], th, leaves[2], stride, rounding, residual=True)
    gx, gw, gb = torch.autograd.grad(ref, leaves, dy)
    torch.testing.assert_close(calls['fwd'](), ref.detach())
    (bx, ) = calls['bwd_input']()
    torch.testing.assert_close(bx, gx)
    bw, bb = calls['bwd_weight']()
    torch.testing.assert_close(bw, gw)
    torch.testing.assert_close(bb, gb)
    for got, want in zip(calls['fwdbwd'](), (gx, gw, gb)):
        torch.testing.assert_close(got, want)
    calls['bwd_input']()  # the kept graph serves any number of calls


def _args(**kw):
    base = dict(device='cpu', batch=1, channels=None, sizes=[9], kernel_sizes=[5], rounding=['trunc', 'bilinear'],
                passes=['fwd', 'bwd_input', 'bwd_weight'], configs=[('float32', 'nchw')], angles=['mixed8', 45.0],
                angle_jitter=0.0, strides=[1], seed=0, repeats=2, rounds=2, warmup=0, kernel_times=False,
                kernel_steps=3)
    return argparse.Namespace(**{**base, **kw})


def test_passes_run_and_table():
    result = op_passes.run(_args())
    recs = result['records']
    assert [(r['angle_deg'], r['rounding'], r['pass']) for r in recs] == [
        (a, r, p) for a in ('mixed8', 45.0) for r in ('trunc', 'bilinear') for p in ('fwd', 'bwd_input', 'bwd_weight')]
    assert all(r['C'] == 512 and r['path'] == 'cpu' and r['ms'] > 0 and len(r['round_ms']) == 2 for r in recs)
    md = op_passes.summarize(result)
    row = next(line for line in md.splitlines() if line.startswith('| float32, nchw | 1x512x9x9, 5 | 45.0 | bilinear'))
    cells = row.strip('| ').split(' | ')
    fwd, bi, bw, total = (float(c) for c in cells[4:8])
    assert total == pytest.approx(fwd + bi + bw, abs=2e-3)


def test_strided_cases_name_their_stride():
    result = op_passes.run(_args(rounding=['trunc'], passes=['fwd', 'bwd_input'], angles=['mixed8'], strides=[1, 2]))
    assert [(r.get('stride', 1), r['pass']) for r in result['records']] == [(1, 'fwd'), (1, 'bwd_input'),
                                                                            (2, 'fwd'), (2, 'bwd_input')]
    md = op_passes.summarize(result)
    assert '| float32, nchw | 1x512x9x9, 5 | mixed8 |' in md
    assert '| float32, nchw | 1x512x9x9, 5, stride 2 | mixed8 |' in md


def test_host_time_per_call_on_the_cpu():
    args = _args(batch=1, channels=8, rounding=['trunc'], passes=['fwd', 'fwdbwd'], angles=['mixed8'],
                 repeats=6, rounds=3, warmup=1)
    result = op_host.run(args)
    keys = [(r['impl'], r['pass']) for r in result['records']]
    assert keys == [('conv2d_1xK', 'fwd'), ('conv2d_1xK', 'fwdbwd'), ('conv2d_7x7', 'fwd'), ('conv2d_7x7', 'fwdbwd'),
                    ('mmo1d', 'fwd'), ('mmo1d', 'fwdbwd'), ('empty_like', 'fwd')]
    assert all(len(r['round_us']) == 3 and r['host_us'] > 0 for r in result['records'])
    md = op_host.summarize(result)
    ours = next(r for r in result['records'] if (r['impl'], r['pass']) == ('mmo1d', 'fwd'))
    ref = next(r for r in result['records'] if (r['impl'], r['pass']) == ('conv2d_1xK', 'fwd'))
    assert f"| mmo1d | trunc | fwd | {ours['host_us']:.1f} | {ours['host_us'] / ref['host_us']:.2f}x |" in md


def test_kernel_times_join_each_record_and_get_a_table(monkeypatch):
    profiled = []

    def fake_profile(step, steps, top):  # torch.profiler's CUDA kernels need a GPU: their sum stands in
        step()
        profiled.append(steps)
        return {'kernel_ms': 0.25 * len(profiled), 'own_kernel_ms': 0.2, 'launches': 2.0}

    monkeypatch.setattr(op_passes, 'profile_kernels', fake_profile)
    result = op_passes.run(_args(rounding=['trunc'], angles=['mixed8'], kernel_times=True, kernel_steps=3))
    recs = result['records']
    assert profiled == [3, 3, 3] and result['env']['kernel_steps'] == 3
    assert [(r['pass'], r['kernel_ms'], r['launches']) for r in recs] == [
        ('fwd', 0.25, 2.0), ('bwd_input', 0.5, 2.0), ('bwd_weight', 0.75, 2.0)]
    md = op_passes.summarize(result)
    kernel_table = md.split('Kernel time in ms per call')[1]
    assert '| float32, nchw | 1x512x9x9, 5 | mixed8 | trunc | 0.250 | 0.500 | 0.750 | 1.500 | - | cpu |' in kernel_table
