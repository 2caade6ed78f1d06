"""tools/model_converters/convert_checkpoint.py on checkpoints fabricated in each source layout."""
import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.registry import DefaultScope
from mmpretrain.models.backbones import ConvNeXt
from mmpretrain.registry import MODELS as MMPRETRAIN_MODELS

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.convert import (
    SourceLayoutError,
    convert_state_dict,
    detect_source_format,
    rename_keys,
    select_state_dict,
)

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'model_converters' / 'convert_checkpoint.py'
_spec = importlib.util.spec_from_file_location('convert_checkpoint', TOOL)
convert_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(convert_tool)
ARCH = dict(depths=[1, 2, 1, 1], channels=[8, 16, 16, 24])
X = torch.randn(2, 3, 64, 64)


def _perturb(model):
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def _mmpretrain_classifier(backbone: dict, num_classes: int = 7):
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        head = dict(type='LinearClsHead', num_classes=num_classes, in_channels=ARCH['channels'][-1])
        return MMPRETRAIN_MODELS.build(dict(type='ImageClassifier', backbone=backbone, neck=None,
                                            head=head)).eval()




def _authors_layout(sd, plus_plus):
    out = {}
    for k, v in sd.items():
        k = k.replace('backbone.norm3.', 'norm.').replace('backbone.', '').replace('head.fc.', 'head.')
        k = re.sub(r'pointwise_conv([12])', r'pwconv\1', k)
        k = k.replace('depthwise_conv', 'dwconv1' if plus_plus else 'dwconv').replace('mid_conv', 'dwconv2')
        out[k] = v
    return out


def _timm_layout(sd):
    out = {}
    for k, v in sd.items():
        k = re.sub(r'^backbone\.downsample_layers\.0\.', 'stem.', k)
        k = re.sub(r'^backbone\.downsample_layers\.(\d)\.', r'stages.\1.downsample.', k)
        k = re.sub(r'^backbone\.stages\.(\d)\.(\d+)\.', r'stages.\1.blocks.\2.', k)
        k = k.replace('depthwise_conv', 'conv_dw').replace('pointwise_conv1', 'mlp.fc1')
        k = k.replace('pointwise_conv2', 'mlp.fc2').replace('backbone.norm3.', 'head.norm.')
        out[k] = v
    return out


@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp', '2d'])
def test_authors_checkpoint_round_trip(tmp_path, capsys, variant):
    kernels = {'1d': (9, 9, 7, 5), '1dpp': ((5, 9), ) * 4, '2dpp': ((7, 9), ) * 4, '2d': (7, ) * 4}[variant]
    backbone = dict(type='mmo1d.OrientedConvNeXt', arch=ARCH, variant=variant, kernel_sizes=kernels,
                    stem_kernel_size=7)
    source = _perturb(_mmpretrain_classifier(backbone))
    ema = _perturb(_mmpretrain_classifier(backbone))
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(0.5)
    layout = lambda m: _authors_layout(m.state_dict(), variant.endswith('pp'))  # noqa: E731
    authors = layout(source)
    assert 'stages.0.0.pwconv1.weight' in authors and 'norm.weight' in authors and 'head.weight' in authors
    assert ('downsample_layers.0.dw1.theta' in authors) == (variant in ('1d', '1dpp'))
    path = tmp_path / 'authors.pth'
    torch.save({'model': authors, 'model_ema': layout(ema), 'epoch': 299,
                'args': argparse.Namespace(model=f'convnext_{variant}')}, path)
    outs = {}
    for flag in ('', '--ema'):
        cls_out, bb_out = tmp_path / f'cls{flag}.pth', tmp_path / f'bb{flag}.pth'
        args = [str(path), '--src-format', 'oriented1d', '--classifier-out', str(cls_out), '--backbone-out',
                str(bb_out)] + ([flag] if flag else [])
        if variant == '1dpp' and not flag:  # the command line itself, once
            result = subprocess.run([sys.executable, str(TOOL)] + args, capture_output=True, text=True,
                                    timeout=120)
            assert result.returncode == 0, result.stderr[-2000:]
            stdout = result.stdout
        else:
            convert_tool.main(args)
            stdout = capsys.readouterr().out
        assert f"variant={variant!r}" in stdout and 'keep their initialisation' not in stdout
        assert f'wrote {cls_out}' in stdout
        model = _mmpretrain_classifier(backbone)
        model.load_state_dict(torch.load(cls_out)['state_dict'], strict=True)
        with torch.no_grad():
            outs[flag] = model(X)
        bb = OrientedConvNeXt(ARCH, variant, kernel_sizes=kernels, stem_kernel_size=7,
                              init_cfg=dict(type='Pretrained', checkpoint=str(bb_out)))
        bb.init_weights()
        bb.eval()
        with torch.no_grad():
            torch.testing.assert_close(bb(X)[0], model.backbone(X)[0])
    with torch.no_grad():
        torch.testing.assert_close(outs[''], source(X))
        torch.testing.assert_close(outs['--ema'], ema(X))
    assert not torch.allclose(outs[''], outs['--ema'])


