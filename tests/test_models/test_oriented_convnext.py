"""OrientedConvNeXt: shapes, angles, freezing, checkpointing, sizes, and parity with ConvNeXt."""
import math

import pytest
import torch
from mmpretrain.models.backbones import ConvNeXt

from mmo1d.models import OrientedConvNeXt
from mmo1d.ops import OrientedDWConv1d

SMALL = dict(depths=[1, 2, 3, 1], channels=[8, 16, 24, 32])
VARIANTS = ('2d', '1d', '1dpp', '2dpp')
SMALL_KERNELS = {'2d': (3, 3, 3, 3), '1d': (7, 7, 5, 3), '1dpp': ((5, 7), ) * 4, '2dpp': ((3, 7), ) * 4}


def small(variant, **kwargs):
    kwargs.setdefault('kernel_sizes', SMALL_KERNELS[variant])
    kwargs.setdefault('stem_channels', 8)
    return OrientedConvNeXt(SMALL, variant, **kwargs)


def spec_angle(c: int, channels: int, directions: int, offset: float) -> float:
    """Spec section 1: contiguous groups, theta = pi * ((group / D + offset) mod 1)."""
    group = (directions * (c + 1) - 1) // channels
    return math.pi * ((group / directions + offset) % 1.0)


def stage_sizes(variant, h, w):
    if variant in ('1d', '1dpp'):  # two stride-2 oriented convs: ceil twice
        h, w = math.ceil(math.ceil(h / 2) / 2), math.ceil(math.ceil(w / 2) / 2)
    else:  # 4x4 stride-4 conv: floor
        h, w = h // 4, w // 4
    sizes = [(h, w)]
    for _ in range(3):
        h, w = h // 2, w // 2
        sizes.append((h, w))
    return sizes


@pytest.mark.parametrize('variant', VARIANTS)
@pytest.mark.parametrize('size', [(64, 64), (112, 137)])
def test_output_shapes(variant, size):
    model = small(variant, out_indices=(0, 1, 2, 3), gap_before_final_norm=False).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *size))
    assert [tuple(o.shape) for o in outs] == [(1, c, *hw) for c, hw in zip(SMALL['channels'],
                                                                           stage_sizes(variant, *size))]


def test_odd_large_input_and_out_indices():
    model = small('1dpp', out_indices=(1, -1), gap_before_final_norm=False).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, 511, 511))
    assert [tuple(o.shape) for o in outs] == [(1, 16, 64, 64), (1, 32, 16, 16)]
    assert hasattr(model, 'norm1') and hasattr(model, 'norm3') and not hasattr(model, 'norm0')
    cls = small('2d').eval()  # classification default: out_indices=-1, GAP before the final norm
    with torch.no_grad():
        (feat, ) = cls(torch.randn(2, 3, 33, 47))
    assert feat.shape == (2, 32)


@pytest.mark.parametrize('variant', VARIANTS)
def test_forward_backward_every_parameter_used(variant):
    model = small(variant, out_indices=(0, 1, 2, 3), gap_before_final_norm=False, drop_path_rate=0.2)
    model.init_weights()
    model.train()
    outs = model(torch.randn(2, 3, 32, 32))
    sum(o.float().pow(2).mean() for o in outs).backward()
    # DDP needs no find_unused_parameters: every parameter gets a gradient.
    no_grad = [n for n, p in model.named_parameters() if p.grad is None]
    assert no_grad == []
    thetas = [n for n, _ in model.named_buffers() if n.endswith('theta')]
    assert all(not n.endswith('theta') for n, _ in model.named_parameters())
    assert (len(thetas) > 0) == (variant != '2d')


@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_angles_per_channel_and_layer(variant):
    model = small(variant, directions=4)
    oriented = {n: m for n, m in model.named_modules() if isinstance(m, OrientedDWConv1d)}
    for name, conv in oriented.items():
        parts = name.split('.')
        if parts[0] == 'stages':
            offset = 0.5 if int(parts[2]) % 2 == 1 else 0.0
        else:
            offset = {'dw1': 0.0, 'dw2': 0.5}[parts[2]]
        expected = torch.tensor([spec_angle(c, conv.channels, 4, offset) for c in range(conv.channels)])
        torch.testing.assert_close(conv.theta, expected.float(), atol=1e-6, rtol=0, msg=name)
    if variant != '2dpp':
        assert 'downsample_layers.0.dw2' in oriented
    # Both oriented convolutions of a ++ block share the block's offset.
    if variant != '1d':
        block = model.stages[1][1]
        torch.testing.assert_close(block.mid_conv.theta[:1], torch.tensor([math.pi / 2]))
    unrotated = small(variant, directions=4, layer_rotation=False)
    for name, conv in unrotated.named_modules():
        if isinstance(conv, OrientedDWConv1d) and name.startswith('stages'):
            assert conv.theta.min() == 0.0 and conv.angle_offset == 0.0


