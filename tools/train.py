"""Train a model from an mmdet, mmseg or mmpretrain config with mmengine's Runner.

The config's ``default_scope`` decides the toolbox. Arguments follow mmdet's and mmseg's
``tools/train.py``.

Examples::

    python tools/train.py configs/mmseg/oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py
    python tools/train.py CONFIG --work-dir work_dirs/run1 --resume          # resume the latest
    python tools/train.py CONFIG --resume work_dirs/run1/iter_4000.pth       # resume this one
    bash tools/dist_train.sh CONFIG 8                                        # 8 GPUs
"""
import argparse
from typing import Optional, Sequence

from mmengine.config import Config, DictAction

from mmo1d.utils import allow_mmengine_checkpoints
from mmo1d.utils.quiet import quiet_upstream
from mmo1d.utils.tool_utils import (
    CFG_OPTIONS_HELP,
    LAUNCHERS,
    build_runner,
    check_checkpoint_path,
    export_local_rank,
    load_config,
)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line arguments (``argv`` defaults to ``sys.argv[1:]``)."""
    parser = argparse.ArgumentParser(description='Train a model (mmdet, mmseg or mmpretrain config)')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='directory for logs and checkpoints '
                        '(default: the config\'s work_dir, else ./work_dirs/<config name>)')
    parser.add_argument('--amp', action='store_true',
                        help='enable automatic mixed precision (AmpOptimWrapper, dynamic loss scale)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the actual total batch size over the '
                        'config\'s auto_scale_lr.base_batch_size')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume training: from the given checkpoint, or, without a path, from '
                        'the latest checkpoint in the work directory')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help=CFG_OPTIONS_HELP)
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none', help='job launcher')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK instead.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    export_local_rank(args.local_rank)
    return args


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply ``--amp``, ``--auto-scale-lr`` and ``--resume`` to the config.

    Raises:
        KeyError: ``--auto-scale-lr`` with a config that has no ``auto_scale_lr.base_batch_size``.
        FileNotFoundError: ``--resume`` with a checkpoint path that does not exist.
    """
    if args.amp:
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        if 'base_batch_size' not in cfg.get('auto_scale_lr', {}):
            raise KeyError('--auto-scale-lr needs auto_scale_lr = dict(base_batch_size=...) in the '
                           'config (the total batch size its learning rate was set for)')
        cfg.auto_scale_lr.enable = True
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        check_checkpoint_path(args.resume, '--resume checkpoint')
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Train with the config and options given on the command line."""
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options, args.launcher, args.work_dir)
    cfg = merge_args(cfg, args)
    allow_mmengine_checkpoints()
    runner = build_runner(cfg)
    runner.train()


if __name__ == '__main__':
    quiet_upstream()
    main()
