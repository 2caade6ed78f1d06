"""Training the demo longer as docs/downstream.md says: the learning rate after the old end.

The commands are read from the page and parsed by ``tools/train.py``; the optimizer wrapper and
the schedulers are built by mmengine's builders and stepped as its training loop and
``ParamSchedulerHook`` step them (resuming as ``Runner.resume`` does).
"""
import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import List, Tuple

import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper, build_optim_wrapper
from mmengine.optim.scheduler import _ParamScheduler
from mmengine.registry import PARAM_SCHEDULERS

from mmo1d.utils.tool_utils import load_config

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / 'docs' / 'downstream.md'
SECTION = "### Training longer than the config's schedule"
OLD, NEW = 500, 1000


def _train_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location('mmo1d_tools_train', REPO / 'tools' / 'train.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documented_commands() -> List[List[str]]:
    """The arguments of each ``python tools/train.py`` command of the section, in order."""
    text = DOC.read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index('\n## ')]
    commands = [shlex.split(block.replace('\\\n', ' ')) for block in re.findall(r'```bash\n(.*?)```', section, re.S)]
    assert commands and all(c[:2] == ['python', 'tools/train.py'] for c in commands), commands
    return [c[2:] for c in commands]


def _config(argv: List[str]) -> Config:
    """The config ``tools/train.py`` would train with these arguments."""
    train = _train_tool()
    args = train.parse_args([str(REPO / argv[0]), *argv[1:]])
    return train.merge_args(load_config(args.config, args.cfg_options, args.launcher, args.work_dir), args)


def _build(cfg: Config) -> Tuple[OptimWrapper, List[_ParamScheduler]]:
    """The config's optimizer, on a small module, and its schedulers.

    The config's layer-wise decay constructor only scales each group's learning rate, so one plain
    group follows the same schedule.
    """
    optim_wrapper = dict(type='OptimWrapper', optimizer=cfg.optim_wrapper.optimizer)
    wrapper = build_optim_wrapper(torch.nn.Linear(2, 2), optim_wrapper)
    return wrapper, [PARAM_SCHEDULERS.build(dict(s, optimizer=wrapper)) for s in cfg.param_scheduler]


def _train(wrapper: OptimWrapper, schedulers: List[_ParamScheduler], iters: int) -> List[float]:
    """The learning rate of each of ``iters`` iterations: optimizer step, then every scheduler's."""
    lrs = []
    for _ in range(iters):
        lrs.append(wrapper.param_groups[0]['lr'])
        wrapper.step()
        for scheduler in schedulers:
            scheduler.step()
    return lrs


def _extended_config() -> Config:
    cfg = _config(_documented_commands()[0])
    assert cfg.train_cfg.max_iters == NEW and [s.end for s in cfg.param_scheduler] == [30, NEW]
    return cfg


def test_the_documented_overrides_keep_a_learning_rate_after_the_old_end() -> None:
    lrs = _train(*_build(_extended_config()), NEW)
    assert all(lr > 0 for lr in lrs[:NEW - 1])
    # The poly decay now reaches 0 at the new end.
    assert lrs[NEW - 1] == 0


def test_max_iters_alone_trains_at_zero_after_the_old_end() -> None:
    argv = _documented_commands()[0]
    cfg = _config([a for a in argv if not a.startswith('param_scheduler.')])
    assert cfg.train_cfg.max_iters == NEW and cfg.param_scheduler[1].end == OLD
    lrs = _train(*_build(cfg), NEW)
    assert all(lr > 0 for lr in lrs[:OLD - 1])
    assert all(lr == 0 for lr in lrs[OLD:])


def test_resuming_restores_the_old_schedule_over_the_overrides() -> None:
    old_wrapper, old_schedulers = _build(_config(_documented_commands()[0][:1]))
    _train(old_wrapper, old_schedulers, OLD)
    wrapper, schedulers = _build(_extended_config())
    wrapper.load_state_dict(old_wrapper.state_dict())
    for scheduler, old in zip(schedulers, old_schedulers):
        scheduler.load_state_dict(old.state_dict())
    assert schedulers[1].end == OLD
    assert all(lr == 0 for lr in _train(wrapper, schedulers, NEW - OLD))


def test_going_on_from_a_finished_run_loads_its_weights_only() -> None:
    cfg = _config(_documented_commands()[1])
    assert cfg.load_from == 'work_dirs/demo/upernet-1d/iter_500.pth' and not cfg.get('resume', False)
    lrs = _train(*_build(cfg), OLD)
    assert all(lr > 0 for lr in lrs[:OLD - 1])
