# UperNet 160k ADE20K with ConvNeXt-T-1D and learnable angles ("-la"): the T-1D recipe, with
# every oriented kernel (stem and blocks) reading its taps bilinearly
# (rounding='bilinear') and learning its per-channel angles (theta), starting from the paper's 8
# directions. No results are published for it.
# The angles get no weight decay and the learning rate of their block: mmseg's
# LearningRateDecayOptimizerConstructor puts every 1-D parameter in its layer's no-decay group (it
# does not read paramwise_cfg.custom_keys).
# That is the recommended setting for a schedule this long (docs/learnable.md): the angles' lr
# multiplier is 1 and they follow the schedule's warm-up; a short schedule needs a larger multiplier.
_base_ = './oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py'

model = dict(backbone=dict(rounding='bilinear', learnable_angles=True))
custom_hooks = [dict(type='mmo1d.AngleLoggerHook', interval=1000)]
