"""Non-finite and huge angles, and the path query, on every device."""
import math

import pytest
import torch

from mmo1d.ops import (
    PATH_ALIASES,
    canonical_path,
    oriented_dwconv1d,
    oriented_dwconv1d_path,
    oriented_dwconv1d_paths,
    oriented_dwconv1d_reference,
    tap_offsets,
)
from mmo1d.ops._ext import _C

from .utils import DEVICES

SPECIAL = [float('nan'), float('inf'), float('-inf'), 1e30, -3e38, 0.3]


def test_reference_offsets_of_special_angles():
    theta = torch.tensor(SPECIAL)
    dh, dw = tap_offsets(theta, 7)
    # No direction: every tap of a NaN or infinite angle sits at the centre.
    assert (dh[:3] == 0).all() and (dw[:3] == 0).all()
    # Finite angles of any magnitude: the double sine and cosine of the float32 angle.
    for c in (3, 4, 5):
        a = float(theta[c])  # the float32 value
        s, co = math.sin(a), math.cos(a)
        want_h = [int(-(t - 3) * torch.tensor(s, dtype=torch.float32).item()) for t in range(7)]
        want_w = [int((t - 3) * torch.tensor(co, dtype=torch.float32).item()) for t in range(7)]
        assert dh[c].tolist() == want_h and dw[c].tolist() == want_w


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('stride', [1, 2])
def test_special_angles_compute_the_documented_op(device, dtype, stride):
    if device == 'cpu' and dtype != torch.float32:
        pytest.skip('the CPU kernel computes reduced precisions in float32 like this case')
    g = torch.Generator().manual_seed(3)
    c = 16 * len(SPECIAL)  # whole channel blocks: the channels_last fast paths serve it
    theta = torch.tensor(SPECIAL).repeat_interleave(16)
    x = torch.randn(2, c, 19, 23, generator=g)
    w = torch.randn(c, 9, generator=g) / 3
    b = torch.randn(c, generator=g)
    for layout in (torch.contiguous_format, torch.channels_last):
        xd = x.to(device, dtype).contiguous(memory_format=layout)
        out = oriented_dwconv1d(xd, w.to(device, dtype), theta.to(device), b.to(device, dtype), stride)
        assert torch.isfinite(out).all()
        ref = oriented_dwconv1d_reference(xd.double(), w.to(device).double(), theta.to(device),
                                          b.to(device).double(), stride)
        tol = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]
        torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol * 4)
        # The first 48 channels (NaN, inf, -inf) compute b + x * sum(w) at the output pixels.
        plain = (xd.double()[:, :48, ::stride, ::stride] * w.to(device).double()[:48].sum(1)[:, None, None]
                 + b.to(device).double()[:48, None, None])
        torch.testing.assert_close(out[:, :48].double(), plain, rtol=tol, atol=tol * 4)


def test_path_query_on_cpu():
    x = torch.randn(1, 4, 8, 8)
    w = torch.randn(4, 5)
    for p in ('forward', 'backward_input', 'backward_weight'):
        assert oriented_dwconv1d_path(x, w, 2, p) == 'cpu'
    assert oriented_dwconv1d_path(x, w.view(4, 1, 1, 5)) == 'cpu'
    with pytest.raises(ValueError, match='pass_ must be'):
        oriented_dwconv1d_path(x, w, 1, 'sideways')
    with pytest.raises(RuntimeError, match='K odd'):
        oriented_dwconv1d_path(x, torch.randn(4, 4))
    with pytest.raises(RuntimeError, match=r'input must be \(N, C, H, W\)'):
        oriented_dwconv1d_path(x[0], w)
    with pytest.raises(RuntimeError, match='theta'):
        oriented_dwconv1d_path(x, w, theta=torch.zeros(3))
    with pytest.raises(ValueError, match='rounding must be'):
        oriented_dwconv1d_path(x, w, rounding='round')


def test_path_list_comes_from_the_compiled_families():
    paths = oriented_dwconv1d_paths()
    if not _C.cuda_compiled() and not torch.cuda.is_available():
        assert paths == []
        return
    assert len(paths) == len(set(paths)) and all(p and '+' not in p for p in paths)
    # The general family serves every rounded call, so the dispatcher tries it last; the
    # interpolated families serve the interpolated calls (learnable angles), the fast ones first.
    assert paths[-4:] == ['general_gather_nchw', 'general_gather_nhwc', 'general_wgrad_nchw', 'general_wgrad_nhwc']
    interp = ['interp_win', 'interp_seg', 'interp_seg_wgrad', 'interp_vec', 'interp_vec_wgrad',
              'interp_vec_wgrad_classes', 'interp_gather_nchw', 'interp_gather_nhwc', 'interp_wgrad_nchw',
              'interp_wgrad_nhwc']
    assert [p for p in paths if p.startswith('interp_')] == interp


def test_former_path_names_read_as_the_current_ones():
    assert canonical_path('seg_nchw') == 'seg_gather'
    assert canonical_path('gather_nchw+nchw_copies') == 'general_gather_nchw+nchw_copies'
    assert canonical_path('wgrad_nhwc') == 'general_wgrad_nhwc'
    for name in ('seg_gather', 'interp_gather_nhwc', 'cpu', 'general_wgrad_nchw+nchw_copies'):
        assert canonical_path(name) == name
    # No former name is a current one (a name never means two paths).
    assert not set(PATH_ALIASES) & set(PATH_ALIASES.values())
    with pytest.raises(ValueError, match='non-empty string'):
        canonical_path('')


def test_path_names_start_with_their_family_word():
    paths = oriented_dwconv1d_paths()
    if not _C.cuda_compiled() and not torch.cuda.is_available():
        pytest.skip('no CUDA kernels')
    # Every former name maps to a path of the compiled list, and none of them is still returned.
    assert set(PATH_ALIASES.values()) <= set(paths)
    assert not set(PATH_ALIASES) & set(paths)
    words = ('s2_gather', 'win_gather', 'vec_gather', 'seg_gather', 'mma_wgrad', 'vec_wgrad', 'seg_wgrad',
             'interp_win', 'mma_interp_wgrad', 'interp_seg', 'interp_vec', 'interp', 'general')
    assert all(any(p == w or p.startswith(w + '_') for w in words) for p in paths)
