# Cascade Mask R-CNN with ConvNeXt-T-1D ("Convolutional Networks with Oriented 1D Kernels",
# ICCV 2023) on COCO: the setting of the paper, taken from ConvNeXt. 3x schedule (36 epochs, steps
# at 27 and 33), 8 GPUs x 2 images, multi-scale (480-800) + crop training, GIoU 4conv1fc box heads,
# AdamW lr 2e-4 / wd 0.05 with layer-wise lr decay 0.7, drop path 0.4, AMP.
_base_ = 'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'

# The official ConvNeXt configs force-import mmpretrain; this backbone comes from mmo1d.
custom_imports = dict(imports=['mmo1d'], allow_failed_imports=False)

# The backbone starts from its own initialisation (truncated normal); the paper starts from
# ImageNet weights: add init_cfg=dict(type='Pretrained', checkpoint='PATH.pth', prefix='backbone.')
# to the backbone (oriented kernels are centre-cropped to the downstream lengths on loading).
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmo1d.OrientedConvNeXt',
        arch='tiny',
        variant='1d',
        kernel_sizes='downstream',
        drop_path_rate=0.4,
        layer_scale_init_value=1e-6,
        out_indices=(0, 1, 2, 3),
        gap_before_final_norm=False),
    neck=dict(in_channels=[96, 192, 384, 768]))

# Layer-wise decay: stage 3's blocks fall into groups of three (ids 3..5 for T's 9 blocks), the
# last stage gets num_layers; mmdet's constructor needs num_layers = 3 + (depth of stage 3) / 3,
# i.e. 6 for T (3-3-9-3) and 12 for B (3-3-27-3).
optim_wrapper = dict(paramwise_cfg=dict(decay_rate=0.7, decay_type='layer_wise', num_layers=6))