def test_default_angles_eight_directions():
    model = OrientedConvNeXt(SMALL, '1d', kernel_sizes=(7, 7, 7, 7), stem_channels=8)
    theta = model.stages[0][0].depthwise_conv.theta
    # 8 channels, 8 directions: one channel per 22.5 degrees.
    torch.testing.assert_close(theta, torch.arange(8) * math.pi / 8)


def test_kernel_size_settings():
    t1d = OrientedConvNeXt('tiny', '1d', kernel_sizes='downstream', out_indices=(0, 1, 2, 3))
    assert [s[0].depthwise_conv.kernel_size for s in t1d.stages] == [31, 31, 27, 13]
    assert t1d.downsample_layers[0].dw1.kernel_size == 31
    tpp = OrientedConvNeXt('tiny', '1dpp', kernel_sizes='downstream')
    assert [(s[0].depthwise_conv.kernel_size, s[0].mid_conv.kernel_size) for s in tpp.stages] == [
        (15, 31), (15, 31), (15, 27), (13, 13)]
    assert tpp.downsample_layers[0].dw1.kernel_size == 15
    t2pp = OrientedConvNeXt('tiny', '2dpp')
    assert all(s[0].depthwise_conv.kernel_size == (7, 7) and s[0].mid_conv.kernel_size == 31
               for s in t2pp.stages)
    assert isinstance(t2pp.downsample_layers[0][0], torch.nn.Conv2d)


@pytest.mark.parametrize('kwargs,match', [
    (dict(arch='huge'), 'unknown arch'),
    (dict(arch=dict(depths=[1, 1, 1], channels=[8, 8, 8])), '4 depths'),
    (dict(arch=dict(depths=[1, 1, 1, 1])), 'depths" and "channels'),
    (dict(variant='3d'), 'unknown variant'),
    (dict(kernel_sizes='coco'), 'unknown kernel_sizes'),
    (dict(kernel_sizes=(7, 7, 7)), 'one entry per stage'),
    (dict(kernel_sizes=(7, 7, 8, 7)), 'odd int'),
    (dict(variant='1dpp', kernel_sizes=(7, 7, 7, 7)), 'pair'),
    (dict(out_indices=(4, )), 'out_indices'),
    (dict(frozen_stages=5), 'frozen_stages'),
    (dict(drop_path_rate=1.0), 'drop_path_rate'),
    (dict(variant='2dpp', depthwise_layout='nhwc'), r"depthwise_layout must be one of .*got 'nhwc'"),
])
def test_bad_arguments(kwargs, match):
    kwargs = {'arch': SMALL, 'variant': '1d', **kwargs}
    with pytest.raises(ValueError, match=match):
        OrientedConvNeXt(**kwargs)


@pytest.mark.parametrize('variant', ['2d', '2dpp'])
def test_depthwise_layout_reaches_every_square_depthwise_convolution(variant):
    from mmo1d.models.layers import DepthwiseConv2d

    for layout in ('auto', 'nchw', 'input'):
        model = small(variant, depthwise_layout=layout)
        convs = [m for m in model.modules() if isinstance(m, DepthwiseConv2d)]
        assert len(convs) == sum(model.depths) and {c.layout for c in convs} == {layout}


def test_frozen_stages():
    model = small('1dpp', frozen_stages=2, out_indices=(0, 1, 2, 3), gap_before_final_norm=False,
                  drop_path_rate=0.5)
    model.train()
    for i in range(4):
        frozen = i < 2
        for module in (model.downsample_layers[i], model.stages[i]):
            assert all(p.requires_grad != frozen for p in module.parameters())
            assert all(m.training != frozen for m in module.modules())
    # Frozen blocks are deterministic in train mode (drop path off); the rest is not.
    x = torch.randn(2, 3, 32, 32)
    a = model.stages[1](model.downsample_layers[1](model.stages[0](model.downsample_layers[0](x))))
    b = model.stages[1](model.downsample_layers[1](model.stages[0](model.downsample_layers[0](x))))
    assert torch.equal(a, b)
    assert model.norm0.training


