"""init_cfg=Pretrained: oriented kernels are resized, everything else must fit exactly."""
import pytest
import torch

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.utils import resize_oriented_kernel
from mmo1d.ops import OrientedDWConv1d

ARCH = dict(depths=[1, 2, 1, 1], channels=[8, 8, 16, 16])
BIG = ((5, 9), (5, 9), (5, 9), (5, 9))
SMALL = ((5, 9), (5, 9), (5, 7), (3, 3))


def test_resize_oriented_kernel():
    w = torch.arange(2 * 7, dtype=torch.float32).view(2, 1, 1, 7)
    assert torch.equal(resize_oriented_kernel(w, 3), w[..., 2:5])
    assert torch.equal(resize_oriented_kernel(w, 7), w)
    padded = resize_oriented_kernel(w, 11)
    assert padded.shape == (2, 1, 1, 11)
    assert torch.equal(padded[..., 2:9], w) and not padded[..., :2].any() and not padded[..., 9:].any()
    with pytest.raises(ValueError, match='odd'):
        resize_oriented_kernel(w, 4)


def _model(kernel_sizes, **kwargs):
    kwargs.setdefault('out_indices', (0, 1, 2, 3))
    kwargs.setdefault('gap_before_final_norm', False)
    return OrientedConvNeXt(ARCH, '1dpp', kernel_sizes=kernel_sizes, stem_kernel_size=7, stem_channels=8,
                            **kwargs)


def _source(kernel_sizes, zero_outer_to=None):
    torch.manual_seed(0)
    model = _model(kernel_sizes)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
        if zero_outer_to is not None:  # make cropping lossless so outputs must agree exactly
            for name, m in model.named_modules():
                if isinstance(m, OrientedDWConv1d) and name.startswith('stages'):
                    stage = int(name.split('.')[1])
                    keep = zero_outer_to[stage][0 if name.endswith('depthwise_conv') else 1]
                    cut = (m.kernel_size - keep) // 2
                    if cut:
                        m.weight[..., :cut] = 0
                        m.weight[..., -cut:] = 0
    return model.eval()


def _save(tmp_path, state_dict, name='ckpt.pth'):
    path = tmp_path / name
    torch.save({'state_dict': state_dict, 'meta': {}}, path)
    return str(path)


