"""mmo1d.benchmark.op_interp: the implementations per rounding, the cases run on the CPU (gradients, paths,
records), the ratios and tables from synthetic records, the files written."""
import argparse
import json
import math
from pathlib import Path

import torch

from mmo1d.benchmark import op_interp
from mmo1d.benchmark.op_inputs import perturbed_angles
from mmo1d.ops import oriented_angles

ALL = ('trunc', 'bilinear', 'gaussian', 'bilinear_fixed')


def _args(**kw):
    base = dict(device='cpu', batch=2, channels=16, sizes=[11], kernel_sizes=[7], rounding=['bilinear', 'gaussian'],
                passes=['fwd', 'fwdbwd'], configs=[('float32', 'nchw'), ('bfloat16', 'channels_last')], seed=0,
                angle_jitter=0.05, repeats=4, rounds=2, warmup=0)
    return argparse.Namespace(**{**base, **kw})


def test_implementations_follow_the_roundings():
    assert list(op_interp.implementations(['bilinear', 'gaussian'])) == list(ALL)
    assert op_interp.implementations(['gaussian']) == {'trunc': ('trunc', False), 'gaussian': ('gaussian', True)}
    assert op_interp.implementations(['floor']) == {'trunc': ('trunc', False), 'floor': ('floor', False)}
    assert (op_interp.default_channels('float32'), op_interp.default_channels('float16')) == (512, 384)


def test_angles_are_moved_off_the_lattice_the_same_way_each_time():
    theta = perturbed_angles(64, 0.05, 0)
    off = theta - oriented_angles(64)
    assert theta.dtype == torch.float32 and theta.shape == (64,)
    assert 0 < off.abs().max() <= 0.05 and off.abs().min() > 0
    assert torch.equal(theta, perturbed_angles(64, 0.05, 0))
    assert not torch.equal(theta, perturbed_angles(64, 0.05, 1))


def test_cases_run_on_the_cpu():
    args = _args()
    cases = op_interp.make_cases('bfloat16', 'channels_last', args, 'cpu')
    assert [(r['impl'], r['pass']) for r, _ in cases] == [(i, p) for i in ALL for p in ('fwd', 'fwdbwd')]
    for rec, step in cases:
        assert rec['paths'] == {p: 'cpu' for p in ('forward', 'backward_input', 'backward_weight')}
        assert (rec['dtype'], rec['layout'], rec['N'], rec['C'], rec['H'], rec['K']) == (
            'bfloat16', 'channels_last', 2, 16, 11, 7)
        grads = step(0)
        if rec['pass'] == 'fwd':
            assert grads is None
            continue
        assert len(grads) == (4 if rec['theta_grad'] else 3)  # x, weight, bias, and theta where learnable
        assert grads[0].shape == (2, 16, 11, 11) and grads[0].dtype == torch.bfloat16
        assert grads[0].is_contiguous(memory_format=torch.channels_last)
        if rec['theta_grad']:
            assert grads[3].dtype == torch.float32 and torch.isfinite(grads[3]).all() and grads[3].abs().sum() > 0
    # The same tensors and angles for every implementation: the roundings' input gradients differ, those of
    # bilinear with and without the angles' gradient do not.
    grads = {rec['impl']: step(0)[0] for rec, step in cases if rec['pass'] == 'fwdbwd'}
    assert torch.equal(grads['bilinear'], grads['bilinear_fixed'])
    assert not torch.equal(grads['bilinear'], grads['trunc'])
    assert not torch.equal(grads['bilinear'], grads['gaussian'])
    calls = []

    def timer(fn, repeats, warmup):
        calls.append(repeats)
        return [1.0 + len(calls) % 3] * repeats

    records = op_interp.measure(args, 'cpu', timer=timer, peak=lambda fn: 1000)
    assert len(records) == 2 * len(ALL) * 2 and [r['dtype'] for r in records[::8]] == ['float32', 'bfloat16']
    assert records[0]['layout'] == 'nchw' and all(len(r['round_ms']) == args.rounds for r in records)
    rows = op_interp.ratios(records)
    assert [(r['dtype'], r['impl']) for r in rows] == [(d, i) for d in ('float32', 'bfloat16') for i in ALL[1:]]
    assert all(r['memory_ratio'] == 1.0 for r in rows)


