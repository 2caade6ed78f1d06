"""tools/analysis_tools/benchmark_model.py: the CPU smoke path writes complete results (the median over
rounds) in the fp32, bf16 and fp16 modes, scales the fp16 training loss as AmpOptimWrapper does, and skips
a missing timm; the kernel-time and CUDA-graph fields are combined over rounds, compared with timm and
written to the markdown, and a failed capture or profile is recorded without ending the run."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'benchmark_model.py'
_spec = importlib.util.spec_from_file_location('benchmark_model', TOOL)
benchmark_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchmark_tool)


def test_cpu_smoke(tmp_path, capsys, monkeypatch):
    # Hide timm whether or not it is installed: the baseline must be skipped with a message.
    monkeypatch.setitem(sys.modules, 'timm', None)
    result = benchmark_tool.main(['--device', 'cpu', '--batch-size', '2', '--img-size', '32', '--archs', 'tiny',
                                  '--variants', '1dpp', '--repeats', '1', '--rounds', '3', '--warmup', '0',
                                  '--out-dir', str(tmp_path)])['tiny']
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
    assert sorted(p.name for p in tmp_path.iterdir()) == ['models_tiny_cpu.json', 'models_tiny_cpu.md',
                                                          'models_tiny_cpu.png']
    saved = json.loads((tmp_path / 'models_tiny_cpu.json').read_text())
    assert saved['records'] == records and saved['env']['gpu'] == 'cpu' and saved['env']['timm'] is None
    assert saved['env']['command'].startswith('python ')
    md = (tmp_path / 'models_tiny_cpu.md').read_text()
    assert '| ConvNeXt-T-1D++ (mmo1d) |' in md and '## bf16' in md and '## fp16' in md and 'timm not installed' in md
    assert f"Command: `{saved['env']['command']}`" in md


def test_no_gpu_message():
    if benchmark_tool.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    result = subprocess.run([sys.executable, str(TOOL), '--archs', 'tiny'], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and 'no CUDA device' in result.stderr


RESULTS = Path(__file__).resolve().parents[2] / 'benchmarks' / 'results'
#: The README's table: one committed run per model size.
COMMITTED = [RESULTS / f'models_{size}_h100.json' for size in ('tiny', 'base')]


def test_readme_table_from_committed_results(capsys):
    """The README table is the committed results files' ratios to timm: every cell recomputed here."""
    results = [json.loads(path.read_text()) for path in COMMITTED]
    assert benchmark_tool.main(['--readme-table'] + [str(path) for path in COMMITTED]) == {}
    lines = capsys.readouterr().out.strip().splitlines()
    table = lines[4:lines.index('', 4)]
    rows = {line.split(' | ')[0].lstrip('| '): line.strip('| ').split(' | ')[1:] for line in table}
    records = [r for result in results for r in result['records']]
    recs = {(r['model'], r['mode'], r['pass']): r for r in records}
    modes = list(dict.fromkeys(r['mode'] for r in records))
    ours = [m for m in dict.fromkeys(r['model'] for r in records) if '(mmo1d)' in m]
    assert {m[len('ConvNeXt-')] for m in ours} == {'T', 'B'}
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
    # Under the table: the largest slowest / fastest round ratio of each mode, and each file's rounds.
    spreads = {m: max(max(r['round_ms']) / min(r['round_ms']) for r in records if r['mode'] == m) for m in modes}
    rounds = [result['env']['rounds'] for result in results]
    spread_line = lines.index(table[-1]) + 2
    assert lines[spread_line] == (f'Slowest / fastest of the {rounds[0]} rounds (T) and {rounds[1]} rounds (B) of one '
                                  'model and pass, at most: ' + ', '.join(f'{m} {v:.2f}' for m, v in spreads.items())
                                  + '.')
    # Then the kernel-time table: timm's summed kernel time over ours, per mode and pass.
    kernel_rows = {line.split(' | ')[0].lstrip('| '): line.strip('| ').split(' | ')[1:]
                   for line in lines[spread_line + 6:]}
    assert sorted(kernel_rows) == sorted(rows)
    for model in ours:
        timm = 'timm convnext_' + ('tiny' if model.startswith('ConvNeXt-T') else 'base')
        for i, mode in enumerate(modes):
            expected = [recs[timm, mode, p]['kernel_ms'] / recs[model, mode, p]['kernel_ms']
                        for p in ('infer', 'train')]
            cell = kernel_rows[model.replace(' (mmo1d)', '')][i]
            assert [float(v) for v in cell.split(' / ')] == pytest.approx(expected, abs=0.005)


