"""mmo1d.analysis.angles and tools/analysis_tools/visualize_angles.py: changes of known angles, the
initial directions of a model, and the tool on a small checkpoint (with a stored config, with
--config, without any)."""
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.patches import Rectangle
from mmengine.config import Config
from PIL import Image

from mmo1d.analysis import angles
from mmo1d.models import OrientedConvNeXt

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'visualize_angles.py'
BACKBONE = dict(type='mmo1d.OrientedConvNeXt', arch=dict(depths=[1, 2, 1, 1], channels=[8, 8, 16, 16]), variant='1dpp',
                kernel_sizes=[(5, 7)] * 4, stem_kernel_size=5, stem_channels=8, rounding='bilinear',
                learnable_angles=True)
CONFIG = f'model = dict(type="ImageClassifier", backbone={BACKBONE!r})\n'


def test_changes_and_summary_of_known_angles():
    rad = math.radians
    initial = {'a': torch.tensor([0.0, rad(90)], dtype=torch.float64), 'b': torch.tensor([rad(45)])}
    # +10 and -20 degrees; +190 degrees is -170 (a kernel turned by 360 degrees is the same kernel).
    learned = {'a': torch.tensor([rad(10), rad(70)]), 'b': torch.tensor([rad(45 + 190)])}
    changes = angles.angle_changes(learned, initial)
    torch.testing.assert_close(changes['a'], torch.tensor([10.0, -20.0], dtype=torch.float64), atol=1e-5, rtol=0)
    torch.testing.assert_close(changes['b'], torch.tensor([-170.0], dtype=torch.float64), atol=1e-5, rtol=0)
    summary = angles.change_summary(changes)
    assert summary['layers']['a'] == pytest.approx(dict(count=2, mean_abs_change_deg=15.0, max_abs_change_deg=20.0))
    assert summary['all'] == pytest.approx(dict(count=3, mean_abs_change_deg=200 / 3, max_abs_change_deg=170.0))
    # Orientation: the line the kernel lies on, modulo 180 degrees.
    torch.testing.assert_close(angles.orientations_deg(torch.tensor([rad(-10), rad(200)])),
                               torch.tensor([170.0, 20.0], dtype=torch.float64), atol=1e-4, rtol=0)
    with pytest.raises(KeyError, match=r'1 only in the angles \(c\), 1 only in the initial angles \(b\)'):
        angles.angle_changes({'a': learned['a'], 'c': learned['b']}, initial)
    with pytest.raises(ValueError, match=r'a: \(1,\) angles against \(2,\)'):
        angles.angle_changes({'a': learned['b'], 'b': learned['b']}, initial)


@pytest.mark.parametrize('variant,count', [('1d', 2 + 5), ('1dpp', 2 + 2 * 5), ('2dpp', 5)])
def test_initial_angles_are_the_configured_directions(variant, count):
    cfg = {k: v for k, v in BACKBONE.items() if k != 'type'}
    cfg.update(variant=variant, kernel_sizes=[(5, 7)] * 4 if variant.endswith('pp') else [5] * 4)
    model = OrientedConvNeXt(**cfg)
    layers = angles.oriented_layers(model, learnable_only=True)
    assert len(layers) == count
    initial = angles.initial_angles(layers)
    # Before training the angles are exactly the initial ones (odd blocks turned by 90 degrees).
    summary = angles.change_summary(angles.angle_changes({n: m.theta for n, m in layers.items()}, initial))
    assert summary['all']['count'] == sum(m.channels for m in layers.values())
    assert summary['all']['max_abs_change_deg'] < 1e-4
    assert torch.allclose(initial['stages.1.1.mid_conv' if variant != '1d' else 'stages.1.1.depthwise_conv'][0],
                          torch.tensor(math.pi / 2, dtype=torch.float64))
    fixed = OrientedConvNeXt(**dict(cfg, rounding='trunc', learnable_angles=False))
    assert not angles.oriented_layers(fixed, learnable_only=True) and len(angles.oriented_layers(fixed)) == count