def _official_sources():
    torch.manual_seed(0)
    ref = _mmpretrain_classifier(dict(type='ConvNeXt', arch=ARCH))
    ref.init_weights()
    return _perturb(ref)


@pytest.mark.parametrize('fmt', ['official', 'mmpretrain', 'timm'])
def test_convnext_sources_into_2d(fmt):
    ref = _official_sources()
    sd = ref.state_dict()
    source = {'official': lambda: _authors_layout(sd, False), 'mmpretrain': lambda: dict(sd),
              'timm': lambda: _timm_layout(sd)}[fmt]()
    if fmt == 'timm':
        assert 'stages.1.blocks.1.mlp.fc2.weight' in source and 'stem.1.bias' in source
        assert 'stages.2.downsample.1.weight' in source and 'head.norm.weight' in source
    result = convert_state_dict(source, fmt)
    assert result.variant == '2d' and result.fresh == [] and result.arch == ARCH
    ours = _mmpretrain_classifier(dict(type='mmo1d.OrientedConvNeXt', arch=ARCH, variant='2d'))
    ours.load_state_dict(result.classifier, strict=True)
    with torch.no_grad():
        torch.testing.assert_close(ours(X), ref(X), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('fmt', ['official', 'timm'])
def test_convnext_into_2dpp_keeps_new_branch(fmt):
    ref = _official_sources()
    sd = ref.state_dict()
    source = _authors_layout(sd, False) if fmt == 'official' else _timm_layout(sd)
    result = convert_state_dict(source, fmt, variant='2dpp', mid_kernel_size=9)
    assert result.fresh and all('.mid_conv.' in k for k in result.fresh)
    assert len(result.fresh) == 2 * sum(ARCH['depths'])  # weight and bias of every block's branch
    assert result.kernel_sizes == [(7, 9)] * 4
    model = OrientedConvNeXt(ARCH, '2dpp', kernel_sizes=result.kernel_sizes)
    model.load_state_dict(result.backbone, strict=True)
    w = model.stages[0][0].mid_conv.weight
    assert w.abs().max() > 0 and w.std() < 0.03  # the truncated-normal initialisation, not zeros
    # With the new branch silenced (h + 0 + conv_0(h) = h) the 2D++ model is the source ConvNeXt.
    with torch.no_grad():
        for m in model.modules():
            if getattr(m, 'residual', False):
                m.weight.zero_()
                m.bias.zero_()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(X)[0], ref.backbone(X)[0], atol=1e-5, rtol=1e-4)


