# ConvNeXt-B-1D++ on ImageNet-1k, the recipe of ./oriented-convnext-base-1d_32xb128_in1k.py;
# 1D++: oriented 1x15 then 1x31 on the 4C hidden tensor, depthwise 1D stem with 1x15 kernels.
_base_ = ['./oriented-convnext-base-1d_32xb128_in1k.py']

model = dict(backbone=dict(variant='1dpp'))
