# The CPU Cascade Mask R-CNN demo with the ConvNeXt (2D, 7x7 depthwise) baseline backbone.
_base_ = './cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py'

model = dict(backbone=dict(variant='2d'))