def test_readme_table_takes_results_of_one_gpu_and_batch():
    result = json.loads(COMMITTED[0].read_text())
    other = json.loads(json.dumps(result))
    other['env']['batch_size'] = 32
    with pytest.raises(ValueError, match='disagree on batch_size'):
        benchmark_tool.readme_table(result, other)
    assert benchmark_tool.readme_table(result) == benchmark_tool.readme_table(result, dict(result, records=[]))


def test_summarize_rewrites_the_committed_markdown(capsys):
    """--summarize prints the markdown that the run wrote next to its results file."""
    for path in COMMITTED:
        assert benchmark_tool.main(['--summarize', str(path)]) == {}
        assert capsys.readouterr().out == path.with_suffix('.md').read_text()


def test_compare_prints_two_runs_side_by_side(tmp_path, capsys):
    """--compare on a committed results file against itself: every case at ratio 1; runs of two GPUs
    are refused with the reason."""
    path = COMMITTED[0]
    assert benchmark_tool.main(['--compare', str(path), str(path)]) == {}
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith('| ') and ' mode ' not in line]
    assert len(rows) == len(json.loads(path.read_text())['records'])
    assert all(line.endswith('| 1.000 |') for line in rows)
    other = json.loads(path.read_text())
    other['env']['gpu'] = 'NVIDIA A100'
    (tmp_path / 'other.json').write_text(json.dumps(other))
    with pytest.raises(SystemExit, match='--compare: the two runs differ in gpu'):
        benchmark_tool.main(['--compare', str(path), str(tmp_path / 'other.json')])


def test_new_options_parse():
    args = benchmark_tool.parse_args([])
    assert args.rounds == 6 and args.passes == ['infer', 'train']
    assert not args.kernel_times and args.kernel_steps == 5 and not args.cuda_graph
    args = benchmark_tool.parse_args(['--kernel-times', '--kernel-steps', '3', '--cuda-graph', '--passes', 'train'])
    assert args.kernel_times and args.kernel_steps == 3 and args.cuda_graph and args.passes == ['train']
    with pytest.raises(SystemExit):
        benchmark_tool.parse_args(['--kernel-steps', '0'])


def test_step_without_optimizer_writes_fresh_gradients():
    """The step captured for training: each call sets the gradients anew (no accumulation, no update)."""
    torch = benchmark_tool.torch
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 1000))
    x, y = torch.randn(2, 3, 4, 4), torch.tensor([1, 7])
    weight = model[1].weight.detach().clone()
    step = benchmark_tool.make_step(model, x, y, None, train=True, autocast_cache=False)
    step()
    first = model[1].weight.grad.clone()
    step()
    assert torch.equal(model[1].weight.grad, first) and first.abs().sum() > 0
    assert torch.equal(model[1].weight, weight)
    model.zero_grad(set_to_none=True)
    benchmark_tool.make_step(model, x, y, torch.bfloat16, train=False, autocast_cache=False)()
    assert model[1].weight.grad is None


