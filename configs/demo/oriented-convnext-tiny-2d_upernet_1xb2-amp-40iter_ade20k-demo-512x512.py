# The 40-iteration UperNet demo run of ConvNeXt-T-1D, with the ConvNeXt-T (2D) baseline backbone.
_base_ = './oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py'

model = dict(backbone=dict(variant='2d'))
