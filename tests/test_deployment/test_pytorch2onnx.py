"""tools/deployment/pytorch2onnx.py: classifier, segmentor and backbone exports checked by ONNX Runtime."""
import importlib.util
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from mmo1d.deployment import max_abs_difference, non_standard_ops, run_onnxruntime

pytest.importorskip('onnxruntime')
pytest.importorskip('onnxscript')

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / 'tools' / 'deployment' / 'pytorch2onnx.py'
_spec = importlib.util.spec_from_file_location('pytorch2onnx', TOOL)
pytorch2onnx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pytorch2onnx)

SEG_CONFIG = ROOT / 'configs' / 'demo' / 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
DET_CONFIG = ROOT / 'configs' / 'demo' / \
    'cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py'
CLS_CONFIG = ROOT / 'configs' / 'mmpretrain' / 'oriented-convnext-tiny-1dpp_32xb128_in1k.py'


def test_classifier_from_checkpoint(tmp_path):
    from mmpretrain.apis import init_model
    config = tmp_path / 'tiny_cls.py'
    config.write_text(f"_base_ = ['{CLS_CONFIG}']\n"
                      "arch = dict(_delete_=True, depths=[1, 1, 1, 1], channels=[8, 8, 16, 16])\n"
                      "model = dict(backbone=dict(arch=arch, stem_channels=8),\n"
                      "             head=dict(in_channels=16, num_classes=5))\n")
    torch.manual_seed(0)
    model = init_model(Config.fromfile(str(config)), device='cpu').eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    checkpoint = tmp_path / 'cls.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, checkpoint)
    out = tmp_path / 'cls.onnx'
    diff = pytorch2onnx.main([str(config), str(checkpoint), '--out', str(out), '--shape', '48', '40', '--legacy'])
    assert diff < 1e-4
    x = torch.randn(2, 3, 48, 40)
    with pytest.raises(ValueError, match='inputs'):
        run_onnxruntime(str(out), [x, x])
    # Batch 1 was exported: compare one image with the independently built model.
    with torch.no_grad():
        expected = model(x[:1], mode='tensor')
    assert expected.shape == (1, 5)
    assert max_abs_difference([expected], run_onnxruntime(str(out), [x[:1]])) < 1e-4


def test_a_checkpoint_that_does_not_fit_the_config_is_refused(tmp_path):
    """Another head size and another depth: one error that counts each misfit, no ONNX file, exit status 1."""
    from mmpretrain.apis import init_model

    def tiny(name: str, depths: list, num_classes: int) -> Path:
        config = tmp_path / f'{name}.py'
        config.write_text(f"_base_ = ['{CLS_CONFIG}']\n"
                          f"arch = dict(_delete_=True, depths={depths}, channels=[8, 8, 16, 16])\n"
                          "model = dict(backbone=dict(arch=arch, stem_channels=8),\n"
                          f"             head=dict(in_channels=16, num_classes={num_classes}))\n")
        return config

    config = tiny('five', [1, 1, 1, 1], 5)
    other = init_model(Config.fromfile(str(tiny('seven', [1, 1, 2, 1], 7))), device='cpu')
    checkpoint = tmp_path / 'seven.pth'
    torch.save({'state_dict': other.state_dict(), 'meta': {}}, checkpoint)
    out = tmp_path / 'cls.onnx'
    with pytest.raises(SystemExit) as error:
        pytorch2onnx.main([str(config), str(checkpoint), '--out', str(out), '--shape', '32', '32'])
    message = str(error.value)
    extra = [k for k in other.state_dict() if k.startswith('backbone.stages.2.1.')]
    assert message.startswith(f'error: {checkpoint} does not fit ImageClassifier: {len(extra)} unexpected keys: '
                              f'{extra[:3]} and {len(extra) - 3} more | 2 mismatched '
                              'tensors: head.fc.weight (checkpoint (7, 16), model (5, 16)); head.fc.bias'), message
    assert '\n' not in message and not out.exists()


def test_segmentor_whole_model(tmp_path, capsys):
    out = tmp_path / 'seg.onnx'
    diff = pytorch2onnx.main([str(SEG_CONFIG), '--out', str(out), '--shape', '64', '64'])
    assert diff < 1e-4
    assert non_standard_ops(str(out)) == []
    printed = capsys.readouterr().out
    assert 'max abs difference between PyTorch and ONNX Runtime' in printed and 'SegmentorLogits' in printed
    (logits, ) = run_onnxruntime(str(out), [torch.randn(1, 3, 64, 64)])
    assert logits.shape == (1, Config.fromfile(str(SEG_CONFIG)).model.decode_head.num_classes, 64, 64)


def test_detector_backbone_and_whole_detector_refused(tmp_path):
    with pytest.raises(ValueError, match='mmdeploy'):
        pytorch2onnx.main([str(DET_CONFIG), '--out', str(tmp_path / 'det.onnx')])
    out = tmp_path / 'det_backbone.onnx'
    diff = pytorch2onnx.main([str(DET_CONFIG), '--backbone', '--out', str(out), '--shape', '64', '96', '--legacy'])
    assert diff < 1e-4
    assert len(run_onnxruntime(str(out), [torch.randn(1, 3, 64, 96)])) == 4


def test_opset_below_the_lowerings_is_refused(tmp_path):
    with pytest.raises(ValueError, match='opset_version must be >= 17'):
        pytorch2onnx.main([str(SEG_CONFIG), '--backbone', '--out', str(tmp_path / 'x.onnx'), '--shape', '32', '32',
                           '--opset', '16'])


def test_legacy_export_stops_where_a_ppm_scale_does_not_divide_the_feature_map(tmp_path, monkeypatch):
    def export_onnx(*args, **kwargs):
        raise AssertionError('the model was traced')

    monkeypatch.setattr(pytorch2onnx, 'export_onnx', export_onnx)
    with pytest.raises(ValueError) as error:
        pytorch2onnx.main([str(SEG_CONFIG), '--out', str(tmp_path / 'seg.onnx'), '--shape', '128', '128', '--legacy'])
    message = str(error.value)
    assert message.startswith('--legacy: ') and 'at input 128x128' in message
    assert 'psp_modules.2.0 pools 4x4 (1/32 of the input) to 3x3' in message
    assert 'psp_modules.3.0 pools 4x4 (1/32 of the input) to 6x6' in message and 'psp_modules.1.0' not in message
    assert 'Every pool scale (of a PPM, as in UperNet) must divide the size of the feature map it pools' in message
    assert 'multiples of 192' in message and 'e.g. 192x192' in message


def test_legacy_export_at_a_size_the_ppm_scales_divide(tmp_path):
    out = tmp_path / 'seg.onnx'
    assert pytorch2onnx.main([str(SEG_CONFIG), '--out', str(out), '--shape', '192', '192', '--legacy']) < 1e-4
    assert non_standard_ops(str(out)) == []
