# The CPU demo UperNet of ConvNeXt-1D on the oriented-texture demo data
# (`make_demo_data.py --which textures`): four classes, each a texture at its own orientation (by
# default 11.25 + k x 45 degrees, halfway between the kernels' 8 directions), 64x64 grey images under
# pixel noise. The demo's backbone and heads (at half their width the model does not start learning
# within 300 iterations), 300 iterations of 8 images. It is the fixed-angle baseline of
# tools/analysis_tools/learnable_angles_study.py.
# The training pipeline neither flips nor rescales (a flip changes a texture's orientation, hence its
# class), and the optimizer is mmengine's default constructor without layer-wise decay, so that its
# learnable-angle ("-la") counterpart can give the angles their own learning rate (custom_keys).
_base_ = './oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'

data_root = 'data/demo/textures/ADEChallengeData2016'
# The texture classes as make_demo_data.py labels them (TEXTURE_CLASSES), orientation k as class k.
metainfo = dict(classes=('fence', 'railing', 'blind', 'curtain'))
num_classes = 4
crop_size = (64, 64)
max_iters = 300

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(drop_path_rate=0.0),
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes),
    test_cfg=dict(_delete_=True, mode='whole'))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
test_pipeline = train_pipeline
train_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=8, num_workers=1,
    dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(logger=dict(interval=50), checkpoint=dict(interval=max_iters))