@pytest.mark.parametrize('direction', ['crop', 'pad'])
def test_pretrained_resizes_oriented_kernels(tmp_path, mm_log, direction):
    src_ks, dst_ks = (BIG, SMALL) if direction == 'crop' else (SMALL, BIG)
    source = _source(src_ks, zero_outer_to=dst_ks if direction == 'crop' else None)
    sd = {f'backbone.{k}': v for k, v in source.state_dict().items()}
    sd['head.fc.weight'] = torch.zeros(10, 16)
    path = _save(tmp_path, sd)
    target = _model(dst_ks, init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.'))
    target.init_weights()
    target.eval()
    w_src = source.stages[3][0].mid_conv.weight
    w_dst = target.stages[3][0].mid_conv.weight
    assert w_dst.shape[-1] == (3 if direction == 'crop' else 9)
    assert torch.equal(w_dst, resize_oriented_kernel(w_src, w_dst.shape[-1]))
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        for a, b in zip(source(x), target(x)):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    log = mm_log.text
    assert 'resized oriented kernel stages.3.0.mid_conv.weight from 1x' in log
    assert 'resized oriented kernel stages.0.0.' not in log  # unchanged length


def test_classifier_into_detection_backbone(tmp_path, mm_log):
    """A classifier checkpoint (final norm = norm3, a head) fills a backbone with 4 output norms."""
    torch.manual_seed(0)
    cls = _model(BIG, out_indices=(3, ), gap_before_final_norm=True)
    with torch.no_grad():
        for p in cls.parameters():
            p.normal_(0, 0.1)
    sd = {f'backbone.{k}': v for k, v in cls.state_dict().items()}
    sd.update({'head.fc.weight': torch.zeros(10, 16), 'head.fc.bias': torch.zeros(10)})
    path = _save(tmp_path, sd)
    det = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.'))
    det.init_weights()
    assert torch.equal(det.norm3.weight, cls.norm3.weight)
    assert torch.equal(det.norm0.weight, torch.ones(8))  # not in the checkpoint: initial value
    assert torch.equal(det.stages[1][1].pointwise_conv1.weight, cls.stages[1][1].pointwise_conv1.weight)
    # norm0, norm1 and norm2 (weight, bias): one line that counts them and names the first ones.
    assert "6 tensors are not in the checkpoint and keep their initial values: ['norm0.weight'" in mm_log.text
    # And the other way: output norms the model does not have are ignored, not errors.
    sd = {f'backbone.{k}': v for k, v in det.state_dict().items()}
    init_cfg = dict(type='Pretrained', checkpoint=_save(tmp_path, sd, 'det.pth'), prefix='backbone')
    back = _model(BIG, out_indices=(3, ), gap_before_final_norm=True, init_cfg=init_cfg)
    back.init_weights()
    assert torch.equal(back.norm3.bias, det.norm3.bias)
    assert 'ignored norm0.weight' in mm_log.text


def test_pretrained_with_other_init_entries(tmp_path):
    source = _source(SMALL)
    path = _save(tmp_path, source.state_dict())
    target = _model(SMALL, init_cfg=[dict(type='Constant', layer=['Linear'], val=3.0, bias=0.0),
                                     dict(type='Pretrained', checkpoint=path)])
    target.init_weights()
    assert torch.equal(target.stages[0][0].pointwise_conv1.weight, source.stages[0][0].pointwise_conv1.weight)


@pytest.mark.parametrize('edit,match', [
    (lambda sd: sd.pop('stages.1.0.norm.weight'), r"1 missing keys: \['stages.1.0.norm.weight'\]"),
    (lambda sd: sd.update({'stages.0.0.extra': torch.zeros(1)}), r"1 unexpected keys: \['stages.0.0.extra'\]"),
    (lambda sd: sd.update({'stages.0.0.pointwise_conv1.weight': torch.zeros(16, 8)}),
     r'stages.0.0.pointwise_conv1.weight \(checkpoint \(16, 8\), model \(32, 8\)\)'),
    (lambda sd: sd.update({'stages.0.0.depthwise_conv.weight': torch.zeros(4, 1, 1, 5)}),
     r'stages.0.0.depthwise_conv.weight \(checkpoint \(4, 1, 1, 5\)'),
    (lambda sd: sd.update({'stages.1.1.depthwise_conv.theta': torch.zeros(5)}),
     r'stages.1.1.depthwise_conv.theta \(checkpoint \(5,\), model \(8,\)\)'),
])
def test_pretrained_errors_name_the_keys(tmp_path, edit, match):
    sd = dict(_source(SMALL).state_dict())
    edit(sd)
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, sd)))
    with pytest.raises(RuntimeError, match=match):
        target.init_weights()


def test_pretrained_angles_optional_and_loaded(tmp_path, mm_log):
    sd = {k: v for k, v in _source(SMALL).state_dict().items() if not k.endswith('theta')}
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, sd)))
    own = {k: v.clone() for k, v in target.state_dict().items() if k.endswith('theta')}
    target.init_weights()  # absent angles: the model keeps its own directions, and says so
    assert all(torch.equal(target.state_dict()[k], v) for k, v in own.items())
    assert f'{len(own)} angle tensors are not in the checkpoint' in mm_log.text
    # Present angles are the checkpoint's, even where the model was configured otherwise: the
    # kernels were trained with them. The log counts the layers whose angles differ.
    source = _source(SMALL)
    four = _model(SMALL, directions=4, init_cfg=dict(type='Pretrained',
                                                     checkpoint=_save(tmp_path, source.state_dict())))
    four.init_weights()
    differ = [k for k, v in _model(SMALL, directions=4).state_dict().items()
              if k.endswith('theta') and not torch.equal(v, source.state_dict()[k])]
    assert differ
    for key, value in source.state_dict().items():
        assert torch.equal(four.state_dict()[key], value), key
    assert f"{len(differ)} angle tensors of the checkpoint differ from the model's directions" in mm_log.text


def test_pretrained_bad_prefix_and_unconverted(tmp_path):
    sd = _source(SMALL).state_dict()
    init_cfg = dict(type='Pretrained', checkpoint=_save(tmp_path, sd), prefix='backbone.')
    target = _model(SMALL, init_cfg=init_cfg)
    with pytest.raises(KeyError, match="prefix 'backbone.'"):
        target.init_weights()
    raw = tmp_path / 'raw.pth'
    torch.save({'model': dict(sd), 'epoch': 3}, raw)
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=str(raw)))
    with pytest.raises(ValueError, match='convert_checkpoint.py'):
        target.init_weights()


