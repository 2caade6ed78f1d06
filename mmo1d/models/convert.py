"""Conversion of released ImageNet checkpoints into OrientedConvNeXt checkpoints.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023. Sources:

- ``'oriented1d'``: the authors' classifiers (ConvNeXt layout: ``downsample_layers.*``,
  ``stages.i.j.{dwconv,dwconv1,dwconv2,norm,pwconv1,pwconv2,gamma}``, ``norm``, ``head``);
- ``'official'``: facebookresearch ConvNeXt (the same layout, 2D blocks only);
- ``'mmpretrain'``: mmpretrain's ImageClassifier with its ConvNeXt (``backbone.*``, ``head.fc.*``);
- ``'timm'``: timm's ConvNeXt (``stem.0/1``, ``stages.i.downsample.0/1``,
  ``stages.i.blocks.j.{conv_dw,norm,mlp.fc1,mlp.fc2,gamma}``, ``head.norm``, ``head.fc``).

:func:`detect_source_format` tells the layout from the keys. The result is an mmpretrain
ImageClassifier state dict (``backbone.*`` with the final norm as ``backbone.norm3``,
``head.fc.*``) and the backbone part alone. A 2D source converted into a 2D++
model leaves the new oriented branches (``mid_conv``) at their initialisation and reports them;
anything else that does not fit the target model is an error.
"""
import re
from collections import OrderedDict
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from mmengine.model.weight_init import initialize
from torch import Tensor

from .backbones import OrientedConvNeXt
from .utils import adapt_state_dict

SOURCE_FORMATS = ('oriented1d', 'official', 'mmpretrain', 'timm')

_CONVNEXT_RULES = [
    (r'^downsample_layers\.', 'backbone.downsample_layers.'),
    (r'^stages\.(\d+)\.(\d+)\.(?:dwconv|dwconv1)\.', r'backbone.stages.\1.\2.depthwise_conv.'),
    (r'^stages\.(\d+)\.(\d+)\.dwconv2\.', r'backbone.stages.\1.\2.mid_conv.'),
    (r'^stages\.(\d+)\.(\d+)\.pwconv([12])\.', r'backbone.stages.\1.\2.pointwise_conv\3.'),
    (r'^stages\.(\d+)\.(\d+)\.(norm\.|gamma$)', r'backbone.stages.\1.\2.\3'),
    (r'^norm\.', 'backbone.norm3.'),
    (r'^head\.', 'head.fc.'),
]
_RULES: Dict[str, List[Tuple[str, str]]] = {
    'oriented1d': _CONVNEXT_RULES,
    'official': _CONVNEXT_RULES,
    'mmpretrain': [(r'^(backbone\.|head\.fc\.)', r'\1')],
    'timm': [
        (r'^stem\.([01])\.', r'backbone.downsample_layers.0.\1.'),
        (r'^stages\.(\d+)\.downsample\.([01])\.', r'backbone.downsample_layers.\1.\2.'),
        (r'^stages\.(\d+)\.blocks\.(\d+)\.conv_dw\.', r'backbone.stages.\1.\2.depthwise_conv.'),
        (r'^stages\.(\d+)\.blocks\.(\d+)\.mlp\.fc([12])\.', r'backbone.stages.\1.\2.pointwise_conv\3.'),
        (r'^stages\.(\d+)\.blocks\.(\d+)\.(norm\.|gamma$)', r'backbone.stages.\1.\2.\3'),
        (r'^head\.norm\.', 'backbone.norm3.'),
        (r'^head\.fc\.', 'head.fc.'),
    ],
}


class Conversion(NamedTuple):
    """Result of :func:`convert_state_dict`.

    Attributes:
        classifier (OrderedDict[str, Tensor]): mmpretrain ImageClassifier keys (``backbone.*``,
            ``head.fc.*``; no head if the source had none).
        backbone (OrderedDict[str, Tensor]): OrientedConvNeXt keys (final norm as ``norm3``).
        arch (dict): ``depths`` and ``channels``.
        variant (str): Model variant.
        kernel_sizes (list): Per-stage kernel sizes of the backbone.
        stem_kernel_size (int, optional): Oriented kernel length of the depthwise 1D stem.
        fresh (list[str]): Backbone keys not in the source, left at their initialisation.
    """
    classifier: 'OrderedDict[str, Tensor]'
    backbone: 'OrderedDict[str, Tensor]'
    arch: dict
    variant: str
    kernel_sizes: list
    stem_kernel_size: Optional[int]
    fresh: List[str]


class SourceLayoutError(KeyError):
    """The keys of a state dict do not follow the source layout they are converted from."""

    def __str__(self) -> str:
        return str(self.args[0])


