"""mmo1d.AngleLoggerHook in mmengine's Runner: what it logs and records, and when."""
import json
import math
from types import SimpleNamespace

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn

from mmo1d.engine import AngleLoggerHook
from mmo1d.ops import OrientedDWConv1d


class Toy(BaseModel):
    """A learnable-angle convolution followed by a fixed-angle one (which the hook must not follow)."""

    def __init__(self) -> None:
        super().__init__()
        self.turning = OrientedDWConv1d(8, 5, rounding='bilinear', learnable_angles=True, angle_offset=0.25)
        self.fixed = OrientedDWConv1d(8, 5, rounding='bilinear')

    def forward(self, inputs, targets=None, mode='tensor'):
        out = self.fixed(self.turning(inputs))
        if mode == 'loss':
            return dict(loss=((out - targets)**2).mean())
        return out


def _data(n: int = 10) -> list:
    torch.manual_seed(0)
    return [dict(inputs=torch.randn(8, 12, 12), targets=torch.randn(8, 12, 12)) for _ in range(n)]


def test_hook_logs_and_records_the_change_of_the_learnable_angles(tmp_path):
    runner = Runner(
        model=Toy(),
        work_dir=str(tmp_path),
        experiment_name='angle_logger_hook',
        train_dataloader=dict(dataset=_data(), sampler=dict(type='DefaultSampler', shuffle=False), batch_size=2,
                              collate_fn=dict(type='default_collate'), num_workers=0),
        train_cfg=dict(by_epoch=False, max_iters=5),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=2.0)),
        custom_hooks=[dict(type='mmo1d.AngleLoggerHook', interval=2)],
        default_hooks=dict(logger=dict(type='LoggerHook', interval=1), checkpoint=None),
        visualizer=dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend')],
                        name='angle_logger_hook'),
    )
    runner.train()
    model = runner.model
    start = math.pi * 0.25  # 8 directions with offset 0.25 turn: group g at (g / 8 + 1/4) * 180 degrees
    initial = torch.tensor([math.pi * ((g / 8 + 0.25) % 1) for g in range(8)], dtype=torch.float64)
    assert initial[0] == pytest.approx(start)
    change = torch.rad2deg(model.turning.theta.detach().double() - initial).abs()
    assert change.mean() > 1e-3  # training turned the angles

    scalars = [json.loads(line) for line in (tmp_path / runner.timestamp / 'vis_data' / 'scalars.json').open()]
    recorded = {s['step']: s for s in scalars if 'angles/mean_abs_change_deg' in s}
    assert sorted(recorded) == [2, 4, 5]  # every 2 iterations and after the last
    assert recorded[5]['angles/mean_abs_change_deg'] == pytest.approx(change.mean().item(), rel=1e-6)
    assert recorded[5]['angles/max_abs_change_deg'] == pytest.approx(change.max().item(), rel=1e-6)
    assert recorded[2]['angles/mean_abs_change_deg'] < recorded[5]['angles/mean_abs_change_deg']

    log = (tmp_path / runner.timestamp / f'{runner.timestamp}.log').read_text()
    assert log.count('learnable angles at iteration') == 3
    assert f"learnable angles at iteration 5: mean |change| {change.mean().item():.4f} deg" in log
    assert 'over 8 angles in 1 layers' in log
    assert 'learnable angles after training, change from the initial directions per layer:' in log
    assert f'turning: 8 angles, mean |change| {change.mean().item():.4f} deg' in log
    assert 'fixed:' not in log  # fixed angles are not followed


def test_hook_warns_once_for_a_model_without_learnable_angles():
    logger = MMLogger.get_instance('angle_logger_hook_fixed')
    messages = []
    logger.warning = messages.append
    hook = AngleLoggerHook(interval=1)
    runner = SimpleNamespace(model=nn.Sequential(OrientedDWConv1d(4, 3)), logger=logger, iter=0, max_iters=1)
    hook.before_train(runner)
    hook.after_train_iter(runner, 0)
    hook.after_train(runner)
    assert len(messages) == 1 and 'has no learnable angles' in messages[0]
    with pytest.raises(ValueError, match='interval must be a positive int'):
        AngleLoggerHook(interval=0)
