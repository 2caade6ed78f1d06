"""Layers of the oriented 1D ConvNeXt models against independent oracles."""
import gc
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mmo1d.models.layers import DepthwiseOrientedStem, DropPath, LayerNorm2d, OrientedConvNeXtBlock
from mmo1d.ops import oriented_dwconv1d_reference


def _randomise(module: torch.nn.Module) -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.2)


@pytest.mark.parametrize('channels_last', [False, True])
def test_layer_norm_2d_matches_per_pixel_norm(channels_last):
    norm = LayerNorm2d(6)
    _randomise(norm)
    x = torch.randn(2, 6, 5, 7)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = norm(x)
    mean = x.mean(1, keepdim=True)
    var = x.var(1, unbiased=False, keepdim=True)
    expected = (x - mean) / torch.sqrt(var + 1e-6) * norm.weight[:, None, None] + norm.bias[:, None, None]
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    assert y.is_contiguous(memory_format=torch.channels_last)
    with pytest.raises(ValueError, match='N, C, H, W'):
        norm(torch.randn(2, 6, 5))


def test_drop_path():
    drop = DropPath(0.5)
    x = torch.ones(64, 3, 2, 2)
    drop.eval()
    assert drop(x) is x
    drop.train()
    torch.manual_seed(0)
    y = drop(x)
    per_sample = y.flatten(1)
    # Every sample is either dropped or kept and scaled by 1 / (1 - p), as a whole.
    assert set(per_sample.unique().tolist()) <= {0.0, 2.0}
    assert (per_sample == per_sample[:, :1]).all()
    assert 0 < (per_sample[:, 0] == 0).sum() < 64
    with pytest.raises(ValueError, match='drop_prob'):
        DropPath(1.0)


def _block_oracle(block: OrientedConvNeXtBlock, x: torch.Tensor) -> torch.Tensor:
    """The block written out with the reference op and functional calls, NCHW throughout."""
    dw = block.depthwise_conv
    if isinstance(dw, torch.nn.Conv2d):
        h = F.conv2d(x, dw.weight, dw.bias, padding=dw.padding, groups=dw.groups)
    else:
        h = oriented_dwconv1d_reference(x, dw.weight, dw.theta, dw.bias)
    h = F.layer_norm(h.permute(0, 2, 3, 1), h.shape[1:2], block.norm.weight, block.norm.bias, 1e-6)
    h = F.gelu(F.linear(h, block.pointwise_conv1.weight, block.pointwise_conv1.bias))
    if block.mid_conv is not None:
        mid = block.mid_conv
        h = oriented_dwconv1d_reference(h.permute(0, 3, 1, 2), mid.weight, mid.theta, mid.bias).permute(
            0, 2, 3, 1) + h
    h = F.linear(h, block.pointwise_conv2.weight, block.pointwise_conv2.bias) * block.gamma
    return x + h.permute(0, 3, 1, 2)


@pytest.mark.parametrize('oriented,kernel_size,mid', [(False, 7, None), (True, 9, None), (True, 5, 9),
                                                      (False, 3, 11)])
@pytest.mark.parametrize('angle_offset', [0.0, 0.5])
def test_block_matches_oracle(oriented, kernel_size, mid, angle_offset):
    block = OrientedConvNeXtBlock(8, kernel_size, oriented, mid, directions=4, angle_offset=angle_offset)
    _randomise(block)
    x = torch.randn(2, 8, 9, 11)
    torch.testing.assert_close(block(x), _block_oracle(block, x), atol=1e-4, rtol=1e-4)
    # channels_last input: same values, channels_last output.
    y = block(x.contiguous(memory_format=torch.channels_last))
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, _block_oracle(block, x), atol=1e-4, rtol=1e-4)
    assert (mid is not None) == (block.mid_conv is not None)
    if block.mid_conv is not None:
        assert block.mid_conv.channels == 32 and block.mid_conv.kernel_size == mid


def test_block_layer_scale_and_errors():
    block = OrientedConvNeXtBlock(8, 7, False, layer_scale_init_value=0.0)
    assert block.gamma is None
    assert 'gamma' not in dict(block.named_parameters())
    assert torch.equal(OrientedConvNeXtBlock(8, 7, True).gamma, torch.full((8, ), 1e-6))
    with pytest.raises(ValueError, match='odd'):
        OrientedConvNeXtBlock(8, 6, True)


