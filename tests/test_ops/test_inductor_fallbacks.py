"""torch.compile's inductor runs the ops that have export decompositions (the oriented convolution and
the fused layer norm) as calls of their kernels, also where the environment variable CI is set: there
inductor refuses its own fallback for an op with a registered decomposition, and torch.compile failed."""
import pytest
import torch

from mmo1d.ops import OrientedDWConv1d, layer_norm_last

OPS = (torch.ops.mmo1d.oriented_dwconv1d.default, torch.ops.mmo1d.layer_norm_last.default)


@pytest.fixture
def first_compile(monkeypatch):
    """CI set, and neither op lowered yet, as in a process that compiles them for the first time."""
    import torch._inductor.lowering as lowering
    monkeypatch.setenv('CI', 'true')
    for op in OPS:
        monkeypatch.delitem(lowering.lowerings, op, raising=False)
    torch._dynamo.reset()
    yield lowering
    torch._dynamo.reset()


def test_compiled_ops_run_their_kernels_where_ci_is_set(first_compile):
    lowering = first_compile
    assert all(torch._decomp.get_decompositions([op]) for op in OPS)  # the export decompositions
    conv = OrientedDWConv1d(8, 7, residual=True)
    weight, bias = torch.randn(8), torch.randn(8)

    def block(x):
        return layer_norm_last(conv(x).permute(0, 2, 3, 1), weight, bias, gelu=True)

    x = torch.randn(2, 8, 10, 9, requires_grad=True)
    out = torch.compile(block, fullgraph=True, dynamic=False)(x)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    ref = block(x)
    (ref_grad,) = torch.autograd.grad(ref.square().sum(), x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grad, ref_grad)
    assert all(op in lowering.lowerings for op in OPS)  # lowered as calls of the ops
