# ConvNeXt-B-2D++ on ImageNet-1k, the recipe of ./oriented-convnext-base-1d_32xb128_in1k.py;
# 2D++: ConvNeXt's 7x7 block plus an oriented 1x31 on the 4C hidden tensor, patchify stem.
_base_ = ['./oriented-convnext-base-1d_32xb128_in1k.py']

model = dict(backbone=dict(variant='2dpp'))
