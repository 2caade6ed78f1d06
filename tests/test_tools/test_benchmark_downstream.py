"""tools/analysis_tools/benchmark_downstream.py on the CPU: the stock mmseg / mmdet ConvNeXt configs and
ours resolve and build on the demo data (dry run), a smoke run of the small demo configs writes complete
results, and missing packages or data are named."""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('mmseg')
pytest.importorskip('mmdet')

from mmengine.config import Config  # noqa: E402

from mmo1d.benchmark.downstream_configs import (  # noqa: E402
    DEFAULT_RUNS,
    RUNS,
    load_config,
    prepare_config,
    resolve_config,
)
from mmo1d.models.backbones.oriented_convnext import OrientedConvNeXt  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / 'tools' / 'analysis_tools' / 'benchmark_downstream.py'
CONFIG_ROOT = str(REPO / 'configs')
_spec = importlib.util.spec_from_file_location('benchmark_downstream', TOOL)
benchmark_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchmark_tool)


def _run(argv, cwd, timeout=300):
    env = {**os.environ, 'CUDA_VISIBLE_DEVICES': '', 'OMP_NUM_THREADS': '2', 'PYTHONWARNINGS': 'ignore'}
    proc = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f'{argv} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}'
    return proc


@pytest.fixture(scope='module')
def demo_data(tmp_path_factory):
    root = tmp_path_factory.mktemp('demo')
    _run([REPO / 'tools' / 'dataset_converters' / 'make_demo_data.py', '--out', root, '--ade-train', '4',
          '--ade-val', '1', '--coco-train', '4', '--coco-val', '1'], REPO)
    return root


def _cls_name(cls) -> str:
    return f'{cls.__module__}.{cls.__qualname__}'


def _main(argv, monkeypatch):
    """The tool's ``main(argv)`` in this process, started (for the command it records) as a user
    starts it: ``python tools/analysis_tools/benchmark_downstream.py ...``. The command line itself
    is run by test_no_gpu_message."""
    monkeypatch.setattr('sys.argv', [str(TOOL)] + [str(a) for a in argv])
    return benchmark_tool.main([str(a) for a in argv])


def test_dry_run_resolves_the_stock_and_our_configs(demo_data, tmp_path, monkeypatch):
    pytest.importorskip('mmpretrain')
    import torch
    from mmpretrain.models import ConvNeXt

    # As CUDA_VISIBLE_DEVICES="" would: the CPU models, also where a GPU is present.
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.chdir(REPO)
    _main(['--device', 'cpu', '--dry-run', '--in-process', '--configs', *DEFAULT_RUNS, '--data-root', demo_data,
           '--out-dir', tmp_path], monkeypatch)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['downstream_dry_run_cpu.json', 'downstream_dry_run_cpu.md']
    result = json.loads((tmp_path / 'downstream_dry_run_cpu.json').read_text())
    assert result['env']['dry_run'] and '--dry-run' in result['env']['command']
    records = {r['name']: r for r in result['records']}
    assert list(records) == list(DEFAULT_RUNS)
    for name, rec in records.items():
        raw = Config.fromfile(rec['config_path'], import_custom_modules=False)
        backbone = rec['backbone']
        if name.endswith('-stock'):
            package = __import__(rec['config'].split('::')[0])
            assert rec['config_path'].startswith(str(Path(package.__file__).parent)) and rec['baseline']
            assert backbone['type'] == 'mmpretrain.ConvNeXt' and backbone['cls'] == _cls_name(ConvNeXt)
            assert backbone['depths'] == [3, 3, 9, 3] == list(ConvNeXt.arch_settings['tiny']['depths'])
            assert rec['dropped_pretrained'] == {'model.backbone': raw.model.backbone.init_cfg.checkpoint}
        else:
            assert backbone['type'] == 'mmo1d.OrientedConvNeXt' and backbone['cls'] == _cls_name(OrientedConvNeXt)
            assert backbone['variant'] == name.rsplit('-', 1)[1] and backbone['depths'] == [3, 3, 9, 3]
            assert rec['dropped_pretrained'] == {} and not rec['baseline']
        assert backbone['channels'] == [96, 192, 384, 768]
        # The configs' own AMP (float16: no dtype given) and cudnn.benchmark setting.
        assert raw.optim_wrapper.type == rec['optim_wrapper'] == 'AmpOptimWrapper' and 'dtype' not in raw.optim_wrapper
        assert rec['amp_dtype'] == 'float16'
        assert rec['cudnn_benchmark'] == bool(raw.env_cfg.get('cudnn_benchmark'))
        (sizes, ) = rec['image_sizes']
        assert rec['batch_size'] == 2 and len(sizes) == 2
        if rec['task'] == 'seg':  # 512x512 random crops of the resized image
            assert all(max(hw) <= 512 for hw in sizes)
        else:  # short side 480-800 after the multi-scale resize (both branches end with it)
            assert all(480 <= min(hw) <= 800 for hw in sizes)
    md = (tmp_path / 'downstream_dry_run_cpu.md').read_text()
    assert '| seg-stock: `mmseg::convnext/convnext-tiny_upernet_8xb2-amp-160k_ade20k-512x512.py` | ' \
           'mmpretrain.ConvNeXt (3-3-9-3) | float16 | (dry run) |' in md