def test_failed_capture_or_profile_is_recorded():
    cpu, cuda = benchmark_tool.torch.device('cpu'), benchmark_tool.torch.device('cuda')
    assert benchmark_tool.graph_case(lambda: None, None, cpu) == {
        'graph_ms': None, 'graph_error': 'RuntimeError: CUDA graphs need a CUDA device (--device cuda)'}
    assert benchmark_tool.kernel_case(lambda: None, 5, cpu) == {
        'kernel_ms': None, 'kernel_error': 'RuntimeError: kernel times need a CUDA device (--device cuda)'}

    def failing_capture(step):
        raise RuntimeError('CUDA error: operation not permitted\nwhen stream is capturing')

    out = benchmark_tool.graph_case(lambda: None, None, cuda, capture=failing_capture)
    assert out == {'graph_ms': None,
                   'graph_error': 'RuntimeError: CUDA error: operation not permitted when stream is capturing'}
    replays = []
    graph = type('Graph', (), {'replay': lambda self: replays.append(1)})()

    def timer(fn):
        fn()
        return 4.25

    assert benchmark_tool.graph_case(lambda: None, timer, cuda, capture=lambda step: graph) == {'graph_ms': 4.25}
    assert replays == [1]


def _round(model, mode, pas, ms, **extra):
    return dict(model=model, mode=mode, **{'pass': pas}, ms=ms, peak_mem_bytes=100, **extra)


def test_combine_rounds_keeps_graph_and_kernel_fields():
    timm, ours = 'timm convnext_tiny', 'ConvNeXt-T-1D++ (mmo1d)'
    top = [{'name': 'k', 'total_ms': 10.0, 'count': 5}]
    rounds = []
    for r, (a, b) in enumerate([(10.0, 3.0), (12.0, 2.0), (11.0, 4.0)]):  # round-major, as the tool times them
        last = {'kernel_ms': 2.0, 'kernel_steps': 5, 'top_kernels': top, 'own_kernels': top[:1]} if r == 2 else {}
        rounds += [_round(timm, 'bf16', 'train', a, graph_ms=a - 1, **last),
                   _round(ours, 'bf16', 'train', a + 1, graph_ms=None, graph_error='E: capture failed'),
                   _round(timm, 'bf16', 'infer', b, graph_ms=b / 2),
                   _round(ours, 'bf16', 'infer', b + 1, graph_ms=b)]
    recs = benchmark_tool.combine_rounds(rounds, batch_size=64)
    # Model-major order, as the results files have always been written.
    assert [(r['model'], r['pass']) for r in recs] == [(timm, 'train'), (timm, 'infer'), (ours, 'train'),
                                                       (ours, 'infer')]
    by = {(r['model'], r['pass']): r for r in recs}
    assert by[timm, 'train']['ms'] == 11.0 and by[timm, 'train']['graph_ms'] == 10.0
    assert by[timm, 'train']['graph_round_ms'] == [9.0, 11.0, 10.0]
    assert by[timm, 'train']['graph_img_per_s'] == round(64 / 10.0e-3, 1)
    assert by[timm, 'train']['kernel_ms'] == 2.0 and by[timm, 'train']['top_kernels'] == top
    assert by[timm, 'train']['own_kernels'] == top[:1]  # what a comparison of two builds reads
    assert 'kernel_ms' not in by[timm, 'infer'] and 'graph_error' not in by[timm, 'infer']
    failed = by[ours, 'train']
    assert failed['graph_ms'] is None and failed['graph_img_per_s'] is None
    assert failed['graph_error'] == 'E: capture failed' and failed['ms'] == 12.0
    # Without the new options, a record has exactly the fields it always had.
    plain = benchmark_tool.combine_rounds([_round(ours, 'fp32', 'infer', 1.0)], batch_size=2)[0]
    assert set(plain) == {'model', 'mode', 'pass', 'ms', 'img_per_s', 'round_ms', 'peak_mem_bytes'}


def _result(records):
    env = dict(gpu='GPU X', torch='2', cuda='13', cudnn=9, driver='1', timm='1.0', date='today', batch_size=64,
               img_size=224, rounds=6, repeats=10, warmup=10, command='python bench.py', kernel_steps=5,
               cuda_graph=True)
    return {'env': env, 'records': records}


def _rec(model, pas, ms, **extra):
    return dict(model=model, mode='bf16', **{'pass': pas}, ms=ms, img_per_s=round(64 / (ms * 1e-3), 1),
                round_ms=[ms, ms], peak_mem_bytes=2**30, **extra)


