# A ConvNeXt-1D Cascade Mask R-CNN small enough to train on a CPU: the ConvNeXt-T-1D recipe on
# the COCO-style demo data with a 1-1-2-1 / 32-64-128-256 backbone, the multi-scale + crop
# augmentation scaled down to the 160x160 demo images, fewer proposals and RoIs, 200 iterations
# of 4 images, fp32, and a higher learning rate for a run this short.
_base_ = './cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-40iter_coco-demo.py'

max_iters = 200
# The 3x recipe's short sides 480-800 (crop branch: 400-600, then a 384-600 crop) times 0.2.
train_scales = [(s, 267) for s in range(96, 161, 8)]

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, depths=[1, 1, 2, 1], channels=[32, 64, 128, 256]),
        stem_channels=16,
        drop_path_rate=0.1),
    neck=dict(in_channels=[32, 64, 128, 256]),
    # Fewer proposals and sampled RoIs than the 3x recipe's 2000 / 512 (a few shapes per image);
    # the RoI heads dominate the CPU time.
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=500, max_per_img=300),
        rcnn=[
            dict(assigner=dict(type='MaxIoUAssigner', pos_iou_thr=iou, neg_iou_thr=iou, min_pos_iou=iou,
                               match_low_quality=False, ignore_iof_thr=-1),
                 sampler=dict(type='RandomSampler', num=64, pos_fraction=0.25, neg_pos_ub=-1,
                              add_gt_as_proposals=True),
                 mask_size=28, pos_weight=-1, debug=False)
            for iou in (0.5, 0.6, 0.7)
        ]),
    test_cfg=dict(rpn=dict(nms_pre=300, max_per_img=100)))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(
        type='RandomChoice',
        transforms=[
            [dict(type='RandomChoiceResize', scales=train_scales, keep_ratio=True)],
            [dict(type='RandomChoiceResize', scales=[(80, 267), (100, 267), (120, 267)],
                  keep_ratio=True),
             dict(type='RandomCrop', crop_type='absolute_range', crop_size=(77, 120),
                  allow_negative_crop=True),
             dict(type='RandomChoiceResize', scales=train_scales, keep_ratio=True)],
        ]),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(267, 160), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(batch_size=4, num_workers=1, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(num_workers=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

# fp32: AMP needs a GPU. Same optimizer and lr decay as the real recipe, larger learning rate.
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(decay_rate=0.7, decay_type='layer_wise', num_layers=6),
    constructor='LearningRateDecayOptimizerConstructor')
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=max_iters // 4),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters,
         milestones=[max_iters * 27 // 36, max_iters * 33 // 36], gamma=0.1),
]
default_hooks = dict(
    logger=dict(interval=20),
    checkpoint=dict(interval=max_iters))
