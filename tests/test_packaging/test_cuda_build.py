"""Whether a build compiles the CUDA kernels: the rule (mmo1d/utils/cuda_build.py) and what setup.py does.

FORCE_CUDA=1 always compiles them (and needs a toolkit and a CUDA torch); FORCE_CUDA=0 never does;
unset, they are compiled only where a toolkit, a CUDA torch and a GPU are all present.
"""
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

from mmo1d.utils.cuda_build import cuda_build_decision

REPO = Path(__file__).resolve().parents[2]
TOOLKIT = '/usr/local/cuda'


def _gpu(visible: bool):
    def gpu_visible() -> bool:
        return visible
    return gpu_visible


def _no_gpu_query() -> bool:
    raise AssertionError('the GPUs were asked about although the answer cannot change the decision')


@pytest.mark.parametrize('force, cuda_home, torch_cuda, gpu, build', [
    # FORCE_CUDA unset: all three needed.
    (None, TOOLKIT, '13.0', True, True),
    ('', TOOLKIT, '13.0', True, True),
    (None, TOOLKIT, '13.0', False, False),
    (None, None, '13.0', True, False),
    (None, TOOLKIT, None, True, False),
    # FORCE_CUDA=1: with or without a GPU.
    ('1', TOOLKIT, '13.0', False, True),
    ('1', TOOLKIT, '13.0', True, True),
    # FORCE_CUDA=0: never.
    ('0', TOOLKIT, '13.0', True, False),
    ('0', None, None, False, False),
])
def test_decision_table(force: Optional[str], cuda_home: Optional[str], torch_cuda: Optional[str], gpu: bool,
                        build: bool) -> None:
    decided, reason = cuda_build_decision(force, cuda_home, torch_cuda, _gpu(gpu))
    assert decided is build
    assert reason and '\n' not in reason


def test_the_gpus_are_asked_about_only_when_it_matters() -> None:
    assert cuda_build_decision('1', TOOLKIT, '13.0', _no_gpu_query)[0]
    assert not cuda_build_decision('0', TOOLKIT, '13.0', _no_gpu_query)[0]
    assert not cuda_build_decision(None, None, '13.0', _no_gpu_query)[0]
    assert not cuda_build_decision(None, TOOLKIT, None, _no_gpu_query)[0]


def test_reasons_say_why_and_where_the_kernels_come_from_later() -> None:
    _, no_gpu = cuda_build_decision(None, TOOLKIT, '13.0', _gpu(False))
    assert 'no GPU is visible' in no_gpu and 'just in time' in no_gpu and 'FORCE_CUDA=1' in no_gpu
    _, no_toolkit = cuda_build_decision(None, None, '13.0', _gpu(True))
    assert 'no CUDA toolkit' in no_toolkit
    _, cpu_torch = cuda_build_decision(None, TOOLKIT, None, _gpu(True))
    assert 'CPU-only' in cpu_torch


@pytest.mark.parametrize('cuda_home, torch_cuda, missing', [
    (None, '13.0', 'no CUDA toolkit'),
    (TOOLKIT, None, 'torch is a CPU-only build'),
])
def test_force_cuda_1_without_what_it_needs_is_an_error(cuda_home: Optional[str], torch_cuda: Optional[str],
                                                        missing: str) -> None:
    with pytest.raises(RuntimeError, match=f'FORCE_CUDA=1 asks for the CUDA kernels, but {missing}'):
        cuda_build_decision('1', cuda_home, torch_cuda, _gpu(True))


@pytest.mark.parametrize('force', ['yes', 'true', '2'])
def test_other_force_cuda_values_are_refused(force: str) -> None:
    with pytest.raises(ValueError, match=f"FORCE_CUDA must be 1, 0 or unset, got '{force}'"):
        cuda_build_decision(force, TOOLKIT, '13.0', _gpu(True))


def _build_ext(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``setup.py build_ext`` into ``tmp_path`` with a compiler that tells its version and compiles
    nothing: the build writes its ninja file, then stops at the first compile (one job at a time)."""
    tmp_path.mkdir(parents=True)
    compiler = tmp_path / 'g++'  # torch checks the compiler's name and version
    compiler.write_text('#!/bin/sh\ncase "$1" in --version|-dump*) exec c++ "$@";; esac\nexit 1\n')
    compiler.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k not in ('FORCE_CUDA', 'TORCH_CUDA_ARCH_LIST')}
    return subprocess.run([sys.executable, 'setup.py', '-q', 'build_ext', '--build-temp', str(tmp_path / 'temp'),
                           '--build-lib', str(tmp_path / 'lib')], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**base, 'CC': str(compiler), 'CXX': str(compiler), 'MAX_JOBS': '1',
                                            **env})


def _compiled_sources(tmp_path: Path) -> list:
    ninja = tmp_path / 'temp' / 'build.ninja'
    assert ninja.is_file(), 'setup.py wrote no ninja file'
    return [line.split(': ', 1)[1] for line in ninja.read_text().splitlines() if line.startswith('build ')]


@pytest.mark.skipif(CUDA_HOME is None or torch.version.cuda is None,
                    reason='needs a CUDA toolkit and a CUDA build of torch')
def test_without_a_gpu_setup_compiles_no_cuda_unless_forced(tmp_path: Path) -> None:
    # CUDA_VISIBLE_DEVICES='' hides any GPU, as on a machine without one.
    proc = _build_ext(tmp_path / 'unset', CUDA_VISIBLE_DEVICES='')
    assert 'mmo1d: no GPU is visible: building the CPU kernels only' in proc.stderr, proc.stderr[-2000:]
    sources = _compiled_sources(tmp_path / 'unset')
    assert sources and not any('.cu' in s or '/cuda/' in s for s in sources)
    proc = _build_ext(tmp_path / 'forced', CUDA_VISIBLE_DEVICES='', FORCE_CUDA='1', TORCH_CUDA_ARCH_LIST='9.0')
    assert 'mmo1d: FORCE_CUDA=1: compiling the CUDA kernels too' in proc.stderr, proc.stderr[-2000:]
    assert any('.cu' in s for s in _compiled_sources(tmp_path / 'forced'))


def test_the_script_prints_the_decision_or_the_error() -> None:
    script = REPO / 'mmo1d' / 'utils' / 'cuda_build.py'
    env = {k: v for k, v in os.environ.items() if k != 'FORCE_CUDA'}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**env, 'FORCE_CUDA': '0'})
    assert (proc.returncode, proc.stdout) == (0, 'cpu FORCE_CUDA=0: building the CPU kernels only\n')
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          env={**env, 'FORCE_CUDA': 'on'})
    assert proc.returncode == 1 and proc.stdout == ''
    assert proc.stderr.strip().splitlines()[-1] == "error: FORCE_CUDA must be 1, 0 or unset, got 'on'"
