"""`.dev_scripts/gpu.sh build` and `pack`: a tree whose build matches its sources is reused, a packed
build travels to another copy of the trees and is reused there, and a build of other sources is not.

The script runs on copies of two trees (this one and `.old`, each a setup.py, csrc/ and mmo1d/) with
a stand-in interpreter: its `setup.py build_ext` copies a real shared library (the standard library's
`math` module) into mmo1d/ and records the call, so that no compiler runs; it names a torch version.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SO = '_C.cpython-312-x86_64-linux-gnu.so'

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ('bash', 'strip', 'tar', 'xz')), reason='needs bash, strip, tar, xz')

STAND_IN = """#!/bin/bash
if [ "$1" = setup.py ]; then
  echo "$PWD" >> {calls}
  [ -f FAIL_BUILD ] && exit 3
  cp {library} mmo1d/{so}
  exit 0
fi
[ "$1" = -c ] && [[ "$2" == *torch.__version__* ]] && {{ echo 2.11.0+cu130; exit 0; }}
exec {python} "$@"
"""


def make_tree(root: Path) -> None:
    """A checkout's root: the script, and this tree and `.old` as the builds see them."""
    (root / '.dev_scripts').mkdir(parents=True)
    shutil.copy(REPO / '.dev_scripts' / 'gpu.sh', root / '.dev_scripts' / 'gpu.sh')
    for tree in (root, root / '.old'):
        (tree / 'csrc').mkdir(parents=True)
        (tree / 'mmo1d').mkdir()
        (tree / 'csrc' / 'op.cu').write_text(f'// the sources of {"old" if tree.name == ".old" else "new"}\n')
        (tree / 'setup.py').write_text('')


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    library = next(Path(sysconfig.get_config_var('DESTSHARED')).glob('math*.so'))
    script = tmp_path / 'python'
    script.write_text(STAND_IN.format(calls=tmp_path / 'calls', library=library, so=SO, python=sys.executable))
    script.chmod(0o755)
    return script


def gpu_sh(root: Path, stand_in: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=str(stand_in), TORCH_CUDA_ARCH_LIST='9.0')
    return subprocess.run(['bash', str(root / '.dev_scripts' / 'gpu.sh'), *args], env=env, capture_output=True,
                          text=True, timeout=300)


def builds(stand_in: Path) -> list:
    """The trees built so far, and forget them."""
    calls = stand_in.parent / 'calls'
    built = calls.read_text().split() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return sorted(Path(p).name for p in built)


def test_builds_are_reused_while_their_sources_stay(tmp_path: Path, stand_in: Path) -> None:
    root = tmp_path / 'a'
    make_tree(root)
    assert gpu_sh(root, stand_in, 'build', str(tmp_path / 'out')).returncode == 0
    assert builds(stand_in) == ['.old', 'a']
    run = gpu_sh(root, stand_in, 'build', str(tmp_path / 'out'))
    assert run.returncode == 0 and 'new build: reused' in run.stdout and 'old build: reused' in run.stdout
    assert builds(stand_in) == []
    with open(root / '.old' / 'csrc' / 'op.cu', 'a') as f:
        f.write('// changed\n')
    assert gpu_sh(root, stand_in, 'build', str(tmp_path / 'out')).returncode == 0
    assert builds(stand_in) == ['.old']
    # A failed build fails the stage, with its log's end.
    (root / '.old' / 'FAIL_BUILD').touch()
    (root / '.old' / 'csrc' / 'op.cu').write_text('// changed again\n')
    run = gpu_sh(root, stand_in, 'build', str(tmp_path / 'out'))
    assert run.returncode != 0 and 'old build: 3' in run.stdout


def test_packed_builds_travel_to_another_copy(tmp_path: Path, stand_in: Path) -> None:
    root, copy = tmp_path / 'a', tmp_path / 'b'
    make_tree(root)
    assert gpu_sh(root, stand_in, 'build', str(tmp_path / 'out')).returncode == 0
    pack = gpu_sh(root, stand_in, 'pack', str(tmp_path / 'packed'))
    assert pack.returncode == 0, pack.stdout + pack.stderr
    assert sorted(p.name for p in (tmp_path / 'packed').iterdir()) == ['new_build.tar.xz', 'old_build.tar.xz']
    builds(stand_in)
    # Another copy of the same trees, whose .old has other sources: this tree's build is reused, the old
    # one's archive is left out and the tree built.
    make_tree(copy)
    (copy / '.old' / 'csrc' / 'op.cu').write_text('// other sources\n')
    shutil.copytree(tmp_path / 'packed', copy / '.builds')
    run = gpu_sh(copy, stand_in, 'build', str(tmp_path / 'out2'))
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'new build: reused' in run.stdout and 'old_build.tar.xz: built from other sources' in run.stdout
    assert builds(stand_in) == ['.old']
    assert (copy / 'mmo1d' / SO).stat().st_size <= (root / 'mmo1d' / SO).stat().st_size  # stripped
