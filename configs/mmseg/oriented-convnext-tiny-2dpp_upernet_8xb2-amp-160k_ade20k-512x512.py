# UperNet 160k ADE20K with ConvNeXt-T-2D++:
# 7x7 depthwise convs, plus a residual oriented 1D conv on the expanded MLP features.
_base_ = './oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py'

model = dict(backbone=dict(variant='2dpp'))
