"""ONNX and torch.export lowering of mmo1d's ops (mmo1d.ops.onnx_lowering) checked with ONNX Runtime.

Oracles: the reference op (mmo1d.ops.reference), the compiled op and the PyTorch models; fp32
outputs of ONNX Runtime within 1e-4, graphs of standard-domain operators only.
"""
import math

import pytest
import torch
from torch import Tensor, nn

from mmo1d.deployment import export_onnx, max_abs_difference, non_standard_ops, run_onnxruntime
from mmo1d.models.backbones import OrientedConvNeXt
from mmo1d.models.layers import LayerNorm
from mmo1d.ops import OrientedDWConv1d, oriented_dwconv1d, oriented_dwconv1d_reference
from mmo1d.ops.onnx_lowering import (
    export_decompositions,
    oriented_dwconv1d_decomposition,
)

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

ATOL = 1e-4
EXPORTERS = [pytest.param(True, id='dynamo'), pytest.param(False, id='torchscript')]
# Every combination the op offers, on planes whose sizes do not divide by the stride.
CASES = [dict(stride=s, residual=r, rounding=rnd, bias=b)
         for s in (1, 2) for r in (False, True) for rnd in ('trunc', 'floor') for b in (True, False)]


class OpBranches(nn.Module):
    """One oriented convolution per case (alternating layer-wise rotation), and a LayerNorm + GELU."""

    def __init__(self, channels: int = 16, kernel_size: int = 7) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            OrientedDWConv1d(channels, kernel_size, angle_offset=0.5 * (i % 2), **case) for i, case in enumerate(CASES))
        self.norm = LayerNorm(channels, act='gelu')
        for p in self.parameters():
            nn.init.normal_(p)

    def forward(self, x: Tensor):
        return tuple(conv(x) for conv in self.convs) + (self.norm(x.permute(0, 2, 3, 1)), )


