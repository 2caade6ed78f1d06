"""Silence the known-harmless messages that mmengine, mmseg and setuptools print on every run.

The entry points (``tools/``, ``demo/image_demo.py``) call :func:`quiet_upstream` first. Each
message is matched by its text and its category (warnings) or logger and level (mmengine's log),
so any other warning, of the toolboxes or of mmo1d, still shows. ``docs/inference.md`` lists what
is silenced, what is not, and why.
"""
import logging
import re
import warnings
from typing import NamedTuple, Optional, Sequence, Type

from mmengine.logging import MMLogger


class UpstreamWarning(NamedTuple):
    """A warning to ignore.

    Attributes:
        message: regex matched at the start of the warning's text.
        category: the warning's class.
        module: regex matched against the whole name of the module the warning is attributed to
            (``None``: any module).
    """

    message: str
    category: Type[Warning]
    module: Optional[str]


UPSTREAM_WARNINGS = (
    # setuptools, when mmengine's package_utils imports (and reloads) pkg_resources to
    # find the config's toolbox; the warning is attributed to the importer, mmengine or importlib.
    UpstreamWarning(r'pkg_resources is deprecated as an API', UserWarning, None),
    # mmseg's BaseDecodeHead builds its losses through its own deprecated helper.
    UpstreamWarning(r'``build_loss`` would be deprecated soon', UserWarning, r'mmseg\.models\.builder'),
    # mmseg's CrossEntropyLoss, whenever avg_non_ignore is left at False: the official recipes do.
    UpstreamWarning(r'Default ``avg_non_ignore`` is False', UserWarning,
                    r'mmseg\.models\.losses\.cross_entropy_loss'),
    # mmengine's Visualizer, built by inference helpers without a save_dir: nothing is saved by it.
    UpstreamWarning(r"Failed to add <class 'mmengine\.visualization\.vis_backend\.LocalVisBackend'>, "
                    r'please provide the `save_dir` argument', UserWarning, r'mmengine\.visualization\.visualizer'),
)
# mmseg has no "function" registry: its inferencers find pseudo_collate in mmengine's, as intended,
# after mmengine's registry logs this at WARNING level.
UPSTREAM_LOG_MESSAGES = (r'Failed to search registry with scope "mmseg" in the "function" registry tree\.', )


class UpstreamLogFilter(logging.Filter):
    """Drop the WARNING records whose text starts with one of ``patterns``.

    Args:
        patterns: regexes matched at the start of a record's text (default:
            :data:`UPSTREAM_LOG_MESSAGES`).
    """

    def __init__(self, patterns: Sequence[str] = UPSTREAM_LOG_MESSAGES) -> None:
        super().__init__()
        self.patterns = [re.compile(p) for p in patterns]

    def filter(self, record: logging.LogRecord) -> bool:
        """``False`` (drop) for a listed WARNING record, ``True`` for anything else."""
        if record.levelno != logging.WARNING:
            return True
        text = record.getMessage()
        return not any(p.match(text) for p in self.patterns)


def quiet_upstream() -> None:
    """Ignore :data:`UPSTREAM_WARNINGS` and filter :data:`UPSTREAM_LOG_MESSAGES` out of the log.

    The warning filters are process-wide (and inherited by forked data-loader workers). The log
    filter goes on mmengine's current logger, the ``mmengine`` one unless a Runner has made its
    own, which is where the listed record is written. Calling it again adds nothing.
    """
    for entry in UPSTREAM_WARNINGS:
        warnings.filterwarnings('ignore', message=entry.message, category=entry.category, module=entry.module or '')
    logger = MMLogger.get_current_instance()
    if not any(isinstance(f, UpstreamLogFilter) for f in logger.filters):
        logger.addFilter(UpstreamLogFilter())
