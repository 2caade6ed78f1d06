"""tools/misc/demo_learnable_angles.sh: its commands (--dry-run), arguments and summary (--summarize)."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / 'tools' / 'misc' / 'demo_learnable_angles.sh'
BASE = 'configs/demo/oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
LA = 'configs/demo/oriented-convnext-demo-1d-la_upernet_1xb8-500iter_ade20k-demo-128x128.py'
RUNS = ('trunc', 'bilinear-fixed', 'learnable')


def _script(args: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    full_env = {**os.environ, 'PYTHON': sys.executable, **env}
    return subprocess.run(['bash', str(SCRIPT), *args], env=full_env, capture_output=True, text=True,
                          timeout=60)


def _commands(stdout: str) -> List[List[str]]:
    """The commands a dry run prints, as argument lists without the log redirection."""
    return [shlex.split(line)[:-2] for line in stdout.splitlines() if not line.startswith(('==', 'would'))]


def test_dry_run_prints_three_runs_on_the_same_data_and_seed(tmp_path: Path) -> None:
    work_dir = tmp_path / 'work'
    proc = _script(['--dry-run', '--out', str(tmp_path / 's.json'), '--figure', str(tmp_path / 'fig')],
                   dict(WORK_DIR=str(work_dir), DEMO_DIR=str(tmp_path / 'data'), SEED='7'))
    assert proc.returncode == 0, proc.stderr
    assert not work_dir.exists(), 'a dry run must not create the work directory'
    commands = _commands(proc.stdout)
    tools = [Path(c[1]).name for c in commands]
    assert tools == ['make_demo_data.py'] + ['train.py', 'test.py'] * 3 + ['visualize_angles.py']
    data_root = f'{tmp_path / "data"}/ade/ADEChallengeData2016'
    expected = dict(trunc=(BASE, []), **{'bilinear-fixed': (LA, ['model.backbone.learnable_angles=False'])},
                    learnable=(LA, []))
    for i, name in enumerate(RUNS):
        train, test = commands[1 + 2 * i], commands[2 + 2 * i]
        config, extra = expected[name]
        assert train[2] == test[2] == config
        assert train[train.index('--work-dir') + 1] == str(work_dir / name)
        assert test[3] == str(work_dir / name / 'iter_500.pth')
        for command in (train, test):
            options = command[command.index('--cfg-options') + 1:]
            assert options == [f'{split}_dataloader.dataset.data_root={data_root}'
                               for split in ('train', 'val', 'test')] + ['randomness.seed=7'] + extra
    visualize = commands[-1]
    assert visualize[2] == str(work_dir / 'learnable' / 'iter_500.pth')
    assert visualize[visualize.index('--out') + 1] == str(tmp_path / 'fig')
    assert f'would write {tmp_path / "s.json"}' in proc.stdout


@pytest.mark.parametrize('args,status', [(['--bogus'], 2), (['--out'], 2), (['--help'], 0)])
def test_usage(args: List[str], status: int) -> None:
    proc = _script(args, {})
    assert proc.returncode == status
    assert '--dry-run' in proc.stderr and '--summarize' in proc.stderr


def _fake_runs(work_dir: Path, figure: Path) -> None:
    """What the three runs and visualize_angles.py leave behind: test metrics, train times, angles."""
    for i, name in enumerate(RUNS):
        for stamp, miou in (('20240101_000000', 1.0), ('20240102_000000', 60.0 + i)):
            test_dir = work_dir / name / 'test' / stamp
            test_dir.mkdir(parents=True)
            (test_dir / f'{stamp}.json').write_text(json.dumps(dict(aAcc=90.0, mIoU=miou, mAcc=70.0)))
        (work_dir / name / 'train_seconds').write_text(f'{100 + i}.04\n')
    change = dict(count=4, mean_abs_change_deg=1.5, max_abs_change_deg=6.25)
    figure.with_suffix('.json').write_text(json.dumps(dict(layers={'stages.0.0.dwconv': change}, all=change)))


def test_summarize_writes_json_and_table(tmp_path: Path) -> None:
    work_dir, out, figure = tmp_path / 'work', tmp_path / 'res' / 'summary.json', tmp_path / 'fig'
    _fake_runs(work_dir, figure)
    proc = _script(['--summarize', '--figure', str(figure)],
                   dict(WORK_DIR=str(work_dir), OUT=str(out), OMP_NUM_THREADS='1'))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert summary['seed'] == 0 and summary['omp_num_threads'] == '1' and summary['cpu']
    assert list(summary['runs']) == list(RUNS)
    for i, name in enumerate(RUNS):
        run = summary['runs'][name]
        assert run['mIoU'] == 60.0 + i, 'the latest test of each run'
        assert run['train_seconds'] == 100.0 + i
        assert run['config'] == (BASE if name == 'trunc' else LA)
        assert run['options'] == (['model.backbone.learnable_angles=False'] if name == 'bilinear-fixed' else [])
    assert 'angle_change' not in summary['runs']['trunc']
    change = summary['runs']['learnable']['angle_change']
    assert change['all']['max_abs_change_deg'] == 6.25 and change['figure'] == f'{figure}.png'
    table = proc.stdout.splitlines()
    assert table[0].split() == ['run', 'mIoU', 'mAcc', 'aAcc', 'train', 's']
    assert table[2].split() == ['bilinear-fixed', '61.00', '70.00', '90.00', '101']
    assert 'max |change| 6.250 deg' in proc.stdout


def test_summarize_without_runs_says_what_to_do(tmp_path: Path) -> None:
    proc = _script(['--summarize', '--out', str(tmp_path / 's.json')], dict(WORK_DIR=str(tmp_path / 'none')))
    assert proc.returncode != 0
    assert 'without --summarize first' in proc.stderr
    assert not (tmp_path / 's.json').exists()


@pytest.mark.parametrize('reference', [False, True])
def test_a_run_writes_under_the_work_dir_unless_asked_for_the_reference_files(tmp_path: Path, reference: bool) -> None:
    work_dir = tmp_path / 'work'
    # OUT and FIGURE empty: as if unset, whatever the calling environment holds.
    proc = _script(['--dry-run'] + (['--reference'] if reference else []),
                   dict(WORK_DIR=str(work_dir), DEMO_DIR=str(tmp_path / 'data'), OUT='', FIGURE=''))
    assert proc.returncode == 0, proc.stderr
    visualize = _commands(proc.stdout)[-1]
    figure = visualize[visualize.index('--out') + 1]
    summary = proc.stdout.splitlines()[-1]
    if reference:
        assert figure == 'docs/figures/learned_angles_demo'
        assert summary == 'would write benchmarks/results/learnable_demo_angles_cpu.json'
    else:
        assert figure == str(work_dir / 'learned_angles_demo')
        assert summary == f'would write {work_dir / "demo_angles.json"}'
