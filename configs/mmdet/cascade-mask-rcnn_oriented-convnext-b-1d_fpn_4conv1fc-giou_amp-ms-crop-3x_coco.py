# Cascade Mask R-CNN 3x COCO with ConvNeXt-B-1D: the T-1D setting with the B backbone, drop path
# 0.7 and layer-wise lr decay 0.8 over 12 layer groups (stage 3 has 27 blocks).
_base_ = './cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'

model = dict(
    backbone=dict(arch='base', drop_path_rate=0.7),
    neck=dict(in_channels=[128, 256, 512, 1024]))
optim_wrapper = dict(paramwise_cfg=dict(decay_rate=0.8, num_layers=12))
