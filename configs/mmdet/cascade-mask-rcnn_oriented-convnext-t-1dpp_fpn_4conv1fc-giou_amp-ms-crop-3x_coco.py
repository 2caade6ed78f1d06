# Cascade Mask R-CNN 3x COCO with ConvNeXt-T-1D++:
# oriented 1D kernels, plus a residual oriented 1D conv on the expanded MLP features.
_base_ = './cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'

model = dict(backbone=dict(variant='1dpp'))
