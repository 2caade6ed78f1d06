"""A training hook that holds the learnable angles of the oriented 1D kernels for the first iterations.

"Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) fixes the angles of
its kernels; mmo1d can learn them (``learnable_angles=True``). Early in training the features are
still random and so is the angles' gradient; this hook lets the rest of the network learn first.
mmengine's parameter schedulers act on every parameter group alike, hence a hook.
"""
from typing import List, Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmo1d.registry import HOOKS


@HOOKS.register_module()
class AngleWarmupHook(Hook):
    """Set the learning rate of the angles (``theta``) to 0 for the first ``iters`` iterations.

    The angles must be in parameter groups of their own, as mmengine's default optimizer
    constructor makes them with ``paramwise_cfg.custom_keys={'theta': ...}``. Before each of the
    first ``iters`` iterations their groups' learning rate is set to 0, and it is put back after the
    iteration, before the parameter schedulers step (this hook's priority is above theirs), so the
    schedule itself is untouched. AdamW still sees the angles' gradients in the meantime.

    In a config: ``custom_hooks = [dict(type='mmo1d.AngleWarmupHook', iters=100)]``.

    Args:
        iters (int): Iterations during which the angles are held. Default: 100.
    """
    priority = 'NORMAL'

    def __init__(self, iters: int = 100) -> None:
        if isinstance(iters, bool) or not isinstance(iters, int) or iters < 0:
            raise ValueError(f'AngleWarmupHook: iters must be an int >= 0, got {iters!r}')
        self.iters = iters
        self._groups: List[dict] = []
        self._held: Optional[List[float]] = None

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        angles = {id(p) for name, p in model.named_parameters() if name.endswith('.theta') and p.requires_grad}
        self._groups = []
        for group in runner.optim_wrapper.param_groups:
            held = [id(p) in angles for p in group['params']]
            if any(held) and not all(held):
                raise ValueError('AngleWarmupHook: the angles share a parameter group with other parameters; give '
                                 "them their own, e.g. paramwise_cfg=dict(custom_keys={'theta': dict(decay_mult=0.0)}) "
                                 "with mmengine's default optimizer constructor")
            if any(held):
                self._groups.append(group)
        if not self._groups:
            runner.logger.warning('AngleWarmupHook: the model has no learnable angles; it does nothing')

    def before_train_iter(self, runner, batch_idx: int, data_batch: Optional[dict] = None) -> None:
        if runner.iter < self.iters and self._groups:
            self._held = [group['lr'] for group in self._groups]
            for group in self._groups:
                group['lr'] = 0.0

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch: Optional[dict] = None,
                         outputs: Optional[dict] = None) -> None:
        if self._held is not None:
            for group, lr in zip(self._groups, self._held):
                group['lr'] = lr
            self._held = None
