"""AngleWarmupHook: the angles stay put for the first iterations, the other parameters do not, and the
learning rates the schedulers see are untouched."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.optim import build_optim_wrapper
from torch import nn

from mmo1d.engine.hooks.angle_warmup_hook import AngleWarmupHook
from mmo1d.ops import OrientedDWConv1d


class _Net(nn.Module):

    def __init__(self) -> None:
        super().__init__()
        self.conv = OrientedDWConv1d(8, 5, rounding='bilinear', learnable_angles=True)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x)).square().mean()


def _runner(custom_keys: dict) -> SimpleNamespace:
    torch.manual_seed(0)
    model = _Net()
    optimizer = dict(type='AdamW', lr=0.01, weight_decay=0.05)
    wrapper = build_optim_wrapper(model, dict(type='OptimWrapper', optimizer=optimizer,
                                              paramwise_cfg=dict(custom_keys=custom_keys)))
    return SimpleNamespace(model=model, optim_wrapper=wrapper, iter=0, logger=MMLogger.get_current_instance())


def test_angles_are_held_then_learn() -> None:
    runner = _runner({'theta': dict(lr_mult=10.0, decay_mult=0.0)})
    hook = AngleWarmupHook(iters=3)
    hook.before_train(runner)
    x = torch.randn(2, 8, 9, 9)
    theta0, weight0 = runner.model.conv.theta.detach().clone(), runner.model.conv.weight.detach().clone()
    lrs = [g['lr'] for g in runner.optim_wrapper.param_groups]
    for i in range(5):
        runner.iter = i
        hook.before_train_iter(runner, i)
        runner.optim_wrapper.update_params(runner.model(x))
        hook.after_train_iter(runner, i)
        assert [g['lr'] for g in runner.optim_wrapper.param_groups] == lrs  # what the schedulers see
        moved = not torch.equal(runner.model.conv.theta, theta0)
        assert moved == (i >= 3), i
        assert not torch.equal(runner.model.conv.weight, weight0)


def test_angles_sharing_a_group_are_refused() -> None:
    runner = _runner({})
    runner.optim_wrapper.optimizer.param_groups[:] = [
        dict(runner.optim_wrapper.optimizer.param_groups[0], params=list(runner.model.parameters()))]
    with pytest.raises(ValueError, match='their own'):
        AngleWarmupHook(iters=2).before_train(runner)


@pytest.mark.parametrize('iters', [-1, 1.5, True])
def test_bad_iters(iters) -> None:
    with pytest.raises(ValueError, match='iters must be an int'):
        AngleWarmupHook(iters=iters)
