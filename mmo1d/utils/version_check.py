"""The mmengine and mmcv versions mmo1d works with, checked on ``import mmo1d`` as mmdet and mmseg do.

The ranges are also the ``install_requires`` of ``setup.py``, which loads this file by path: it
imports nothing at module level beyond the standard library. Tested with mmengine 0.10.7 and
mmcv 2.1.0; the mmcv range is that of mmdet 3.3 and mmseg 1.2.
"""
import importlib
import importlib.util
from typing import Dict, List, Optional

#: Package name -> (minimum version, first version excluded).
VERSION_RANGES = {
    'mmengine': ('0.10.0', '1.0.0'),
    'mmcv': ('2.0.0rc4', '2.2.0'),
}
_DISPLAY = {'mmengine': 'MMEngine', 'mmcv': 'MMCV'}


def requirements() -> List[str]:
    """The ranges as pip requirements, e.g. ``'mmcv>=2.0.0rc4,<2.2.0'``."""
    return [f'{name}>={low},<{high}' for name, (low, high) in VERSION_RANGES.items()]


def installed_versions() -> Dict[str, str]:
    """The versions of the packages of :data:`VERSION_RANGES` that are installed."""
    return {name: importlib.import_module(name).__version__
            for name in VERSION_RANGES if importlib.util.find_spec(name) is not None}


def check_versions(found: Optional[Dict[str, str]] = None) -> None:
    """Assert that each found version lies in its range of :data:`VERSION_RANGES`.

    Args:
        found: package name -> version (default: :func:`installed_versions`); packages that are
            not named are not checked.

    Raises:
        AssertionError: naming the package, the version found and the range to install.
    """
    from mmengine.utils import digit_version

    for name, version in (installed_versions() if found is None else found).items():
        low, high = VERSION_RANGES[name]
        assert digit_version(low) <= digit_version(version) < digit_version(high), \
            f'{_DISPLAY[name]}=={version} is used but incompatible with mmo1d. ' \
            f'Please install {name}>={low}, <{high}.'
