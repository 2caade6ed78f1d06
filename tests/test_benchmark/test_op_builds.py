"""mmo1d.benchmark.op_builds: the old build's package, the runs taking turns, the pairing of their records."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mmo1d.benchmark import op_builds


def _tree(root: Path, lib: bool = True) -> Path:
    (root / 'mmo1d' / 'ops').mkdir(parents=True)
    (root / 'mmo1d' / 'ops' / '__init__.py').write_text(f'WHERE = {str(root)!r}\n')
    (root / 'mmo1d' / '__init__.py').write_text('')
    (root / 'mmo1d' / 'benchmark').mkdir()
    (root / 'mmo1d' / 'benchmark' / '__init__.py').write_text(f'WHERE = {str(root)!r}\n')
    if lib:
        (root / 'mmo1d' / '_C.cpython-311-x86_64-linux-gnu.so').write_text(str(root))
    (root / 'csrc' / 'cuda').mkdir(parents=True)
    (root / 'csrc' / 'a.cpp').write_text('a' + str(root))
    (root / 'csrc' / 'cuda' / 'b.cu').write_text('b')
    return root


def test_overlay_takes_the_op_from_the_old_tree(tmp_path):
    old, new = _tree(tmp_path / 'old'), _tree(tmp_path / 'new')
    dest = op_builds.overlay_package(str(old), str(new / 'mmo1d'), str(tmp_path / 'overlay'))
    code = 'import mmo1d.ops, mmo1d.benchmark; print(mmo1d.ops.WHERE, mmo1d.benchmark.WHERE)'
    out = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env={**os.environ, 'PYTHONPATH': dest},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(old), str(new)]
    lib = Path(dest) / 'mmo1d' / '_C.cpython-311-x86_64-linux-gnu.so'
    assert lib.read_text() == str(old) and (Path(dest) / 'csrc' / 'a.cpp').read_text() == 'a' + str(old)


def test_overlay_needs_a_built_old_tree(tmp_path):
    with pytest.raises(FileNotFoundError, match='build_ext --inplace'):
        op_builds.overlay_package(str(_tree(tmp_path / 'old', lib=False)), str(_tree(tmp_path / 'new') / 'mmo1d'),
                                  str(tmp_path / 'o'))
    with pytest.raises(FileNotFoundError, match='not an mmo1d source tree'):
        op_builds.overlay_package(str(tmp_path), str(tmp_path / 'new' / 'mmo1d'), str(tmp_path / 'o2'))


def test_sources_fingerprint_is_the_sha1_of_csrc_in_path_order(tmp_path):
    root = _tree(tmp_path / 't')
    want = hashlib.sha1(b'a' + str(root).encode() + b'b').hexdigest()[:12]  # csrc/a.cpp sorts before csrc/cuda/b.cu
    assert op_builds.sources_fingerprint(str(root)) == want
    assert op_builds.sources_fingerprint(str(tmp_path)) == 'none'


def test_strip_options():
    argv = ['--device', 'cpu', '--ab', 'old', '--ab-rounds=2', '--out-dir', 'o', '--passes', 'fwd']
    assert op_builds.strip_options(argv, {'--ab': 1, '--ab-rounds': 1, '--out-dir': 1}) == [
        '--device', 'cpu', '--passes', 'fwd']


def test_builds_take_turns_and_records_pair_up(tmp_path):
    runs = []

    def runner(cmd, env):
        build = 'old' if env['PYTHONPATH'].startswith('OLD') else 'new'
        runs.append((build, cmd[2:-2]))
        ms = {'old': 2.0, 'new': 1.0}[build] + len(runs) / 100
        recs = [dict(impl='mmo1d', H=9, pass_='fwd', ms=ms, round_ms=[ms], path=f'{build}_path'),
                dict(impl='mmo1d', H=9, pass_='bwd', ms=2 * ms, round_ms=[ms], path='p', kernel_ms=ms / 2,
                     own_kernel_ms=ms / 4, launches=2.0)]
        Path(cmd[-1]).write_text(json.dumps({'env': {'gpu': 'G', 'build': build}, 'records': recs}))
        return SimpleNamespace(returncode=0)

    env, records = op_builds.alternate('tool.py', ['--x'], {'old': 'OLD', 'new': 'NEW'}, 3, str(tmp_path), runner)
    assert [b for b, _ in runs] == ['old', 'new'] * 3 and all(args == ['--x'] for _, args in runs)
    assert env == {'gpu': 'G', 'build': 'new'} and len(records) == 12
    rows = op_builds.compare(records)
    # A case with kernel times pairs them as a measure of their own, beside the event times.
    assert [(r['pass_'], r['measure']) for r in rows] == [('fwd', 'ms'), ('bwd', 'ms'), ('bwd', 'kernel_ms')]
    assert rows[2]['old_runs'] == [2.01 / 2, 2.03 / 2, 2.05 / 2] and rows[2]['new'] == 1.04 / 2
    fwd = rows[0]
    assert fwd['old_runs'] == [2.01, 2.03, 2.05] and fwd['new_runs'] == [1.02, 1.04, 1.06]
    assert (fwd['old'], fwd['new'], fwd['ratio']) == (2.03, 1.04, round(1.04 / 2.03, 4))
    assert (fwd['old_path'], fwd['new_path'], fwd['measure']) == ('old_path', 'new_path', 'ms')
    result = {'env': env, 'rows': rows, 'alternations': 3, 'command': 'python x', 'builds': {
        'old': {'path': '.old', 'sources': 'aaa'}, 'new': {'path': '.', 'sources': 'bbb'}}}
    md = op_builds.summarize(result)
    assert '| fwd | ms | 2.03 | 1.04 | 0.512 | 2.01 2.03 2.05 | 1.02 1.04 1.06 | old_path -> new_path |' in md
    assert 'Fields the same in every case: H=9, impl=mmo1d' in md


def test_a_failed_run_says_which_build(tmp_path):
    def runner(cmd, env):
        return SimpleNamespace(returncode=3)

    with pytest.raises(RuntimeError, match=r'old build \(OLD\) failed with exit status 3'):
        op_builds.alternate('tool.py', [], {'old': 'OLD', 'new': 'NEW'}, 1, str(tmp_path), runner)
