"""One float32 training step of a downstream benchmark config on the CPU: its largest gradients and the
peak of the tensor memory it holds.

Prepares the config as `tools/analysis_tools/benchmark_downstream.py` does (its run names: seg-stock,
det-t-1dpp, ...; pretrained checkpoints dropped, the demo data, 2 images per batch, seed 0), draws the
first batch (before the model is built, so that every config sees the same batch), runs forward +
backward and prints:

- the parameters with the largest gradients: what float16 AMP can hold (a gradient above 65504 at the
  loss scale overflows, and GradScaler then skips the optimizer step);
- the bytes of the tensors alive after the forward pass and at the peak of the step (every tensor an
  op returns, counted once per storage until its last tensor is freed; parameters and the loader's
  batch not included), which compares the memory two configs' steps hold without a GPU.

    python .dev_scripts/train_step_cpu.py RUN DEMO_DATA [--top 8]

DEMO_DATA: the folder written by `tools/dataset_converters/make_demo_data.py --out`.
"""
import argparse
import os.path as osp
import random
import tempfile
import weakref

import numpy as np
import torch
from mmengine.registry import MODELS, init_default_scope
from mmengine.runner import Runner
from torch.utils._python_dispatch import TorchDispatchMode

from mmo1d.benchmark.downstream_configs import RUNS, load_config, prepare_config

CONFIG_ROOT = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), 'configs')


class LiveTensors(TorchDispatchMode):
    """Bytes of the storages of the tensors that ops return, from their creation to the death of their
    last tensor; ``peak`` is the most at any time."""

    def __init__(self):
        super().__init__()
        self.storages = {}  # data pointer -> [bytes, tensors alive]
        self.bytes = 0
        self.peak = 0

    def _release(self, key):
        entry = self.storages[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.bytes -= entry[0]
            del self.storages[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func._schema.is_mutable:
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() == 0:
                    continue
                key = t.untyped_storage().data_ptr()
                if key not in self.storages:
                    self.storages[key] = [t.untyped_storage().nbytes(), 0]
                    self.bytes += self.storages[key][0]
                    self.peak = max(self.peak, self.bytes)
                self.storages[key][1] += 1
                weakref.finalize(t, self._release, key)
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('run', choices=list(RUNS))
    parser.add_argument('demo_data')
    parser.add_argument('--top', type=int, default=8)
    args = parser.parse_args()
    run = RUNS[args.run]
    cfg, _ = load_config(run, CONFIG_ROOT)
    prepare_config(cfg, run, args.demo_data, tempfile.mkdtemp(), workers=0)
    init_default_scope(cfg.get('default_scope'))
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    batch = next(iter(Runner.build_dataloader(cfg.train_dataloader, seed=0)))
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.train()
    live = LiveTensors()
    with live:
        data = model.data_preprocessor(batch, True)
        loss, _ = model.parse_losses(model(**data, mode='loss'))
        after_forward = live.bytes
        loss.backward()
    shapes = [tuple(d.img_shape) for d in data['data_samples']]
    print(f'batch {tuple(data["inputs"].shape)} (images {shapes}), loss {loss.item():.4g}')
    print(f'tensors alive after the forward pass {after_forward / 2**20:.0f} MiB, at the peak of the step '
          f'{live.peak / 2**20:.0f} MiB')
    grads = sorted(((n, p.grad.abs().max().item()) for n, p in model.named_parameters() if p.grad is not None),
                   key=lambda kv: -kv[1])
    print('largest gradients: ' + ', '.join(f'{n} {g:.3g}' for n, g in grads[:args.top]))


if __name__ == '__main__':
    main()