def _detector_checkpoint(tmp_path, source, wrap=''):
    """A whole detector's state dict: the backbone under 'backbone.', then a neck and a head."""
    sd = {f'{wrap}backbone.{k}': v for k, v in source.state_dict().items()}
    for i in range(4):
        sd[f'{wrap}neck.lateral_convs.{i}.conv.weight'] = torch.zeros(16, 8, 1, 1)
        sd[f'{wrap}neck.lateral_convs.{i}.conv.bias'] = torch.zeros(16)
    sd[f'{wrap}rpn_head.rpn_conv.weight'] = torch.zeros(16, 16, 3, 3)
    sd[f'{wrap}roi_head.bbox_head.fc_cls.weight'] = torch.zeros(81, 64)
    return _save(tmp_path, sd, 'detector.pth')


@pytest.mark.parametrize('wrap', ['', 'module.'])
def test_whole_detector_without_prefix_suggests_it(tmp_path, wrap):
    source = _source(SMALL)
    path = _detector_checkpoint(tmp_path, source, wrap)
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=path))
    with pytest.raises(RuntimeError) as info:
        target.init_weights()
    message = str(info.value)
    assert "did you mean prefix='backbone.'?" in message
    needed = [k for k in target.state_dict() if not k.endswith('.theta') and not k.startswith('norm')]
    assert f'{len(needed)} missing keys' in message
    assert f"{len(needed)} of the model's {len(needed)} keys are in the checkpoint under 'backbone.'" in message
    unexpected = len(source.state_dict()) + 10  # the backbone's keys under 'backbone.', neck, heads
    assert f'{unexpected} unexpected keys' in message and f'and {unexpected - 3} more' in message
    assert len(message) < 600, message
    # The suggested prefix loads every tensor as saved.
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=path, prefix='backbone.'))
    target.init_weights()
    for key, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[key], value), key


def test_prefix_suggested_for_a_partial_checkpoint_after_the_given_prefix(tmp_path):
    """Most keys under 'model.backbone.', a few missing; the hint names the whole prefix."""
    source = _source(SMALL)
    sd = {f'model.backbone.{k}': v for k, v in source.state_dict().items() if not k.startswith('stages.3')}
    sd['model.head.fc.weight'] = torch.zeros(10, 16)
    init_cfg = dict(type='Pretrained', checkpoint=_save(tmp_path, sd), prefix='model')
    with pytest.raises(RuntimeError, match=r"did you mean prefix='model\.backbone\.'\?") as info:
        _model(SMALL, init_cfg=init_cfg).init_weights()
    assert len(str(info.value)) < 600


def test_unrelated_checkpoint_is_short_and_suggests_nothing(tmp_path):
    sd = {f'encoder.layer.{i}.attention.{name}': torch.zeros(4) for i in range(40)
          for name in ('query.weight', 'key.weight', 'value.weight', 'output.dense.weight')}
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, sd)))
    with pytest.raises(RuntimeError) as info:
        target.init_weights()
    message = str(info.value)
    assert '160 unexpected keys' in message and "'encoder.layer.0.attention.query.weight'" in message
    assert 'and 157 more' in message
    assert 'prefix' not in message
    assert len(message) < 600, message


def test_no_prefix_hint_when_the_keys_fit_as_they_are(tmp_path):
    """A backbone checkpoint with a few tensors missing and a stray copy of one under 'ema.'."""
    sd = dict(_source(SMALL).state_dict())
    sd['ema.stages.1.0.norm.weight'] = sd.pop('stages.1.0.norm.weight')
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, sd)))
    with pytest.raises(RuntimeError) as info:
        target.init_weights()
    message = str(info.value)
    assert "1 missing keys: ['stages.1.0.norm.weight']" in message
    assert "1 unexpected keys: ['ema.stages.1.0.norm.weight']" in message
    assert 'prefix' not in message


def test_many_mismatched_tensors_are_counted(tmp_path):
    sd = {k: torch.zeros(1) if k.endswith('pointwise_conv1.weight') else v
          for k, v in _source(SMALL).state_dict().items()}
    target = _model(SMALL, init_cfg=dict(type='Pretrained', checkpoint=_save(tmp_path, sd)))
    with pytest.raises(RuntimeError, match=r'5 mismatched tensors: stages\.0\.0\.pointwise_conv1\.weight '
                       r'\(checkpoint \(1,\), model \(32, 8\)\); .* and 2 more$'):
        target.init_weights()
