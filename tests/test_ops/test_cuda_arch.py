"""mmo1d.ops.cuda_arch: TORCH_CUDA_ARCH_LIST read as torch reads it; targets below sm_80 refused."""
import re
from pathlib import Path

import pytest
from torch.utils.cpp_extension import _get_cuda_arch_flags

from mmo1d.ops.cuda_arch import (
    MIN_CAPABILITY,
    check_arch_list,
    check_build_targets,
    check_capabilities,
    parse_arch_list,
)

CSRC = Path(__file__).resolve().parents[2] / 'csrc'
LISTS = ['8.0', '8.0 8.6', '8.0;8.6;8.9;9.0+PTX', '9.0a', '12.0a+PTX', 'Ampere', 'Hopper;Ada', 'Ampere+Tegra',
         'Blackwell', '7.5', 'Turing', '7.0;8.0', 'Volta+Tegra', 'Pascal 8.6']


def _torch_targets(monkeypatch, value):
    """torch's own reading: the (compute_XX, PTX?) targets of its nvcc -gencode flags."""
    monkeypatch.setenv('TORCH_CUDA_ARCH_LIST', value)
    flags = _get_cuda_arch_flags()
    codes = {m.groups() for m in map(re.compile(r'arch=compute_(\w+),code=(sm|compute)_').search, flags)}
    return {(arch, kind == 'compute') for arch, kind in codes}


@pytest.mark.parametrize('value', LISTS)
def test_parse_agrees_with_torch(monkeypatch, value):
    ours = {(f'{a.major}{a.minor}{a.suffix}', False) for a in parse_arch_list(value)}
    ours |= {(f'{a.major}{a.minor}{a.suffix}', True) for a in parse_arch_list(value) if a.ptx}
    assert ours == _torch_targets(monkeypatch, value)


@pytest.mark.parametrize('value, refused, kept', [
    ('7.5', '7.5', '8.0'), ('Turing', '7.5+PTX', '8.0'), ('7.0;8.0;9.0+PTX', '7.0', '8.0;9.0+PTX'),
    ('Volta+Tegra Ampere', '7.2', '8.0;8.6+PTX'), ('6.0 6.1', '6.0, 6.1', '8.0'),
])
def test_targets_below_sm80_are_refused(value, refused, kept):
    with pytest.raises(ValueError) as info:
        check_arch_list(value)
    message = str(info.value)
    assert f'TORCH_CUDA_ARCH_LIST={value!r} asks for {refused}, which mmo1d cannot build' in message
    assert 'cp.async' in message and f'TORCH_CUDA_ARCH_LIST="{kept}"' in message and 'FORCE_CUDA=0' in message


@pytest.mark.parametrize('value', ['8.0', 'Ampere;Ada;Hopper', '9.0a', '8.0;8.6;8.9;9.0+PTX', 'Blackwell'])
def test_supported_targets_pass(value):
    assert all(a.capability >= MIN_CAPABILITY for a in check_arch_list(value))


@pytest.mark.parametrize('value', ['sm_80', '8', '8.0+ptx', 'Amprere'])
def test_unreadable_entries_are_named(monkeypatch, value):
    with pytest.raises(ValueError, match='cannot read the entry'):
        check_arch_list(value)
    with pytest.raises(ValueError):  # torch refuses them too
        _torch_targets(monkeypatch, value)


def test_visible_gpus_are_checked_without_a_list():
    t4, a100 = ('Tesla T4', (7, 5)), ('NVIDIA A100-SXM4-80GB', (8, 0))
    check_capabilities([a100, ('NVIDIA H100 80GB HBM3', (9, 0))])
    for arch_list in ('', 'native'):
        with pytest.raises(RuntimeError, match=r'for Tesla T4 \(sm_75\): its CUDA kernels copy tiles .* cp\.async'):
            check_build_targets(arch_list, [a100, t4])
    check_build_targets('8.0', [t4])  # an explicit list decides, as in torch


def test_the_kernels_use_what_the_minimum_stands_for():
    """cp.async (sm_80) is in the CUDA sources: the minimum cannot be lowered without changing them."""
    sources = [p.read_text() for p in CSRC.rglob('*') if p.suffix in ('.cu', '.cuh')]
    assert any('cp.async' in text for text in sources)
    assert MIN_CAPABILITY == (8, 0)
