# A ConvNeXt-1D UperNet small enough to train on a CPU in minutes (tools/misc/demo.sh): the
# ConvNeXt-T-1D recipe on the demo data with a 1-1-2-1 / 32-64-128-256 backbone, a narrow head,
# 128x128 crops, 500 iterations of 8 images, fp32, and a higher learning rate for a run this short.
_base_ = './oriented-convnext-tiny-1d_upernet_1xb2-amp-40iter_ade20k-demo-512x512.py'

crop_size = (128, 128)
scale = (512, 128)
max_iters = 500

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, depths=[1, 1, 2, 1], channels=[32, 64, 128, 256]),
        stem_channels=16,
        drop_path_rate=0.1),
    decode_head=dict(in_channels=[32, 64, 128, 256], channels=64),
    auxiliary_head=dict(in_channels=128, channels=32),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(85, 85)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=scale, ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
img_ratios = [0.75, 1.0, 1.25]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=(int(scale[0] * r), int(scale[1] * r)), keep_ratio=True)
             for r in img_ratios],
            [dict(type='RandomFlip', prob=0., direction='horizontal'),
             dict(type='RandomFlip', prob=1., direction='horizontal')],
            [dict(type='LoadAnnotations', reduce_zero_label=True)],
            [dict(type='PackSegInputs')],
        ])
]
train_dataloader = dict(batch_size=8, num_workers=1, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

# fp32: AMP needs a GPU. Same optimizer and lr decay as the real recipe, larger learning rate.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(decay_rate=0.9, decay_type='stage_wise', num_layers=6),
    constructor='LearningRateDecayOptimizerConstructor')
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(interval=max_iters))
env_cfg = dict(cudnn_benchmark=False)
randomness = dict(seed=0)
