"""FLOPs and parameters of an mmseg or mmdet config on an input of a fixed size.

Counted as mmseg's and mmdet's ``tools/analysis_tools/get_flops.py`` count them: mmengine's
``FlopAnalyzer`` (what ``get_model_complexity_info`` runs; one multiply-add = one FLOP) traces
``model.forward`` in ``'tensor'`` mode on a random image, after the data preprocessor. Importing
mmo1d (the config's ``custom_imports``) teaches it the oriented op and the fused layer norm. For
segmentors this is mmseg's procedure (auxiliary head dropped). For detectors the input has the
given size instead of mmdet's dataset images, as in mmdet 2's script (``--shape 1280 800``); with
random weights the RPN still keeps its ``max_per_img`` proposals (1000). mmdet 3's tensor-mode
forward runs every cascade stage's mask head on all proposals; mmdet 2's ``forward_dummy``, with
which the ConvNeXt and Swin papers' FLOPs were counted, on the first 100 RoIs only. Both are
reported, the second derived from the per-module counts of the first.

Example::

    python tools/analysis_tools/get_flops.py \\
        configs/mmseg/oriented-convnext-tiny-1d_upernet_8xb2-amp-160k_ade20k-512x512.py --shape 2048 512
"""
import argparse
import json
import os.path as osp
from functools import partial
from typing import Optional, Sequence

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.config import Config, DictAction
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import init_default_scope

from mmo1d.utils.quiet import quiet_upstream

#: RoIs per image that mmdet 2's ``forward_dummy`` sends through the mask heads.
DUMMY_MASK_ROIS = 100


def format_flops(flops: int) -> str:
    """FLOPs as the README's tables write them: in G with one decimal, also above 1000G."""
    return f'{flops / 1e9:.1f}G'


def format_params(params: int) -> str:
    """Parameters as the README's tables write them: in M with two decimals."""
    return f'{params / 1e6:.2f}M'


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='mmseg or mmdet config file')
    parser.add_argument('--shape', type=int, nargs=2, required=True, metavar=('H', 'W'),
                        help='input size, as the toolboxes\' --shape: (3, H, W)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override settings of the config')
    parser.add_argument('--json', help='append the result as one JSON line to this file')
    return parser.parse_args(argv)


def _analyze(model: torch.nn.Module, inputs: torch.Tensor) -> FlopAnalyzer:
    model.eval()
    with torch.no_grad():
        analyzer = FlopAnalyzer(model, inputs).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
        analyzer.total()
    return analyzer


def segmentor_flops(cfg: Config, shape: Sequence[int]) -> dict:
    """mmseg's get_flops procedure: ``{'flops', 'params', 'input'}``."""
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    init_default_scope(cfg.get('scope', 'mmseg'))
    input_shape = (3, *shape)
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    model.auxiliary_head = None
    meta = dict(ori_shape=input_shape[-2:], pad_shape=input_shape[-2:])
    data = model.data_preprocessor({'inputs': [torch.rand(input_shape)],
                                    'data_samples': [SegDataSample(metainfo=meta)]})
    analyzer = _analyze(model, data['inputs'])
    return dict(flops=analyzer.total(), params=parameter_count(model)[''], input=list(data['inputs'].shape))


def detector_flops(cfg: Config, shape: Sequence[int]) -> dict:
    """A detector on one image of ``shape``: ``{'flops', 'params', 'input', 'proposals'}``, and for
    a mask head ``mask_head_flops`` and ``flops_masks_of_100_rois``."""
    from mmdet.registry import MODELS
    from mmdet.structures import DetDataSample

    init_default_scope(cfg.get('default_scope', 'mmdet'))
    height, width = shape
    model = revert_sync_batchnorm(MODELS.build(cfg.model))
    meta = dict(img_shape=(height, width), ori_shape=(height, width), pad_shape=(height, width),
                scale_factor=(1.0, 1.0))
    data = model.data_preprocessor({'inputs': [torch.randint(0, 256, (3, height, width), dtype=torch.uint8)],
                                    'data_samples': [DetDataSample(metainfo=meta)]})
    proposals = []
    if getattr(model, 'rpn_head', None) is not None:
        predict = model.rpn_head.predict

        def recording_predict(*args, **kwargs):  # keeps the RPN's output to count the proposals
            proposals.append(predict(*args, **kwargs))
            return proposals[-1]

        model.rpn_head.predict = recording_predict
    model.forward = partial(model.forward, data_samples=data['data_samples'])
    analyzer = _analyze(model, data['inputs'])
    result = dict(flops=analyzer.total(), params=parameter_count(model)[''], input=list(data['inputs'].shape))
    if proposals:
        result['proposals'] = len(proposals[-1][0])
    if proposals and getattr(model.roi_head, 'with_mask', False):
        # Every stage's mask head (a cascade's are roi_head.mask_head.{stage}).
        mask = analyzer.by_module()['roi_head.mask_head']
        rois = result['proposals']
        result['mask_head_flops'] = mask
        result['flops_masks_of_100_rois'] = result['flops'] - mask + mask * min(rois, DUMMY_MASK_ROIS) // rois
    return result


def main(argv: Optional[Sequence[str]] = None) -> dict:
    args = parse_args(argv)
    if not osp.isfile(args.config):
        raise FileNotFoundError(f'config file not found: {args.config}')
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    scope = cfg.get('default_scope')
    if scope not in ('mmseg', 'mmdet'):
        raise ValueError(f'{args.config}: default_scope is {scope!r}; this script counts mmseg and mmdet models '
                         '(classifiers: tools/analysis_tools/model_complexity.py)')
    torch.manual_seed(0)
    result = (segmentor_flops if scope == 'mmseg' else detector_flops)(cfg, args.shape)
    result = dict(config=args.config, shape=list(args.shape), **result)
    split_line = '=' * 30
    print(f"{split_line}\nInput shape: {tuple(result['input'][1:])}\nFlops: {format_flops(result['flops'])}\n"
          f"Params: {format_params(result['params'])}")
    if 'flops_masks_of_100_rois' in result:
        print(f"Flops with the mask heads on {DUMMY_MASK_ROIS} of the {result['proposals']} RoIs (mmdet 2's "
              f"forward_dummy): {format_flops(result['flops_masks_of_100_rois'])}")
    print(split_line)
    if args.json:
        with open(args.json, 'a') as f:
            f.write(json.dumps(result) + '\n')
    return result


if __name__ == '__main__':
    quiet_upstream()
    main()