def test_cpu_smoke_run_times_each_config_in_its_own_process(demo_data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    _main(['--device', 'cpu', '--configs', 'seg-demo-2d', 'seg-demo-1d', '--warmup', '1', '--iters', '2',
           '--data-root', demo_data, '--out-dir', tmp_path, '--work-dir', tmp_path / 'work'], monkeypatch)
    assert 'wrote' in capsys.readouterr().out
    result = json.loads((tmp_path / 'downstream_cpu.json').read_text())
    env, (base, ours) = result['env'], result['records']
    assert env['command'].endswith(f'--iters 2 --data-root {demo_data} --out-dir {tmp_path} --work-dir '
                                   f'{tmp_path / "work"}')
    assert env['isolated'] and not env['dry_run'] and (env['warmup'], env['iters']) == (1, 2)
    assert (base['name'], ours['name']) == ('seg-demo-2d', 'seg-demo-1d') and base['baseline']
    for rec, variant in ((base, '2d'), (ours, '1d')):
        assert rec['backbone']['variant'] == variant and rec['backbone']['depths'] == [1, 1, 2, 1]
        assert (rec['warmup'], rec['iters'], rec['iters_timed']) == (1, 2, 2)
        assert len(rec['s_per_iter']) == len(rec['image_sizes']) == 2
        assert rec['s_per_iter_median'] == pytest.approx(statistics.median(rec['s_per_iter']), abs=1e-6)
        assert rec['optim_wrapper'] == 'OptimWrapper' and rec['amp_dtype'] is None and rec['loss_finite']
        assert (work := tmp_path / 'work' / f"{rec['name']}.log").is_file(), work
    # One seed for every config: the same images, crops and flips in the same order.
    assert base['image_sizes'] == ours['image_sizes']
    assert all(max(hw) <= 128 for batch in base['image_sizes'] for hw in batch)
    assert base['s_per_iter_ratio'] == 1.0
    assert ours['s_per_iter_ratio'] == pytest.approx(ours['s_per_iter_median'] / base['s_per_iter_median'])
    md = (tmp_path / 'downstream_cpu.md').read_text()
    assert f"Command: `{env['command']}`" in md and '| vs seg-demo-2d |' in md
    assert f"| seg-demo-1d: `{RUNS['seg-demo-1d'].config}` | mmo1d.OrientedConvNeXt (1-1-2-1, 1d) | fp32 | " \
           f"{ours['s_per_iter_median']:.4f} | {ours['s_per_iter_ratio']:.2f} |" in md


def test_missing_packages_and_data_are_named(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, 'mmpretrain', None)
    for name in ('seg-stock', 'det-stock'):
        with pytest.raises(ModuleNotFoundError, match=r"\.py needs mmpretrain \(custom_imports 'mmpretrain.models', "
                           r"model type 'mmpretrain.ConvNeXt'\), which is not installed: pip install "
                           r"mmpretrain==1.2.0"):
            load_config(RUNS[name], CONFIG_ROOT)
    monkeypatch.setitem(sys.modules, 'mmseg', None)
    with pytest.raises(ModuleNotFoundError, match=r'comes with mmseg, which is not installed \(pip install '
                       r'mmsegmentation==1.2.2\)'):
        resolve_config(RUNS['seg-stock'], CONFIG_ROOT)
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError, match=r'config not found: .*nowhere.*oriented-convnext-tiny-1d_upernet'):
        resolve_config(RUNS['seg-t-1d'], str(tmp_path / 'nowhere'))
    cfg, _ = load_config(RUNS['seg-t-1d'], CONFIG_ROOT)
    with pytest.raises(FileNotFoundError, match=r'demo data not found: .*ade/ADEChallengeData2016 \(write it with '
                       r'python tools/dataset_converters/make_demo_data.py --out '):
        prepare_config(cfg, RUNS['seg-t-1d'], str(tmp_path), str(tmp_path / 'work'))


