# ConvNeXt-T-1D++ with learnable angles ("-la") on ImageNet-1k: the T-1D-la recipe (bilinear taps,
# learned per-channel angles from the paper's 8 directions, the angles' optimizer settings and log) on
# the T-1D++ model, whose recipe is T-1D's with variant='1dpp'. No results are published for it.
_base_ = ['./oriented-convnext-tiny-1d-la_32xb128_in1k.py']

model = dict(backbone=dict(variant='1dpp'))