def _check(model: nn.Module, x: Tensor, dynamo: bool):
    with torch.no_grad():
        expected = model(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    proto = export_onnx(model, (x, ), dynamo=dynamo)
    assert non_standard_ops(proto) == []
    assert not any(node.domain.startswith('mmo1d') or 'oriented' in node.op_type for node in proto.graph.node)
    actual = run_onnxruntime(proto, [x])
    assert max_abs_difference(expected, actual) < ATOL
    return expected, actual


@pytest.mark.parametrize('dynamo', EXPORTERS)
def test_op_cases_through_onnxruntime(dynamo):
    torch.manual_seed(0)
    model = OpBranches().eval()
    x = torch.randn(2, 16, 11, 9)
    expected, actual = _check(model, x, dynamo)
    for conv, out in zip(model.convs, actual):
        ref = oriented_dwconv1d_reference(x, conv.weight, conv.theta, conv.bias, conv.stride, conv.rounding,
                                          conv.residual)
        assert max_abs_difference([ref], [out]) < ATOL


@pytest.mark.parametrize('rounding', ['trunc', 'floor'])
@pytest.mark.parametrize('residual', [False, True])
def test_dense_kernel_decomposition_matches_reference(rounding, residual):
    # Angles where float32 rounding decides the offsets: float32(pi/2) has cos < 0, pi/4, 3pi/4, 0.
    torch.manual_seed(0)
    channels, k = 12, 31
    theta = torch.tensor([0, math.pi / 8, math.pi / 4, math.pi / 2, 3 * math.pi / 4, 7 * math.pi / 8,
                          1e-3, math.pi / 6, math.pi / 3, 2.0, 2.5, 3.1], dtype=torch.float32)
    x = torch.randn(2, channels, 19, 14, dtype=torch.float64)
    weight = torch.randn(channels, k, dtype=torch.float64)
    bias = torch.randn(channels, dtype=torch.float64)
    for stride in (1, 2, 3):
        out = oriented_dwconv1d_decomposition(x, weight, theta, bias, stride, rounding, 0.5, 1.0, residual)
        ref = oriented_dwconv1d_reference(x, weight, theta, bias, stride, rounding, residual)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_decomposition_keeps_the_ops_memory_format():
    conv = OrientedDWConv1d(8, 5, stride=2)
    x = torch.randn(1, 8, 9, 10).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        out = oriented_dwconv1d_decomposition(x, conv.weight, conv.theta, conv.bias, 2, 'trunc', 0.5, 1.0, False)
        assert out.stride() == conv(x).stride()


def test_torch_export_runs_and_decomposes_to_aten():
    torch.manual_seed(0)
    model = OrientedConvNeXt(arch=dict(depths=[1, 1, 1, 1], channels=[8, 8, 16, 16]), variant='1dpp',
                             stem_channels=8, kernel_sizes=[(5, 7)] * 4).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
    program = torch.export.export(model, (x, ))
    targets = {str(n.target) for n in program.graph.nodes if n.op == 'call_function'}
    assert {'mmo1d.oriented_dwconv1d.default', 'mmo1d.layer_norm_last.default'} <= targets
    decomposed = program.run_decompositions(export_decompositions())
    targets = {str(n.target) for n in decomposed.graph.nodes if n.op == 'call_function'}
    assert not any(t.startswith('mmo1d.') for t in targets)
    assert targets & {'aten.conv2d.default', 'aten.convolution.default'}
    with torch.no_grad():
        for module in (program.module(), decomposed.module()):
            torch.testing.assert_close(module(x), expected, rtol=0, atol=ATOL)


@pytest.mark.parametrize('dynamo', EXPORTERS)
@pytest.mark.parametrize('variant', ['1d', '1dpp', '2d', '2dpp'])
def test_backbone_variants_through_onnxruntime(variant, dynamo):
    torch.manual_seed(0)
    model = OrientedConvNeXt(arch=dict(depths=[1, 1, 2, 1], channels=[8, 16, 16, 24]), variant=variant,
                             kernel_sizes='downstream', stem_channels=8, out_indices=(0, 1, 2, 3),
                             gap_before_final_norm=False, layer_scale_init_value=1.0)
    model.init_weights()
    expected, _ = _check(model.eval(), torch.randn(1, 3, 64, 48), dynamo)
    assert len(expected) == 4


@pytest.mark.parametrize('rounding', ['bilinear', 'gaussian'])
@pytest.mark.parametrize('residual', [False, True])
def test_interp_decomposition_matches_the_op(rounding, residual):
    torch.manual_seed(0)
    channels, k = 6, 9
    x = torch.randn(2, channels, 13, 11, dtype=torch.float64)
    weight = torch.randn(channels, k, dtype=torch.float64)
    theta = torch.rand(channels, dtype=torch.float64) * math.pi
    bias = torch.randn(channels, dtype=torch.float64)
    for stride in (1, 2, 3):
        out = oriented_dwconv1d_decomposition(x, weight, theta, bias, stride, rounding, 0.6, 1.5, residual)
        ref = oriented_dwconv1d(x, weight, theta, bias, stride, rounding, residual, 0.6, 1.5)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


class LearnedAngles(nn.Module):
    """Oriented convolutions with learnable angles, both interpolations, after some training."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.convs = nn.ModuleList([
            OrientedDWConv1d(channels, 7, rounding='bilinear', learnable_angles=True),
            OrientedDWConv1d(channels, 5, stride=2, rounding='gaussian', learnable_angles=True, sigma=0.6, radius=1.5,
                             residual=True)])
        with torch.no_grad():
            for conv in self.convs:
                conv.theta.add_(torch.rand(channels) * 0.3)

    def forward(self, x: Tensor):
        return tuple(conv(x) for conv in self.convs)


def test_learned_angles_through_onnxruntime():
    torch.manual_seed(0)
    _check(LearnedAngles().eval(), torch.randn(2, 8, 11, 9), dynamo=True)


def test_learned_angles_torchscript_export_says_to_use_dynamo():
    with pytest.raises(Exception, match='dynamo=True'):
        export_onnx(LearnedAngles().eval(), (torch.randn(1, 8, 9, 9), ), dynamo=False)
