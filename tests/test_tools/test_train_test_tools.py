"""tools/train.py, tools/test.py and tools/dist_*.sh on the CPU demo configs and demo data.

One training and one test run go through the command line (``python tools/train.py ...``), as
``.dev_scripts/gpu_downstream.sh`` calls them; the other runs call the tools' ``main(argv)`` in this
process with the same arguments, which saves each a fresh interpreter importing the toolboxes.
"""
import importlib.util
import itertools
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Optional

import pytest
import torch

from mmo1d.utils import allow_mmengine_checkpoints

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / 'tools'
DEMO = REPO / 'configs' / 'demo'
SEG_CFG = DEMO / 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
DET_CFG = DEMO / 'cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py'
SEG_LA_CFG = DEMO / 'oriented-convnext-demo-1d-la_upernet_1xb8-500iter_ade20k-demo-128x128.py'
NUM_ADE_VAL = 3
NUM_COCO_VAL = 2
# Small and single-process data loading for a fast CPU run.
FAST = [
    'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0',
    'train_dataloader.persistent_workers=False', 'val_dataloader.num_workers=0',
    'val_dataloader.persistent_workers=False', 'test_dataloader.num_workers=0',
    'test_dataloader.persistent_workers=False', 'default_hooks.logger.interval=1',
]


