"""tools/analysis_tools/benchmark_op.py: what each option combination measures and its defaults, the errors for
options that do not fit, the CPU paths end to end (a run per label, per rounding, per pass, host time, the runs of
--ab), the message without a GPU and the files of a GPU run."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_op.py'
_spec = importlib.util.spec_from_file_location('benchmark_op', TOOL)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

TINY = ['--device', 'cpu', '--batch', '1', '--channels', '16', '--sizes', '9', '--kernel-sizes', '3', '5',
        '--threads', '1', '--repeats', '2', '--rounds', '2', '--warmup', '0']


@pytest.mark.parametrize('argv, kind', [
    ([], 'gpu'), (['--device', 'cpu'], 'cpu'), (['--rounding', 'bilinear', 'gaussian'], 'interp'),
    (['--rounding', 'floor', '--device', 'cpu'], 'interp'), (['--passes', 'fwd', 'bwd_weight'], 'passes'),
    (['--host-time', '--rounding', 'bilinear'], 'host'), (['--passes', 'fwdbwd'], 'gpu'),
    (['--passes', 'fwd', '--kernel-times'], 'passes'), (['--rounding', 'bilinear', '--kernel-times'], 'passes')])
def test_options_select_the_measurement(argv, kind):
    assert bench.parse_args(argv).measurement == kind


def test_defaults_of_each_measurement():
    gpu = bench.parse_args([])
    assert (gpu.batch, gpu.channels, gpu.sizes, gpu.kernel_sizes, gpu.repeats, gpu.rounds) == (
        64, 512, [14, 28, 56], [7, 15, 31], 51, 3)
    assert gpu.configs == [('float32', 'nchw'), ('bfloat16', 'channels_last'), ('float16', 'channels_last')]
    assert gpu.angles == [22.5 * i for i in range(8)] + ['mixed8'] and gpu.passes == ['fwd', 'fwdbwd']
    cpu = bench.parse_args(['--device', 'cpu'])
    assert (cpu.batch, cpu.channels, cpu.sizes, cpu.configs) == (8, 96, [56], [('float32', 'nchw'),
                                                                               ('float32', 'channels_last')])
    assert cpu.angles == [0.0, 22.5, 45.0, 90.0, 'mixed8'] and cpu.out_dir == 'benchmarks/results'
    interp = bench.parse_args(['--rounding', 'bilinear', 'gaussian'])
    assert (interp.channels, interp.sizes, interp.kernel_sizes, interp.repeats, interp.rounds) == (None, [56], [31],
                                                                                                   30, 6)
    assert interp.angle_jitter == 0.05 and interp.out_dir == 'benchmarks/results'
    passes = bench.parse_args(['--passes', 'fwd', 'bwd_input', 'bwd_weight', '--layouts', 'channels_last',
                               '--angles', '0', 'mixed8'])
    assert passes.angle_jitter == 0.0 and passes.angles == [0.0, 'mixed8']
    assert passes.configs == [('bfloat16', 'channels_last'), ('float16', 'channels_last'),
                              ('float32', 'channels_last')]
    host = bench.parse_args(['--host-time'])
    assert (host.batch, host.channels, host.configs, host.repeats, host.rounds) == (
        2, 96, [('bfloat16', 'channels_last')], 300, 7)


@pytest.mark.parametrize('argv, message', [
    (['--device', 'cpu', '--sizes', '9', '14'], 'one --sizes and one --dtypes'),
    (['--rounding', 'bilinear', '--kernel-sizes', '7', '31'], 'one --sizes and one --kernel-sizes'),
    (['--host-time', '--passes', 'bwd_input'], 'host measurements take fwd and fwdbwd'),
    (['--angles', '0', '45'], "must include 'mixed8'"),
    (['--angles', 'diagonal'], "an angle is degrees or 'mixed8'"),
    (['--ab', 'old', '--records-out', 'x.json'], 'leave out --records-out'),
    (['--rounds', '0'], 'must be >= 1'),
    (['--strides', '2'], 'gpu measurements run at stride 1'),
    (['--host-time', '--kernel-times'], '--kernel-times: host measurements time whole calls'),
    (['--passes', 'bwd_weight', '--kernel-times', '--device', 'cpu'], 'it needs --device cuda'),
    (['--passes', 'bwd_weight', '--kernel-steps', '0'], '--kernel-steps must be >= 1, got 0'),
    (['--passes', 'bwd_input', '--strides', '0'], '--strides must be >= 1, got 0'),
    (['--rounding', 'bilinear', '--angle-jitter', '-0.1'], '--angle-jitter must be >= 0, got -0.1'),
])
def test_options_that_do_not_fit(argv, message, capsys):
    with pytest.raises(SystemExit) as err:
        bench.parse_args(argv)
    assert err.value.code == 2 and message in capsys.readouterr().err


def test_no_gpu_message(tmp_path):
    if torch.cuda.is_available():
        pytest.skip('a GPU is present')
    for argv in ([], ['--rounding', 'gaussian'], ['--passes', 'bwd_input'], ['--host-time'], ['--ab', 'old']):
        with pytest.raises(SystemExit, match='no CUDA device'):
            bench.main(argv + ['--out-dir', str(tmp_path)])


def test_cpu_runs_per_label_and_ratios(tmp_path):
    for label in ('before', 'after', 'before'):
        bench.main(TINY + ['--label', label, '--out-dir', str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ['op_cpu.json', 'op_cpu.md']
    json_path = tmp_path / 'op_cpu.json'
    runs = json.loads(json_path.read_text())['runs']
    assert list(runs) == ['after', 'before']  # the repeated label replaced its run and moved last
    angles = [0.0, 22.5, 45.0, 90.0]
    for run in runs.values():
        keys = sorted((r['impl'], r['layout'], r['K'], r['pass'], str(r['angle_deg'])) for r in run['records'])
        impls = [('torch_horizontal', None)] + [('mmo1d', a) for a in angles + ['mixed8']]
        assert keys == sorted((impl, layout, k, pas, str(a)) for layout in ('nchw', 'channels_last') for k in (3, 5)
                              for pas in ('fwd', 'fwdbwd') for impl, a in impls)
        assert all(r['ms'] > 0 for r in run['records'])
        assert run['env']['threads'] == 1 and run['env']['channels'] == 16 and run['env']['repeats'] == 2
    md = json_path.with_suffix('.md').read_text()
    assert '## Change: after -> before' in md and md.index('## after') < md.index('## before')
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
                assert float(cells[-2].rstrip('x')) == pytest.approx(max(ours[a] for a in angles) / ref, abs=0.006)
                assert float(cells[-1].rstrip('x')) == pytest.approx(ours['mixed8'] / ref, abs=0.006)


@pytest.mark.parametrize('extra, stem, impls', [
    (['--rounding', 'gaussian', '--kernel-sizes', '5'], 'interp_speed_cpu', {'trunc', 'gaussian'}),
    (['--rounding', 'gaussian', '--kernel-sizes', '5', '--angle-jitter', '0'], 'interp_speed_jitter0_cpu',
     {'trunc', 'gaussian'}),
    (['--passes', 'bwd_weight', '--rounding', 'trunc', 'bilinear'], 'interp_passes_cpu', {'mmo1d'}),
    (['--passes', 'bwd_weight', '--kernel-sizes', '5', '--config-name', 'k5'], 'op_passes_k5_cpu', {'mmo1d'}),
    (['--host-time', '--kernel-sizes', '5', '--repeats', '3'], 'op_host_time_cpu',
     {'conv2d_1xK', 'conv2d_7x7', 'mmo1d', 'empty_like'}),
])
def test_each_measurement_writes_its_files(extra, stem, impls, tmp_path, monkeypatch):
    argv = ['--device', 'cpu', '--batch', '1', '--channels', '16', '--sizes', '9', '--threads', '1', '--repeats',
            '2', '--rounds', '1', '--warmup', '0', '--dtypes', 'float32', '--out-dir', str(tmp_path)] + extra
    # The results file records the command that started the process: here, the tool as a user runs it.
    monkeypatch.setattr('sys.argv', [str(TOOL)] + argv)
    bench.main(argv)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f'{stem}.json', f'{stem}.md']
    result = json.loads((tmp_path / f'{stem}.json').read_text())
    assert {r['impl'] for r in result['records']} == impls
    assert (tmp_path / f'{stem}.md').read_text().startswith('# ')
    assert result['env']['gpu'] == 'cpu' and 'benchmark_op.py' in result['env']['command']
    assert result['env']['command'].endswith(' '.join(extra))


def test_records_out_holds_what_ab_pairs(tmp_path):
    out = tmp_path / 'r.json'
    bench.main(TINY + ['--passes', 'fwd', 'bwd_input', '--dtypes', 'float32', '--records-out', str(out)])
    result = json.loads(out.read_text())
    assert sorted(result) == ['env', 'records'] and not list(tmp_path.glob('op_passes*'))
    assert [(r['K'], r['pass']) for r in result['records']] == [(3, 'fwd'), (3, 'bwd_input'), (5, 'fwd'),
                                                                 (5, 'bwd_input')]


def test_ab_needs_a_built_tree(tmp_path):
    with pytest.raises(SystemExit, match='not an mmo1d source tree'):
        bench.main(TINY + ['--ab', str(tmp_path), '--out-dir', str(tmp_path / 'o')])


def test_results_go_to_a_new_out_dir(tmp_path, monkeypatch):
    """The output folder is made before the timed run (a missing one used to fail after it)."""
    out = tmp_path / 'new' / 'dir'
    records = [dict(impl=impl, dtype='bfloat16', layout='nchw' if impl == 'torch_horizontal' else 'channels_last',
                    H=56, K=31, angle_deg=a, ms=ms, peak_mem_bytes=100, **{'pass': 'fwd'})
               for impl, a, ms in [('torch_horizontal', None, 2.0), ('torch_2d_7x7', None, 0.8)]
               + [('mmo1d', 22.5 * i, 0.5) for i in range(8)] + [('mmo1d', 'mixed8', 0.6)]]
    env = {'gpu': 'Test GPU', 'batch': 64, 'channels': 512, 'rounds': 3, 'repeats': 51, 'copy_bandwidth_GBps': 3000.0,
           'torch': 'x', 'cuda': 'x', 'cudnn': 1, 'driver': 'x', 'date': 'x', 'command': 'python x'}

    def fake_run(args):
        assert out.is_dir()
        return {'env': env, 'records': records}

    monkeypatch.setattr(bench, 'run', fake_run)
    bench.main(['--out-dir', str(out)])
    assert sorted(p.name for p in out.iterdir()) == ['op_testgpu.json', 'op_testgpu.md', 'op_testgpu.png']
    assert json.loads((out / 'op_testgpu.json').read_text())['records'] == records


@pytest.mark.parametrize('argv, gpu, ab, stem', [
    ([], 'NVIDIA H100 80GB HBM3', False, 'op_h100'),
    (['--batch', '64', '--channels', '384', '--sizes', '56', '--dtypes', 'bfloat16', 'float16', '--kernel-sizes', '31',
      '--config-name', 'pp_conv'], 'NVIDIA H100 80GB HBM3', False, 'op_pp_conv_h100'),
    (['--device', 'cpu'], None, False, 'op_cpu'),
    (['--rounding', 'bilinear', 'gaussian'], 'NVIDIA H200', False, 'interp_speed_h200'),
    (['--rounding', 'bilinear', 'gaussian', '--angle-jitter', '0'], 'NVIDIA H200', False, 'interp_speed_jitter0_h200'),
    (['--rounding', 'bilinear', '--angle-jitter', '0.1'], 'NVIDIA H200', False, 'interp_speed_jitter0.1_h200'),
    (['--rounding', 'bilinear', '--angle-jitter', '1e-5'], 'NVIDIA H200', False, 'interp_speed_jitter0.00001_h200'),
    (['--passes', 'fwd', 'bwd_input', 'bwd_weight', '--rounding', 'trunc', 'bilinear', 'gaussian'], 'NVIDIA H200',
     False, 'interp_passes_h200'),
    (['--passes', 'fwd', 'bwd_input', 'bwd_weight'], 'NVIDIA H100 80GB HBM3', True, 'op_passes_ab_h100'),
    (['--passes', 'bwd_weight', '--config-name', 'nchw_weight_merge'], 'NVIDIA H100 80GB HBM3', True,
     'op_passes_nchw_weight_merge_ab_h100'),
    (['--host-time'], 'NVIDIA GeForce RTX 4090', False, 'op_host_time_rtx4090'),
])
def test_results_names(argv, gpu, ab, stem):
    """The names benchmarks/README.md indexes: benchmark, configuration, machine tag."""
    assert bench.results_stem(bench.parse_args(argv), {'gpu': gpu}, ab=ab) == stem


def test_config_name_must_fit_a_file_name(capsys):
    with pytest.raises(SystemExit) as err:
        bench.parse_args(['--config-name', 'PP conv'])
    assert err.value.code == 2 and "'PP conv' cannot be part of a results file name" in capsys.readouterr().err


def test_cpu_runs_of_another_cpu_are_not_mixed(tmp_path):
    """A results file compares its runs: one on another CPU is refused before anything is timed."""
    (tmp_path / 'op_cpu.json').write_text(json.dumps({'runs': {'before': {'env': {'cpu': 'Other CPU 9000'}}}}))
    with pytest.raises(SystemExit, match=r'holds runs on another CPU \(before on Other CPU 9000\)'):
        bench.main(TINY + ['--label', 'after', '--out-dir', str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ['op_cpu.json']
