"""mmo1d.analysis.footprint: tap counts worked out by hand, and the figure tool."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmo1d.analysis.footprint import footprint

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'visualize_footprint.py'


def test_axis_angles_read_the_centre_row_and_column():
    horizontal = footprint(0.0, 7)
    assert horizontal[3].tolist() == [1] * 7 and horizontal.sum() == 7
    vertical = footprint(90.0, 7)  # sin(90) is exactly 1 in float32: the column of the output pixel
    assert vertical[:, 3].tolist() == [1] * 7 and vertical.sum() == 7


def test_45_degrees_by_hand():
    """K=31 at 45 degrees, s = float32 sin = cos = 0.70710677; a(e) = floor(e * s) for e = 1..15 takes the
    11 values 0..10. Truncation: tap d = +-e reads (-+a, +-a), so the taps d = -1, 0, 1 share the
    output pixel and 21 pixels are read. Floor: d = e reads (-(a + 1), a), d = -e reads (a, -(a + 1)):
    11 + 11 pixels off the diagonal plus the output pixel, 23."""
    trunc = footprint(45.0, 31, 'trunc')
    assert np.count_nonzero(trunc) == 21 and trunc[15, 15] == 3 and trunc.sum() == 31
    assert all(trunc[15 - a, 15 + a] >= 1 and trunc[15 + a, 15 - a] >= 1 for a in range(11))
    floor = footprint(45.0, 31, 'floor')
    assert np.count_nonzero(floor) == 23 and floor[15, 15] == 1 and floor.sum() == 31
    assert floor[14, 15] == 1 and floor[15, 14] == 1  # d = +1 and d = -1


def test_bad_arguments():
    with pytest.raises(ValueError, match='odd'):
        footprint(0.0, 8)
    with pytest.raises(ValueError, match='rounding'):
        footprint(0.0, 7, 'round')


def test_tool_draws_both_roundings(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location('visualize_footprint', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tmp_path / 'fp.png'
    pixels = tool.main(['--kernel-size', '31', '--angles', '0', '45', '90', '--out', str(out)])
    assert pixels == {'trunc': [31, 21, 31], 'floor': [31, 23, 31]}
    assert '| trunc | 31 | 21 | 31 |' in capsys.readouterr().out
    # 3 panels of max(1.2, 31 * 0.065) inches plus margins, 2 rows.
    panel = 31 * 0.065
    image = np.asarray(Image.open(out))
    assert image.shape[:2] == (round((2 * (panel + 0.4) + 0.7) * 100), round((3 * panel + 0.9) * 100))
    assert image.std() > 0
