# The real UperNet ConvNeXt-T-1D recipe (512x512 crops, AMP) on the demo data of
# tools/dataset_converters/make_demo_data.py, for a short run: 40 iterations on one GPU, then one evaluation.
# It times the real model on real-size inputs (.dev_scripts/gpu_downstream.sh); the images are small
# and get upscaled by the training and test pipelines.
_base_ = '../mmseg/oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py'

data_root = 'data/demo/ade/ADEChallengeData2016'
# The demo's ground, discs, squares, triangles and bars are drawn as these ADE20K classes; naming
# them makes the dataset map them to labels 0..4 and every other label to 255 (ignored).
metainfo = dict(classes=('floor', 'ball', 'box', 'flag', 'pole'))
num_classes = 5
max_iters = 40

model = dict(
    decode_head=dict(num_classes=num_classes),
    auxiliary_head=dict(num_classes=num_classes))

train_dataloader = dict(
    batch_size=2,
    num_workers=2,
    dataset=dict(data_root=data_root, metainfo=metainfo))
val_dataloader = dict(
    num_workers=2,
    dataset=dict(data_root=data_root, metainfo=metainfo))
test_dataloader = val_dataloader

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=max_iters // 4),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=max_iters // 4, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(
    logger=dict(interval=10),
    checkpoint=dict(interval=max_iters))
