# ConvNeXt-B (2D) on ImageNet-1k, the recipe of ./oriented-convnext-base-1d_32xb128_in1k.py;
# the ConvNeXt baseline (7x7 depthwise kernels, patchify stem) built by mmo1d.
_base_ = ['./oriented-convnext-base-1d_32xb128_in1k.py']

model = dict(backbone=dict(variant='2d'))
