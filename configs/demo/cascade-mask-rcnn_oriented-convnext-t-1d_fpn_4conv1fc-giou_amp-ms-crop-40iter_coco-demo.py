# The real Cascade Mask R-CNN ConvNeXt-T-1D recipe (multi-scale 480-800 + crop, AMP) on the COCO-
# style demo data of tools/dataset_converters/make_demo_data.py, for a short run: 40 iterations on one GPU, then one
# evaluation (CocoMetric, bbox and segm). It times the real model on real-size inputs
# (.dev_scripts/gpu_downstream.sh); the images are small and get upscaled by the pipelines.
_base_ = '../mmdet/cascade-mask-rcnn_oriented-convnext-t-1d_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'

data_root = 'data/demo/coco/'
max_iters = 40

train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(data_root=data_root))
val_dataloader = dict(num_workers=2, dataset=dict(data_root=data_root))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator

# Iteration-based instead of 36 epochs: warm-up over the first quarter, the 3x schedule's two
# steps at the same relative positions (27/36 and 33/36).
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=max_iters // 4),
    dict(type='MultiStepLR', by_epoch=False, begin=0, end=max_iters,
         milestones=[max_iters * 27 // 36, max_iters * 33 // 36], gamma=0.1),
]
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(by_epoch=False, interval=max_iters))
log_processor = dict(by_epoch=False)
