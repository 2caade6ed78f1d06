"""The switch of the tensor-core path: a process-wide setting the CUDA dispatcher reads per call."""
import os
import subprocess
import sys

import pytest

from mmo1d.ops import _ext, set_tensor_cores, tensor_cores_enabled

needs_kernels = pytest.mark.skipif(not _ext._cuda_ready, reason='the setting lives in the CUDA kernels')


@needs_kernels
def test_set_tensor_cores_returns_the_previous_setting():
    first = tensor_cores_enabled()
    try:
        assert set_tensor_cores(False) is first
        assert tensor_cores_enabled() is False
        assert set_tensor_cores(True) is False
        assert tensor_cores_enabled() is True
    finally:
        set_tensor_cores(first)


@pytest.mark.parametrize('value, expected', [('0', False), ('1', True), (None, True)])
def test_environment_variable_sets_the_default(value, expected):
    env = dict(os.environ)
    env.pop('MMO1D_TENSOR_CORES', None)
    if value is not None:
        env['MMO1D_TENSOR_CORES'] = value
    code = 'from mmo1d.ops import tensor_cores_enabled; print(tensor_cores_enabled())'
    out = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(expected)