def test_kernel_ratios_and_the_markdown_of_the_new_fields():
    timm, ours, base = 'timm convnext_tiny', 'ConvNeXt-T-1D++ (mmo1d)', 'ConvNeXt-B-1D++ (mmo1d)'
    top = [{'name': 'a' * 100, 'total_ms': 20.0, 'count': 10}, {'name': 'gemm', 'total_ms': 5.0, 'count': 15}]
    records = [_rec(timm, 'infer', 10.0, kernel_ms=8.0, kernel_steps=5, top_kernels=top, graph_ms=9.0,
                    graph_img_per_s=6400.0 / 9.0),
               _rec(timm, 'train', 30.0, kernel_ms=25.0, kernel_steps=5, top_kernels=top, graph_ms=20.0,
                    graph_img_per_s=3200.0),
               _rec(ours, 'infer', 12.0, kernel_ms=10.0, kernel_steps=5, top_kernels=top, graph_ms=10.0,
                    graph_img_per_s=6400.0),
               _rec(ours, 'train', 40.0, kernel_ms=None, kernel_error='RuntimeError: no kernels', graph_ms=None,
                    graph_img_per_s=None, graph_error='AcceleratorError: capture failed'),
               _rec(base, 'infer', 50.0, kernel_ms=30.0, kernel_steps=5, top_kernels=top)]
    benchmark_tool.add_kernel_ratios(records)
    assert [r['kernel_ms_vs_timm'] for r in records] == [1.0, 1.0, 1.25, None, None]  # no timm base timed
    md = benchmark_tool.summarize(_result(records))
    lines = md.splitlines()
    header = lines.index('| model | infer kernel ms | train kernel ms | infer kernel vs timm | train kernel vs timm '
                         '| infer graph img/s | train graph img/s | infer graph vs timm | train graph vs timm |')
    assert lines[header + 2] == '| timm convnext_tiny | 8.00 | 25.00 | 1.00 | 1.00 | 711.1 | 3200.0 | 1.00 | 1.00 |'
    assert lines[header + 3] == '| ConvNeXt-T-1D++ (mmo1d) | 10.00 | - | 1.25 | - | 6400.0 | - | 9.00 | - |'
    assert lines[header + 4] == '| ConvNeXt-B-1D++ (mmo1d) | 30.00 | - | - | - | - | - | - | - |'
    assert '*kernel ms*: sum of the GPU self-times' in md and 'mean of 5 steps' in md
    assert '*graph img/s*' in md and 'without the AdamW step' in md
    # Largest kernels per step: total / steps, launches / steps; names cut at 70 characters.
    assert f"- {timm}, bf16, infer: `{'a' * 70}` 4.00 ms x2; `gemm` 1.00 ms x3" in lines
    assert f'- {ours}, bf16, train, kernel times: RuntimeError: no kernels' in lines
    assert f'- {ours}, bf16, train, CUDA graph: AcceleratorError: capture failed' in lines
    # The speed table of the README does not change with the new fields.
    assert '| ConvNeXt-T-1D++ |' in benchmark_tool.readme_table(_result(records))


