# The CPU UperNet demo with the ConvNeXt (2D, 7x7 depthwise) baseline backbone, for comparison.
_base_ = './oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'

model = dict(backbone=dict(variant='2d'))
