"""The real-user paths: ``type='mmo1d.OrientedConvNeXt'`` in mmdet / mmseg / mmpretrain configs."""
import subprocess
import sys
import textwrap

from mmengine.registry import MODELS as ROOT_MODELS

from mmo1d.models import OrientedConvNeXt
from mmo1d.registry import MODELS

ARCH = "arch=dict(depths=[1, 1, 2, 1], channels=[8, 16, 16, 32]), kernel_sizes='downstream'"


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_registry_is_a_scoped_child_of_mmengine_root():
    assert MODELS.scope == 'mmo1d'
    assert MODELS.parent is ROOT_MODELS
    assert ROOT_MODELS._children['mmo1d'] is MODELS
    assert MODELS.get('OrientedConvNeXt') is OrientedConvNeXt
    assert ROOT_MODELS.get('mmo1d.OrientedConvNeXt') is OrientedConvNeXt


def test_build_in_downstream_registries_without_importing_mmo1d():
    """A fresh interpreter that never imports mmo1d: mmengine must find the scope by itself."""
    out = _run(f"""
        import sys
        from mmengine.config import Config
        from mmengine.registry import DefaultScope
        import mmdet.registry, mmseg.registry, mmpretrain.registry
        assert 'mmo1d' not in sys.modules
        shapes = []
        for scope, reg in (('mmdet', mmdet.registry.MODELS), ('mmseg', mmseg.registry.MODELS)):
            DefaultScope.get_instance('test-' + scope, scope_name=scope)
            cfg = Config.fromstring(
                "backbone = dict(type='mmo1d.OrientedConvNeXt', variant='1dpp', {ARCH}, "
                "out_indices=(0, 1, 2, 3), gap_before_final_norm=False)", '.py')
            model = reg.build(cfg.backbone)
            import torch
            outs = model(torch.randn(1, 3, 32, 32))
            shapes.append([tuple(o.shape) for o in outs])
        DefaultScope.get_instance('test-mmpretrain', scope_name='mmpretrain')
        cls = mmpretrain.registry.MODELS.build(Config.fromstring(
            "model = dict(type='ImageClassifier', backbone=dict(type='mmo1d.OrientedConvNeXt', "
            "variant='2dpp', {ARCH}), neck=None, head=dict(type='LinearClsHead', num_classes=5, "
            "in_channels=32))", '.py').model)
        logits = cls(torch.randn(2, 3, 32, 32))
        print(type(model).__module__, shapes, tuple(logits.shape), 'mmo1d' in sys.modules)
    """)
    module, rest = out.split(' ', 1)
    assert module == 'mmo1d.models.backbones.oriented_convnext'
    expected = [(1, 8, 8, 8), (1, 16, 4, 4), (1, 16, 2, 2), (1, 32, 1, 1)]
    assert rest.strip() == f'{[expected, expected]} (2, 5) True'


def test_custom_imports_path():
    out = _run(f"""
        from mmengine.config import Config
        import mmdet.registry
        cfg = Config.fromstring(
            "custom_imports = dict(imports=['mmo1d'], allow_failed_imports=False)\\n"
            "backbone = dict(type='mmo1d.OrientedConvNeXt', variant='1d', {ARCH})", '.py')
        import sys
        assert 'mmo1d' in sys.modules
        print(type(mmdet.registry.MODELS.build(cfg.backbone)).__name__)
    """)
    assert out.strip() == 'OrientedConvNeXt'