def _stem_oracle(stem, x):
    ln = lambda h, m: F.layer_norm(h, h.shape[-1:], m.weight, m.bias, 1e-6)  # noqa: E731
    h = F.linear(x.permute(0, 2, 3, 1), stem.pw1.weight, stem.pw1.bias).permute(0, 3, 1, 2)
    h = oriented_dwconv1d_reference(h, stem.dw1.weight, stem.dw1.theta, stem.dw1.bias, stride=2)
    h = F.gelu(ln(h.permute(0, 2, 3, 1), stem.norm1)).permute(0, 3, 1, 2)
    h = oriented_dwconv1d_reference(h, stem.dw2.weight, stem.dw2.theta, stem.dw2.bias, stride=2)
    h = F.gelu(ln(h.permute(0, 2, 3, 1), stem.norm2))
    return ln(F.linear(h, stem.pw2.weight, stem.pw2.bias), stem.norm3).permute(0, 3, 1, 2)


def test_depthwise_oriented_stem_matches_oracle():
    stem = DepthwiseOrientedStem(3, 8, 16, kernel_size=7, directions=8)
    _randomise(stem)
    x = torch.randn(2, 3, 13, 18)
    y = stem(x)
    assert y.shape == (2, 16, 4, 5)  # ceil(ceil(13 / 2) / 2), ceil(ceil(18 / 2) / 2)
    torch.testing.assert_close(y, _stem_oracle(stem, x), atol=1e-4, rtol=1e-4)
    # Spec: first oriented conv offset 0, second offset 0.5 (90 degrees further).
    assert stem.dw1.stride == stem.dw2.stride == 2
    torch.testing.assert_close(stem.dw2.theta, torch.remainder(stem.dw1.theta + torch.pi / 2, torch.pi))


def test_depthwise_oriented_stem_gradients_match_oracle():
    """Training recomputes the inputs of dw1, dw2 and pw2 in backward: gradients must not change."""
    stem = DepthwiseOrientedStem(3, 8, 16, kernel_size=7, directions=8)
    _randomise(stem)
    x = torch.randn(2, 3, 13, 18, requires_grad=True)
    grad_out = torch.randn(2, 16, 4, 5)
    params = [x] + list(stem.parameters())
    expected = torch.autograd.grad(_stem_oracle(stem, x), params, grad_out)
    stem(x).backward(grad_out)
    for p, e in zip(params, expected):
        torch.testing.assert_close(p.grad, e, atol=1e-4, rtol=1e-4)