def test_conversion_errors():
    sd = _official_sources().state_dict()
    with pytest.raises(ValueError, match="converts into '2d' or '2dpp', not '1d'"):
        convert_state_dict(sd, 'mmpretrain', variant='1d')
    broken = dict(sd)
    broken['backbone.stages.0.0.pointwise_conv1.weight'] = torch.zeros(3, 8)
    with pytest.raises(RuntimeError, match=r'stages.0.0.pointwise_conv1.weight \(checkpoint \(3, 8\)'):
        convert_state_dict(broken, 'mmpretrain')
    with pytest.raises(KeyError, match='no EMA weights'):
        select_state_dict({'model': sd}, ema=True)
    assert select_state_dict({'state_dict_ema': sd, 'state_dict': {}}, ema=True) is sd
    mmengine_ema = {'steps': torch.tensor(5), **{f'module.{k}': v for k, v in sd.items()}}
    picked = select_state_dict({'state_dict': {}, 'ema_state_dict': mmengine_ema}, ema=True)
    assert picked.keys() == sd.keys() and all(picked[k] is sd[k] for k in sd)


def test_mmpretrain_convnext_tiny_into_2d_tiny():
    """The real size: mmpretrain's ConvNeXt-T and the converted '2d' T agree on a 64x64 input."""
    torch.manual_seed(0)
    ref = ConvNeXt('tiny')
    _perturb(ref)
    ref.eval()  # mmpretrain's ConvNeXt.train() returns None, so no chaining
    source = {f'backbone.{k}': v for k, v in ref.state_dict().items()}
    source.update({'head.fc.weight': torch.randn(1000, 768), 'head.fc.bias': torch.randn(1000)})
    result = convert_state_dict(source, 'mmpretrain')
    assert result.arch == OrientedConvNeXt.arch_settings['tiny'] and result.kernel_sizes == [7] * 4
    assert result.classifier['head.fc.weight'] is source['head.fc.weight']
    ours = OrientedConvNeXt('tiny', '2d')
    ours.load_state_dict(result.backbone, strict=True)
    ours.eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x)[0], ref(x)[0], atol=1e-5, rtol=1e-4)


def test_source_format_told_from_the_keys():
    sd = _official_sources().state_dict()
    assert detect_source_format(sd) == 'mmpretrain'
    assert detect_source_format(_timm_layout(sd)) == 'timm'
    assert detect_source_format({f'module.{k}': v for k, v in _authors_layout(sd, False).items()}) == 'official'
    backbone = dict(type='mmo1d.OrientedConvNeXt', arch=ARCH, variant='1dpp', kernel_sizes=((5, 9), ) * 4)
    assert detect_source_format(_authors_layout(_mmpretrain_classifier(backbone).state_dict(), True)) == 'oriented1d'
    with pytest.raises(SourceLayoutError, match=r"none of the source layouts .*: 1 of \d+ keys are not in the "
                       r"closest one, 'mmpretrain', e.g. extra.weight$"):
        detect_source_format({**sd, 'extra.weight': torch.zeros(1)})


def test_wrong_source_format_names_the_layout_of_the_keys():
    sd = _official_sources().state_dict()
    with pytest.raises(SourceLayoutError) as error:
        rename_keys(sd, 'timm')
    message = str(error.value)
    assert re.fullmatch(r"\d+ of \d+ keys are not in the 'timm' ConvNeXt layout, e.g. backbone\.\S+, backbone\.\S+, "
                        r"backbone\.\S+, \.\.\.; the keys follow the 'mmpretrain' layout", message), message
    with pytest.raises(SourceLayoutError, match=r"the keys follow the 'oriented1d' / 'official' layout$"):
        rename_keys(_authors_layout(sd, False), 'mmpretrain')


