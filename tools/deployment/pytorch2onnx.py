"""Export an mmo1d model to ONNX from its config and checkpoint, and check it with ONNX Runtime.

What is exported, by the config's ``default_scope``:

- ``mmpretrain``: the classifier, ``model(x, mode='tensor')``: (N, num_classes) class scores;
- ``mmseg``: the segmentor, ``model.encode_decode(x, metas)``: (N, num_classes, H, W) logits at
  the input size (the whole-image inference of UperNet with its auxiliary head dropped);
- with ``--backbone``, any config (mmdet's included): ``model.backbone(x)``, one output per stage.

The checkpoint must hold exactly the model's tensors (keys and shapes): one that does not fit the
config is refused with the counts and a few keys of each misfit, never exported with random weights.

The graph input is the preprocessed image batch (N, 3, H, W): mean/std normalisation, channel order
and resizing are left outside, as in mmdeploy. The ONNX model is run with ONNX Runtime on the CPU
on a random input, and the largest absolute difference from PyTorch is printed; the script fails
when it exceeds ``--atol``.

Example::

    python tools/deployment/pytorch2onnx.py \\
        configs/mmseg/oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py \\
        work_dirs/upernet-t-1d/iter_160000.pth --shape 512 512 --out upernet-t-1d.onnx
"""
import argparse
import time
from typing import List, Optional, Sequence, Tuple

import torch
from mmengine.config import Config, DictAction
from mmengine.model import revert_sync_batchnorm
from torch import Tensor, nn

from mmo1d.deployment import (
    export_onnx,
    legacy_export_problem,
    max_abs_difference,
    non_standard_ops,
    record_adaptive_pools,
    run_onnxruntime,
)
from mmo1d.models.utils.checkpoint import load_exact
from mmo1d.utils import CheckpointFileError
from mmo1d.utils.quiet import quiet_upstream

SCOPES = ('mmpretrain', 'mmseg', 'mmdet')


class ClassifierScores(nn.Module):
    """An mmpretrain classifier's class scores: ``model(x, mode='tensor')``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x, mode='tensor')


class SegmentorLogits(nn.Module):
    """An mmseg segmentor's logits resized to the input: ``model.encode_decode``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        shape = tuple(x.shape[-2:])
        metas = [dict(img_shape=shape, ori_shape=shape, pad_shape=shape)] * x.shape[0]
        return self.model.encode_decode(x, metas)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Export an mmo1d model to ONNX and check it with ONNX Runtime')
    parser.add_argument('config', help='mmpretrain, mmseg or mmdet config file')
    parser.add_argument('checkpoint', nargs='?', default=None,
                        help='checkpoint file (default: none, the weights are random)')
    parser.add_argument('--out', default='model.onnx', help='ONNX file to write (default: model.onnx)')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'), default=None,
                        help='input height and width (default: 224 224 for classifiers, the crop size '
                        'for segmentors, 800 1280 for detectors)')
    parser.add_argument('--batch-size', type=int, default=1, help='batch size of the input (default: 1)')
    parser.add_argument('--backbone', action='store_true', help='export the backbone only')
    parser.add_argument('--legacy', action='store_true',
                        help="use torch's TorchScript-based exporter (dynamo=False) instead of torch.export")
    parser.add_argument('--opset', type=int, default=None, help='ONNX opset, >= 17 (default: the exporter\'s)')
    parser.add_argument('--atol', type=float, default=1e-4,
                        help='fail when |PyTorch - ONNX Runtime| exceeds this (default: 1e-4)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def build_model(cfg: Config, checkpoint: Optional[str], backbone: bool) -> Tuple[nn.Module, str]:
    """The model to export, in eval mode on the CPU, built with its toolbox's own API.

    Returns:
        tuple[nn.Module, str]: the module and the config's default scope.

    Raises:
        SystemExit: ``error: ...`` when the checkpoint cannot be read or does not fit the model.
    """
    scope = cfg.get('default_scope')
    if scope not in SCOPES:
        raise ValueError(f'the config has default_scope={scope!r}; expected one of {SCOPES}')
    if scope == 'mmdet' and not backbone:
        raise ValueError('a whole detector needs mmdeploy\'s rewrites of its post-processing to export '
                         '(docs/deployment.md); pass --backbone to export its backbone')
    # Built without the checkpoint: the toolboxes' loaders take what fits and only log the rest.
    if scope == 'mmpretrain':
        from mmpretrain.apis import init_model
        model = init_model(cfg, None, device='cpu')
    elif scope == 'mmseg':
        from mmseg.apis import init_model
        model = init_model(cfg, None, device='cpu')
    else:
        from mmdet.apis import init_detector
        model = init_detector(cfg, None, device='cpu')
    if checkpoint is not None:
        try:
            loaded = load_exact(model, checkpoint)
        except (FileNotFoundError, CheckpointFileError, RuntimeError, ValueError, TypeError) as e:
            raise SystemExit(f'error: {e}') from e
        print(f'loaded {loaded} tensors from {checkpoint}')
    model = revert_sync_batchnorm(model).eval()
    if backbone:
        return model.backbone, scope
    return (ClassifierScores(model) if scope == 'mmpretrain' else SegmentorLogits(model)).eval(), scope


def default_shape(cfg: Config, scope: str) -> Tuple[int, int]:
    if scope == 'mmseg' and cfg.get('crop_size') is not None:
        return tuple(cfg.crop_size)
    return {'mmpretrain': (224, 224), 'mmseg': (512, 512), 'mmdet': (800, 1280)}[scope]


def flatten_outputs(outputs) -> List[Tensor]:
    if isinstance(outputs, Tensor):
        return [outputs]
    return [t for item in outputs for t in flatten_outputs(item)]


def main(argv: Optional[Sequence[str]] = None) -> float:
    """Export, run both, print the difference; returns it (raises if above ``--atol``)."""
    args = parse_args(argv)
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    model, scope = build_model(cfg, args.checkpoint, args.backbone)
    shape = tuple(args.shape) if args.shape else default_shape(cfg, scope)
    x = torch.randn(args.batch_size, 3, *shape)
    with torch.no_grad(), record_adaptive_pools(model) as pools:
        expected = flatten_outputs(model(x))
    problem = legacy_export_problem(pools, shape) if args.legacy else None
    if problem:
        raise ValueError(f'--legacy: {problem}; without --legacy, the torch.export-based exporter takes any size')
    start = time.perf_counter()
    proto = export_onnx(model, (x, ), args.out, dynamo=not args.legacy, opset_version=args.opset,
                        input_names=['input'])
    exporter = 'TorchScript' if args.legacy else 'torch.export'
    print(f'exported {type(model).__name__} ({scope}, input {tuple(x.shape)}) with the {exporter} exporter '
          f'to {args.out} in {time.perf_counter() - start:.1f} s')
    foreign = non_standard_ops(proto)
    if foreign:
        raise RuntimeError(f'the ONNX graph has non-standard operators: {foreign}')
    diff = max_abs_difference(expected, run_onnxruntime(args.out, [x]))
    print(f'max abs difference between PyTorch and ONNX Runtime: {diff:.3g} over {len(expected)} output(s)')
    if not diff <= args.atol:
        raise RuntimeError(f'ONNX Runtime differs from PyTorch by {diff:.3g} > --atol {args.atol:g}')
    return diff


if __name__ == '__main__':
    quiet_upstream()
    main()
