"""Largest gradients of one float32 training step of an mmdet or mmseg config, on the CPU.

What float16 AMP can hold: a gradient above 65504 at the loss scale overflows, and GradScaler then
skips the optimizer step. Builds the config's model with its own initialisation (the Pretrained
entry of the backbone dropped), draws the first batch of its train pipeline (seed 0, before the
model is built, so that every config sees the same batch), runs forward + backward in float32 and
prints the input shapes and the parameters with the largest gradients.

    python .dev_scripts/grad_range.py CONFIG DATA_ROOT [--top 8]

DATA_ROOT: e.g. the COCO folder of `tools/dataset_converters/make_demo_data.py`.
"""
import argparse
import random

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner

import mmo1d  # noqa: F401  (registers mmo1d's modules)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config')
    parser.add_argument('data_root')
    parser.add_argument('--top', type=int, default=8)
    args = parser.parse_args()
    cfg = Config.fromfile(args.config)
    cfg.model.backbone.pop('init_cfg', None)
    loader_cfg = cfg.train_dataloader
    loader_cfg.dataset.data_root = args.data_root.rstrip('/') + '/'
    loader_cfg.update(num_workers=0, persistent_workers=False, batch_size=2)
    init_default_scope(cfg.get('default_scope'))
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    batch = next(iter(Runner.build_dataloader(loader_cfg, seed=0)))
    torch.manual_seed(0)
    from mmengine.registry import MODELS
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.train()
    data = model.data_preprocessor(batch, True)
    loss, _ = model.parse_losses(model(**data, mode='loss'))
    loss.backward()
    shapes = [tuple(d.img_shape) for d in data['data_samples']]
    print(f'batch {tuple(data["inputs"].shape)} (images {shapes}), loss {loss.item():.4g}')
    grads = sorted(((n, p.grad.abs().max().item()) for n, p in model.named_parameters() if p.grad is not None),
                   key=lambda kv: -kv[1])
    print('largest gradients: ' + ', '.join(f'{n} {g:.3g}' for n, g in grads[:args.top]))


if __name__ == '__main__':
    main()