def _new_key(key: str, source_format: str) -> Optional[str]:
    """``key`` renamed by the first matching rule of ``source_format``; None if no rule matches."""
    key = re.sub(r'^module\.', '', key)
    for pattern, replacement in _RULES[source_format]:
        new_key, hits = re.subn(pattern, replacement, key)
        if hits:
            return new_key
    return None


def _unknown_keys(state_dict: Dict[str, Tensor], source_format: str) -> List[str]:
    return [key for key in state_dict if _new_key(key, source_format) is None]


def _matching_formats(state_dict: Dict[str, Tensor]) -> List[str]:
    return [fmt for fmt in SOURCE_FORMATS if not _unknown_keys(state_dict, fmt)]


def _examples(keys: List[str], count: int = 3) -> str:
    return ', '.join(keys[:count]) + (', ...' if len(keys) > count else '')


def rename_keys(state_dict: Dict[str, Tensor], source_format: str) -> 'OrderedDict[str, Tensor]':
    """Rename a source state dict to mmpretrain ImageClassifier keys of an OrientedConvNeXt.

    Args:
        state_dict (dict[str, Tensor]): Source tensors.
        source_format (str): One of :data:`SOURCE_FORMATS`.

    Returns:
        OrderedDict[str, Tensor]: ``backbone.*`` and ``head.fc.*`` tensors.

    Raises:
        SourceLayoutError: Keys that are not in the ``source_format`` layout; the message names the
            layout the keys follow, if any, and a few of the keys.
    """
    if source_format not in _RULES:
        raise ValueError(f'unknown source format {source_format!r}; choose one of {SOURCE_FORMATS}')
    new_keys = {key: _new_key(key, source_format) for key in state_dict}
    unknown = [key for key, new_key in new_keys.items() if new_key is None]
    if unknown:
        matching = _matching_formats(state_dict)
        looks_like = (f'the keys follow the {" / ".join(map(repr, matching))} layout' if matching else
                      f'the keys follow none of the source layouts {SOURCE_FORMATS}')
        raise SourceLayoutError(f'{len(unknown)} of {len(state_dict)} keys are not in the {source_format!r} '
                                f'ConvNeXt layout, e.g. {_examples(unknown)}; {looks_like}')
    return OrderedDict((new_keys[key], value) for key, value in state_dict.items())


def infer_variant(renamed: Dict[str, Tensor]) -> str:
    """The variant of a renamed state dict: depthwise 1D stem or not, "++" blocks or not."""
    one_d_stem = 'backbone.downsample_layers.0.pw1.weight' in renamed
    plus_plus = any('.mid_conv.' in key for key in renamed)
    return {(False, False): '2d', (True, False): '1d', (True, True): '1dpp', (False, True): '2dpp'}[
        one_d_stem, plus_plus]


def detect_source_format(state_dict: Dict[str, Tensor]) -> str:
    """The source layout whose key patterns cover every key of ``state_dict``.

    The authors' classifiers and official ConvNeXt share one layout: a state dict in it is
    ``'oriented1d'`` when it has a depthwise 1D stem or "++" blocks, ``'official'`` otherwise.

    Args:
        state_dict (dict[str, Tensor]): Source tensors.

    Returns:
        str: One of :data:`SOURCE_FORMATS`.

    Raises:
        SourceLayoutError: No layout covers every key.
    """
    matching = _matching_formats(state_dict)
    if not matching:
        unknown = {fmt: _unknown_keys(state_dict, fmt) for fmt in SOURCE_FORMATS}
        closest = min(SOURCE_FORMATS, key=lambda fmt: len(unknown[fmt]))
        raise SourceLayoutError(
            f'the keys follow none of the source layouts {SOURCE_FORMATS}: {len(unknown[closest])} of '
            f'{len(state_dict)} keys are not in the closest one, {closest!r}, e.g. {_examples(unknown[closest])}')
    if matching[0] == 'oriented1d':
        return 'official' if infer_variant(rename_keys(state_dict, 'oriented1d')) == '2d' else 'oriented1d'
    return matching[0]


def _infer_arch(renamed: Dict[str, Tensor]) -> Tuple[dict, list, list, Optional[int]]:
    depths = [0] * OrientedConvNeXt.num_stages
    for key in renamed:
        match = re.match(r'backbone\.stages\.(\d+)\.(\d+)\.', key)
        if match:
            stage, block = int(match.group(1)), int(match.group(2))
            depths[stage] = max(depths[stage], block + 1)
    try:
        channels = [renamed[f'backbone.stages.{i}.0.norm.weight'].shape[0] for i in range(len(depths))]
        first = [renamed[f'backbone.stages.{i}.0.depthwise_conv.weight'].shape[-1]
                 for i in range(len(depths))]
    except KeyError as e:
        raise KeyError(f'the source has no stage {e}: not a 4-stage ConvNeXt') from e
    mid = [renamed[f'backbone.stages.{i}.0.mid_conv.weight'].shape[-1]
           if f'backbone.stages.{i}.0.mid_conv.weight' in renamed else None for i in range(len(depths))]
    stem = renamed.get('backbone.downsample_layers.0.dw1.weight')
    return dict(depths=depths, channels=channels), first, mid, None if stem is None else stem.shape[-1]


