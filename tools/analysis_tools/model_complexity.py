"""Parameters and FLOPs of the OrientedConvNeXt ImageNet classifiers.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023).
Each model is the backbone plus a linear classification head, as in the paper's results table.
FLOPs are counted the fvcore way the paper uses (one multiply-add = one FLOP; element-wise
operations not counted) with mmengine's FlopAnalyzer, which is taught the oriented op (K
multiply-adds per output element). Angles are buffers and not counted as parameters.

Example::

    python tools/analysis_tools/model_complexity.py --archs tiny base --img-size 224
"""
import argparse
import json
from typing import List

from torch import Tensor, nn

from mmo1d.models import OrientedConvNeXt
from mmo1d.models.utils import model_complexity
from mmo1d.utils.quiet import quiet_upstream

VARIANT_NAMES = {'2d': ' (2D)', '1d': '-1D', '1dpp': '-1D++', '2dpp': '-2D++'}


class Classifier(nn.Module):
    """Backbone, global average pooling + final norm (inside the backbone), linear head.

    Args:
        backbone (OrientedConvNeXt): A backbone with ``gap_before_final_norm=True``.
        num_classes (int): Number of classes.
    """

    def __init__(self, backbone: OrientedConvNeXt, num_classes: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.channels[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """(N, 3, H, W) -> (N, num_classes)."""
        return self.head(self.backbone(x)[-1])


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--archs', nargs='+', default=['tiny', 'base'],
                        choices=list(OrientedConvNeXt.arch_settings))
    parser.add_argument('--variants', nargs='+', default=list(VARIANT_NAMES), choices=list(VARIANT_NAMES))
    parser.add_argument('--img-size', type=int, default=224, help='square input size (default: 224)')
    parser.add_argument('--kernel-sizes', default='imagenet', choices=('imagenet', 'downstream'))
    parser.add_argument('--num-classes', type=int, default=1000)
    parser.add_argument('--json', help='also write the rows to this JSON file')
    return parser.parse_args(argv)


def measure(arch: str, variant: str, img_size: int, kernel_sizes: str, num_classes: int) -> dict:
    """One row: ``model``, ``arch``, ``variant``, ``params`` and ``flops`` (ints)."""
    model = Classifier(OrientedConvNeXt(arch, variant, kernel_sizes=kernel_sizes), num_classes)
    flops, params = model_complexity(model, (3, img_size, img_size))
    return dict(model=f'ConvNeXt-{arch[0].upper()}{VARIANT_NAMES[variant]}', arch=arch, variant=variant,
                params=params, flops=flops)


def main(argv=None) -> List[dict]:
    args = parse_args(argv)
    rows = [measure(a, v, args.img_size, args.kernel_sizes, args.num_classes)
            for a in args.archs for v in args.variants]
    print(f'| model | params (M) | FLOPs at {args.img_size}x{args.img_size} (G) |')
    print('|---|---|---|')
    for row in rows:
        print(f"| {row['model']} | {row['params'] / 1e6:.2f} | {row['flops'] / 1e9:.2f} |")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(dict(img_size=args.img_size, kernel_sizes=args.kernel_sizes, num_classes=args.num_classes,
                           rows=rows), f, indent=2)
    return rows


if __name__ == '__main__':
    quiet_upstream()
    main()
