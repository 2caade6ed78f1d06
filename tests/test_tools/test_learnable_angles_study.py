"""tools/analysis_tools/learnable_angles_study.py: its runs (--dry-run) and its summary (--summarize)."""
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_tool() -> ModuleType:
    path = REPO / 'tools' / 'analysis_tools' / 'learnable_angles_study.py'
    spec = importlib.util.spec_from_file_location('learnable_angles_study', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


study = _load_tool()


def test_plan_gives_every_setting_the_same_seeds_and_data(tmp_path: Path) -> None:
    args = study.parse_args(['--out-dir', str(tmp_path), '--seeds', '0', '1', '2', '--sweep', '1', '10',
                             '--no-warmup'])
    runs = study.plan_runs(args, default_mult=10.0)
    main = [r for r in runs if r['setting'] in study.SETTINGS]
    assert [(r['seed'], r['setting']) for r in main] == [(s, n) for s in (0, 1, 2) for n in study.SETTINGS]
    sweep = [r for r in runs if r['setting'] not in study.SETTINGS]
    # 10 is the main setting's multiplier already: only 1 is added, on the first two seeds.
    assert [(r['setting'], r['seed']) for r in sweep] == [('bilinear-learned-lr1', 0), ('bilinear-learned-lr1', 1)]
    data = f'{tmp_path}/data/textures/ADEChallengeData2016'
    for run in runs:
        assert run['options'][:3] == [f'{s}_dataloader.dataset.data_root={data}' for s in ('train', 'val', 'test')]
        assert run['options'][3] == f'randomness.seed={run["seed"]}'
        assert run['run_dir'] == f'{tmp_path}/runs/{run["setting"]}/seed{run["seed"]}'
    by_name = {r['setting']: r for r in runs if r['seed'] == 0}
    assert by_name['trunc-fixed']['config'] == study.BASE and by_name['trunc-fixed']['options'][4:] == []
    assert by_name['bilinear-fixed']['options'][4:] == ['model.backbone.learnable_angles=False']
    assert by_name['bilinear-learned']['options'][4:] == [f'{study.LR_KEY}=10']
    assert by_name['gaussian-learned']['options'][4:] == study.GAUSSIAN + [f'{study.LR_KEY}=10']
    assert 'model.backbone.radius=1.5' in study.GAUSSIAN
    assert by_name['bilinear-learned-lr1']['options'][4:] == [f'{study.LR_KEY}=1']


def test_warmup_runs_the_warmup_config_on_the_sweep_seeds(tmp_path: Path) -> None:
    args = study.parse_args(['--out-dir', str(tmp_path), '--sweep', '--sweep-seeds', '4'])
    (run, ) = [r for r in study.plan_runs(args, default_mult=10.0) if r['setting'] not in study.SETTINGS]
    assert (run['setting'], run['seed'], run['config']) == ('bilinear-learned-warmup100', 4, study.LA_WARMUP)
    assert run['options'][4:] == [f'{study.LR_KEY}=10'] and (REPO / study.LA_WARMUP).is_file()


def test_iters_option_shortens_the_whole_schedule(tmp_path: Path) -> None:
    args = study.parse_args(['--out-dir', str(tmp_path), '--iters', '20', '--settings', 'trunc-fixed', '--sweep',
                             '--no-warmup'])
    (run, ) = study.plan_runs(args, default_mult=10.0)[:1]
    assert {'train_cfg.max_iters=20', 'train_cfg.val_interval=20', 'default_hooks.checkpoint.interval=20',
            'param_scheduler.1.end=20'} <= set(run['options'])


@pytest.mark.parametrize('argv,message', [(['--jobs', '0'], '--jobs'), (['--sweep', '0'], 'positive'),
                                          (['--iters', '0'], '--iters')])
def test_bad_options(argv, message, capsys) -> None:
    with pytest.raises(SystemExit):
        study.parse_args(argv)
    assert message in capsys.readouterr().err


def _fake_study(out: Path) -> None:
    """What the data maker and the runs leave: textures.json and one result.json per run."""
    data = out / 'data' / 'textures' / 'ADEChallengeData2016'
    data.mkdir(parents=True)
    (data / 'textures.json').write_text(json.dumps(dict(
        orientations_deg=[11.25, 56.25], size=[64, 64], noise=0.6, split_sizes=dict(training=4, validation=2))))
    miou = {'trunc-fixed': (50.0, 54.0), 'bilinear-fixed': (40.0, 41.0), 'bilinear-learned': (60.0, 70.0),
            'gaussian-learned': (61.0, 61.0)}
    for setting, values in miou.items():
        for seed, value in enumerate(values):
            result = dict(setting=setting, seed=seed, config=study.LA, theta_lr_mult=None, options=[],
                          mIoU=value, mAcc=value + 10, aAcc=90.0, train_seconds=100.0 + seed, angles=None)
            if setting.endswith('learned'):
                stats = dict(count=2, moved_share=1.0, toward_share=0.5 + 0.5 * seed, judged=2,
                             mean_abs_change_deg=4.0, mean_gap_start_deg=11.25, mean_gap_end_deg=8.0)
                result.update(theta_lr_mult=10.0, angles=dict(
                    alignment={'all': stats, 'stem': stats}, groups={'stem.dw1': 'stem'},
                    learned={'stem.dw1': [math.radians(9.0), math.radians(50.0)]}))
            run_dir = out / 'runs' / setting / f'seed{seed}'
            run_dir.mkdir(parents=True)
            (run_dir / 'result.json').write_text(json.dumps(result))


def test_summarize_writes_table_json_and_figure(tmp_path: Path) -> None:
    _fake_study(tmp_path)
    report = study.main(['--out-dir', str(tmp_path), '--summarize', '--seeds', '0', '1', '--sweep', '--no-warmup'])
    rows = report['settings']
    assert list(rows) == list(study.SETTINGS)
    assert rows['trunc-fixed']['mIoU']['mean'] == 52.0
    assert rows['trunc-fixed']['mIoU']['std'] == pytest.approx(math.sqrt(8.0))
    assert rows['bilinear-learned']['mIoU']['values'] == [60.0, 70.0]
    assert rows['bilinear-learned']['angles']['all']['toward_share'] == pytest.approx(0.75)
    assert 'angles' not in rows['trunc-fixed']
    text = (tmp_path / 'learned_angles_textures_cpu.md').read_text()
    assert rows['bilinear-learned']['mIoU_minus_trunc_fixed']['values'] == [10.0, 16.0]
    assert 'mIoU_minus_trunc_fixed' not in rows['trunc-fixed']
    assert '| bilinear-learned | 10 | 65.00 ± 7.07 | 60.00 (0), 70.00 (1) | 13.00 ± 4.24 | 75.00 ± 7.07 | 100 |' in text
    assert '| bilinear-learned | stem | 2 | 4.00 | 1.00 | 0.75 | 8.00 |' in text
    assert json.loads((tmp_path / 'learned_angles_textures_cpu.json').read_text())['settings'] == json.loads(
        json.dumps(rows))
    # Without --write-reference the figure, like the tables, stays in --out-dir.
    assert report['figure'] == (tmp_path / 'learned_angles_textures.png').as_posix()
    assert (tmp_path / 'learned_angles_textures.png').stat().st_size > 0


def test_summarize_without_runs_says_what_to_do(tmp_path: Path) -> None:
    _fake_study(tmp_path)
    with pytest.raises(SystemExit, match='without --summarize first'):
        study.main(['--out-dir', str(tmp_path), '--summarize', '--seeds', '0', '1', '2', '--sweep', '--no-warmup'])
