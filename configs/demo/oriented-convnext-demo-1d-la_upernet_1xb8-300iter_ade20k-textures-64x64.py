# The texture demo UperNet of ConvNeXt-1D with learnable angles ("-la"): every oriented kernel reads
# its taps bilinearly (rounding='bilinear') and learns its per-channel angles (theta), starting from
# the 8 directions; AngleLoggerHook logs how far they have turned. The angles get no weight decay and
# 10 times the base learning rate: in 300 iterations at the block's own rate they turn by about a
# degree, a tenth of the half step between directions (docs/learnable.md, and the multipliers that
# tools/analysis_tools/learnable_angles_study.py tries).
_base_ = './oriented-convnext-demo-1d_upernet_1xb8-300iter_ade20k-textures-64x64.py'

model = dict(backbone=dict(rounding='bilinear', learnable_angles=True))
# 'theta', not '.theta': --cfg-options can then reach it (optim_wrapper.paramwise_cfg.custom_keys.theta.lr_mult).
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'theta': dict(lr_mult=10.0, decay_mult=0.0)}))
custom_hooks = [dict(type='mmo1d.AngleLoggerHook', interval=50)]
