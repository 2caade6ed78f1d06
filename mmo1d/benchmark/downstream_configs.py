"""The configs of the downstream benchmark, resolved and pointed at the demo data.

Two tasks, each with its baseline: mmseg's UperNet ConvNeXt-T config and mmdet's Cascade Mask
R-CNN ConvNeXt-T config (the stock ones, from the installed packages' ``.mim/configs``, with
mmpretrain's ConvNeXt), and the T-1D, T-1D++, T-2D++ (and T, the 2D design) recipes of
``configs/mmseg`` and ``configs/mmdet``. The small demo configs of ``configs/demo`` (ConvNeXt-demo
2D as the baseline, 1D) run on a CPU, to check the code path.

Every config keeps its model, train pipeline, optim wrapper (AMP included) and runtime settings
(``env_cfg.cudnn_benchmark``), plus a run's own ``options`` (e.g. ``seg-t-2dpp-nchw``: the 7x7
depthwise convolutions in NCHW; ``seg-t-1dpp-cl-out``: the backbone's outputs channels_last);
:func:`prepare_config` changes only what the benchmark needs: the data root (the demo data of
``tools/dataset_converters/make_demo_data.py``), 2 images per GPU, the same number of loader
workers and an infinite sampler with a fixed seed for every config (the same sequence of images
and augmentations), no pretrained checkpoint (no network), no validation or test.
"""
import importlib.util
import os.path as osp
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mmengine.config import Config, ConfigDict
from mmengine.utils import import_modules_from_strings

#: The stock configs of the two tasks, as ``<package>::<path under its .mim/configs>``.
STOCK_CONFIGS = {
    'seg': 'mmseg::convnext/convnext-tiny_upernet_8xb2-amp-160k_ade20k-512x512.py',
    'det': 'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
}
#: mmo1d's configs, relative to the repository's ``configs/``, by task and variant.
OUR_CONFIGS = {
    'seg': 'mmseg/oriented-convnext-tiny-{}_upernet_8xb2-amp-160k_ade20k-512x512.py',
    'det': 'mmdet/cascade-mask-rcnn_oriented-convnext-t-{}_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
}
DEMO_CONFIGS = {
    'seg': 'demo/oriented-convnext-demo-{}_upernet_1xb8-500iter_ade20k-demo-128x128.py',
    'det': 'demo/cascade-mask-rcnn_oriented-convnext-demo-{}_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py',
}
TASK_NAMES = {'seg': 'UperNet, ADE20K-style demo data', 'det': 'Cascade Mask R-CNN, COCO-style demo data'}
#: Where each task's data lies under the folder written by make_demo_data.py.
DATA_ROOTS = {'seg': 'ade/ADEChallengeData2016', 'det': 'coco/'}
#: pip's name of the packages whose import name differs.
PIP_NAMES = {'mmseg': 'mmsegmentation', 'mmcv': 'mmcv'}
#: Versions tested together (README.md, Installation).
TESTED = {'mmengine': '0.10.7', 'mmcv': '2.1.0', 'mmdet': '3.3.0', 'mmseg': '1.2.2', 'mmpretrain': '1.2.0'}


@dataclass(frozen=True)
class DownstreamRun:
    """One config of the benchmark.

    Attributes:
        name: short name, e.g. ``'det-t-1dpp'``.
        task: ``'seg'`` or ``'det'``.
        config: ``'<package>::<path>'`` for a stock config, else a path relative to ``configs/``.
        baseline: whether the other configs of the task are compared with this one.
        options: config options set on top of the file, as ``(dotted key, value)`` pairs (what
            ``--cfg-options`` would set).
    """
    name: str
    task: str
    config: str
    baseline: bool = False
    options: Tuple[Tuple[str, Any], ...] = ()


#: Runs of our recipes with one backbone option set: suffix -> (variants, (dotted key, value)).
OPTION_RUNS = {
    # The 7x7 depthwise convolutions through ATen's NCHW kernel whatever cudnn.benchmark says.
    'nchw': (('2dpp', '2d'), ('model.backbone.depthwise_layout', 'nchw')),
    # The backbone's outputs channels_last-strided, as its stages compute them.
    'cl-out': (('1d', '1dpp', '2dpp'), ('model.backbone.out_channels_last', True)),
}


