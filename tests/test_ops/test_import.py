"""``import mmo1d.ops`` needs torch alone; ``import mmo1d`` with the OpenMMLab stack registers the models."""
import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_ops_import_without_openmmlab():
    # None in sys.modules makes every import of these packages fail, as if they were not installed.
    result = _run('''
        import sys
        for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'mmpretrain'):
            sys.modules[name] = None
        import torch
        import mmo1d.ops
        x = torch.randn(1, 4, 9, 9)
        y = mmo1d.ops.oriented_dwconv1d(x, torch.randn(4, 5), mmo1d.ops.oriented_angles(4))
        assert y.shape == (1, 4, 9, 9)
        assert not [m for m in sys.modules if m.startswith('mmo1d.models')], 'mmo1d.models was imported'
        print('ok')
    ''')
    assert result.returncode == 0 and result.stdout.strip() == 'ok', result.stderr[-2000:]


def test_package_import_registers_the_models():
    result = _run('''
        import mmo1d
        from mmo1d.registry import MODELS
        assert MODELS.get('OrientedConvNeXt') is not None
        print('ok')
    ''')
    assert result.returncode == 0 and result.stdout.strip() == 'ok', result.stderr[-2000:]
