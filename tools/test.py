"""Test (and evaluate) a checkpoint with an mmdet, mmseg or mmpretrain config.

The config's ``default_scope`` decides the toolbox. Arguments follow mmdet's and mmseg's
``tools/test.py``.

Examples::

    python tools/test.py CONFIG CHECKPOINT                      # metrics of the test split
    python tools/test.py CONFIG CHECKPOINT --tta                # test-time augmentation
    python tools/test.py CONFIG CHECKPOINT --out results.pkl    # also dump the predictions
    python tools/test.py CONFIG CHECKPOINT --show-dir vis       # paint predictions
    bash tools/dist_test.sh CONFIG CHECKPOINT 8                 # 8 GPUs
"""
import argparse
import inspect
from copy import deepcopy
from typing import Optional, Sequence

from mmengine.config import Config, ConfigDict, DictAction
from mmengine.registry import HOOKS, METRICS
from mmengine.runner import Runner

from mmo1d.utils import allow_mmengine_checkpoints
from mmo1d.utils.quiet import quiet_upstream
from mmo1d.utils.tool_utils import (
    CFG_OPTIONS_HELP,
    LAUNCHERS,
    build_runner,
    check_checkpoint_path,
    export_local_rank,
    last_transform_with_flip_keys,
    load_config,
)

