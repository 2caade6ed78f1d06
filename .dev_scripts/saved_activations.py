"""Bytes of the activations that one training forward keeps for backward, per model (CPU).

Counts every tensor autograd saves during the forward pass (``saved_tensors_hooks``, including
what the models' own ``RecomputeSaved`` hooks keep), once per storage, leaving out parameters and
buffers: the part of a training step's peak memory that grows with the batch. Compares the T and B
backbones of every variant with mmpretrain's ConvNeXt (the stock configs' backbone) at 224x224 (``--size``),
float32 (NCHW) or under bfloat16 autocast (channels_last).

    python .dev_scripts/saved_activations.py [--arch tiny base] [--batch 2] [--size 224] [--autocast]
"""
import argparse

import torch

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.layers import recompute


def saved_bytes(model, x, autocast):
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            storages[s.data_ptr()] = s.nbytes()
        return t

    inner = recompute.RecomputeSaved.pack

    def inner_pack(self, t):  # hooks nested in the model's forward hide its saves from `pack`
        packed = inner(self, t)
        return pack(packed) if isinstance(packed, torch.Tensor) else packed

    recompute.RecomputeSaved.pack = inner_pack
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                torch.autocast('cpu', dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
    finally:
        recompute.RecomputeSaved.pack = inner
    out = out[-1] if isinstance(out, (tuple, list)) else out
    out.float().sum().backward()
    return sum(storages.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arch', nargs='+', default=['tiny', 'base'])
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--size', type=int, default=224, help='height and width of the input')
    parser.add_argument('--autocast', action='store_true', help='bfloat16 autocast, channels_last')
    args = parser.parse_args()
    from mmpretrain.models import ConvNeXt
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    fmt = torch.channels_last if args.autocast else torch.contiguous_format
    for arch in args.arch:
        stock = ConvNeXt(arch=arch)
        stock.train()
        base = saved_bytes(stock, x, args.autocast)
        print(f'{arch}: mmpretrain ConvNeXt {base / 2**20 / args.batch:8.1f} MiB per image')
        for variant in ('2d', '1d', '1dpp', '2dpp'):
            model = OrientedConvNeXt(arch=arch, variant=variant).to(memory_format=fmt)
            model.train()
            b = saved_bytes(model, x.contiguous(memory_format=fmt), args.autocast)
            print(f'{arch}: {variant:>4} {b / 2**20 / args.batch:8.1f} MiB per image  {b / base:.3f}x')


if __name__ == '__main__':
    main()