def _load_tool():
    spec = importlib.util.spec_from_file_location('visualize_angles', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def _checkpoint(tmp_path: Path, stored_config: bool) -> Path:
    """A classifier checkpoint whose block stages.0.0 turned every angle of its first convolution by
    5 degrees, and one of them by 30; the other layers did not move."""
    model = OrientedConvNeXt(**{k: v for k, v in BACKBONE.items() if k != 'type'})
    with torch.no_grad():
        theta = model.stages[0][0].depthwise_conv.theta
        theta.add_(math.radians(5))
        theta[3] += math.radians(25)
    state = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(10, 16)
    meta = dict(cfg=Config.fromstring(CONFIG, '.py').pretty_text) if stored_config else {}
    path = tmp_path / ('stored.pth' if stored_config else 'plain.pth')
    torch.save(dict(state_dict=state, meta=meta), path)
    return path


@pytest.mark.parametrize('source', ['stored', 'argument'])
def test_tool_reports_the_changes_per_layer(tmp_path, source):
    tool = _load_tool()
    config = tmp_path / 'config.py'
    config.write_text(CONFIG)
    args = [str(_checkpoint(tmp_path, stored_config=source == 'stored')), '--out', str(tmp_path / 'out' / 'angles')]
    report = tool.main(args + (['--config', str(config)] if source == 'argument' else []))
    saved = json.loads((tmp_path / 'out' / 'angles.json').read_text())
    assert saved == json.loads(json.dumps(report))
    assert saved['prefix'] == 'backbone.'
    layers = saved['layers']
    assert len(layers) == 2 + 2 * 5 and layers['downsample_layers.0.dw1']['count'] == 8
    moved = layers['stages.0.0.depthwise_conv']
    assert moved == pytest.approx(dict(count=8, mean_abs_change_deg=(7 * 5 + 30) / 8, max_abs_change_deg=30.0),
                                  abs=1e-4)
    assert all(s['max_abs_change_deg'] < 1e-4 for name, s in layers.items() if name != 'stages.0.0.depthwise_conv')
    assert saved['all']['count'] == sum(s['count'] for s in layers.values())
    image = np.asarray(Image.open(tmp_path / 'out' / 'angles.png'))
    assert image.shape[:2] == (800, 1000) and image.std() > 0


def test_tool_without_a_config_draws_the_orientations_only(tmp_path, capsys):
    tool = _load_tool()
    report = tool.main([str(_checkpoint(tmp_path, stored_config=False)), '--out', str(tmp_path / 'angles')])
    assert 'the initial angles are unknown' in capsys.readouterr().out
    assert report['config'] is None and 'all' not in report
    assert report['layers']['stages.3.0.mid_conv'] == dict(count=64)
    assert np.asarray(Image.open(tmp_path / 'angles.png')).shape[:2] == (400, 1000)
    with pytest.raises(FileNotFoundError, match='checkpoint not found'):
        tool.main([str(tmp_path / 'missing.pth'), '--out', str(tmp_path / 'x')])


def test_histogram_counts_every_channel(tmp_path):
    model = OrientedConvNeXt(**{k: v for k, v in BACKBONE.items() if k != 'type'})
    layers = angles.oriented_layers(model)
    learned = {n: m.theta.detach() for n, m in layers.items()}
    fig = angles.draw_angles(str(tmp_path / 'h.png'), learned, angles.initial_angles(layers), bin_deg=5)
    hist = fig.axes[0]
    bars = [p for p in hist.patches if isinstance(p, Rectangle)]
    assert sum(b.get_height() for b in bars) == sum(t.numel() for t in learned.values())
    assert [t.get_text() for t in hist.get_legend().get_texts()] == ['stem', 'stage 0', 'stage 1', 'stage 2',
                                                                     'stage 3', 'initial directions']
    assert len(fig.axes[1].patches) == len(layers)  # one bar of mean change per layer
    with pytest.raises(ValueError, match='bin_deg must divide 180'):
        angles.draw_angles(str(tmp_path / 'x.png'), learned, bin_deg=7)