def _runs() -> Dict[str, DownstreamRun]:
    runs = {}
    for task in ('seg', 'det'):
        runs[f'{task}-stock'] = DownstreamRun(f'{task}-stock', task, STOCK_CONFIGS[task], baseline=True)
        for variant in ('1d', '1dpp', '2dpp', '2d'):
            runs[f'{task}-t-{variant}'] = DownstreamRun(f'{task}-t-{variant}', task, OUR_CONFIGS[task].format(variant))
        for suffix, (variants, option) in OPTION_RUNS.items():
            for variant in variants:
                name = f'{task}-t-{variant}-{suffix}'
                runs[name] = DownstreamRun(name, task, OUR_CONFIGS[task].format(variant), options=(option, ))
        for variant in ('2d', '1d'):
            runs[f'{task}-demo-{variant}'] = DownstreamRun(f'{task}-demo-{variant}', task,
                                                           DEMO_CONFIGS[task].format(variant), baseline=variant == '2d')
    return runs


#: Every config the benchmark knows, by name.
RUNS: Dict[str, DownstreamRun] = _runs()
#: The GPU default: the stock configs and the T-1D, T-1D++ and T-2D++ recipes.
DEFAULT_RUNS: Tuple[str, ...] = tuple(f'{task}-{v}' for task in ('seg', 'det')
                                      for v in ('stock', 't-1d', 't-1dpp', 't-2dpp'))
#: The CPU default (a smoke run): the small demo configs, fp32.
SMOKE_RUNS: Tuple[str, ...] = ('seg-demo-2d', 'seg-demo-1d', 'det-demo-2d', 'det-demo-1d')


def resolve_config(run: DownstreamRun, config_root: str) -> str:
    """The config file of ``run``: a stock one in the installed package's ``.mim/configs``, ours under
    ``config_root``.

    Raises:
        ModuleNotFoundError: the package of a stock config is not installed.
        FileNotFoundError: the config file does not exist.
    """
    if '::' in run.config:
        package, rel = run.config.split('::', 1)
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f'{run.name}: the stock config {run.config} comes with {package}, which is not '
                                      f'installed (pip install {PIP_NAMES.get(package, package)}=={TESTED[package]})')
        path = osp.join(list(spec.submodule_search_locations)[0], '.mim', 'configs', rel)
        if not osp.isfile(path):
            raise FileNotFoundError(f'{run.name}: {run.config} is not in the installed {package} ({path} missing; '
                                    f'tested with {package} {TESTED[package]})')
        return path
    path = osp.join(config_root, run.config)
    if not osp.isfile(path):
        raise FileNotFoundError(f'{run.name}: config not found: {path}')
    return path


