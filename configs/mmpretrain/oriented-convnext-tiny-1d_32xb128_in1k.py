# ConvNeXt-T-1D (Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023)
# on ImageNet-1k with ConvNeXt's recipe, as in the paper: AdamW lr 4e-3 at batch 4096 (32 GPUs x 128),
# weight decay 0.05, 300 epochs with 20 of linear warm-up then cosine, RandAugment (9, 0.5), mixup 0.8,
# cutmix 1.0, random erasing 0.25, label smoothing 0.1, stochastic depth 0.1, layer scale 1e-6,
# EMA 0.9999 -- all inherited from mmpretrain's ConvNeXt-T config; only the backbone changes.
_base_ = ['mmpretrain::convnext/convnext-tiny_32xb128_in1k.py']

custom_imports = dict(imports=['mmo1d'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmo1d.OrientedConvNeXt',
        arch='tiny',
        variant='1d',
        kernel_sizes='imagenet',
        directions=8,
        layer_rotation=True,
        drop_path_rate=0.1,
        layer_scale_init_value=1e-6,
        out_indices=(3, ),
        gap_before_final_norm=True),
    head=dict(in_channels=768))
