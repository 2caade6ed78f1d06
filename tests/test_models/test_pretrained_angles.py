"""Checkpoints between learnable- and fixed-angle models: the angles load both ways, nothing is lost.

Through ``init_cfg=dict(type='Pretrained', ...)`` (mmo1d's ``load_pretrained``) and through mmengine's
``load_checkpoint`` (what ``load_from`` and the toolboxes' ``init_model`` use): a learned ``theta``
fills a fixed-angle model's buffer, a fixed-angle ``theta`` fills a learnable model's parameter (the
same Parameter object, so an optimizer built before still holds it), and checkpoints without angles
(the authors' downstream backbones) leave the model's own directions.
"""
import pytest
import torch
from mmengine.runner import load_checkpoint
from torch import nn

from mmo1d.models import OrientedConvNeXt

ARCH = dict(depths=[1, 2, 1, 1], channels=[8, 8, 16, 16])
KERNELS = ((5, 7), ) * 4


def _model(rounding: str = 'bilinear', learnable: bool = False, **kwargs) -> OrientedConvNeXt:
    return OrientedConvNeXt(ARCH, '1dpp', kernel_sizes=KERNELS, stem_kernel_size=5, stem_channels=8,
                            out_indices=(0, 1, 2, 3), gap_before_final_norm=False, rounding=rounding,
                            learnable_angles=learnable, **kwargs)


def _trained(learnable: bool, **kwargs) -> OrientedConvNeXt:
    """A model with random weights; learnable angles turned by up to 0.3 rad, as training would."""
    torch.manual_seed(0)
    model = _model(learnable=learnable, **kwargs)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('.theta'):
                p.add_(torch.empty_like(p).uniform_(-0.3, 0.3))
            else:
                p.normal_(0, 0.1)
    return model.eval()


def _thetas(model: nn.Module) -> dict:
    return {k: v for k, v in model.state_dict().items() if k.endswith('.theta')}


def _save(tmp_path, model: nn.Module, drop_angles: bool = False) -> str:
    path = tmp_path / 'ckpt.pth'
    state = {k: v for k, v in model.state_dict().items() if not (drop_angles and k.endswith('.theta'))}
    torch.save({'state_dict': state, 'meta': {}}, path)
    return str(path)


def _load(model: OrientedConvNeXt, path: str, how: str) -> OrientedConvNeXt:
    if how == 'pretrained':
        model.init_cfg = dict(type='Pretrained', checkpoint=path)
        model.init_weights()
    else:
        load_checkpoint(model, path, map_location='cpu', strict=True)
    return model.eval()


def _outputs(model: nn.Module) -> tuple:
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.randn(1, 3, 32, 32))


@pytest.mark.parametrize('how', ['pretrained', 'load_checkpoint'])
@pytest.mark.parametrize('rounding', ['bilinear', 'trunc'])
def test_learned_angles_load_into_a_fixed_angle_model(tmp_path, mm_log, how, rounding):
    source = _trained(learnable=True)
    target = _load(_model(rounding), _save(tmp_path, source), how)
    thetas = _thetas(source)
    assert len(thetas) == 2 + 2 * sum(ARCH['depths'])
    assert not [n for n, _ in target.named_parameters() if n.endswith('.theta')]  # still buffers
    assert [n for n, _ in target.named_buffers() if n.endswith('.theta')] == list(thetas)
    for key, value in source.state_dict().items():  # every tensor, the learned angles included
        assert torch.equal(target.state_dict()[key], value), key
    if rounding == 'bilinear':  # the same function: the fixed model reads the learned angles
        for a, b in zip(_outputs(source), _outputs(target)):
            torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)
    else:  # truncation reads the learned angles too: not the 8 directions a fresh model has
        fresh = _model(rounding)
        fresh.load_state_dict({k: v for k, v in source.state_dict().items() if not k.endswith('.theta')},
                              strict=False)
        assert any(not torch.allclose(a, b) for a, b in zip(_outputs(fresh.eval()), _outputs(target)))
    if how == 'pretrained':
        assert (f"{len(thetas)} angle tensors of the checkpoint differ from the model's directions"
                in mm_log.text)


@pytest.mark.parametrize('how', ['pretrained', 'load_checkpoint'])
def test_fixed_angles_load_into_a_learnable_model(tmp_path, how):
    """A fixed-angle checkpoint (here with 4 directions, so that its angles differ from the model's 8)
    gives a learnable model its starting angles, in the same Parameter objects."""
    source = _trained(learnable=False, rounding='trunc', directions=4)
    target = _model(learnable=True)
    before = {n: p for n, p in target.named_parameters() if n.endswith('.theta')}
    assert any(not torch.equal(before[k], v) for k, v in _thetas(source).items())
    _load(target, _save(tmp_path, source), how)
    after = {n: p for n, p in target.named_parameters() if n.endswith('.theta')}
    assert list(after) == list(before) and all(after[n] is before[n] for n in before)
    assert all(p.requires_grad for p in after.values())
    for key, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[key], value), key


def test_round_trip_learnable_fixed_learnable(tmp_path):
    source = _trained(learnable=True)
    fixed = _load(_model('trunc'), _save(tmp_path, source), 'pretrained')
    back = _load(_model(learnable=True), _save(tmp_path, fixed), 'pretrained')
    for key, value in source.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key
    for a, b in zip(_outputs(source), _outputs(back)):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize('learnable', [False, True])
def test_checkpoint_without_angles_keeps_the_models_directions(tmp_path, mm_log, learnable):
    """The authors' downstream backbones store no angles: every other tensor loads, the angles stay."""
    source = _trained(learnable=False, rounding='trunc')
    target = _model(learnable=learnable)
    own = {k: v.clone() for k, v in _thetas(target).items()}
    _load(target, _save(tmp_path, source, drop_angles=True), 'pretrained')
    for key, value in target.state_dict().items():
        assert torch.equal(value, own[key] if key in own else source.state_dict()[key]), key
    assert f'{len(own)} angle tensors are not in the checkpoint and keep the model\'s directions' in mm_log.text
    assert "differ from the model's directions" not in mm_log.text


def test_angles_of_another_width_are_an_error(tmp_path):
    source = _trained(learnable=True)
    state = dict(source.state_dict())
    state['stages.2.0.mid_conv.theta'] = torch.zeros(5)
    path = tmp_path / 'bad.pth'
    torch.save({'state_dict': state}, path)
    target = _model(learnable=True, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(RuntimeError, match=r'stages.2.0.mid_conv.theta \(checkpoint \(5,\), model \(64,\)\)'):
        target.init_weights()
