"""DepthwiseConv2d (the 2D and 2D++ blocks' KxK convolution): the same values, gradients and
parameters as nn.Conv2d in both of its layouts, NCHW strides for the input and the weight when it
computes in NCHW, and a channels_last result either way."""
import pytest
import torch
import torch.nn.functional as F

from mmo1d.models.layers import DepthwiseConv2d


def _conv_and_input(channels=6, k=7):
    torch.manual_seed(0)
    conv = DepthwiseConv2d(channels, k)
    with torch.no_grad():
        for p in conv.parameters():
            p.normal_(0, 0.3)
    conv = conv.to(memory_format=torch.channels_last)  # as the benchmarks move the models
    x = torch.randn(2, channels, 11, 9).contiguous(memory_format=torch.channels_last)
    return conv, x


@pytest.mark.parametrize('nchw', [False, True])
def test_values_gradients_and_layout(monkeypatch, nchw):
    conv, x = _conv_and_input()
    monkeypatch.setattr(DepthwiseConv2d, 'computes_in_nchw', lambda self, t: nchw)
    seen = []
    conv2d = F.conv2d

    def spy(inp, weight, *args):
        seen.append((inp.stride(), weight.stride()))
        return conv2d(inp, weight, *args)

    monkeypatch.setattr(torch.nn.modules.conv.F, 'conv2d', spy)
    xg = x.detach().requires_grad_()
    out = conv(xg)
    assert out.is_contiguous(memory_format=torch.channels_last)
    (inp_strides, w_strides), = seen
    if nchw:
        assert inp_strides == (6 * 11 * 9, 11 * 9, 9, 1) and w_strides == (49, 49, 7, 1)
    else:
        assert inp_strides == x.stride() and w_strides == conv.weight.stride() == (49, 1, 7, 1)
    monkeypatch.undo()
    # The oracle: float64 depthwise convolution of the same parameters.
    ref = F.conv2d(x.double(), conv.weight.double(), conv.bias.double(), padding=3, groups=6)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(ref)
    got = torch.autograd.grad(out, (xg, conv.weight, conv.bias), grad.float())
    xd = x.double().requires_grad_()
    wd = conv.weight.detach().double().requires_grad_()
    bd = conv.bias.detach().double().requires_grad_()
    want = torch.autograd.grad(F.conv2d(xd, wd, bd, padding=3, groups=6), (xd, wd, bd), grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4)


def test_parameters_of_a_conv2d():
    conv = DepthwiseConv2d(8, 5)
    ref = torch.nn.Conv2d(8, 8, 5, padding=2, groups=8)
    assert {k: v.shape for k, v in conv.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    assert isinstance(conv, torch.nn.Conv2d) and conv.padding == (2, 2) and conv.groups == 8


@pytest.mark.parametrize('cudnn_benchmark', [False, True])
def test_cpu_tensors_keep_their_layout(cudnn_benchmark):
    conv, x = _conv_and_input()
    with torch.backends.cudnn.flags(enabled=True, benchmark=cudnn_benchmark):
        assert not conv.computes_in_nchw(x)


def _cuda_conv_and_input():
    conv, x = _conv_and_input()
    return conv.cuda(), x.cuda()


def test_layout_option():
    assert DepthwiseConv2d(8, 7).layout == 'auto' and 'layout' not in repr(DepthwiseConv2d(8, 7))
    assert "layout='nchw'" in repr(DepthwiseConv2d(8, 7, 'nchw'))
    with pytest.raises(ValueError, match=r"layout must be one of \('auto', 'nchw', 'input'\), got 'NCHW'"):
        DepthwiseConv2d(8, 7, 'NCHW')
    conv, x = _conv_and_input()
    for layout in ('nchw', 'input'):
        conv.layout = layout
        assert not conv.computes_in_nchw(x)  # CPU tensors keep their layout whatever the option


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('cudnn_benchmark', [False, True])
def test_cuda_layout_option_overrides_cudnn_benchmark(cudnn_benchmark):
    conv, x = _cuda_conv_and_input()
    with torch.backends.cudnn.flags(enabled=True, benchmark=cudnn_benchmark):
        conv.layout = 'nchw'
        assert conv.computes_in_nchw(x)
        out = conv(x)
        conv.layout = 'input'
        assert not conv.computes_in_nchw(x)
        torch.testing.assert_close(conv(x), out, rtol=1e-4, atol=1e-4)
    assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
@pytest.mark.parametrize('cudnn_benchmark', [False, True])
def test_cuda_layout_follows_cudnn_benchmark(cudnn_benchmark):
    conv, x = _cuda_conv_and_input()
    with torch.backends.cudnn.flags(enabled=True, benchmark=cudnn_benchmark):
        assert conv.computes_in_nchw(x) == (not cudnn_benchmark)
        with torch.autocast('cuda', dtype=torch.float16):
            out = conv(x)
    assert out.is_contiguous(memory_format=torch.channels_last)
    ref = F.conv2d(x.double(), conv.weight.double(), conv.bias.double(), padding=3, groups=6)
    torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=2e-2)