def _types(node: Any) -> Iterator[str]:
    """Every ``type`` string in a nested config."""
    if isinstance(node, dict):
        if isinstance(node.get('type'), str):
            yield node['type']
        for value in node.values():
            yield from _types(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _types(value)


def required_modules(cfg: Config) -> Dict[str, List[str]]:
    """The top-level modules a config imports, each with what needs it: its ``default_scope``, its
    ``custom_imports`` and the scopes of its model's types (``'mmpretrain.ConvNeXt'``)."""
    needs: Dict[str, List[str]] = {}
    if cfg.get('default_scope'):
        needs.setdefault(cfg.default_scope, []).append(f'default_scope {cfg.default_scope!r}')
    imports = cfg.get('custom_imports', {}).get('imports', [])
    for module in [imports] if isinstance(imports, str) else imports:
        needs.setdefault(module.split('.')[0], []).append(f'custom_imports {module!r}')
    for type_name in _types(cfg.get('model', {})):
        if '.' in type_name:
            needs.setdefault(type_name.split('.')[0], []).append(f'model type {type_name!r}')
    return {module: list(dict.fromkeys(why)) for module, why in needs.items()}


def check_required_modules(cfg: Config, path: str) -> None:
    """Fail, naming the package and what needs it, if a module the config needs is not installed.

    Raises:
        ModuleNotFoundError: a required module is missing.
    """
    for module, why in required_modules(cfg).items():
        if importlib.util.find_spec(module) is None:
            pin = f'=={TESTED[module]}' if module in TESTED else ''
            raise ModuleNotFoundError(f'{path} needs {module} ({", ".join(why)}), which is not installed: '
                                      f'pip install {PIP_NAMES.get(module, module)}{pin}')


def _drop_pretrained(node: Any, where: str, dropped: Dict[str, str]) -> None:
    """Remove every ``init_cfg`` of type ``Pretrained`` from a nested config (the module then gets
    its class's own initialisation), noting its checkpoint."""
    if isinstance(node, dict):
        init_cfg = node.get('init_cfg')
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            dropped[where] = init_cfg.get('checkpoint')
            node.pop('init_cfg')
        for key, value in node.items():
            _drop_pretrained(value, f'{where}.{key}' if where else key, dropped)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            _drop_pretrained(value, f'{where}.{i}', dropped)


def load_config(run: DownstreamRun, config_root: str) -> Tuple[Config, str]:
    """Load the config of ``run`` after checking that what it imports is installed, then import its
    ``custom_imports`` (as ``Config.fromfile`` does)."""
    path = resolve_config(run, config_root)
    cfg = Config.fromfile(path, import_custom_modules=False)
    check_required_modules(cfg, path)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    return cfg, path


def prepare_config(cfg: Config, run: DownstreamRun, data_root: str, work_dir: str, batch_size: int = 2,
                   workers: int = 2, seed: int = 0, init_loss_scale: Optional[float] = None) -> Dict[str, Any]:
    """Point ``cfg`` (in place) at the demo data under ``data_root`` and set it up for timing.

    Args:
        cfg: the loaded config of ``run``.
        run: the run.
        data_root: the folder written by ``make_demo_data.py`` (``ade/`` and ``coco/`` in it).
        work_dir: mmengine's work directory of the run (logs).
        batch_size: images per GPU.
        workers: data loader processes.
        seed: the seed of the runner and the sampler.
        init_loss_scale: the initial scale of an AMP config's dynamic loss scaling (the config's own
            when None). Without pretrained weights the layer norms meet zero-variance input on the
            zero-padded pixels of a batch, whose float16 gradients then overflow at GradScaler's
            usual scales: the skipped steps skip the optimizer too (no AdamW state), so the timings
            and peaks of configs that skipped different numbers of steps do not compare.

    Returns:
        What was changed that a reader of the results needs: the dropped pretrained checkpoints and
        the initial loss scale where it was set.

    Raises:
        FileNotFoundError: the task's demo data is missing.
        ValueError: the config's training set has no ``data_root`` to point at the demo data.
    """
    root = osp.join(data_root, DATA_ROOTS[run.task])
    if not osp.isdir(root):
        raise FileNotFoundError(f'demo data not found: {root} (write it with python '
                                f'tools/dataset_converters/make_demo_data.py --out {data_root})')
    if run.options:
        cfg.merge_from_dict(dict(run.options))
    loader = cfg.train_dataloader
    if 'data_root' not in loader.get('dataset', {}):
        raise ValueError(f'{run.name}: train_dataloader.dataset has no data_root to point at the demo data '
                         f'(dataset type {loader.get("dataset", {}).get("type")!r})')
    loader.dataset.data_root = root
    loader.batch_size = batch_size
    loader.num_workers = workers
    loader.persistent_workers = workers > 0
    loader.sampler = ConfigDict(type='InfiniteSampler', shuffle=True, seed=seed)
    dropped: Dict[str, Optional[str]] = {}
    _drop_pretrained(cfg.model, 'model', dropped)
    changed: Dict[str, Any] = {'dropped_pretrained': dropped}
    if run.options:
        changed['options'] = dict(run.options)
    if init_loss_scale is not None and not init_loss_scale > 0:
        raise ValueError(f'init_loss_scale must be positive, got {init_loss_scale}')
    if init_loss_scale is not None and cfg.optim_wrapper.get('type', '').split('.')[-1] == 'AmpOptimWrapper':
        cfg.optim_wrapper.loss_scale = dict(init_scale=float(init_loss_scale))
        changed['init_loss_scale'] = float(init_loss_scale)
    cfg.load_from = None
    cfg.resume = False
    for key in ('val_dataloader', 'val_cfg', 'val_evaluator', 'test_dataloader', 'test_cfg', 'test_evaluator'):
        cfg[key] = None
    cfg.work_dir = work_dir
    cfg.launcher = 'none'
    cfg.randomness = dict(seed=seed)
    # A name of its own: mmengine's DefaultScope, logger and visualizer are instances by name, and
    # several runs in one process must not share the first one's scope.
    cfg.experiment_name = f'downstream_{run.name}_{uuid.uuid4().hex[:8]}'
    return changed
