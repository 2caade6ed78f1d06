"""Convert ImageNet classifier checkpoints into OrientedConvNeXt checkpoints.

Models of "Convolutional Networks with Oriented 1D Kernels" (Kirchmeyer & Deng, ICCV 2023).
Sources (``--src-format``, default: the layout the keys follow): the authors' released
classifiers (``oriented1d``), official facebookresearch ConvNeXt (``official``), mmpretrain ConvNeXt
(``mmpretrain``) and timm ConvNeXt (``timm``). Outputs: a backbone checkpoint for
``init_cfg=dict(type='Pretrained', checkpoint=...)`` and / or an mmpretrain ImageClassifier
checkpoint (``backbone.*``, ``head.fc.*``; load it with ``load_from`` or, for a backbone,
``prefix='backbone.'``).

Examples::

    python tools/model_converters/convert_checkpoint.py convnext_tiny_1d.pth --src-format oriented1d --ema \\
        --backbone-out t1d_backbone.pth --classifier-out t1d_in1k.pth
    python tools/model_converters/convert_checkpoint.py convnext_tiny_1k_224_ema.pth --src-format official \\
        --variant 2dpp --backbone-out t2dpp_init.pth
"""
import argparse
import os
import os.path as osp

import torch

from mmo1d.models.convert import (
    SOURCE_FORMATS,
    SourceLayoutError,
    arch_name,
    convert_state_dict,
    detect_source_format,
    select_state_dict,
)
from mmo1d.utils import CheckpointFileError, load_checkpoint_file
from mmo1d.utils.quiet import quiet_upstream


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='source checkpoint (.pth)')
    parser.add_argument('--src-format', choices=SOURCE_FORMATS,
                        help='layout of the source (default: the one its keys follow)')
    parser.add_argument('--variant', choices=('2d', '1d', '1dpp', '2dpp'),
                        help="target variant (default: the source's; a 2D source may target 2dpp)")
    parser.add_argument('--ema', action='store_true',
                        help='convert the EMA weights (model_ema / state_dict_ema / ema_state_dict)')
    parser.add_argument('--mid-kernel-size', type=int, default=31,
                        help='oriented kernel length of new 2D++ branches (default: 31)')
    parser.add_argument('--backbone-out', help='write the backbone checkpoint here')
    parser.add_argument('--classifier-out', help='write the mmpretrain ImageClassifier checkpoint here')
    args = parser.parse_args(argv)
    if not (args.backbone_out or args.classifier_out):
        parser.error('give --backbone-out and/or --classifier-out')
    return args


def save(state_dict: dict, path: str, meta: dict) -> None:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    torch.save({'state_dict': state_dict, 'meta': meta}, path)
    print(f'wrote {path} ({len(state_dict)} tensors)')


def main(argv=None) -> None:
    args = parse_args(argv)
    # Every way a source can be wrong ends in one line: the file, then what is wrong with it.
    try:
        source = select_state_dict(load_checkpoint_file(args.src), ema=args.ema)
    except (FileNotFoundError, CheckpointFileError) as e:
        raise SystemExit(f'error: {e}') from e
    except KeyError as e:
        raise SystemExit(f'error: {args.src}: {e.args[0]}') from e
    try:
        src_format = args.src_format or detect_source_format(source)
        result = convert_state_dict(source, src_format, args.variant, args.mid_kernel_size)
    except SourceLayoutError as e:
        raise SystemExit(f'error: {args.src}: {e}') from e
    except (KeyError, ValueError, RuntimeError) as e:
        raise SystemExit(f'error: {args.src}: {e.args[0] if isinstance(e, KeyError) else e}') from e
    arch = arch_name(result.arch)
    meta = dict(source=osp.basename(args.src), source_format=src_format, ema=args.ema, arch=arch,
                variant=result.variant, kernel_sizes=result.kernel_sizes,
                stem_kernel_size=result.stem_kernel_size)
    print(f'source format {src_format!r}' + ('' if args.src_format else ' (told from the keys)'))
    print(f'arch={arch} variant={result.variant!r} kernel_sizes={result.kernel_sizes} '
          f'stem_kernel_size={result.stem_kernel_size}')
    if args.backbone_out:
        save(result.backbone, args.backbone_out, meta)
    if args.classifier_out:
        if 'head.fc.weight' not in result.classifier:
            raise SystemExit('the source has no classification head: use --backbone-out only')
        save(result.classifier, args.classifier_out, meta)


if __name__ == '__main__':
    quiet_upstream()
    main()
