"""A training hook that logs how far the learnable angles of the oriented 1D kernels have turned.

"Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023) fixes the angles of
its kernels; with ``rounding='bilinear'`` or ``'gaussian'`` and ``learnable_angles=True`` mmo1d's
oriented convolutions learn them. This hook follows them during training, measured as in
:mod:`mmo1d.analysis.angles` (change from the configured directions, wrapped to [-180, 180)).
"""
from typing import Dict, Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from torch import Tensor

from mmo1d.analysis.angles import angle_changes, change_summary, initial_angles, oriented_layers
from mmo1d.ops import OrientedDWConv1d
from mmo1d.registry import HOOKS


@HOOKS.register_module()
class AngleLoggerHook(Hook):
    """Log the mean and largest absolute change of the learnable angles from their initial directions.

    Every ``interval`` training iterations and after the last one, logs one line over all learnable
    angles of the model and sends the two numbers to the visualizer's backends as scalars
    ``angles/mean_abs_change_deg`` and ``angles/max_abs_change_deg`` (degrees); after training, logs
    them per layer. A layer's initial angles are its configured directions (``directions``,
    ``angle_offset``), so a resumed run is measured from the same start. A model without learnable
    angles gets one warning and nothing more.

    In a config: ``custom_hooks = [dict(type='mmo1d.AngleLoggerHook', interval=50)]``.

    Args:
        interval (int): Log every ``interval`` training iterations. Default: 50.
    """
    priority = 'LOW'

    def __init__(self, interval: int = 50) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ValueError(f'AngleLoggerHook: interval must be a positive int, got {interval!r}')
        self.interval = interval
        self._layers: Dict[str, OrientedDWConv1d] = {}
        self._initial: Dict[str, Tensor] = {}

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self._layers = oriented_layers(model, learnable_only=True)
        self._initial = initial_angles(self._layers)
        if not self._layers:
            runner.logger.warning('AngleLoggerHook: the model has no learnable angles (no OrientedDWConv1d with '
                                  'learnable_angles=True); it logs nothing')

    def summary(self) -> dict:
        """:func:`mmo1d.analysis.angles.change_summary` of the model's learnable angles now."""
        return change_summary(angle_changes({name: m.theta for name, m in self._layers.items()}, self._initial))

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch: Optional[dict] = None,
                         outputs: Optional[dict] = None) -> None:
        if not self._layers or not (self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner)):
            return
        total = self.summary()['all']
        runner.logger.info(f"learnable angles at iteration {runner.iter + 1}: mean |change| "
                           f"{total['mean_abs_change_deg']:.4f} deg, max |change| "
                           f"{total['max_abs_change_deg']:.4f} deg over {total['count']} angles in "
                           f'{len(self._layers)} layers')
        runner.visualizer.add_scalars({'angles/mean_abs_change_deg': total['mean_abs_change_deg'],
                                       'angles/max_abs_change_deg': total['max_abs_change_deg']},
                                      step=runner.iter + 1)

    def after_train(self, runner) -> None:
        if not self._layers:
            return
        lines = [f"  {name}: {s['count']} angles, mean |change| {s['mean_abs_change_deg']:.4f} deg, "
                 f"max |change| {s['max_abs_change_deg']:.4f} deg" for name, s in self.summary()['layers'].items()]
        runner.logger.info('learnable angles after training, change from the initial directions per layer:\n'
                           + '\n'.join(lines))
