# The 40-iteration Cascade Mask R-CNN demo run of ConvNeXt-T-1D, with the ConvNeXt-T (2D)
# baseline backbone.
_base_ = './cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py'

model = dict(backbone=dict(variant='2d'))
