"""mmo1d.benchmark.classifiers: the configs it names exist, missing ones are named, names match the paper."""
from pathlib import Path

import pytest
from mmengine.config import Config

from mmo1d.benchmark.classifiers import (
    NAMES,
    OPTIONAL_VARIANTS,
    VARIANTS,
    config_path,
    display_name,
    drop_path_rate,
)

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / 'configs' / 'mmpretrain')


@pytest.mark.parametrize('arch', ['tiny', 'base'])
@pytest.mark.parametrize('variant', VARIANTS)
def test_every_variant_has_a_classifier_config(arch, variant):
    cfg = Config.fromfile(config_path(CONFIG_DIR, arch, variant))
    assert cfg.default_scope == 'mmpretrain'
    assert cfg.model.type == 'ImageClassifier'


def test_missing_config_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"oriented-convnext-small-1d_32xb128_in1k\.py \(arch 'small'"):
        config_path(str(tmp_path), 'small', '1d')


def test_names_and_drop_path_rate():
    assert set(NAMES) == set(VARIANTS + OPTIONAL_VARIANTS)
    assert [display_name('tiny', v) for v in VARIANTS] == [
        'ConvNeXt-T (mmo1d)', 'ConvNeXt-T-1D (mmo1d)', 'ConvNeXt-T-1D++ (mmo1d)', 'ConvNeXt-T-2D++ (mmo1d)']
    # The spec's ImageNet drop_path_rate: T 0.1, B 0.5.
    assert drop_path_rate(CONFIG_DIR, 'tiny') == pytest.approx(0.1)
    assert drop_path_rate(CONFIG_DIR, 'base') == pytest.approx(0.5)


@pytest.mark.parametrize('variant,name', [('1d', 'ConvNeXt-T-1D-la (mmo1d)'), ('1dpp', 'ConvNeXt-T-1D++-la (mmo1d)')])
def test_learnable_angle_variant_is_the_la_config(variant, name):
    """'1d-la' and '1dpp-la' time the T recipes with learnable bilinear angles; B has no such config."""
    cfg = Config.fromfile(config_path(CONFIG_DIR, 'tiny', f'{variant}-la'))
    assert cfg.model.backbone.variant == variant
    assert cfg.model.backbone.rounding == 'bilinear' and cfg.model.backbone.learnable_angles
    assert display_name('tiny', f'{variant}-la') == name
    with pytest.raises(FileNotFoundError, match=f'{variant}-la'):
        config_path(CONFIG_DIR, 'base', f'{variant}-la')
