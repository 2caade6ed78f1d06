# UperNet with ConvNeXt-T-1D ("Convolutional Networks with Oriented 1D Kernels", ICCV 2023) on
# ADE20K: the setting of the paper, taken from ConvNeXt. 160k iterations, 8 GPUs x 2 images of
# 512x512 crops, AdamW lr 1e-4 / wd 0.05 with stage-wise lr decay 0.9, drop path 0.4, AMP, sliding
# window inference; `tools/test.py --tta` runs the multi-scale + flip test.
_base_ = 'mmseg::convnext/convnext-tiny_upernet_8xb2-amp-160k_ade20k-512x512.py'

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
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))

# Multi-scale + flip test as in ConvNeXt / the paper: the test scale (2048, 512) times
# 0.5 ... 1.75, each plain and flipped, predictions averaged by mmseg's SegTTAModel.
tta_model = dict(type='SegTTAModel')
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=(int(2048 * r), int(512 * r)), keep_ratio=True)
             for r in img_ratios],
            [dict(type='RandomFlip', prob=0., direction='horizontal'),
             dict(type='RandomFlip', prob=1., direction='horizontal')],
            [dict(type='LoadAnnotations', reduce_zero_label=True)],
            [dict(type='PackSegInputs')],
        ])
]