def _record(impl, pass_, ms, peak, dtype='float32', layout='nchw', c=512):
    rounding, theta_grad = op_interp.implementations(['bilinear', 'gaussian'])[impl]
    paths = {'forward': f'{impl}_fwd', 'backward_input': f'{impl}_bi', 'backward_weight': f'{impl}_bw'}
    return dict(impl=impl, rounding=rounding, theta_grad=theta_grad, dtype=dtype, layout=layout, N=64, C=c, H=56,
                W=56, K=31, **{'pass': pass_}, paths=paths, ms=ms, round_ms=[ms * 0.9, ms, ms * 1.2],
                peak_mem_bytes=peak)


def _synthetic():
    times = {'trunc': (1.0, 2.0), 'bilinear': (1.5, 2.8), 'gaussian': (2.5, 6.4), 'bilinear_fixed': (1.4, 2.4)}
    peaks = {'trunc': 1000 * 2**20, 'bilinear': 1040 * 2**20, 'gaussian': 1100 * 2**20, 'bilinear_fixed': 1000 * 2**20}
    records = []
    for dtype, layout, c, scale in (('float32', 'nchw', 512, 1.0), ('float16', 'channels_last', 384, 0.5)):
        for impl in ALL:
            for pass_, ms in zip(('fwd', 'fwdbwd'), times[impl]):
                records.append(_record(impl, pass_, ms * scale, peaks[impl], dtype, layout, c))
    env = {'gpu': 'Test GPU', 'torch': 't', 'cuda': 'c', 'cudnn': 1, 'driver': 'd', 'date': 'x', 'batch': 64,
           'size': 56, 'kernel_size': 31, 'repeats': 30, 'rounds': 6, 'angle_jitter': 0.05, 'seed': 0,
           'copy_bandwidth_GBps': 3000.0, 'commit': 'abc1234',
           'command': 'python tools/analysis_tools/benchmark_op.py --rounding bilinear gaussian'}
    return {'env': env, 'records': records, 'ratios': op_interp.ratios(records), 'anchor': op_interp.ANCHOR}


def test_ratios_against_trunc_and_their_targets():
    rows = {(r['dtype'], r['impl']): r for r in _synthetic()['ratios']}
    assert len(rows) == 6
    bil, gau, fixed = rows['float32', 'bilinear'], rows['float32', 'gaussian'], rows['float32', 'bilinear_fixed']
    assert (bil['fwd_ratio'], bil['fwdbwd_ratio'], bil['fwdbwd_target']) == (1.5, 1.4, 1.5)
    assert bil['memory_ratio'] == 1.04 and bil['targets_met']
    assert (gau['fwdbwd_ratio'], gau['fwdbwd_target'], gau['memory_ratio']) == (3.2, 3.0, 1.1)  # 3.2 > 3, 1.1 > 1.05
    assert not gau['targets_met']
    assert fixed['fwdbwd_target'] is None and fixed['fwdbwd_ratio'] == 1.2 and fixed['targets_met']
    assert rows['float16', 'gaussian']['fwdbwd_ratio'] == 3.2 and rows['float16', 'gaussian']['C'] == 384


def test_tables_and_files(tmp_path):
    result = _synthetic()
    md = op_interp.summarize(result)
    assert md.startswith('# Interpolated oriented lines against truncation on Test GPU\n')
    assert 'Command: `python tools/analysis_tools/benchmark_op.py --rounding bilinear gaussian`' in md
    assert 'median of 30 repeats in 6 interleaved rounds' in md and 'commit abc1234' in md
    assert '| float32, nchw | 512 | bilinear | yes | 1.50 | 1.40 | <= 1.5 | 1.040 | yes |' in md
    assert '| float32, nchw | 512 | gaussian | yes | 2.50 | 3.20 | <= 3 | 1.100 | NO |' in md
    assert '| float16, channels_last | 384 | bilinear | no | 1.40 | 1.20 | - | 1.000 | yes |' in md
    assert '2.1-2.25x' in md and 'RTX 3090' in md
    spread = f'{1.2 / 0.9:.2f}'
    assert (f'| float32, nchw | trunc | 1.000 | 2.000 | {spread} / {spread} | 1000.0 | trunc_fwd / trunc_bi / '
            'trunc_bw |') in md
    json_path, md_path = op_interp.write_results(result, str(tmp_path / 'new' / 'interp_speed_x'))
    assert (json_path, md_path) == (str(tmp_path / 'new' / 'interp_speed_x.json'),
                                    str(tmp_path / 'new' / 'interp_speed_x.md'))
    saved = json.loads(Path(json_path).read_text())
    assert saved['ratios'] == result['ratios'] and saved['records'][0]['paths']['forward'] == 'trunc_fwd'
    assert Path(md_path).read_text() == md + '\n'
    assert math.isclose(saved['ratios'][0]['fwdbwd_ratio'], 1.4)