def test_tool_tells_the_layout_or_refuses_a_wrong_one(tmp_path, capsys):
    sd = _official_sources().state_dict()
    path = tmp_path / 'timm.pth'
    torch.save({'state_dict': _timm_layout(sd)}, path)
    out = tmp_path / 'cls.pth'
    convert_tool.main([str(path), '--classifier-out', str(out)])
    assert "source format 'timm' (told from the keys)" in capsys.readouterr().out
    assert torch.load(out)['meta']['source_format'] == 'timm'
    with pytest.raises(SystemExit) as error:
        convert_tool.main([str(path), '--src-format', 'mmpretrain', '--classifier-out', str(out)])
    message = str(error.value)
    assert message.startswith(f'error: {path}: ') and "the keys follow the 'timm' layout" in message
    assert len(message) < 400, message


def test_learned_angles_survive_the_conversion():
    """An mmpretrain-layout classifier that learned its angles converts into a backbone (built with
    the default fixed angles) that keeps them: the converted checkpoint carries the learned theta."""
    source = _perturb(_mmpretrain_classifier(dict(type='mmo1d.OrientedConvNeXt', arch=ARCH, variant='1dpp',
                                                  kernel_sizes=[(5, 7)] * 4, stem_kernel_size=5,
                                                  rounding='bilinear', learnable_angles=True)))
    thetas = {k: v for k, v in source.state_dict().items() if k.endswith('.theta')}
    assert len(thetas) == 2 + 2 * sum(ARCH['depths'])
    result = convert_state_dict(source.state_dict(), detect_source_format(source.state_dict()))
    assert result.variant == '1dpp' and not result.fresh
    default = OrientedConvNeXt(ARCH, '1dpp', kernel_sizes=[(5, 7)] * 4, stem_kernel_size=5).state_dict()
    for key, value in thetas.items():
        assert not torch.equal(value, default[key[len('backbone.'):]]), key  # the angles did move
        assert torch.equal(result.backbone[key[len('backbone.'):]], value), key
        assert torch.equal(result.classifier[key], value), key


def _tool_subprocess(args: list) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)


def test_bad_sources_end_in_one_error_line(tmp_path):
    """A missing file, a text file, a wrong --variant, no EMA weights: one ``error:`` line (exit status 1)."""
    text = tmp_path / 'notes.pth'
    text.write_text('experiment notes, not weights\n')
    official = tmp_path / 'official.pth'
    torch.save({'model': _authors_layout(_official_sources().state_dict(), False)}, official)
    cases = [
        ([str(tmp_path / 'missing.pth')], f'error: checkpoint not found: {tmp_path / "missing.pth"}'),
        ([str(text)], f'error: {text} is not a PyTorch checkpoint (not a file written by torch.save, or one cut '
                      'short)'),
        ([str(official), '--variant', '1d'],
         f"error: {official}: the source is a '2d' model; it converts into '2d' or '2dpp', not '1d'"),
        ([str(official), '--ema'], f"error: {official}: no EMA weights (model_ema / state_dict_ema / "
                                   "ema_state_dict) in the checkpoint; it has ['model']"),
    ]
    for args, line in cases:
        with pytest.raises(SystemExit) as error:
            convert_tool.main(args + ['--backbone-out', str(tmp_path / 'out.pth')])
        assert str(error.value) == line
    assert not (tmp_path / 'out.pth').exists()


def test_new_2dpp_branches_are_named_once(tmp_path):
    """A 2D source into 2D++: the new branches keep their initialisation, said once (count and examples)."""
    path = tmp_path / 'official.pth'
    torch.save({'model': _authors_layout(_official_sources().state_dict(), False)}, path)
    proc = _tool_subprocess([str(path), '--variant', '2dpp', '--backbone-out', str(tmp_path / 'out.pth')])
    assert proc.returncode == 0, proc.stderr[-2000:]
    output = proc.stdout + proc.stderr
    fresh = 2 * sum(ARCH['depths'])
    assert output.count(f'{fresh} tensors are not in the checkpoint and keep their initial values') == 1, output
    assert output.count('stages.0.0.mid_conv.weight') == 1, output
    assert "variant='2dpp'" in output and f'wrote {tmp_path / "out.pth"}' in output
