"""What a build compiles and what an sdist and a wheel carry (no compilation here).

The sdist and the wheel's pure-Python part are built from a copy of the checkout's files (``git
ls-files``: tracked, and new files not ignored), so that the file lists can be compared with it.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import List

import pytest
import torch

from mmo1d.ops import _ext
from mmo1d.ops.cuda_env import build_files, cpp_sources, cuda_sources, find_csrc

from .markdown_links import broken, documentation, links

REPO = Path(__file__).resolve().parents[2]


def _listed(*paths: str) -> List[str]:
    try:
        out = subprocess.run(['git', 'ls-files', '--cached', '--others', '--exclude-standard', '--', *paths],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout')
    return sorted(p for p in out.splitlines() if (REPO / p).is_file())


def _rel(paths: List[str], root: Path) -> List[str]:
    return sorted(Path(p).relative_to(root).as_posix() for p in paths)


def test_discovery_rules_on_nested_folders(tmp_path):
    files = ['a.cpp', 'a.h', 'cpu/b.cpp', 'cpu/deep/c.cpp', 'op/x.cpp', 'op/x.h', 'op/cuda/y.cu', 'op/cuda/y.cuh',
             'cuda/k.cu', 'cuda/k.cuh', 'cuda/host.cpp', 'cuda/sub/k2.cu', 'cuda/sub/t.h', 'notes.md']
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text('')
    assert _rel(cpp_sources(str(tmp_path)), tmp_path) == ['a.cpp', 'cpu/b.cpp', 'cpu/deep/c.cpp', 'op/x.cpp']
    assert _rel(cuda_sources(str(tmp_path)), tmp_path) == ['cuda/host.cpp', 'cuda/k.cu', 'cuda/sub/k2.cu',
                                                          'op/cuda/y.cu']
    assert _rel(build_files(str(tmp_path)), tmp_path) == sorted(set(files) - {'notes.md'})


def test_every_listed_source_is_built():
    tracked = [p[len('csrc/'):] for p in _listed('csrc')]
    csrc = REPO / 'csrc'
    cpp, cuda = _rel(cpp_sources(str(csrc)), csrc), _rel(cuda_sources(str(csrc)), csrc)
    assert not set(cpp) & set(cuda)
    assert set(cpp) | set(cuda) >= {p for p in tracked if p.endswith(('.cpp', '.cu'))}
    assert {p for p in tracked if p.endswith('.cu')} <= set(cuda)
    assert set(_rel(build_files(str(csrc)), csrc)) >= set(tracked)
    # The just-in-time build of this (editable) install reads the source tree.
    assert _ext.cuda_sources() == cuda_sources(str(csrc))


def test_sources_include_the_aten_headers_they_use():
    # ATen/ATen.h declares every ATen function: a CUDA file that includes it takes 45 s to compile
    # for one architecture against 19 s with ATen's core Tensor header (2 cores). The sources include
    # that header and the per-operator header (ATen/ops/NAME.h) of each function they call.
    csrc = REPO / 'csrc'
    sources = [p for p in csrc.rglob('*') if p.suffix in ('.h', '.cuh', '.cpp', '.cu')]
    assert len(sources) > 50
    whole = [str(p.relative_to(csrc)) for p in sources if '#include <ATen/ATen.h>' in p.read_text()]
    assert not whole, f'ATen/ATen.h included by {whole}'
    # Likewise ATen's global context (ATen/cuda/CUDAContext.h: cuda/common/cuda_context.h has what the
    # sources use) and all of torch's C++ API (torch/extension.h: module.cpp needs pybind11 alone).
    for header in ('ATen/cuda/CUDAContext.h', 'torch/extension.h'):
        heavy = [str(p.relative_to(csrc)) for p in sources if f'#include <{header}>' in p.read_text()]
        assert not heavy, f'{header} included by {heavy}'
    for path in sources:
        text = path.read_text()
        for name in sorted(set(re.findall(r'\bat::(empty|empty_like|zeros_like|gelu|gelu_backward|addcmul)\(', text))):
            assert f'#include <ATen/ops/{name}.h>' in text, f'{path.relative_to(csrc)} calls at::{name}'


@pytest.fixture(scope='module')
def source_copy(tmp_path_factory) -> Path:
    """The files of the checkout, copied."""
    root = tmp_path_factory.mktemp('src')
    for path in _listed('.'):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / path, root / path)
    return root


def _setup(root: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, 'setup.py', '-q', *args], cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.fixture(scope='module')
def sdist_root(source_copy, tmp_path_factory) -> Path:
    """The sdist of the checkout's files, built and unpacked: its top folder."""
    out = tmp_path_factory.mktemp('sdist')
    _setup(source_copy, 'sdist', '--dist-dir', str(out))
    [archive] = out.glob('mmo1d-*.tar.gz')
    with tarfile.open(archive) as tar:
        # The 'data' filter (Python 3.11.4 and later) refuses links and paths out of the folder.
        tar.extractall(out / 'unpacked', **({'filter': 'data'} if hasattr(tarfile, 'data_filter') else {}))
    [root] = (out / 'unpacked').iterdir()
    return root