def test_depthwise_oriented_stem_recompute_under_autocast():
    """The recomputed inputs (pw1's output, the LN + GELU outputs) are made under the forward's
    autocast state (bf16 here): gradients are bitwise those of the same layers run without the
    recompute."""
    stem = DepthwiseOrientedStem(3, 16, 16, kernel_size=7, directions=8)
    _randomise(stem)
    x = torch.randn(2, 3, 15, 12)
    grad_out = torch.randn(2, 16, 4, 3)

    def plain(m, x):
        h = m.pw1(x.permute(0, 2, 3, 1))
        h = m.dw1(h.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        h = m.dw2(m.norm1(h).permute(0, 3, 1, 2)).permute(0, 2, 3, 1)
        return m.norm3(m.pw2(m.norm2(h))).permute(0, 3, 1, 2)

    grads = []
    for fn in (stem, lambda x: plain(stem, x)):
        stem.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            y = fn(x)
        y.float().backward(grad_out)
        grads.append([p.grad.clone() for p in stem.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    assert stem.dw1.weight.grad.dtype == torch.float32


def test_depthwise_oriented_stem_keeps_no_full_resolution_activation():
    stem = DepthwiseOrientedStem(3, 8, 16, kernel_size=7, directions=8)
    outputs = {}

    def keep_ref(name):
        def hook(module, inputs, output):
            outputs.setdefault(name, weakref.ref(output))  # the first call: the forward pass
        return hook

    names = ('pw1', 'dw1', 'norm1', 'dw2', 'norm2', 'pw2')
    for name in names:
        getattr(stem, name).register_forward_hook(keep_ref(name))
    y = stem(torch.randn(2, 3, 13, 18))
    gc.collect()
    # The inputs of dw1, dw2 and pw2 are gone after the forward pass; the oriented convolutions'
    # outputs (saved by the LNs) and pw2's (saved by norm3) are kept.
    assert [outputs[name]() is not None for name in names] == [False, True, False, True, False, True]
    y.sum().backward()
    assert all(p.grad is not None for p in stem.parameters())
    # Without gradients the plain path runs; it gives the same output, bit for bit.
    x = torch.randn(1, 3, 9, 11)
    with torch.no_grad():
        plain = stem(x)
    assert torch.equal(stem(x).detach(), plain)


@pytest.mark.parametrize('grad', [False, True])
def test_depthwise_oriented_stem_frees_each_activation_once_read(grad):
    """When a layer of the stem starts, no earlier activation is alive but its input (and, when
    training, the tensors kept for backward: dw1's and dw2's outputs)."""
    stem = DepthwiseOrientedStem(3, 8, 16, kernel_size=7, directions=8)
    names = ('pw1', 'dw1', 'norm1', 'dw2', 'norm2', 'pw2', 'norm3')
    outputs, alive = {}, {}

    def record(name):
        def hook(module, inputs, output):
            outputs[name] = weakref.ref(output)
        return hook

    def check(name):
        def hook(module, inputs):
            gc.collect()
            alive[name] = [n for n, ref in outputs.items() if ref() is not None]
        return hook

    for name in names:
        getattr(stem, name).register_forward_hook(record(name))
        getattr(stem, name).register_forward_pre_hook(check(name))
    with torch.set_grad_enabled(grad):
        stem(torch.randn(2, 3, 13, 18))
    kept = ['dw1', 'dw2'] if grad else []
    for i, name in enumerate(names[1:]):
        assert sorted(alive[name]) == sorted({names[i]} | {k for k in kept if k in names[:i + 1]}), name


def test_block_drop_path_in_one_addcmul():
    """Training with stochastic depth: x + mask * gamma * f(x), with DropPath's per-sample mask."""
    block = OrientedConvNeXtBlock(8, 5, True, drop_path_rate=0.5, layer_scale_init_value=0.5)
    _randomise(block)
    block.train()
    x = torch.randn(8, 8, 6, 7)
    torch.manual_seed(3)
    y = block(x)
    torch.manual_seed(3)
    mask = torch.empty(8, 1, 1, 1).bernoulli_(0.5)
    expected = x + (_block_oracle(block, x) - x) * mask / 0.5
    torch.testing.assert_close(y, expected, atol=1e-4, rtol=1e-4)
    dropped = (mask.flatten() == 0)
    assert 0 < dropped.sum() < 8
    assert torch.equal(y[dropped], x[dropped])


def test_plus_plus_block_keeps_no_gelu_output():
    """The "++" convolution's input (the GELU output) is made again in backward, not kept: of the
    block's 4C-wide activations, backward keeps pw1's product (GELU's input before pw1's bias, which
    the op adds) and pw2's input only."""
    block = OrientedConvNeXtBlock(8, 5, True, mid_kernel_size=7, directions=4)
    _randomise(block)
    pw2_input, wide = [], []
    block.pointwise_conv2.register_forward_pre_hook(lambda m, i: pw2_input.append(i[0].data_ptr()))
    x = torch.randn(2, 8, 9, 11, requires_grad=True)

    def pack(t):
        if t.numel() == 4 * x.numel():
            wide.append(t.data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = block(x)
    assert len(set(wide)) == 2 and pw2_input[0] in wide
    grad_out = torch.randn_like(y)
    y.backward(grad_out)
    grads = [x.grad] + [p.grad for p in block.parameters()]
    # Activation checkpointing runs the block as pw1, GELU and the op: pw1's bias added in its matrix
    # product, not after it, so the same gradients up to float32 rounding.
    block.with_cp = True
    x2 = x.detach().requires_grad_()
    block.zero_grad(set_to_none=True)
    block(x2).backward(grad_out)
    for a, b in zip(grads, [x2.grad] + [p.grad for p in block.parameters()]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # And the oracle's.
    x3 = x.detach().requires_grad_()
    params = [x3] + list(block.parameters())
    expected = torch.autograd.grad(_block_oracle(block, x3), params, grad_out)
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


def test_plus_plus_block_calls_a_hooked_or_replaced_pw1():
    """pw1's product and bias are taken apart only for a plain nn.Linear without hooks: a hook on it,
    or a layer in its place (an adapter, a quantised layer), runs as the block's pw1 (float64: the
    same values either way)."""

    class Scaled(nn.Linear):

        def forward(self, x):
            return super().forward(x) * 2

    block = OrientedConvNeXtBlock(8, 5, True, mid_kernel_size=7, directions=4).double()
    _randomise(block)
    x = torch.randn(2, 8, 9, 11, dtype=torch.float64, requires_grad=True)
    plain = block(x)
    seen = []
    handle = block.pointwise_conv1.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    torch.testing.assert_close(block(x), plain, atol=1e-12, rtol=1e-12)
    assert seen == [(2, 9, 11, 32)]
    handle.remove()
    scaled = Scaled(8, 32).double()
    scaled.load_state_dict(block.pointwise_conv1.state_dict())
    block.pointwise_conv1 = scaled
    with torch.no_grad():
        expected = block(x)
    got = block(x)
    assert got.requires_grad
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)
    assert not torch.allclose(got, plain)


@pytest.mark.parametrize('mid_kernel_size', [None, 7])
def test_block_leaves_pw2_bias_to_the_residual(mid_kernel_size):
    """In training with a channels_last input, pw2's product comes alone and the residual op adds its
    bias and gives it its gradient (no reduction of the Linear's own): the residual's node takes the
    bias itself; values and gradients those of the block that calls pw2 (activation checkpointing), up
    to float32 rounding. With an NCHW input the Linear keeps its bias."""
    block = OrientedConvNeXtBlock(8, 5, True, mid_kernel_size=mid_kernel_size, directions=4, drop_path_rate=0.3,
                                  layer_scale_init_value=0.5)
    _randomise(block)
    block.train()
    def residual_leaves(y):
        return [fn.variable for fn, _ in y.grad_fn.next_functions if fn is not None and hasattr(fn, 'variable')]

    # An NCHW input: the residual runs ATen's ops, the Linear keeps its bias.
    assert not any(v is block.pointwise_conv2.bias for v in residual_leaves(block(torch.randn(2, 8, 5, 6))))
    x = torch.randn(4, 8, 9, 11).contiguous(memory_format=torch.channels_last).requires_grad_()
    torch.manual_seed(1)
    y = block(x)
    assert any(v is block.pointwise_conv2.bias for v in residual_leaves(y))
    grad_out = torch.randn_like(y)
    y.backward(grad_out)
    grads = [x.grad] + [p.grad for p in block.parameters()]
    block.with_cp = True
    block.zero_grad(set_to_none=True)
    x2 = x.detach().clone().requires_grad_()
    torch.manual_seed(1)
    y2 = block(x2)
    y2.backward(grad_out)
    torch.testing.assert_close(y, y2, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, [x2.grad] + [p.grad for p in block.parameters()]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_norm_layers_write_the_autocast_dtype_only_where_a_cast_follows():
    """Under autocast the block's LayerNorm (it feeds pw1) returns bf16, the same values pw1 would
    get from its own cast of a float32 LayerNorm; the stem's last norm keeps float32."""
    block = OrientedConvNeXtBlock(16, 5, True)
    _randomise(block)
    stem = DepthwiseOrientedStem(3, 8, 16, kernel_size=7)
    h = torch.randn(2, 5, 6, 16)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        y = block.norm(h.bfloat16())
        assert stem(torch.randn(1, 3, 16, 16)).dtype == torch.float32
    assert y.dtype == torch.bfloat16
    expected = F.layer_norm(h.bfloat16().float(), (16, ), block.norm.weight, block.norm.bias, 1e-6)
    torch.testing.assert_close(y, expected.bfloat16(), atol=0, rtol=2**-7)
    assert stem.norm1.act == 'gelu' and stem.norm2.act == 'gelu' and stem.norm3.act is None