@pytest.mark.parametrize('variant', ['1dpp', '2d'])
def test_with_cp_same_outputs_and_gradients(variant):
    torch.manual_seed(0)
    plain = small(variant, out_indices=(2, 3), gap_before_final_norm=False)
    plain.init_weights()
    cp_model = small(variant, out_indices=(2, 3), gap_before_final_norm=False, with_cp=True)
    cp_model.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    grads = []
    for model in (plain, cp_model):
        outs = model(x)
        loss = sum((o * torch.linspace(-1, 1, o.numel()).view_as(o)).sum() for o in outs)
        gx, = torch.autograd.grad(loss, x, retain_graph=True)
        loss.backward()
        grads.append((outs, gx, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (o1, gx1, g1), (o2, gx2, g2) = grads
    for a, b in zip(o1, o2):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(gx1, gx2)
    assert g1.keys() == g2.keys()
    for name in g1:
        torch.testing.assert_close(g1[name], g2[name], msg=name)


def test_stochastic_depth_schedule():
    model = small('1d', drop_path_rate=0.3)
    rates = [getattr(b.drop_path, 'drop_prob', 0.0) for s in model.stages for b in s]
    torch.testing.assert_close(torch.tensor(rates), torch.linspace(0, 0.3, 7))


def test_2d_matches_mmpretrain_convnext():
    """The '2d' variant is ConvNeXt: mmpretrain's weights load unchanged and give its outputs."""
    torch.manual_seed(0)
    ref = ConvNeXt(SMALL, out_indices=(0, 1, 2, 3), gap_before_final_norm=False)
    ref.init_weights()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # non-trivial norms and layer scales
    ours = OrientedConvNeXt(SMALL, '2d', out_indices=(0, 1, 2, 3), gap_before_final_norm=False)
    ours.load_state_dict(ref.state_dict(), strict=True)
    ref.eval(), ours.eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(ref(x), ours(x)):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)
    assert ours.get_layer_depth('backbone.stages.2.2.gamma', 'backbone.') == \
        ref.get_layer_depth('backbone.stages.2.2.gamma', 'backbone.')


# Paper results table (backbone + 1000-class linear head; angles are buffers), in its rounding.
PAPER_PARAMS = {
    ('tiny', '2d'): '28.6', ('tiny', '1d'): '28.5', ('tiny', '1dpp'): '29.2', ('tiny', '2dpp'): '29.4',
    ('base', '2d'): '89', ('base', '1d'): '88', ('base', '1dpp'): '90', ('base', '2dpp'): '91',
}


@pytest.mark.parametrize('arch,variant', sorted(PAPER_PARAMS))
def test_parameter_counts_match_paper(arch, variant):
    model = OrientedConvNeXt(arch, variant)
    params = sum(p.numel() for p in model.parameters()) + model.channels[-1] * 1000 + 1000
    paper = PAPER_PARAMS[arch, variant]
    decimals = len(paper.split('.')[1]) if '.' in paper else 0
    assert f'{params / 1e6:.{decimals}f}' == paper


@pytest.mark.parametrize('variant', VARIANTS)
def test_channels_last_throughout_and_bf16_autocast(variant):
    """Every stem, downsampling and block output stays channels_last (no layout round trips), the
    outputs are contiguous as mmpretrain's ConvNeXt returns them (channels_last with
    out_channels_last), and bf16 autocast gives the float32 result up to bf16 precision."""
    torch.manual_seed(0)
    model = small(variant, out_indices=(0, 1, 2, 3), gap_before_final_norm=False)
    model.init_weights()
    model.eval()
    layouts = []
    hooks = [m.register_forward_hook(lambda m, i, o: layouts.append(o.is_contiguous(
        memory_format=torch.channels_last))) for m in [*model.downsample_layers, *model.modules()]
        if type(m).__name__ in ('OrientedConvNeXtBlock', 'DepthwiseOrientedStem', 'Sequential')]
    x = torch.randn(2, 3, 32, 32)  # NCHW contiguous input
    with torch.no_grad():
        ref = model(x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            low = model(x)
    for h in hooks:
        h.remove()
    assert len(layouts) > 10 and all(layouts)
    for a, b in zip(ref, low):
        assert a.is_contiguous() and b.is_contiguous()
        assert (b.float() - a).abs().max() / a.abs().max() < 0.05
    model.out_channels_last = True
    with torch.no_grad():
        kept = model(x)
    assert kept[0].shape[-1] > 1 and not kept[0].is_contiguous()
    for a, b in zip(ref, kept):
        assert b.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(b, a, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r'\(N, C, H, W\) images'):
        model(torch.randn(3, 32, 32))


@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_learnable_angles_in_every_oriented_convolution(variant):
    """rounding and learnable_angles reach the stem, the blocks and the ++ convolutions; every theta
    gets a gradient, through the ++ block's recomputed activation too, and it equals that of the
    same model under activation checkpointing."""
    torch.manual_seed(0)
    kwargs = dict(out_indices=(3, ), gap_before_final_norm=False, rounding='bilinear', learnable_angles=True,
                  layer_scale_init_value=1.0)
    plain, cp_model = small(variant, **kwargs), small(variant, with_cp=True, **kwargs)
    cp_model.load_state_dict(plain.state_dict())
    convs = [m for m in plain.modules() if isinstance(m, OrientedDWConv1d)]
    assert convs and all(c.rounding == 'bilinear' and isinstance(c.theta, torch.nn.Parameter) for c in convs)
    x = torch.randn(2, 3, 32, 32)
    grads = []
    for model in (plain, cp_model):
        model(x)[0].square().sum().backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if n.endswith('theta')})
    assert len(grads[0]) == len(convs)
    for name, g in grads[0].items():
        assert g is not None and g.abs().sum() > 0, name
        torch.testing.assert_close(g, grads[1][name], msg=name)
    with pytest.raises(ValueError, match="variant '2d' has no oriented convolution"):
        small('2d', rounding='bilinear')
