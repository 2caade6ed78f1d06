"""CUDA kernels of the fused layer norm: the scalar path, many rows, determinism, wide rows."""
import pytest
import torch
import torch.nn.functional as F

from mmo1d.ops import layer_norm_last

from .test_layer_norm import _make, _oracle, _run, _tolerance
from .utils import rel_err

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('channels', [64, 384])
def test_misaligned_rows_take_the_scalar_path(dtype, channels):
    """A data pointer one element past an aligned allocation cannot use 16-byte vectors."""
    shape = (5, 9, channels)
    x, w, b = _make(shape, dtype, 'cuda', seed=7, offset=1)
    assert x.data_ptr() % 16 != 0
    grad_out = torch.randn(shape, device='cuda', dtype=dtype, generator=torch.Generator('cuda').manual_seed(0))
    for gelu in (False, True):
        got = _run(x, w, b, gelu, dtype, grad_out)
        for name, g, e in zip(('y', 'dx', 'dw', 'db'), got, _oracle(x, w, b, gelu, grad_out)):
            assert rel_err(g, e) < _tolerance(dtype), name


@pytest.mark.parametrize('channels,gelu', [(64, True), (96, False), (768, False)])
def test_many_rows_bfloat16(channels, gelu):
    """More rows than one grid-stride pass of the backward kernel: every row and column is summed."""
    shape = (8, 56, 56, channels) if channels < 512 else (8, 14, 14, channels)
    x, w, b = _make(shape, torch.bfloat16, 'cuda', seed=channels)
    grad_out = torch.randn(shape, device='cuda', dtype=torch.bfloat16)
    got = _run(x, w, b, gelu, torch.bfloat16, grad_out)
    for name, g, e in zip(('y', 'dx', 'dw', 'db'), got, _oracle(x, w, b, gelu, grad_out)):
        assert rel_err(g, e) < _tolerance(torch.bfloat16), name


def test_weight_gradient_is_deterministic():
    x, w, b = _make((16, 40, 40, 96), torch.bfloat16, 'cuda', seed=1)
    grad_out = torch.randn(x.shape, device='cuda', dtype=torch.bfloat16)
    first = _run(x, w, b, True, torch.bfloat16, grad_out)
    for _ in range(3):
        again = _run(x, w, b, True, torch.bfloat16, grad_out)
        assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_matches_torch_layer_norm_in_float32():
    """Float32, no activation: the same values as ATen's layer norm up to rounding."""
    x, w, b = _make((4, 28, 28, 192), torch.float32, 'cuda', seed=9)
    torch.testing.assert_close(layer_norm_last(x, w, b), F.layer_norm(x, (192, ), w, b, 1e-6), atol=2e-5,
                               rtol=2e-5)
