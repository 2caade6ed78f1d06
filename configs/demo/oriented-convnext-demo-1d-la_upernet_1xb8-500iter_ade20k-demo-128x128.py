# The CPU demo UperNet of ConvNeXt-1D with learnable angles ("-la"): every oriented kernel reads its
# taps bilinearly (rounding='bilinear') and learns its per-channel angles (theta), starting from the
# 8 directions of the paper's models; AngleLoggerHook logs how far they have turned. The angles get
# no weight decay and the learning rate of their block: mmseg's LearningRateDecayOptimizerConstructor
# puts every 1-D parameter in its layer's no-decay group.
_base_ = './oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'

model = dict(backbone=dict(rounding='bilinear', learnable_angles=True))
custom_hooks = [dict(type='mmo1d.AngleLoggerHook', interval=50)]