#: Test-time-augmentation wrappers used when a config defines no ``tta_model``.
DEFAULT_TTA_MODELS = {
    'mmdet': dict(type='DetTTAModel',
                  tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100)),
    'mmseg': dict(type='SegTTAModel'),
    'mmpretrain': dict(type='AverageClsScoreTTA'),
}
PICKLE_SUFFIXES = ('.pkl', '.pickle')


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Command-line arguments (``argv`` defaults to ``sys.argv[1:]``)."""
    parser = argparse.ArgumentParser(
        description='Test and evaluate a checkpoint (mmdet, mmseg or mmpretrain config)')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='directory for the log and the metrics json '
                        '(default: the config\'s work_dir, else ./work_dirs/<config name>)')
    parser.add_argument('--out', help='save the predictions: a .pkl/.pickle file (any toolbox), or '
                        'for segmentation a directory that receives one PNG per image')
    parser.add_argument('--show', action='store_true', help='display the predictions')
    parser.add_argument('--show-dir', help='directory where every test image, painted with the '
                        'predictions, is saved')
    parser.add_argument('--wait-time', type=float, default=2,
                        help='seconds each image is shown with --show')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help=CFG_OPTIONS_HELP)
    parser.add_argument('--launcher', choices=LAUNCHERS, default='none', help='job launcher')
    parser.add_argument('--tta', action='store_true',
                        help='test-time augmentation: the config\'s tta_model and tta_pipeline '
                        '(multi-scale + flip in the mmseg configs), else horizontal flip')
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK instead.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    export_local_rank(args.local_rank)
    return args


def enable_visualization(cfg: Config, show: bool, show_dir: Optional[str],
                         wait_time: float) -> None:
    """Turn on the config's visualization hook, whichever toolbox it comes from.

    mmdet's hook takes ``draw`` and ``test_out_dir``; mmpretrain's takes ``enable`` and
    ``out_dir``; mmseg's takes ``draw`` and saves through the visualizer's ``save_dir``. Every
    test image is painted.

    Raises:
        KeyError: the config has no ``default_hooks.visualization``.
    """
    hooks = cfg.get('default_hooks', {})
    if 'visualization' not in hooks:
        raise KeyError('--show/--show-dir need a visualization hook in the config: '
                       'default_hooks = dict(visualization=dict(type=...VisualizationHook))')
    hook = hooks['visualization']
    scope = hook.get('_scope_', cfg.get('default_scope'))
    with HOOKS.switch_scope_and_registry(scope) as registry:
        hook_cls = registry.get(hook['type'])
    if hook_cls is None:
        raise KeyError(f'visualization hook {hook["type"]!r} is not registered in scope {scope!r}')
    params = inspect.signature(hook_cls).parameters
    for flag in ('draw', 'enable'):
        if flag in params:
            hook[flag] = True
    if 'interval' in params:
        hook['interval'] = 1  # paint every test image, not one in ``interval``
    if show:
        hook['show'] = True
        hook['wait_time'] = wait_time
    if show_dir is not None:
        if 'test_out_dir' in params:
            hook['test_out_dir'] = show_dir
        elif 'out_dir' in params:
            hook['out_dir'] = show_dir
        else:
            cfg.visualizer['save_dir'] = show_dir


def enable_tta(cfg: Config) -> None:
    """Wrap the model in the config's ``tta_model`` and test with its ``tta_pipeline``.

    Without them, the toolbox's TTA wrapper and a horizontal-flip pipeline built from the test
    pipeline are used, as mmdet's and mmpretrain's test tools do.

    Raises:
        KeyError: no ``tta_model`` in the config and no default for its scope.
        ValueError: mmdet's ``DetTTAModel`` with a mask head (it cannot merge masks).
    """
    scope = cfg.get('default_scope')
    if 'tta_model' not in cfg:
        if scope not in DEFAULT_TTA_MODELS:
            raise KeyError(f'--tta: the config has no tta_model and scope {scope!r} has no default '
                           f'(known: {sorted(DEFAULT_TTA_MODELS)})')
        cfg.tta_model = DEFAULT_TTA_MODELS[scope]
    if cfg.tta_model.get('type') == 'DetTTAModel' and cfg.model.get('roi_head', {}).get('mask_head'):
        raise ValueError('--tta: mmdet\'s DetTTAModel merges boxes only and refuses models that '
                         'predict masks; test this instance segmentation config without --tta')
    if 'tta_pipeline' not in cfg:
        dataset = cfg.test_dataloader.dataset
        while 'dataset' in dataset:
            dataset = dataset['dataset']
        pipeline = deepcopy(dataset.pipeline)
        pipeline[-1] = dict(
            type='TestTimeAug',
            transforms=[[dict(type='RandomFlip', prob=1.),
                         dict(type='RandomFlip', prob=0.)],
                        [last_transform_with_flip_keys(pipeline)]])
        cfg.tta_pipeline = pipeline
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline


def set_prediction_dir(cfg: Config, out: str) -> None:
    """Make a segmentation evaluator write one prediction PNG per image into ``out``.

    Raises:
        ValueError: the test evaluator has no ``output_dir`` (only mmseg's IoUMetric has).
    """
    evaluators = cfg.test_evaluator if isinstance(cfg.test_evaluator, list) else [cfg.test_evaluator]
    for evaluator in evaluators:
        if evaluator.get('type') != 'IoUMetric':
            raise ValueError(f'--out {out}: a directory works only with mmseg\'s IoUMetric (got '
                             f'{evaluator.get("type")!r}); give a .pkl file to dump predictions')
        evaluator['output_dir'] = out
        evaluator['keep_results'] = True


def add_dump_metric(runner: Runner, out: str) -> None:
    """Append a metric that pickles every prediction to ``out`` (mmdet's, else mmengine's)."""
    with METRICS.switch_scope_and_registry(runner.cfg.get('default_scope')) as registry:
        dump_type = 'DumpDetResults' if registry.get('DumpDetResults') is not None else 'DumpResults'
        runner.test_evaluator.metrics.append(registry.build(dict(type=dump_type, out_file_path=out)))


def main(argv: Optional[Sequence[str]] = None) -> dict:
    """Test with the config, checkpoint and options given on the command line.

    Returns:
        The metrics of the test split.
    """
    args = parse_args(argv)
    check_checkpoint_path(args.checkpoint, 'checkpoint')
    cfg = load_config(args.config, args.cfg_options, args.launcher, args.work_dir)
    cfg.load_from = args.checkpoint
    if args.show or args.show_dir is not None:
        enable_visualization(cfg, args.show, args.show_dir, args.wait_time)
    if args.tta:
        enable_tta(cfg)
    dump_file = args.out is not None and args.out.endswith(PICKLE_SUFFIXES)
    if args.out is not None and not dump_file:
        set_prediction_dir(cfg, args.out)
    allow_mmengine_checkpoints()
    runner = build_runner(cfg)
    if dump_file:
        add_dump_metric(runner, args.out)
    return runner.test()


if __name__ == '__main__':
    quiet_upstream()
    main()