def test_run_options_reach_the_model(demo_data, tmp_path):
    """A run's options are set on its config and recorded; the model built from it has them (the
    T-2D++ recipe with its 7x7 depthwise convolutions in NCHW)."""
    from mmseg.registry import MODELS

    from mmo1d.models.layers import DepthwiseConv2d

    cfg, _ = load_config(RUNS['seg-t-2dpp-nchw'], CONFIG_ROOT)
    assert cfg.model.backbone.get('depthwise_layout', 'auto') == 'auto'
    changed = prepare_config(cfg, RUNS['seg-t-2dpp-nchw'], str(demo_data), str(tmp_path))
    assert changed['options'] == {'model.backbone.depthwise_layout': 'nchw'}
    assert RUNS['seg-t-2dpp-nchw'].config == RUNS['seg-t-2dpp'].config
    backbone = MODELS.build(cfg.model.backbone)
    layouts = {m.layout for m in backbone.modules() if isinstance(m, DepthwiseConv2d)}
    assert layouts == {'nchw'}
    cfg, _ = load_config(RUNS['seg-t-2dpp'], CONFIG_ROOT)
    assert 'options' not in prepare_config(cfg, RUNS['seg-t-2dpp'], str(demo_data), str(tmp_path))
    cfg, _ = load_config(RUNS['seg-t-1dpp-cl-out'], CONFIG_ROOT)
    changed = prepare_config(cfg, RUNS['seg-t-1dpp-cl-out'], str(demo_data), str(tmp_path))
    assert changed['options'] == {'model.backbone.out_channels_last': True}
    assert MODELS.build(cfg.model.backbone).out_channels_last


def test_initial_loss_scale_of_amp_configs(demo_data, tmp_path):
    """--init-loss-scale starts every AMP config's dynamic loss scaling at the given scale (a GradScaler
    argument, as mmengine's AmpOptimWrapper passes a dict), is recorded, and leaves other configs alone."""
    import torch

    for name in ('det-stock', 'seg-t-1dpp'):
        cfg, _ = load_config(RUNS[name], CONFIG_ROOT)
        assert cfg.optim_wrapper.type == 'AmpOptimWrapper' and cfg.optim_wrapper.get('loss_scale') in (None, 'dynamic')
        changed = prepare_config(cfg, RUNS[name], str(demo_data), str(tmp_path), init_loss_scale=2.0**-20)
        assert changed['init_loss_scale'] == 2.0**-20
        scaler = torch.amp.GradScaler('cpu', **cfg.optim_wrapper.loss_scale)
        assert scaler.get_scale() == 2.0**-20 and scaler.is_enabled()  # dynamic: it still backs off and grows
    cfg, _ = load_config(RUNS['seg-demo-1d'], CONFIG_ROOT)
    changed = prepare_config(cfg, RUNS['seg-demo-1d'], str(demo_data), str(tmp_path), init_loss_scale=0.5)
    assert 'init_loss_scale' not in changed and 'loss_scale' not in cfg.optim_wrapper
    cfg, _ = load_config(RUNS['det-t-1d'], CONFIG_ROOT)
    with pytest.raises(ValueError, match='init_loss_scale must be positive, got 0.0'):
        prepare_config(cfg, RUNS['det-t-1d'], str(demo_data), str(tmp_path), init_loss_scale=0.0)
    # The option reaches each config's process.
    args = benchmark_tool.parse_args(['--init-loss-scale', '9.5367431640625e-07', '--configs', 'det-stock'])
    argv = benchmark_tool.worker_argv(args, 'det-stock', 'rec.json', 'work')
    assert argv[argv.index('--init-loss-scale') + 1] == '9.5367431640625e-07'
    assert benchmark_tool.parse_args(argv[2:]).init_loss_scale == 2.0**-20


