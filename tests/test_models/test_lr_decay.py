"""mmdet's and mmseg's LearningRateDecayOptimizerConstructor treat OrientedConvNeXt as ConvNeXt."""
import pytest
from mmdet.engine.optimizers import LearningRateDecayOptimizerConstructor as MMDetConstructor
from mmseg.engine.optimizers import LearningRateDecayOptimizerConstructor as MMSegConstructor
from torch import nn

from mmo1d.models import OrientedConvNeXt

ARCH = dict(depths=[1, 2, 7, 1], channels=[8, 8, 16, 16])
OPTIM = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1.0, weight_decay=0.05))


class Detector(nn.Module):

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.backbone = OrientedConvNeXt(ARCH, variant, kernel_sizes='downstream', out_indices=(0, 1, 2, 3),
                                         gap_before_final_norm=False)
        self.neck = nn.Linear(4, 4)


def _scales(constructor_cls, variant, paramwise_cfg):
    model = Detector(variant)
    wrapper = constructor_cls(OPTIM, paramwise_cfg)(model)
    scales = {}
    for group in wrapper.optimizer.param_groups:
        names = {id(p): n for n, p in model.named_parameters()}
        for p in group['params']:
            scales[names[id(p)]] = (group['lr'], group['weight_decay'])
    assert len(scales) == len(list(model.parameters()))  # every parameter in exactly one group
    return model, scales


@pytest.mark.parametrize('constructor_cls', [MMDetConstructor, MMSegConstructor])
@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_layer_wise(constructor_cls, variant):
    rate, num_layers = 0.7, 6
    model, scales = _scales(constructor_cls, variant, dict(decay_rate=rate, decay_type='layer_wise',
                                                           num_layers=num_layers))
    # ConvNeXt's rule with 6 layers (layer ids 0..7, scale rate ** (7 - id)): stem 0; stage 0: 1;
    # stage 1 and its downsampling: 2; downsampling 2: 3; stage 2 block b: 3 + b // 3; stage 3 and
    # its downsampling: 6; everything outside the backbone: 7.
    expected = {
        'backbone.downsample_layers.0.': 0, 'backbone.stages.0.0.': 1, 'backbone.downsample_layers.1.': 2,
        'backbone.stages.1.1.': 2, 'backbone.downsample_layers.2.': 3, 'backbone.stages.2.2.': 3,
        'backbone.stages.2.3.': 4, 'backbone.stages.2.6.': 5, 'backbone.downsample_layers.3.': 6,
        'backbone.stages.3.0.': 6, 'backbone.norm0.': 7, 'neck.': 7,
    }
    seen = set()
    for name, (lr, wd) in scales.items():
        for prefix, layer_id in expected.items():
            if name.startswith(prefix):
                seen.add(prefix)
                assert lr == pytest.approx(rate**(num_layers + 1 - layer_id)), name
        # No weight decay on biases, norms and layer scales (1-D), as for ConvNeXt.
        assert wd == (0.0 if model.get_parameter(name).dim() == 1 else 0.05), name
    assert seen == set(expected)
    oriented = [n for n in scales if n.endswith('mid_conv.weight') or n.endswith('dw1.weight')]
    assert oriented or variant == '1d'
    assert scales['backbone.stages.2.4.depthwise_conv.weight'][0] == pytest.approx(rate**3)


@pytest.mark.parametrize('constructor_cls', [MMDetConstructor, MMSegConstructor])
def test_stage_wise(constructor_cls):
    rate, num_layers = 0.9, 6
    _, scales = _scales(constructor_cls, '1dpp', dict(decay_rate=rate, decay_type='stage_wise',
                                                      num_layers=num_layers))
    # stage_wise: every downsampling layer (the stem included) id 0, stage i id i + 1, the rest
    # (output norms, neck) num_layers + 1; scale rate ** (num_layers + 1 - id).
    for name, (lr, _) in scales.items():
        if name.startswith('backbone.downsample_layers.'):
            layer_id = 0
        elif name.startswith('backbone.stages.'):
            layer_id = int(name.split('.')[2]) + 1
        else:
            layer_id = num_layers + 1
        assert lr == pytest.approx(rate**(num_layers + 1 - layer_id)), name
    assert scales['backbone.stages.3.0.mid_conv.weight'][0] == pytest.approx(rate**3)
    assert not any('theta' in n for n in scales)
