"""tools/deployment/benchmark_onnx_lowering.py: the shifted-slices graph it times is exact."""
import importlib.util
from pathlib import Path

import pytest
import torch

from mmo1d.deployment import max_abs_difference, run_onnxruntime
from mmo1d.ops import OrientedDWConv1d

pytest.importorskip('onnxruntime')

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'deployment' / 'benchmark_onnx_lowering.py'
_spec = importlib.util.spec_from_file_location('benchmark_onnx_lowering', TOOL)
benchmark = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchmark)


@pytest.mark.parametrize('stride,residual,rounding', [(1, False, 'trunc'), (2, True, 'floor'), (3, True, 'trunc')])
def test_slices_model_matches_the_op(stride, residual, rounding):
    torch.manual_seed(0)
    conv = OrientedDWConv1d(16, 9, stride=stride, residual=residual, rounding=rounding, angle_offset=0.5).eval()
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(1, 16, 13, 13)
    with torch.no_grad():
        expected = conv(x)
    assert max_abs_difference([expected], run_onnxruntime(benchmark.slices_model(conv, 13), [x])) < 1e-4