def test_sdist_carries_the_sources_configs_demo_and_docs(sdist_root):
    names = {p.relative_to(sdist_root).as_posix() for p in sdist_root.rglob('*') if p.is_file()}
    folders = ('csrc', 'configs', 'demo', 'docs')
    assert {n for n in names if n.startswith(tuple(f'{f}/' for f in folders))} == set(_listed(*folders))
    assert {'setup.py', 'pyproject.toml', 'MANIFEST.in', 'README.md', 'mmo1d/ops/_ext.py',
            'mmo1d/ops/cuda_env.py', 'mmo1d/ops/cuda_arch.py', 'mmo1d/utils/version_check.py',
            'tools/train.py', 'tools/test.py', 'demo/image_demo.py', 'demo/demo.jpg', 'docs/deployment.md'} <= names


def test_sdist_resolves_every_link_of_the_readme_and_docs(sdist_root):
    """The README is the package's long description: its links and images, and those of the docs it
    links, resolve in the sdist as in the repository."""
    files = documentation(sdist_root)
    assert all(path.is_file() for path in files) and len(files) > 1
    assert sum(link.image for link in links(sdist_root / 'README.md')) >= 1
    assert broken(files, sdist_root) == []


def test_built_package_carries_its_sources_for_the_jit_build(source_copy, tmp_path):
    """``build_py`` writes the wheel's pure-Python part: the package with ``mmo1d/csrc``."""
    _setup(source_copy, 'build_py', '--build-lib', str(tmp_path))
    package = tmp_path / 'mmo1d'
    shipped = package / 'csrc'
    assert sorted(p.relative_to(shipped).as_posix() for p in shipped.rglob('*') if p.is_file()) == [
        p[len('csrc/'):] for p in _listed('csrc')]
    assert (package / 'ops' / '_ext.py').is_file()
    # What mmo1d.ops._ext finds in an installed package: the shipped sources, not a source tree.
    assert find_csrc(str(package)) == str(shipped)
    # Every .cu file, and the C++ sources under csrc/cuda (no kernel launch: not compiled by nvcc).
    cuda_listed = [p for p in _listed('csrc')
                   if p.endswith('.cu') or (p.startswith('csrc/cuda/') and p.endswith('.cpp'))]
    assert _rel(cuda_sources(str(shipped)), shipped) == sorted(p[len('csrc/'):] for p in cuda_listed)
    # Without them, a folder named csrc next to the package is not taken for the sources: only
    # that of a source tree (with setup.py) is.
    shutil.move(shipped, tmp_path / 'csrc')
    assert find_csrc(str(package)) is None
    assert find_csrc(str(source_copy / 'mmo1d')) == str(source_copy / 'csrc')


def test_build_refuses_old_gpu_targets_before_compiling(source_copy, tmp_path):
    """A CUDA build for sm_75 stops with the reason, before any compiler runs (CC/CXX would fail)."""
    from torch.utils.cpp_extension import CUDA_HOME
    if CUDA_HOME is None or torch.version.cuda is None:
        pytest.skip('a CUDA build needs a CUDA toolkit and a CUDA build of torch')
    env = {**os.environ, 'FORCE_CUDA': '1', 'TORCH_CUDA_ARCH_LIST': '7.5;8.0', 'CC': 'false', 'CXX': 'false'}
    proc = subprocess.run([sys.executable, 'setup.py', '-q', 'build_ext', '--build-temp', str(tmp_path / 'temp'),
                           '--build-lib', str(tmp_path / 'lib')], cwd=source_copy, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1
    assert "error: TORCH_CUDA_ARCH_LIST='7.5;8.0' asks for 7.5, which mmo1d cannot build" in proc.stderr
    assert 'cp.async' in proc.stderr and not (tmp_path / 'temp').exists()
