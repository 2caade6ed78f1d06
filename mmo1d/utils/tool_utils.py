"""Helpers shared by ``tools/train.py`` and ``tools/test.py``: config loading, runner building.

The tools work for mmdet, mmseg and mmpretrain configs alike: the config's ``default_scope`` picks
the toolbox, which mmengine's registries import on demand, so nothing here imports a toolbox.
"""
import os
import os.path as osp
from typing import Optional, Sequence

from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

CFG_OPTIONS_HELP = (
    'override settings of the config: key=value pairs (e.g. train_cfg.max_iters=100), merged '
    'into the config; a list value is written key="[a,b]" or key=a,b, nested lists and tuples '
    'like key="[(a,b),(c,d)]"; quote them and leave no spaces.')
LAUNCHERS = ('none', 'pytorch', 'slurm', 'mpi')


def export_local_rank(local_rank: int) -> None:
    """Set ``LOCAL_RANK`` from ``--local_rank`` unless a launcher (torchrun, slurm) already did."""
    os.environ.setdefault('LOCAL_RANK', str(local_rank))


def load_config(path: str, cfg_options: Optional[dict], launcher: str,
                work_dir: Optional[str]) -> Config:
    """Load a config, merge ``--cfg-options``, set the launcher and the work directory.

    The work directory is, in order of priority: ``work_dir``, the config's own ``work_dir``,
    ``./work_dirs/<config name>``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file not found: {path}')
    cfg = Config.fromfile(path)
    cfg.launcher = launcher
    if cfg_options is not None:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(path))[0])
    return cfg


def check_checkpoint_path(path: str, what: str) -> None:
    """Fail early, with the argument's name, if a local checkpoint path does not exist.

    Remote paths (``https://``, ``s3://``, ``torchvision://``...) are left to mmengine.
    """
    if '://' not in path and not osp.isfile(path):
        raise FileNotFoundError(f'{what} not found: {path}')


def build_runner(cfg: Config) -> Runner:
    """Build the default mmengine ``Runner``, or ``cfg.runner_type`` from the registry."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)


def last_transform_with_flip_keys(pipeline: Sequence[dict]) -> dict:
    """The pipeline's last (packing) transform, with ``flip`` keys added to its ``meta_keys``.

    Test pipelines of mmdet list their ``meta_keys`` explicitly without the flip keys, which
    test-time augmentation needs to undo the flip.
    """
    last = dict(pipeline[-1])
    if 'meta_keys' in last:
        keys = tuple(last['meta_keys'])
        last['meta_keys'] = keys + tuple(k for k in ('flip', 'flip_direction') if k not in keys)
    return last