def convert_state_dict(state_dict: Dict[str, Tensor],
                       source_format: str,
                       variant: Optional[str] = None,
                       mid_kernel_size: int = 31) -> Conversion:
    """Convert a source classifier state dict into OrientedConvNeXt checkpoints.

    Architecture (depths, channels) and kernel sizes are read from the tensors. The target
    variant defaults to the source's; a 2D source may target ``'2dpp'``, whose ``mid_conv``
    branches (1 x ``mid_kernel_size``) then keep a fresh initialisation (truncated normal, seed 0).

    Args:
        state_dict (dict[str, Tensor]): Source tensors.
        source_format (str): One of :data:`SOURCE_FORMATS`.
        variant (str, optional): Target variant. Default: the source's.
        mid_kernel_size (int): K2 of fresh ``mid_conv`` branches. Default: 31.

    Returns:
        Conversion: The checkpoints and what was inferred.
    """
    renamed = rename_keys(state_dict, source_format)
    source_variant = infer_variant(renamed)
    variant = variant or source_variant
    arch, first, mid, stem = _infer_arch(renamed)
    if variant in ('1dpp', '2dpp'):
        kernel_sizes = [(f, m if m is not None else mid_kernel_size) for f, m in zip(first, mid)]
    else:
        kernel_sizes = first
    fresh_allowed = source_variant == '2d' and variant == '2dpp'
    if variant != source_variant and not fresh_allowed:
        raise ValueError(f'the source is a {source_variant!r} model; it converts into {source_variant!r}'
                         + (" or '2dpp'" if source_variant == '2d' else '') + f', not {variant!r}')
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = OrientedConvNeXt(arch, variant, kernel_sizes=kernel_sizes, stem_kernel_size=stem)
        # The default initialisation, without init_weights()'s per-parameter report.
        initialize(model, model.default_init_cfg)
    backbone_src = OrderedDict(
        (k[len('backbone.'):], v) for k, v in renamed.items() if k.startswith('backbone.'))
    loaded = adapt_state_dict(model, backbone_src, optional=lambda key: fresh_allowed and '.mid_conv.' in key)
    backbone = model.state_dict()
    fresh = [k for k in backbone if k not in loaded and not k.endswith('.theta')]
    backbone.update(loaded)
    backbone = OrderedDict((k, v.detach().clone().contiguous()) for k, v in backbone.items())
    classifier = OrderedDict((f'backbone.{k}', v) for k, v in backbone.items())
    classifier.update((k, v) for k, v in renamed.items() if k.startswith('head.fc.'))
    return Conversion(classifier, backbone, arch, variant, kernel_sizes, stem, fresh)


def select_state_dict(checkpoint: dict, ema: bool = False) -> Dict[str, Tensor]:
    """The model tensors of a training checkpoint.

    Args:
        checkpoint (dict): Loaded file: the authors' / official ConvNeXt (``model``,
            ``model_ema``), mmengine (``state_dict``, and ``ema_state_dict`` from its EMAHook),
            timm (``state_dict``, ``state_dict_ema``) or a plain state dict.
        ema (bool): Take the exponential moving average weights. Default: False.

    Returns:
        dict[str, Tensor]: The selected state dict.
    """
    if ema and isinstance(checkpoint.get('ema_state_dict'), dict):
        # mmengine's averaged model: the weights under "module.", plus its step counter.
        return {k[len('module.'):]: v for k, v in checkpoint['ema_state_dict'].items() if k.startswith('module.')}
    keys = ('model_ema', 'state_dict_ema') if ema else ('model', 'state_dict')
    for key in keys:
        if isinstance(checkpoint.get(key), dict):
            return checkpoint[key]
    if ema:
        raise KeyError('no EMA weights (model_ema / state_dict_ema / ema_state_dict) in the checkpoint; it '
                       f'has {list(checkpoint)}')
    if checkpoint and all(isinstance(v, Tensor) for v in checkpoint.values()):
        return checkpoint
    raise KeyError(f'no model weights (model / state_dict) in the checkpoint; it has {list(checkpoint)}')


def arch_name(arch: dict) -> Union[str, dict]:
    """The name of a standard arch (``'tiny'``, ...) or the dict itself."""
    for name, setting in OrientedConvNeXt.arch_settings.items():
        if setting == arch:
            return name
    return arch