def test_no_gpu_message():
    import torch

    if torch.cuda.is_available():
        pytest.skip('a GPU is present')
    proc = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and 'no CUDA device' in proc.stderr and 'Traceback' not in proc.stderr


def test_readme_table_from_committed_results(capsys):
    """The README table holds each timed config of the committed results with its ratios to the stock config
    of its task, recomputed here from the records."""
    path = REPO / 'benchmarks' / 'results' / 'downstream_h100.json'
    result = json.loads(path.read_text())
    assert benchmark_tool.main(['--readme-table', str(path)]) == {}
    out = capsys.readouterr().out.strip().splitlines()
    rows = {cells[1]: cells[2:] for cells in (line.strip('| ').split(' | ') for line in out[4:])}
    timed = [r for r in result['records'] if r.get('s_per_iter_median')]
    assert sorted(rows) == sorted(r['name'] for r in timed)
    stock = {r['task']: r for r in timed if r['baseline']}
    for rec in timed:
        base = stock[rec['task']]
        # A run in rounds gives each ratio its range over the rounds: "1.03 (1.01-1.06)".
        ratio_cell = rows[rec['name']][1]
        s_iter, ratio, mib, mem_ratio = (float(v.split(' ')[0]) for v in rows[rec['name']])
        assert s_iter == pytest.approx(rec['s_per_iter_median'], abs=5e-4)
        assert ratio == pytest.approx(rec['s_per_iter_median'] / base['s_per_iter_median'], abs=5e-3)
        per_round = [r for r in rec.get('s_per_iter_ratio_rounds') or [] if r is not None]
        if len(per_round) > 1:
            low, high = (float(v) for v in ratio_cell.split('(')[1].rstrip(')').split('-'))
            assert (low, high) == pytest.approx((min(per_round), max(per_round)), abs=5e-3)
        else:
            assert '(' not in ratio_cell
        assert mib == pytest.approx(rec['peak_mem_bytes'] / 2**20, abs=0.5)
        assert mem_ratio == pytest.approx(rec['peak_mem_bytes'] / base['peak_mem_bytes'], abs=5e-3)


def test_rounds_merge_into_medians_with_per_round_ratio_ranges():
    """--rounds: each config's s/iter is the median of its rounds' medians; its ratio to the stock config
    comes with the range of the rounds' own ratios (each round's config against the same round's stock)."""
    from mmo1d.benchmark.downstream import merge_rounds

    def rec(name, s, peak, baseline=False, **extra):
        return dict(name=name, task='seg', baseline=baseline, config=f'{name}.py', s_per_iter_median=s,
                    peak_mem_bytes=peak, iters_timed=25, iters=25, **extra)

    rounds = [[rec('seg-stock', 0.060, 100, True, kernel_ms=40.0), rec('seg-t-1d', 0.066, 90)],
              [rec('seg-stock', 0.070, 120, True), rec('seg-t-1d', 0.063, 95)],
              [rec('seg-stock', 0.064, 110, True), dict(name='seg-t-1d', task='seg', baseline=False,
                                                         config='seg-t-1d.py', error='timed out')]]
    stock, ours = merge_rounds(rounds)
    assert stock['s_per_iter_rounds'] == [0.060, 0.070, 0.064] and stock['s_per_iter_median'] == 0.064
    assert stock['peak_mem_bytes'] == 120 and stock['kernel_ms'] == 40.0 and stock['rounds_failed'] == 0
    assert ours['s_per_iter_rounds'] == [0.066, 0.063, None] and ours['rounds_failed'] == 1
    assert ours['s_per_iter_median'] == pytest.approx(statistics.median([0.066, 0.063]))
    benchmark_tool.add_ratios([stock, ours])
    assert ours['s_per_iter_ratio'] == pytest.approx(ours['s_per_iter_median'] / 0.064)
    ratios = ours['s_per_iter_ratio_rounds']
    assert ratios[:2] == pytest.approx([1.1, 0.9]) and ratios[2] is None
    assert benchmark_tool._ratio(ours) == f"{ours['s_per_iter_ratio']:.2f} (0.90-1.10)"
    # One round: the records as they are.
    single = merge_rounds([rounds[0]])
    assert single == rounds[0] and 's_per_iter_rounds' not in single[0]
