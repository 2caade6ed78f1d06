# ConvNeXt-T-1D++ with learnable angles ("-la") on ImageNet-1k: the T-1D++ recipe, with every oriented
# kernel (the stem's, the blocks' 1xK and their "++" convolution on the 4C hidden tensor) reading its
# taps bilinearly (rounding='bilinear') and learning its per-channel angles (theta), starting from the
# paper's 8 directions. No results are published for it.
_base_ = ['./oriented-convnext-tiny-1dpp_32xb128_in1k.py']

model = dict(backbone=dict(rounding='bilinear', learnable_angles=True))

# As the T-1D-la recipe: the angles without weight decay at the base learning rate (docs/learnable.md).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.theta': dict(lr_mult=1.0, decay_mult=0.0)}))

# The recipe's EMA hook (a list is replaced, not merged, so it is repeated) and the angles' log,
# about once an epoch (312 iterations at 4096 images per batch).
custom_hooks = [
    dict(type='EMAHook', momentum=1e-4, priority='ABOVE_NORMAL'),
    dict(type='mmo1d.AngleLoggerHook', interval=300),
]
