"""``mmo1d.models.layers.linear``: the Linear on zero-padded input features, and when a Linear may be
computed apart from its module. Oracles: the ``nn.Linear`` itself (values and gradients) and
PyTorch's hook registries."""
import gc
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mmo1d.models.layers import DepthwiseOrientedStem
from mmo1d.models.layers import stems as stems_module
from mmo1d.models.layers.linear import aligned_linear, plain_linear


def _image_view(shape, dtype=torch.float64, seed=0):
    """An (N, H, W, C) view of an NCHW image, as the stem reads it."""
    g = torch.Generator().manual_seed(seed)
    n, h, w, c = shape
    return torch.randn(n, c, h, w, generator=g, dtype=dtype).permute(0, 2, 3, 1).requires_grad_()


@pytest.mark.parametrize('in_features,multiple', [(3, 8), (5, 4), (8, 8), (1, 16)])
def test_aligned_linear_equals_the_layer_and_its_gradients(in_features, multiple):
    layer = nn.Linear(in_features, 24).double()
    x = _image_view((2, 5, 7, in_features))
    got = aligned_linear(x, layer, multiple)
    want = layer(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    grad = torch.randn_like(want)
    got_grads = torch.autograd.grad(got, (x, layer.weight, layer.bias), grad)
    want_grads = torch.autograd.grad(want, (x, layer.weight, layer.bias), grad)
    for g, w in zip(got_grads, want_grads):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('input_grad', [False, True])
def test_aligned_linear_keeps_no_padded_copy_for_backward(monkeypatch, input_grad):
    # The padded inputs are made again in backward: after the forward none is alive, and the
    # gradients are still the layer's.
    copies = []
    pad = F.pad

    def recorded(t, *args, **kwargs):
        out = pad(t, *args, **kwargs)
        if out.dim() == 4:
            copies.append(weakref.ref(out))
        return out

    monkeypatch.setattr(F, 'pad', recorded)
    layer = nn.Linear(3, 16).double()
    x = _image_view((2, 6, 5, 3)).requires_grad_(input_grad)
    y = aligned_linear(x, layer)
    gc.collect()
    assert len(copies) == 1 and copies[0]() is None
    grads = torch.autograd.grad(y.sum(), [t for t in (x, layer.weight, layer.bias) if t.requires_grad])
    assert len(copies) == 2  # made again once, in backward
    monkeypatch.undo()
    want = torch.autograd.grad(layer(x).sum(), [t for t in (x, layer.weight, layer.bias) if t.requires_grad])
    for g, w in zip(grads, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_aligned_linear_reports_a_wrong_feature_count_as_the_layer_does():
    layer = nn.Linear(3, 8)
    with pytest.raises(RuntimeError, match=r'4 and 3x8|shapes cannot be multiplied'):
        aligned_linear(torch.randn(2, 5, 4), layer)


def test_aligned_linear_under_autocast_computes_in_the_autocast_dtype():
    layer = nn.Linear(3, 16)
    x = _image_view((2, 4, 6, 3), torch.float32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        got = aligned_linear(x, layer)
        want = layer(x)
    assert got.dtype == want.dtype == torch.bfloat16
    # Within the rounding of bfloat16 operations of the float64 sums of the bfloat16 operands.
    xb, wb, bb = (t.detach().bfloat16().double() for t in (x, layer.weight, layer.bias))
    exact = xb @ wb.T + bb
    assert ((got.double() - exact).abs() <= 2**-8 * (xb.abs() @ wb.abs().T + bb.abs())).all()
    got.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32 and layer.weight.grad.shape == (16, 3)


def test_plain_linear_is_a_bare_nn_linear_with_a_bias():
    assert plain_linear(nn.Linear(4, 4))
    assert not plain_linear(nn.Linear(4, 4, bias=False))
    assert not plain_linear(type('Adapter', (nn.Linear, ), {})(4, 4))
    assert not plain_linear(nn.Conv2d(4, 4, 1))
    hooked = nn.Linear(4, 4)
    handle = hooked.register_forward_hook(lambda m, i, o: None)
    assert not plain_linear(hooked)
    handle.remove()
    handle = hooked.register_forward_pre_hook(lambda m, i: None)
    assert not plain_linear(hooked)
    handle.remove()
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
    try:
        assert not plain_linear(nn.Linear(4, 4))
    finally:
        handle.remove()
    assert plain_linear(hooked)


def _stem_results(stem, x, dtype, hooked):
    """The stem's output and the gradients of x, pw1's weight and bias; ``hooked``: with a forward
    hook on pw1 (the module's own call, not the padded one)."""
    handle = stem.pw1.register_forward_hook(lambda m, i, o: None) if hooked else None
    stem.zero_grad()
    x.grad = None
    with torch.autocast('cuda', dtype=dtype or torch.float32, enabled=dtype is not None):
        y = stem(x)
    y.float().square().sum().backward()
    if handle is not None:
        handle.remove()
    return y.float(), x.grad.clone(), stem.pw1.weight.grad.clone(), stem.pw1.bias.grad.clone()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16, None])
def test_stem_pads_pw1_on_the_gpu_with_the_same_values(monkeypatch, dtype):
    calls = []

    def counted(x, layer, multiple=8):
        calls.append(x.shape[-1])
        return aligned_linear(x, layer, multiple)

    monkeypatch.setattr(stems_module, 'aligned_linear', counted)
    torch.manual_seed(0)
    stem = DepthwiseOrientedStem(3, 64, 96, 15).cuda()
    x = torch.randn(2, 3, 37, 45, device='cuda', requires_grad=True)
    padded = _stem_results(stem, x, dtype, hooked=False)
    assert calls and all(c == 3 for c in calls)  # forward, then the recompute in backward
    calls.clear()
    plain = _stem_results(stem, x, dtype, hooked=True)
    assert not calls
    if dtype is None:
        for got, want in zip(padded, plain):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        return
    # In 16 bits the two differ by their roundings, which the layer norms and the gradients' sums
    # amplify (x's gradient by up to 3% of its largest value, in both paths alike): each is held to
    # the float32 run of the module's own call, the padded one no further from it than twice the
    # plain one's distance (a padding or bias error would be of the values' own size).
    exact = _stem_results(stem, x, None, hooked=True)
    for name, got, base, want in zip(('y', 'x.grad', 'weight.grad', 'bias.grad'), padded, plain, exact):
        scale = want.abs().max()
        got_err, base_err = ((t - want).abs().max() / scale for t in (got, base))
        assert got_err <= 2 * base_err + 1e-3, (name, got_err.item(), base_err.item())
        assert got_err <= 0.06, (name, got_err.item())
