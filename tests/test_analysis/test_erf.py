"""mmo1d.analysis.erf: the ERF of one layer is its footprint, the area ratios, the loader and the tool."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from mmo1d.analysis import erf as erf_lib
from mmo1d.ops import OrientedDWConv1d, tap_offsets

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'analyze_erf.py'


def load_tool():
    spec = importlib.util.spec_from_file_location('analyze_erf', TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def positive_images(channels, size, count=2):
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(channels, size, size, generator=gen) + 0.1 for _ in range(count)]


@pytest.mark.parametrize('rounding', ['trunc', 'floor'])
def test_erf_of_one_oriented_layer_is_its_footprint(rounding):
    """With positive weights and inputs the input gradient of the central output is the sum of the weights
    of the taps reading each pixel: non-zero exactly at the taps of tap_offsets, for every direction."""
    channels, k, size = 8, 9, 21
    conv = OrientedDWConv1d(channels, k, directions=8, rounding=rounding, bias=False)
    with torch.no_grad():
        conv.weight.uniform_(0.5, 1.0)
    erf, used, skipped = erf_lib.accumulate_erf(conv, positive_images(channels, size), torch.device('cpu'))
    assert (used, skipped) == (2, 0)

    dh, dw = tap_offsets(conv.theta, k, rounding)
    expected = np.zeros((size, size))
    np.add.at(expected, ((dh + size // 2).numpy().ravel(), (dw + size // 2).numpy().ravel()),
              conv.weight.detach().reshape(-1).double().numpy())
    assert set(zip(*np.nonzero(erf))) == set(zip(*np.nonzero(expected)))
    np.testing.assert_allclose(erf, expected, rtol=1e-5)


def test_erf_of_a_7x7_depthwise_conv_is_a_7x7_square():
    conv = nn.Conv2d(3, 3, 7, padding=3, groups=3, bias=False)
    with torch.no_grad():
        conv.weight.uniform_(0.5, 1.0)
    erf, _, _ = erf_lib.accumulate_erf(conv, positive_images(3, 15), torch.device('cpu'))
    rows, cols = np.nonzero(erf)
    assert len(rows) == 49
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (4, 10, 4, 10)


def test_erf_skips_nan_images_and_fails_when_all_are():
    conv = nn.Conv2d(3, 3, 3, padding=1, groups=3, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    good = torch.ones(3, 9, 9)
    erf, used, skipped = erf_lib.accumulate_erf(lambda x: conv(x) * x.sum(), [good, good * float('nan')],
                                                torch.device('cpu'))
    assert (used, skipped) == (1, 1) and np.isfinite(erf).all()
    with pytest.raises(RuntimeError, match='all 1 images gave NaN'):
        erf_lib.accumulate_erf(lambda x: conv(x) * x.sum(), [good * float('nan')], torch.device('cpu'))


def test_area_ratios_of_a_known_map():
    erf = np.zeros((21, 21))
    erf[8:13, 8:13] = 1.0  # a centred 5x5 block: the 3x3 square holds 9/25 = 36% of the total
    ratios = erf_lib.area_ratios(erf, (0.2, 0.3, 0.5, 0.99))
    assert ratios['0.2'] == ratios['0.3'] == dict(side=3, area_ratio=9 / 441)
    assert ratios['0.5'] == ratios['0.99'] == dict(side=5, area_ratio=25 / 441)
    erf[0, 0] = 100.0  # mass in a corner: no centred square below half the map holds 99%
    assert erf_lib.area_ratios(erf, (0.99, ))['0.99'] is None
    with pytest.raises(ValueError, match='zero everywhere'):
        erf_lib.area_ratios(np.zeros((5, 5)))


def test_normalise_is_log_scaled_to_one():
    scaled = erf_lib.normalise(np.array([[0.0, 9.0], [99.0, 999.0]]))
    np.testing.assert_allclose(scaled, [[0, 1 / 3], [2 / 3, 1]])


def test_load_image_resizes_and_normalises(tmp_path):
    path = tmp_path / 'red.png'
    Image.new('RGB', (10, 6), (255, 0, 0)).save(path)
    mean, std = (100.0, 50.0, 10.0), (2.0, 4.0, 5.0)
    rgb = erf_lib.load_image(str(path), 8, mean, std)
    assert rgb.shape == (3, 8, 8)
    np.testing.assert_allclose(rgb[:, 0, 0], [(255 - 100) / 2, -50 / 4, -10 / 5])
    bgr = erf_lib.load_image(str(path), 8, mean, std, rgb=False)  # blue, green, red
    np.testing.assert_allclose(bgr[:, 0, 0], [-100 / 2, -50 / 4, (255 - 10) / 5])
    (tmp_path / 'empty').mkdir()
    with pytest.raises(FileNotFoundError, match='no image'):
        erf_lib.list_images(str(tmp_path / 'empty'))
    with pytest.raises(FileNotFoundError, match='not found'):
        erf_lib.list_images(str(tmp_path / 'missing'))


TINY_CONFIG = """
default_scope = 'mmpretrain'
model = dict(
    type='ImageClassifier',
    data_preprocessor=dict(num_classes=4, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(type='mmo1d.OrientedConvNeXt', arch=dict(depths=[1, 1, 1, 1], channels=[8, 8, 8, 8]),
                  variant='{variant}', kernel_sizes={kernels}, stem_kernel_size=5, stem_channels=8,
                  layer_scale_init_value=1.0, out_indices=(3, ), gap_before_final_norm=True),
    head=dict(type='LinearClsHead', num_classes=4, in_channels=8, loss=dict(type='CrossEntropyLoss')))
"""


def test_tool_writes_maps_numbers_and_figures(tmp_path):
    tool = load_tool()
    images = tmp_path / 'images' / 'class_a'
    images.mkdir(parents=True)
    for i in range(2):
        pixels = np.random.default_rng(i).integers(0, 255, (40, 50, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(images / f'{i}.jpg')
    configs = []
    for variant, kernels in (('1d', [7, 7, 7, 5]), ('2d', [3, 3, 3, 3])):
        configs.append(tmp_path / f'tiny_{variant}.py')
        configs[-1].write_text(TINY_CONFIG.format(variant=variant, kernels=kernels))
    torch.manual_seed(0)
    model = erf_lib.build_model(str(configs[0]))
    checkpoint = tmp_path / 'tiny_1d.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)

    out = tmp_path / 'erf'
    records = tool.main([str(c) for c in configs] + [
        '--checkpoints', str(checkpoint), 'none', '--names', 'T1D', 'T2D', '--data-root', str(tmp_path / 'images'),
        '--img-size', '64', '--device', 'cpu', '--out-dir', str(out), '--compare', str(out / 'both.png')])

    # The checkpoint was loaded: the tool's map is the one of the saved model.
    images_in = [erf_lib.load_image(str(p), 64, *erf_lib.data_normalisation(str(configs[0])))
                 for p in sorted(images.iterdir())]
    direct, _, _ = erf_lib.accumulate_erf(erf_lib.LayerOutput(model, 'backbone.stages.3'), images_in,
                                          torch.device('cpu'))
    np.testing.assert_allclose(np.load(out / 'T1D.npy'), direct, rtol=1e-5, atol=1e-12)
    for name, record in zip(('T1D', 'T2D'), records):
        saved = json.loads((out / f'{name}.json').read_text())
        assert saved['layer'] == 'backbone.stages.3' and saved['images'] == 2 and saved['img_size'] == 64
        assert set(saved['area_ratios']) == {'0.2', '0.3', '0.5', '0.99'}
        assert saved['area_ratios'] == record['area_ratios']
        assert np.load(out / f'{name}.npy').shape == (64, 64)
        assert_png(out / f'{name}.png', (3.2 + 0.8, 3.2 + 1.0))
    assert_png(out / 'both.png', (2 * 3.2 + 0.8, 3.2 + 1.0))


def assert_png(path, size_inches, dpi=100):
    image = np.asarray(Image.open(path))
    assert image.shape[:2] == (round(size_inches[1] * dpi), round(size_inches[0] * dpi))
    assert image.std() > 0  # something is drawn


def test_tool_rejects_mismatched_arguments(tmp_path):
    tool = load_tool()
    with pytest.raises(SystemExit):
        tool.parse_args(['a.py', 'b.py', '--names', 'only_one'])
    with pytest.raises(KeyError, match='no submodule'):
        erf_lib.LayerOutput(nn.Conv2d(1, 1, 1), 'backbone.stages.3')
    with pytest.raises(ValueError, match='no backbone.stages'):
        erf_lib.last_stage_name(nn.Conv2d(1, 1, 1))


def test_visualize_tool_redraws_saved_maps(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location('visualize_erf', TOOL.parent / 'visualize_erf.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    square = np.zeros((21, 21))
    square[8:13, 8:13] = 9.0  # log10(9 + 1) = 1: the normalised map is the 5x5 block of ones
    np.save(tmp_path / 'a.npy', square)
    np.save(tmp_path / 'b.npy', np.pad(np.full((3, 3), 99.0), 9))
    ratios = tool.main([str(tmp_path / 'a.npy'), str(tmp_path / 'b.npy'), '--titles', 'A', 'B',
                        '--out', str(tmp_path / 'ab.png')])
    assert ratios[0]['0.5'] == dict(side=5, area_ratio=25 / 441)
    assert ratios[1]['0.99'] == dict(side=3, area_ratio=9 / 441)
    assert 'A: 20% -> 0.0204' in capsys.readouterr().out
    assert_png(tmp_path / 'ab.png', (2 * 3.2 + 0.8, 3.2 + 1.0))
    np.save(tmp_path / 'bad.npy', np.zeros(3))
    with pytest.raises(ValueError, match='2-D ERF map'):
        tool.main([str(tmp_path / 'bad.npy'), '--out', str(tmp_path / 'bad.png')])


def test_a_backbone_layer_runs_the_backbone_only():
    """Detectors and segmentors cannot run on images alone: a backbone layer is read by running the backbone."""

    class Detector(nn.Module):

        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 5, 3, padding=1))

        def forward(self, inputs, data_samples):
            raise AssertionError('the whole detector must not run')

    model = Detector()
    out = erf_lib.LayerOutput(model, 'backbone.0')(torch.ones(1, 3, 8, 8))
    torch.testing.assert_close(out, model.backbone[0](torch.ones(1, 3, 8, 8)))
