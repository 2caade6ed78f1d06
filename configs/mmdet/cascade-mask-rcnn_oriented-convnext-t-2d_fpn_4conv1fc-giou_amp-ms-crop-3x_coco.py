# Cascade Mask R-CNN 3x COCO with ConvNeXt-T
# (7x7 depthwise convs), the baseline reproduced with the same backbone code and recipe.
_base_ = './cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'

model = dict(backbone=dict(variant='2d'))
