"""`.dev_scripts/gpu.sh op-steps` and `compare`: each tree of a branch's steps (.old, MID_DIR's, this one)
has its op timed, or its results compared bit for bit, against the one before it, pair by pair.

The script runs on a copy of four trees with stand-ins for `benchmark_op.py` and `op_matrix.py` that
record how they were called (their arguments, the package first on the path, the commit they were told),
so that no GPU and no build is needed.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which('bash') is None, reason='needs bash')

BENCHMARK = """import json, os, sys
args = sys.argv[1:]
out = args[args.index('--out-dir') + 1]
first = os.environ['PYTHONPATH'].split(os.pathsep)[0]
with open({calls!r}, 'a') as f:
    f.write(json.dumps({{'args': args, 'package': first, 'commit': os.environ.get('SOURCE_COMMIT')}}) + '\\n')
if os.path.exists(os.path.join(first, 'FAIL')):
    sys.exit('no build in ' + first)
os.makedirs(out, exist_ok=True)
open(os.path.join(out, 'op_passes_ab_cpu.md'), 'w').write('pair\\n')
print('== old build, run 1 of 1')
print('# Two builds of the op: ' + os.path.basename(first))
"""

PYTHON = """#!/bin/bash
[ "$1" = -c ] && [[ "$2" == *torch.__version__* ]] && {{ echo 2.11.0; exit 0; }}
exec {python} "$@"
"""


# op_matrix.py: `dump [--grown] FILE` writes the package it imported; `compare A B` prints both.
OP_MATRIX = """import json, os, sys
args = sys.argv[1:]
if args[0] == 'dump':
    json.dump({'package': os.environ['PYTHONPATH'].split(os.pathsep)[0], 'args': args[1:-1]}, open(args[-1], 'w'))
else:
    print('compared', *(os.path.basename(os.path.normpath(json.load(open(f))['package'])) for f in args[1:]))
"""


def make_trees(root: Path, calls: Path) -> None:
    (root / '.dev_scripts').mkdir(parents=True)
    shutil.copy(REPO / '.dev_scripts' / 'gpu.sh', root / '.dev_scripts' / 'gpu.sh')
    (root / '.dev_scripts' / 'op_matrix.py').write_text(OP_MATRIX)
    (root / 'tools' / 'analysis_tools').mkdir(parents=True)
    (root / 'tools' / 'analysis_tools' / 'benchmark_op.py').write_text(BENCHMARK.format(calls=str(calls)))
    for tree in (root, root / '.old', root / '.mid1', root / '.mid2'):
        (tree / 'csrc').mkdir(parents=True, exist_ok=True)
        (tree / 'mmo1d').mkdir()


def gpu_sh(stage: str, root: Path, tmp_path: Path, out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    python = tmp_path / 'python'
    python.write_text(PYTHON.format(python=sys.executable))
    python.chmod(0o755)
    env = dict(os.environ, PYTHON=str(python), TORCH_CUDA_ARCH_LIST='9.0', **env)
    return subprocess.run(['bash', str(root / '.dev_scripts' / 'gpu.sh'), stage, str(out), *args],
                          env=env, capture_output=True, text=True, timeout=300)


def op_steps(root: Path, tmp_path: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    return gpu_sh('op-steps', root, tmp_path, out, '--passes', 'fwd', **env)


def read_calls(calls: Path) -> list:
    return [json.loads(line) for line in calls.read_text().splitlines()]


def test_each_step_against_the_one_before(tmp_path: Path) -> None:
    root, calls, out = tmp_path / 'repo', tmp_path / 'calls', tmp_path / 'out'
    make_trees(root, calls)
    run = op_steps(root, tmp_path, out, MID_DIR='.mid1 .mid2', MID_COMMIT='1111111 2222222', SOURCE_COMMIT='3333333')
    assert run.returncode == 0, run.stdout + run.stderr
    seen = [(Path(c['package']).name, Path(c['args'][c['args'].index('--ab') + 1]).name, c['commit'],
             Path(c['args'][c['args'].index('--out-dir') + 1]).name) for c in read_calls(calls)]
    assert seen == [('.mid1', '.old', '1111111', 'mid1'), ('.mid2', '.mid1', '2222222', 'mid2'),
                    ('repo', '.mid2', '3333333', 'new')]
    assert all(c['args'][-2:] == ['--passes', 'fwd'] for c in read_calls(calls))  # the stage's options
    # Each pair's tables, in build order, in the stage's log and output, not the runs' progress lines.
    log = (out / 'op_steps.log').read_text()
    assert log.index('== mid1 against old') < log.index('op: .mid1') < log.index('== new against mid2')
    assert '== old build' not in run.stdout and run.stdout.endswith('== new against mid2\n# Two builds of the op: .\n')
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ['mid1', 'mid2', 'new']


def test_a_failed_pair_stops_the_stage_and_keeps_the_pairs_before(tmp_path: Path) -> None:
    root, calls, out = tmp_path / 'repo', tmp_path / 'calls', tmp_path / 'out'
    make_trees(root, calls)
    (root / '.mid2' / 'FAIL').touch()
    run = op_steps(root, tmp_path, out, MID_DIR='.mid1 .mid2')
    assert run.returncode == 1 and 'no build in' in run.stdout
    assert [Path(c['package']).name for c in read_calls(calls)] == ['.mid1', '.mid2']
    assert (out / 'mid1' / 'op_passes_ab_cpu.md').exists() and not (out / 'new').exists()


def test_a_missing_tree_is_named(tmp_path: Path) -> None:
    root, calls, out = tmp_path / 'repo', tmp_path / 'calls', tmp_path / 'out'
    make_trees(root, calls)
    run = op_steps(root, tmp_path, out, MID_DIR='.mid3')
    assert run.returncode == 2 and 'op-steps: no tree in' in run.stderr and '.mid3' in run.stderr
    assert not calls.exists()


def test_compare_each_build_against_the_one_before(tmp_path: Path) -> None:
    root, calls, out = tmp_path / 'repo', tmp_path / 'calls', tmp_path / 'out'
    make_trees(root, calls)
    run = gpu_sh('compare', root, tmp_path, out, MID_DIR='.mid1 .mid2', MATRIX='grown')
    assert run.returncode == 0, run.stdout + run.stderr
    dumps = {name: json.loads((out / f'op_matrix_{name}.json').read_text()) for name in ('old', 'mid1', 'mid2', 'new')}
    assert {name: Path(d['package']).name for name, d in dumps.items()} == {
        'old': '.old', 'mid1': '.mid1', 'mid2': '.mid2', 'new': 'repo'}
    assert all(d['args'] == ['--grown'] for d in dumps.values())
    log = (out / 'compare.log').read_text()
    pairs = ['== mid1 against old\ncompared .old .mid1', '== mid2 against mid1\ncompared .mid1 .mid2',
             '== new against mid2\ncompared .mid2 repo']
    assert all(pair in log for pair in pairs), log
    assert log.index(pairs[0]) < log.index(pairs[1]) < log.index(pairs[2])
