"""mmo1d.utils.quiet: the listed upstream messages are dropped, others of the same kind are kept."""
import logging
import os
import subprocess
import sys
import warnings

import pytest
from mmengine.logging import MMLogger

from mmo1d.utils.quiet import UpstreamLogFilter, quiet_upstream

# mmengine's own registry code logs the fallback for a scope whose toolbox has no "function"
# registry: mmseg (listed) and mmdet (not listed, so it must still show).
REGISTRY_FALLBACK = """
import sys
from mmengine.registry import FUNCTIONS
from mmo1d.utils.quiet import quiet_upstream
if sys.argv[1] == 'quiet':
    quiet_upstream()
for scope in ('mmseg', 'mmdet'):
    with FUNCTIONS.switch_scope_and_registry(scope):
        pass
"""


def _fallback_log(mode: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONWARNINGS'}
    proc = subprocess.run([sys.executable, '-c', REGISTRY_FALLBACK, mode], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_the_mmseg_registry_fallback_is_dropped_and_others_are_kept() -> None:
    mmseg = 'Failed to search registry with scope "mmseg" in the "function" registry tree.'
    mmdet = 'Failed to search registry with scope "mmdet" in the "function" registry tree.'
    loud, quiet = _fallback_log('loud'), _fallback_log('quiet')
    assert mmseg in loud and mmdet in loud
    assert mmseg not in quiet and mmdet in quiet


def test_log_filter_drops_listed_warnings_only() -> None:
    record = logging.LogRecord('mmengine', logging.WARNING, __file__, 1,
                               'Failed to search registry with scope "mmseg" in the "function" registry tree. As a '
                               'workaround, ...', None, None)
    assert not UpstreamLogFilter().filter(record)
    record.levelno = logging.ERROR
    assert UpstreamLogFilter().filter(record)
    record.levelno, record.msg = logging.WARNING, record.msg.replace('"function"', '"model"')
    assert UpstreamLogFilter().filter(record)


@pytest.mark.parametrize('message, module, shown', [
    ('``build_loss`` would be deprecated soon, please use ``mmseg.registry.MODELS.build()``',
     'mmseg.models.builder', False),
    ('Default ``avg_non_ignore`` is False, if you would like to ...', 'mmseg.models.losses.cross_entropy_loss', False),
    ('pkg_resources is deprecated as an API. See ...', 'mmengine.utils.package_utils', False),
    ('pkg_resources is deprecated as an API. See ...', 'importlib', False),
    # The same texts from other modules, and other texts from the same modules, still show.
    ('``build_loss`` would be deprecated soon, please use ...', 'mmo1d.models', True),
    ('Default ``avg_non_ignore`` is False, if you would like to ...', 'mmseg.models.builder', True),
    ('something else', 'mmseg.models.losses.cross_entropy_loss', True),
])
def test_warning_filters_match_text_and_module(message: str, module: str, shown: bool) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        quiet_upstream()
        warnings.warn_explicit(message, UserWarning, 'upstream.py', 1, module=module)
        warnings.warn_explicit(message, DeprecationWarning, 'upstream.py', 2, module=module)
    # Only UserWarning is listed: the same text as another category is never silenced.
    assert [(w.category, w.lineno) for w in caught] == ([(UserWarning, 1)] if shown else []) + [(DeprecationWarning, 2)]


def test_calling_twice_adds_nothing() -> None:
    logger = MMLogger.get_current_instance()
    with warnings.catch_warnings():
        quiet_upstream()
        count = len(warnings.filters)
        quiet_upstream()
        assert len(warnings.filters) == count
    filters = [f for f in logger.filters if isinstance(f, UpstreamLogFilter)]
    assert len(filters) == 1
    logger.removeFilter(filters[0])
