"""mmo1d.analysis.angle_study: seed statistics, the angles' alignment with the textures, the figure."""
import math

import pytest
import torch
from PIL import Image

from mmo1d.analysis import angle_study

TEXTURES = (11.25, 56.25, 101.25, 146.25)


def _rad(*degrees: float) -> torch.Tensor:
    return torch.tensor([math.radians(d) for d in degrees], dtype=torch.float64)


def test_seed_stats_is_the_sample_mean_and_deviation() -> None:
    stats = angle_study.seed_stats([70.0, 72.0, 77.0])
    assert stats['mean'] == pytest.approx(73.0)
    assert stats['std'] == pytest.approx(math.sqrt(((3 ** 2) + 1 + 4 ** 2) / 2))
    assert (stats['min'], stats['max'], stats['n']) == (70.0, 77.0, 3)
    assert angle_study.seed_stats([5.0])['std'] == 0.0
    with pytest.raises(ValueError, match='no values'):
        angle_study.seed_stats([])


def test_orientation_gap_wraps_at_180_degrees() -> None:
    gap = angle_study.orientation_gap(torch.tensor([179.0, 10.0, 0.0, 200.0]), torch.tensor([1.0, 100.0, 90.0, 15.0]))
    assert gap.tolist() == pytest.approx([2.0, 90.0, 90.0, 5.0])


def test_alignment_of_known_moves() -> None:
    # Starts on the lattice; the nearest texture orientation of 0 is 11.25, of 22.5 also 11.25, of 45
    # it is 56.25, of 180 - 22.5 = 157.5 it is 146.25.
    initial = {'stem.dw1': _rad(0.0, 22.5, 45.0, 157.5), 'stages.0.0.dwconv': _rad(0.0, 22.5)}
    learned = {'stem.dw1': _rad(9.0, 20.0, 43.0, 157.6),     # toward, toward, away, not moved
               'stages.0.0.dwconv': _rad(-3.0, 0.0 + 37.0)}  # away (to -3), overshoot past 11.25 by more
    groups = {'stem.dw1': 'stem', 'stages.0.0.dwconv': 'stage 0'}
    stats = angle_study.texture_alignment(initial, learned, TEXTURES, groups)
    stem, stage, total = stats['stem'], stats['stage 0'], stats['all']
    assert stem['count'] == 4 and stem['moved_share'] == pytest.approx(0.75)
    assert stem['judged'] == 3 and stem['toward_share'] == pytest.approx(2 / 3)
    assert stem['mean_abs_change_deg'] == pytest.approx((9 + 2.5 + 2 + 0.1) / 4)
    assert stem['mean_gap_start_deg'] == pytest.approx(11.25)
    assert stem['mean_gap_end_deg'] == pytest.approx((2.25 + 8.75 + 13.25 + 11.35) / 4)
    # 37 is 25.75 from 11.25: moved away from its target, though near another texture (56.25 - 37 = 19.25).
    assert stage['toward_share'] == 0.0 and stage['moved_share'] == 1.0
    assert total['count'] == 6 and total['judged'] == 5 and total['toward_share'] == pytest.approx(2 / 5)


def test_ties_are_not_judged() -> None:
    """With the 8 orientations 11.25 + k x 22.5 every lattice direction is halfway between two."""
    eight = [11.25 + 22.5 * k for k in range(8)]
    stats = angle_study.texture_alignment({'a': _rad(0.0, 22.5)}, {'a': _rad(5.0, 30.0)}, eight)['all']
    assert stats['judged'] == 0 and stats['toward_share'] is None and stats['moved_share'] == 1.0


def test_alignment_refuses_mismatched_layers() -> None:
    with pytest.raises(KeyError, match='different layers'):
        angle_study.texture_alignment({'a': _rad(0.0)}, {'b': _rad(0.0)}, TEXTURES)
    with pytest.raises(ValueError, match='learned angles against'):
        angle_study.texture_alignment({'a': _rad(0.0)}, {'a': _rad(0.0, 1.0)}, TEXTURES)
    with pytest.raises(ValueError, match='at least one texture orientation'):
        angle_study.texture_alignment({'a': _rad(0.0)}, {'a': _rad(0.0)}, [])


def test_figure_has_one_panel_per_setting(tmp_path) -> None:
    runs = [_rad(0.0, 10.0, 12.0, 179.9), _rad(56.0, 90.0)]
    panels = {'bilinear learned': {'stem': runs, 'stage 0': [_rad(45.0)]}, 'gaussian learned': {'stem': runs}}
    path = tmp_path / 'fig.png'
    fig = angle_study.draw_texture_angles(str(path), panels, TEXTURES)
    assert len(fig.axes) == 2
    counts = [sum(p.get_height() for p in ax.patches) for ax in fig.axes]
    assert counts == [7, 6]  # every angle in some bin, 179.9 wrapped next to 0
    assert Image.open(path).size == (1000, round(100 * (2.6 * 2 + 0.6)))