def test_cpu_run_with_kernel_times_and_cuda_graph(tmp_path, monkeypatch):
    """Without a GPU, the options run to the end: the profile is faked here; the capture fails and is
    recorded, attempted once per case."""
    monkeypatch.setitem(sys.modules, 'timm', None)
    profiled, captures = [], []

    def fake_kernel_case(step, steps, device):
        step()
        profiled.append(steps)
        return {'kernel_ms': 1.5, 'kernel_steps': steps, 'top_kernels': [{'name': 'k', 'total_ms': 3.0, 'count': 2}]}

    real_graph_case = benchmark_tool.graph_case

    def counting_graph_case(step, timer, device):
        captures.append(device.type)
        return real_graph_case(step, timer, device)

    monkeypatch.setattr(benchmark_tool, 'kernel_case', fake_kernel_case)
    monkeypatch.setattr(benchmark_tool, 'graph_case', counting_graph_case)
    result = benchmark_tool.main(['--device', 'cpu', '--batch-size', '2', '--img-size', '32', '--archs', 'tiny',
                                  '--variants', '1dpp', '--modes', 'fp32', 'bf16', '--passes', 'train',
                                  '--repeats', '1', '--rounds', '2', '--warmup', '0', '--kernel-times',
                                  '--kernel-steps', '2', '--cuda-graph', '--out-dir', str(tmp_path)])['tiny']
    records = result['records']
    assert [(r['mode'], r['pass']) for r in records] == [('fp32', 'train'), ('bf16', 'train')]
    assert profiled == [2, 2] and captures == ['cpu', 'cpu']  # the last round profiled; a failed capture once
    for rec in records:
        assert rec['ms'] > 0 and len(rec['round_ms']) == 2
        assert rec['kernel_ms'] == 1.5 and rec['kernel_steps'] == 2 and rec['kernel_ms_vs_timm'] is None
        assert rec['graph_ms'] is None and rec['graph_round_ms'] == [None, None]
        assert rec['graph_error'] == 'RuntimeError: CUDA graphs need a CUDA device (--device cuda)'
    env = result['env']
    assert env['passes'] == ['train'] and env['kernel_steps'] == 2 and env['cuda_graph'] is True
    saved = json.loads((tmp_path / 'models_tiny_cpu.json').read_text())
    assert saved['records'] == records
    md = (tmp_path / 'models_tiny_cpu.md').read_text()
    assert '| ConvNeXt-T-1D++ (mmo1d) | - | ' in md  # no inference timed
    assert '| ConvNeXt-T-1D++ (mmo1d) | - | 1.50 | - | - | - | - | - | - |' in md
    assert '## Failed cases' in md and (tmp_path / 'models_tiny_cpu.png').is_file()


def test_no_gpu_message_with_the_new_options():
    if benchmark_tool.torch.cuda.is_available():
        pytest.skip('a GPU is present')
    with pytest.raises(SystemExit, match='no CUDA device'):
        benchmark_tool.main(['--archs', 'tiny', '--kernel-times', '--cuda-graph'])


@pytest.mark.parametrize('arch, variants, device, name', [
    ('tiny', ['2d', '1d', '1dpp', '2dpp'], 'NVIDIA H100 80GB HBM3', 'models_tiny_h100'),
    ('base', ['2d', '1d', '1dpp', '2dpp'], 'NVIDIA H100 80GB HBM3', 'models_base_h100'),
    ('tiny', ['1d', '1d-la'], 'NVIDIA H200', 'models_tiny_la_h200'),
    ('tiny', ['1dpp'], 'cpu', 'models_tiny_cpu'),
])
def test_results_names(arch, variants, device, name):
    """The names benchmarks/README.md indexes (models_tiny_h100.json, models_tiny_la_h200.json, ...)."""
    assert benchmark_tool.results_name(arch, variants, device) == name


def test_each_size_gets_its_own_files(tmp_path, monkeypatch):
    """A run of both sizes writes one set of files per size, each with that size's models only (a small
    stand-in network for every model keeps it quick)."""
    def small_classifier(config_dir, arch, variant):
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 1000))

    monkeypatch.setattr(benchmark_tool, 'build_classifier', small_classifier)
    results = benchmark_tool.main(['--device', 'cpu', '--batch-size', '2', '--img-size', '16', '--archs', 'tiny',
                                   'base', '--variants', '1d', '1d-la', '--modes', 'fp32', '--passes', 'infer',
                                   '--repeats', '1', '--rounds', '1', '--warmup', '0', '--no-timm',
                                   '--out-dir', str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f'models_{arch}_la_cpu.{ext}' for arch in ('tiny', 'base') for ext in ('json', 'md', 'png'))
    for arch, letter in (('tiny', 'T'), ('base', 'B')):
        saved = json.loads((tmp_path / f'models_{arch}_la_cpu.json').read_text())
        assert saved == results[arch]
        assert [r['model'] for r in saved['records']] == [f'ConvNeXt-{letter}-1D (mmo1d)',
                                                          f'ConvNeXt-{letter}-1D-la (mmo1d)']