def _load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f'mmo1d_tools_{name}', TOOLS / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(argv: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> str:
    """Run a command in ``cwd``; fail with its output's tail if it fails; return its output."""
    full_env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore', **(env or {})}
    proc = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f'{" ".join(argv)} failed ({proc.returncode}):\n{output[-4000:]}'
    return output


def _train_argv(cfg: Path, work_dir: Path, options: List[str], extra: List[str] = ()) -> List[str]:
    return [str(cfg), '--work-dir', str(work_dir), *extra, '--cfg-options', *FAST, *options]


def _test_argv(cfg: Path, checkpoint: Path, work_dir: Path, extra: List[str] = (),
               options: List[str] = ()) -> List[str]:
    return [str(cfg), str(checkpoint), '--work-dir', str(work_dir), *extra, '--cfg-options', *FAST, *options]


def _latest_run(work_dir: Path) -> Path:
    """The newest ``<work_dir>/<timestamp>`` folder (a resumed run adds one beside the old)."""
    return sorted(p for p in work_dir.iterdir() if p.is_dir() and p.name[:8].isdigit())[-1]


def _scalars(work_dir: Path) -> List[dict]:
    """The json log records of the most recent run in ``work_dir``."""
    path = _latest_run(work_dir) / 'vis_data' / 'scalars.json'
    return [json.loads(line) for line in path.read_text().splitlines()]


def _test_metrics(work_dir: Path) -> dict:
    """The metrics a test run wrote to ``<work_dir>/<timestamp>/<timestamp>.json``."""
    run = _latest_run(work_dir)
    return json.loads((run / f'{run.name}.json').read_text())


def _log(work_dir: Path) -> str:
    """What the most recent run in ``work_dir`` logged (mmengine writes its console log there too)."""
    run = _latest_run(work_dir)
    return (run / f'{run.name}.log').read_text()


@pytest.fixture(scope='module')
def train_tool() -> ModuleType:
    return _load_tool('train')


@pytest.fixture(scope='module')
def test_tool() -> ModuleType:
    return _load_tool('test')


_RUN_IDS = itertools.count()


def _in_process(tool: ModuleType, argv: List[str]) -> None:
    """``tool.main(argv)`` in this process, the run's visualizer under a name of its own.

    mmseg's and mmdet's configs name their visualizer ``'visualizer'``, and mmengine hands a second
    Runner of one process the instance of the first, which writes the scalars into the first run's
    folder.
    """
    options = [] if '--cfg-options' in argv else ['--cfg-options']
    tool.main([*argv, *options, f'visualizer.name=in_process_{next(_RUN_IDS)}'])


@pytest.fixture
def in_workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in ``workspace`` as the command-line runs do; the tools' ``LOCAL_RANK`` is undone after."""
    monkeypatch.chdir(workspace)
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    return workspace


@pytest.fixture(scope='module')
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``data/demo`` (small), where the configs' relative data paths resolve."""
    root = tmp_path_factory.mktemp('workspace')
    _run([sys.executable, str(TOOLS / 'dataset_converters' / 'make_demo_data.py'), '--ade-train', '8', '--ade-val',
          str(NUM_ADE_VAL), '--coco-train', '4', '--coco-val', str(NUM_COCO_VAL)], root)
    return root


@pytest.fixture(scope='module')
def seg_run(workspace: Path) -> Path:
    """A 4-iteration UperNet run with checkpoints at 2 and 4 and a validation at the end."""
    work_dir = workspace / 'work_dirs' / 'seg'
    output = _run([sys.executable, str(TOOLS / 'train.py'),
                   *_train_argv(SEG_CFG, work_dir, ['train_cfg.max_iters=4', 'train_cfg.val_interval=4',
                                                    'default_hooks.checkpoint.interval=2'])], workspace)
    (workspace / 'work_dirs' / 'seg.train.log').write_text(output)
    return work_dir


@pytest.fixture(scope='module')
def seg_test_run(seg_run: Path, workspace: Path) -> Path:
    """``python tools/test.py`` on the last checkpoint, with predictions and paintings written; its
    console output is saved beside the work directory as ``seg.test.log``."""
    work_dir = workspace / 'work_dirs' / 'seg_test'
    output = _run([sys.executable, str(TOOLS / 'test.py'),
                   *_test_argv(SEG_CFG, seg_run / 'iter_4.pth', work_dir,
                               ['--out', str(workspace / 'seg_preds'), '--show-dir', str(workspace / 'seg_vis')])],
                  workspace)
    (workspace / 'work_dirs' / 'seg.test.log').write_text(output)
    return work_dir


def test_seg_train_logs_losses_checkpoints_and_validation(seg_run: Path) -> None:
    assert (seg_run / 'iter_2.pth').is_file() and (seg_run / 'iter_4.pth').is_file()
    assert (seg_run / 'last_checkpoint').read_text().strip().endswith('iter_4.pth')
    records = _scalars(seg_run)
    train = [r for r in records if 'loss' in r]
    assert [r['iter'] for r in train] == [1, 2, 3, 4]
    assert all(r['loss'] > 0 for r in train)
    val = [r for r in records if 'mIoU' in r]
    assert len(val) == 1 and 0 <= val[0]['mIoU'] <= 100


def test_checkpoint_needs_the_allow_list_on_this_torch(seg_run: Path) -> None:
    """The run's checkpoint is refused by plain torch.load (torch >= 2.6); the tools load it."""
    if not hasattr(torch.serialization, 'add_safe_globals'):
        pytest.skip('torch without weights_only allow-lists')
    code = ('import sys, torch; torch.load(sys.argv[1], map_location="cpu")')
    proc = subprocess.run([sys.executable, '-c', code, str(seg_run / 'iter_4.pth')],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and 'HistoryBuffer' in proc.stderr + proc.stdout


def test_seg_resume_auto_continues_after_the_last_checkpoint(seg_run: Path, in_workspace: Path,
                                                             train_tool: ModuleType) -> None:
    work_dir = in_workspace / 'work_dirs' / 'seg_resume_auto'
    shutil.copytree(seg_run, work_dir)
    _in_process(train_tool, _train_argv(SEG_CFG, work_dir, ['train_cfg.max_iters=6', 'train_cfg.val_interval=6',
                                                    'default_hooks.checkpoint.interval=2'], extra=['--resume']))
    assert 'resumed' in _log(work_dir).lower()
    assert [r['iter'] for r in _scalars(work_dir) if 'loss' in r] == [5, 6]
    assert (work_dir / 'iter_6.pth').is_file()


def test_seg_resume_from_a_given_checkpoint(seg_run: Path, in_workspace: Path, train_tool: ModuleType) -> None:
    work_dir = in_workspace / 'work_dirs' / 'seg_resume_path'
    _in_process(train_tool, _train_argv(SEG_CFG, work_dir, ['train_cfg.max_iters=3', 'train_cfg.val_interval=100',
                                                    'default_hooks.checkpoint.interval=3'],
                                extra=['--resume', str(seg_run / 'iter_2.pth')]))
    assert 'resumed' in _log(work_dir).lower()
    assert [r['iter'] for r in _scalars(work_dir) if 'loss' in r] == [3]
    resumed = torch.load(work_dir / 'iter_3.pth', map_location='cpu', weights_only=False)
    assert resumed['meta']['iter'] == 3


def test_seg_test_writes_metrics_predictions_and_paintings(seg_test_run: Path, workspace: Path) -> None:
    pred_dir, show_dir = workspace / 'seg_preds', workspace / 'seg_vis'
    metrics = _test_metrics(seg_test_run)
    assert 0 <= metrics['mIoU'] <= 100 and 0 < metrics['aAcc'] <= 100
    assert len(list(pred_dir.glob('*.png'))) == NUM_ADE_VAL
    assert len(list(show_dir.rglob('*.png'))) == NUM_ADE_VAL


def test_downstream_summary_of_a_run(seg_run: Path, seg_test_run: Path, workspace: Path) -> None:
    """mmo1d.benchmark.downstream_runs on the folders and logs that train.py and test.py wrote."""
    from mmo1d.benchmark import downstream_runs as summary_tool
    out = workspace / 'downstream'
    work = out / 'work' / 'cpu-check' / 'seg-demo-1d'
    work.mkdir(parents=True)
    (work / 'train').symlink_to(seg_run, target_is_directory=True)
    (work / 'train.log').symlink_to(workspace / 'work_dirs' / 'seg.train.log')
    (work / 'test').symlink_to(seg_test_run, target_is_directory=True)
    (work / 'test.log').symlink_to(workspace / 'work_dirs' / 'seg.test.log')
    summary_tool.main([str(out), 'cpu-check', '0', '4', 'false', f'seg-demo-1d {SEG_CFG}'])
    saved = json.loads((out / 'downstream_train_test_cpu.json').read_text())
    assert saved['mode'] == 'cpu-check' and saved['completed'] is False and saved['device'] == 'cpu'
    [run] = saved['runs']
    train = [r for r in _scalars(seg_run) if 'loss' in r]
    assert run['name'] == 'seg-demo-1d' and run['config'] == str(SEG_CFG) and run['iterations'] == 4
    assert run['final_loss'] == train[-1]['loss'] and run['iter_time_s_first_window'] == train[0]['time']
    # The first logged window (warm-up) is left out of the medians.
    assert run['iter_time_s_median'] == statistics.median(r['time'] for r in train[1:])
    assert run['train_processes'] == run['test_processes'] == 1
    assert run['ddp_unused_parameter_errors'] == 0
    metrics = _test_metrics(work / 'test')
    assert run['test_metrics'] == {k: v for k, v in metrics.items() if k not in ('time', 'data_time', 'step')}
    assert run['test_metrics']['mIoU'] == metrics['mIoU']


def test_seg_tta_and_pickled_predictions(seg_run: Path, in_workspace: Path, test_tool: ModuleType) -> None:
    work_dir = in_workspace / 'work_dirs' / 'seg_tta'
    out = in_workspace / 'seg_tta.pkl'
    _in_process(test_tool, _test_argv(SEG_CFG, seg_run / 'iter_4.pth', work_dir, ['--tta', '--out', str(out)]))
    assert 'SegTTAModel' in _log(work_dir)
    assert 0 <= _test_metrics(work_dir)['mIoU'] <= 100
    with open(out, 'rb') as f:
        predictions = pickle.load(f)
    assert len(predictions) == NUM_ADE_VAL
    assert predictions[0]['pred_sem_seg']['data'].shape[-2:] == (128, 128)


def test_learnable_angles_logged_in_training_and_drawn_from_the_checkpoint(in_workspace: Path, tmp_path: Path,
                                                                           train_tool: ModuleType) -> None:
    """The -la demo config: its AngleLoggerHook runs in mmseg's Runner; visualize_angles.py reads the
    checkpoint, with the initial directions from the config the Runner stored in it."""
    work_dir = in_workspace / 'work_dirs' / 'seg_la'
    _in_process(train_tool, _train_argv(SEG_LA_CFG, work_dir, [
        'train_cfg.max_iters=2', 'train_cfg.val_interval=100', 'default_hooks.checkpoint.interval=2',
        'custom_hooks.0.interval=1'
    ]))
    output = _log(work_dir)
    assert 'learnable angles at iteration 1' in output and 'learnable angles at iteration 2' in output
    assert 'learnable angles after training, change from the initial directions per layer' in output
    angles = {r['step']: r for r in _scalars(work_dir) if 'angles/max_abs_change_deg' in r}
    assert sorted(angles) == [1, 2] and angles[2]['angles/max_abs_change_deg'] > 0
    report = _load_tool('analysis_tools/visualize_angles').main([str(work_dir / 'iter_2.pth'), '--out',
                                                                  str(tmp_path / 'angles')])
    assert report['config'] == 'the one stored in the checkpoint' and report['prefix'] == 'backbone.'
    # The demo backbone: stem 16 + 16 channels, blocks of 32, 64, 128, 128 and 256 channels.
    assert report['all']['count'] == 640 and len(report['layers']) == 7
    for key in ('mean_abs_change_deg', 'max_abs_change_deg'):  # the hook's last record: the same angles
        assert report['all'][key] == pytest.approx(angles[2][f'angles/{key}'], rel=1e-6)
    assert (tmp_path / 'angles.png').is_file() and (tmp_path / 'angles.json').is_file()


# After one iteration no class score passes the usual 0.05: keep every box so that CocoMetric has
# detections to evaluate, the 10 best of each image (a mask head of each of the three stages runs on
# every kept box). 16 sampled RoIs an image in training (the demo's 64): the three 4conv1fc box heads
# on the RoIs take most of a CPU step.
DET_FEW_ROIS = ['model.test_cfg.rcnn.score_thr=0.0', 'model.test_cfg.rcnn.max_per_img=10',
                *(f'model.train_cfg.rcnn.{stage}.sampler.num=16' for stage in range(3))]


def test_det_train_and_test_with_coco_metric(in_workspace: Path, train_tool: ModuleType,
                                             test_tool: ModuleType) -> None:
    work_dir = in_workspace / 'work_dirs' / 'det'
    _in_process(train_tool, _train_argv(DET_CFG, work_dir, ['train_cfg.max_iters=1', 'train_cfg.val_interval=1',
                                                    'default_hooks.checkpoint.interval=1', *DET_FEW_ROIS]))
    assert (work_dir / 'iter_1.pth').is_file()
    val = [r for r in _scalars(work_dir) if 'coco/bbox_mAP' in r]
    assert len(val) == 1 and 'coco/segm_mAP' in val[0]

    out = in_workspace / 'det.pkl'
    test_dir = in_workspace / 'work_dirs' / 'det_test'
    _in_process(test_tool, _test_argv(DET_CFG, work_dir / 'iter_1.pth', test_dir, ['--out', str(out)], DET_FEW_ROIS))
    metrics = _test_metrics(test_dir)
    for key in ('coco/bbox_mAP', 'coco/bbox_mAP_50', 'coco/segm_mAP', 'coco/segm_mAP_50'):
        assert -1 <= metrics[key] <= 1
    with open(out, 'rb') as f:
        predictions = pickle.load(f)
    assert len(predictions) == NUM_COCO_VAL
    instances = predictions[0]['pred_instances']
    assert {'bboxes', 'scores', 'labels', 'masks'} <= set(instances)


CLS_CFG = """
_base_ = 'mmpretrain::convnext/convnext-tiny_32xb128_in1k.py'
custom_imports = dict(imports=['mmo1d'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='mmo1d.OrientedConvNeXt', variant='1d', stem_channels=16,
                  arch=dict(depths=[1, 1, 1, 1], channels=[16, 32, 64, 128]), out_indices=(3, )),
    head=dict(in_channels=128, num_classes=2),
    train_cfg=None)
data = dict(type='CustomDataset', data_root='cls', with_label=True)
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                        dataset=dict(_delete_=True, data_prefix='train', **data,
                                     pipeline={{_base_.train_pipeline}}))
val_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
                      dataset=dict(_delete_=True, data_prefix='val', **data,
                                   pipeline={{_base_.test_pipeline}}))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1)
param_scheduler = dict(_delete_=True, type="ConstantLR", factor=1.0)
default_hooks = dict(logger=dict(interval=1))
"""


def test_classification_train_and_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train_tool: ModuleType,
                                       test_tool: ModuleType) -> None:
    """The same tools with an mmpretrain config: training, TTA, pickled predictions, paintings."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    for split, count in (('train', 4), ('val', 2)):
        for label in ('dark', 'light'):
            folder = tmp_path / 'cls' / split / label
            folder.mkdir(parents=True)
            for i in range(count // 2):
                base = 40 if label == 'dark' else 200
                image = rng.integers(base - 30, base + 30, (48, 48, 3)).astype(np.uint8)
                cv2.imwrite(str(folder / f'{label}{i}.png'), image)
    cfg = tmp_path / 'cls_cfg.py'
    cfg.write_text(CLS_CFG)
    work_dir = tmp_path / 'work_dirs' / 'cls'
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    _in_process(train_tool, [str(cfg), '--work-dir', str(work_dir)])
    assert [r['step'] for r in _scalars(work_dir) if 'accuracy/top1' in r] == [1]  # epoch 1
    checkpoint = work_dir / 'epoch_1.pth'
    out, show_dir, test_dir = tmp_path / 'cls.pkl', tmp_path / 'cls_vis', tmp_path / 'cls_test'
    # mmpretrain's visualization hook cannot paint TTA batches (tuples of views): two runs.
    _in_process(test_tool, [str(cfg), str(checkpoint), '--work-dir', str(test_dir), '--tta', '--out', str(out)])
    assert 'AverageClsScoreTTA' in _log(test_dir)
    assert 0 <= _test_metrics(test_dir)['accuracy/top1'] <= 100
    with open(out, 'rb') as f:
        predictions = pickle.load(f)
    assert len(predictions) == 2 and predictions[0]['pred_score'].shape == (2, )
    _in_process(test_tool, [str(cfg), str(checkpoint), '--work-dir', str(test_dir), '--show-dir', str(show_dir)])
    assert len(list(show_dir.rglob('*.png'))) == 2


@pytest.mark.parametrize('script, args, tool', [
    ('dist_train.sh', ['CFG.py', '4', '--work-dir', 'wd'], 'train.py'),
    ('dist_test.sh', ['CFG.py', 'CKPT.pth', '4', '--tta'], 'test.py'),
])
def test_dist_scripts_call_torchrun(script: str, args: List[str], tool: str, tmp_path: Path) -> None:
    """The torchrun command line of the dist scripts, recorded by a stand-in ``python``.

    (A real multi-process run needs GPUs: mmengine's pytorch launcher always selects a CUDA
    device; .dev_scripts/gpu_downstream.sh runs the scripts on 2 GPUs.)
    """
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    record = tmp_path / 'record.json'
    fake = bin_dir / 'python'
    fake.write_text(f'#!{sys.executable}\nimport json, os, sys\n'
                    f'json.dump(dict(argv=sys.argv[1:], pythonpath=os.environ["PYTHONPATH"]), '
                    f'open({str(record)!r}, "w"))\n')
    fake.chmod(0o755)
    env = dict(PATH=f'{bin_dir}:{os.environ["PATH"]}', PYTHON=str(fake), NNODES='2', NODE_RANK='1',
               MASTER_ADDR='10.1.2.3', PORT='29999')
    _run(['bash', str(TOOLS / script), *args], tmp_path, env)
    called = json.loads(record.read_text())
    n_positional = 3 if tool == 'test.py' else 2
    assert called['argv'] == [
        '-m', 'torch.distributed.run', '--nnodes=2', '--node_rank=1', '--master_addr=10.1.2.3',
        '--master_port=29999', '--nproc_per_node=4', str(TOOLS / tool),
        *args[:n_positional - 1], '--launcher', 'pytorch', *args[n_positional:]]
    assert called['pythonpath'].split(':')[0] == str(TOOLS / '..')


@pytest.mark.parametrize('script, args, message', [
    ('dist_train.sh', ['CFG.py'], 'usage:'),
    ('dist_train.sh', ['CFG.py', 'two'], "GPUS must be a positive integer, got 'two'"),
    ('dist_test.sh', ['CFG.py', 'CKPT.pth', '0'], "GPUS must be a positive integer, got '0'"),
])
def test_dist_scripts_reject_bad_arguments(script: str, args: List[str], message: str) -> None:
    proc = subprocess.run(['bash', str(TOOLS / script), *args], capture_output=True, text=True)
    assert proc.returncode == 2 and message in proc.stderr


def test_train_bad_inputs_are_named(train_tool: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match='config file not found: nope.py'):
        train_tool.main(['nope.py'])
    with pytest.raises(FileNotFoundError, match='--resume checkpoint not found: missing.pth'):
        train_tool.main([str(SEG_CFG), '--resume', 'missing.pth', '--work-dir', str(tmp_path)])
    with pytest.raises(KeyError, match='--auto-scale-lr needs auto_scale_lr'):
        train_tool.main([str(SEG_CFG), '--auto-scale-lr', '--work-dir', str(tmp_path)])


def test_test_bad_inputs_are_named(test_tool: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match='checkpoint not found: missing.pth'):
        test_tool.main([str(SEG_CFG), 'missing.pth'])
    checkpoint = tmp_path / 'any.pth'
    checkpoint.write_bytes(b'')
    with pytest.raises(ValueError, match="a directory works only with mmseg's IoUMetric"):
        test_tool.main([str(DET_CFG), str(checkpoint), '--out', str(tmp_path / 'dir'),
                        '--work-dir', str(tmp_path)])


def test_tta_defaults_add_flip_keys_for_detection(test_tool: ModuleType) -> None:
    from mmengine.config import Config

    cfg = Config.fromfile(str(DET_CFG))
    with pytest.raises(ValueError, match='DetTTAModel merges boxes only'):
        test_tool.enable_tta(cfg)
    cfg.model.roi_head.pop('mask_head')  # a box-only detector
    test_tool.enable_tta(cfg)
    assert cfg.model.type == 'DetTTAModel' and cfg.model.module.type == 'CascadeRCNN'
    tta = cfg.test_dataloader.dataset.pipeline[-1]
    assert tta.type == 'TestTimeAug'
    assert [t['prob'] for t in tta.transforms[0]] == [1.0, 0.0]
    assert {'flip', 'flip_direction'} <= set(tta.transforms[1][0]['meta_keys'])


class _NotAllowed:
    """A class that no allow-list names."""


def test_allow_list_keeps_other_globals_refused(tmp_path: Path) -> None:
    from mmengine.logging import HistoryBuffer

    allow_mmengine_checkpoints()
    buffer = HistoryBuffer()
    buffer.update(1.5)
    good, bad = tmp_path / 'good.pth', tmp_path / 'bad.pth'
    torch.save({'hub': buffer}, good)
    torch.save({'x': _NotAllowed()}, bad)
    assert torch.load(good)['hub'].current() == 1.5
    with pytest.raises(pickle.UnpicklingError, match='_NotAllowed'):
        torch.load(bad)
