"""Loading pretrained weights into oriented 1D models, resizing the oriented kernels.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023: detection and
segmentation backbones use shorter oriented kernels in the late stages (e.g. 1x27 and 1x13) than
the ImageNet classifiers they start from (1x31). A kernel is carried over by centre-cropping it
(keeping the taps with ``|t - K // 2| <= K' // 2``) or, to grow it, by zero-padding both ends;
both keep every tap at the same spatial offset, because offsets depend only on ``t - K // 2``.
Angles (``theta``) are loaded like the weights they were trained with: a checkpoint of a model that
learned its angles (``learnable_angles=True``) gives a fixed-angle model its learned angles, and a
fixed-angle checkpoint gives a learnable model its starting angles; a checkpoint without angles
(the authors' downstream backbones) leaves the model's own. Everything else must match exactly: a
checkpoint that does not fit is an error that counts the keys and names a few of them, never a
silent partial load; when the keys would fit under a prefix (a whole detector's ``backbone.*``),
the error names it. :func:`load_exact` is the strict counterpart for a whole model and its own
checkpoint (what a deployment exports): every key and shape must match, kernels included.
"""
import math
import re
from collections import OrderedDict
from typing import Callable, Dict, List, Optional, Tuple

import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader
from torch import Tensor, nn

from mmo1d.ops import OrientedDWConv1d
from mmo1d.utils import load_checkpoint_file


def resize_oriented_kernel(weight: Tensor, kernel_size: int) -> Tensor:
    """Centre-crop or zero-pad an oriented kernel to a new odd length.

    Args:
        weight (Tensor): (C, 1, 1, K) or (C, K) kernel with K odd.
        kernel_size (int): New odd length K'.

    Returns:
        Tensor: Same leading shape with last dimension K'; taps keep their offset from the centre.
    """
    k = weight.shape[-1]
    if k % 2 == 0 or kernel_size < 1 or kernel_size % 2 == 0:
        raise ValueError(f'oriented kernels have odd lengths, got {k} -> {kernel_size}')
    if kernel_size <= k:
        start = (k - kernel_size) // 2
        return weight[..., start:start + kernel_size].clone()
    pad = (kernel_size - k) // 2
    return F.pad(weight, (pad, pad))


def extract_state_dict(checkpoint: dict, prefix: Optional[str] = None) -> 'OrderedDict[str, Tensor]':
    """The state dict of an mmengine-style checkpoint, ``module.`` removed, optionally one prefix.

    Args:
        checkpoint (dict): A loaded checkpoint: ``{'state_dict': ...}`` or a plain state dict.
        prefix (str, optional): Keep only the keys under this prefix (e.g. ``'backbone.'``) and
            strip it. Default: None.

    Returns:
        OrderedDict[str, Tensor]: The selected tensors.
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f'expected a checkpoint dict, got {type(checkpoint).__name__}')
    state_dict = checkpoint.get('state_dict', checkpoint)
    if 'model' in state_dict and isinstance(state_dict['model'], dict):
        raise ValueError(
            'this looks like an unconverted training checkpoint (it has a "model" entry, as the '
            'authors\' and the official ConvNeXt releases do); convert it with '
            '`python tools/model_converters/convert_checkpoint.py` first')
    state_dict = OrderedDict((re.sub(r'^module\.', '', k), v) for k, v in state_dict.items()
                             if isinstance(v, Tensor))
    if prefix:
        if not prefix.endswith('.'):
            prefix += '.'
        selected = OrderedDict((k[len(prefix):], v) for k, v in state_dict.items() if k.startswith(prefix))
        if not selected:
            raise KeyError(f'no key of the checkpoint starts with prefix {prefix!r}; its first keys are '
                           f'{list(state_dict)[:5]}')
        state_dict = selected
    return state_dict


_EXAMPLES = 3


def _examples(items: List[str], join: Callable[[List[str]], str] = str) -> str:
    """The first few items of a list, joined, and how many more there are."""
    more = len(items) - _EXAMPLES
    return join(items[:_EXAMPLES]) + (f' and {more} more' if more > 0 else '')


def _misfits(missing: List[str], unexpected: List[str], mismatched: Dict[str, str]) -> List[str]:
    """One phrase per kind of misfit between a checkpoint and a model: a count and a few keys."""
    lines = []
    if missing:
        lines.append(f'{len(missing)} missing keys: {_examples(missing)}')
    if unexpected:
        lines.append(f'{len(unexpected)} unexpected keys: {_examples(unexpected)}')
    if mismatched:
        details = [f'{k} ({why})' for k, why in mismatched.items()]
        lines.append(f'{len(mismatched)} mismatched tensors: {_examples(details, "; ".join)}')
    return lines


def _fitting_prefix(keys: List[str], needed: List[str]) -> Optional[Tuple[str, int]]:
    """The prefix under which a checkpoint holds a model's keys, if it holds most of them.

    Args:
        keys (list[str]): Keys of the checkpoint.
        needed (list[str]): Keys the model must load.

    Returns:
        tuple[str, int] | None: The prefix (ending with ``'.'``) under which most of ``needed``
        are found, and how many; None when no prefix gives at least half of them, or more than
        the keys as they are.
    """
    wanted = set(needed)
    found: Dict[str, set] = {}
    for key in keys:
        for i, char in enumerate(key):
            if char == '.' and key[i + 1:] in wanted:
                found.setdefault(key[:i + 1], set()).add(key[i + 1:])
    if not found:
        return None
    best = max(found, key=lambda p: (len(found[p]), -len(p)))
    hits = len(found[best])
    return (best, hits) if 2 * hits >= len(wanted) and hits > len(wanted.intersection(keys)) else None


def adapt_state_dict(model: nn.Module,
                     state_dict: Dict[str, Tensor],
                     optional: Callable[[str], bool] = lambda key: False,
                     logger: str = 'current',
                     prefix: str = '') -> 'OrderedDict[str, Tensor]':
    """Check a state dict against a model and resize its oriented kernels to the model's.

    Rules: an oriented kernel (the ``weight`` of an :class:`~mmo1d.ops.OrientedDWConv1d`) whose
    length differs is centre-cropped or zero-padded (logged); angles (``theta``) may be absent (the
    model keeps its own, logged) and when present are loaded, buffer or parameter alike, whatever
    the model's directions (how many differ from the model's own and by how much is logged: a
    checkpoint that learned its angles turns a fixed-angle model to them, which then reads them with
    its own ``rounding``); keys for which
    ``optional(key)`` is true may be absent (the model keeps their initial values, logged) or
    unexpected (ignored, logged). Any other missing or unexpected key or shape mismatch is a
    ``RuntimeError`` that counts each kind and names a few of them; when most of the model's keys
    are in ``state_dict`` under one prefix (``'backbone.'`` for a detector, a segmentor or a
    classifier), it asks ``did you mean prefix='backbone.'?``.

    Args:
        model (nn.Module): Target model.
        state_dict (dict[str, Tensor]): Tensors to load, keyed like ``model.state_dict()``.
        optional (callable): Predicate on keys that may be absent or extra. Default: none.
        logger (str): mmengine logger name for the messages. Default: 'current'.
        prefix (str): The prefix already removed from the keys of ``state_dict`` (see
            :func:`extract_state_dict`); a suggested prefix is written after it. Default: ''.

    Returns:
        OrderedDict[str, Tensor]: Tensors ready for ``model.load_state_dict(..., strict=False)``:
        resized kernels, the checkpoint's angles, no ignored keys.
    """
    target = model.state_dict()
    oriented = {f'{name}.weight': m.kernel_size for name, m in model.named_modules()
                if isinstance(m, OrientedDWConv1d)}
    result = OrderedDict()
    unexpected: List[str] = []
    mismatched: Dict[str, str] = {}
    turned: Dict[str, float] = {}
    for key, value in state_dict.items():
        if key not in target:
            if optional(key):
                print_log(f'pretrained: ignored {key} (not used by this model)', logger=logger)
            else:
                unexpected.append(key)
            continue
        want = target[key]
        if key.endswith('.theta') and key[:-len('theta')] + 'weight' in oriented and value.shape == want.shape:
            change = (value.double() - want.detach().cpu().double()).abs().max().item()
            if change > 1e-5:
                turned[key] = math.degrees(change)
        if key in oriented and value.shape != want.shape and value.dim() == 4 \
                and value.shape[:3] == want.shape[:3]:
            print_log(f'pretrained: resized oriented kernel {key} from 1x{value.shape[-1]} to '
                      f'1x{want.shape[-1]}', logger=logger)
            value = resize_oriented_kernel(value, want.shape[-1])
        if value.shape != want.shape:
            mismatched[key] = f'checkpoint {tuple(value.shape)}, model {tuple(want.shape)}'
            continue
        result[key] = value
    missing = []
    needed = []
    own_angles = []
    initial = []
    for key in target:
        if key.endswith('.theta') and key[:-len('theta')] + 'weight' in oriented:
            if key not in state_dict:
                own_angles.append(key)
            continue
        if optional(key):
            if key not in state_dict:
                initial.append(key)
            continue
        needed.append(key)
        if key not in state_dict:
            missing.append(key)
    if unexpected or missing or mismatched:
        lines = _misfits(missing, unexpected, mismatched)
        fit = _fitting_prefix(list(state_dict), needed) if missing else None
        if fit is not None:
            whole = (prefix if not prefix or prefix.endswith('.') else prefix + '.') + fit[0]
            lines.append(f'{fit[1]} of the model\'s {len(needed)} keys are in the checkpoint under '
                         f'{whole!r}: did you mean prefix={whole!r}?')
        raise RuntimeError(f'the checkpoint does not fit {type(model).__name__}: ' + ' | '.join(lines))
    if initial:
        print_log(f'pretrained: {len(initial)} tensors are not in the checkpoint and keep their initial values: '
                  f'{_examples(initial)}', logger=logger)
    if own_angles:
        print_log(f'pretrained: {len(own_angles)} angle tensors are not in the checkpoint and keep the model\'s '
                  f'directions: {_examples(own_angles)}', logger=logger)
    if turned:
        print_log(f'pretrained: {len(turned)} angle tensors of the checkpoint differ from the model\'s directions '
                  f'(by up to {max(turned.values()):.3g} degrees) and are loaded: {_examples(list(turned))}',
                  logger=logger)
    return result


def load_pretrained(model: nn.Module,
                    filename: str,
                    prefix: Optional[str] = None,
                    optional: Callable[[str], bool] = lambda key: False,
                    map_location: str = 'cpu',
                    logger: str = 'current') -> None:
    """Load a checkpoint into a model with :func:`adapt_state_dict`'s rules.

    Args:
        model (nn.Module): Target model.
        filename (str): Checkpoint path or URL (anything mmengine's ``CheckpointLoader`` reads).
        prefix (str, optional): Load only the keys under this prefix (e.g. ``'backbone.'``).
        optional (callable): Predicate on keys that may be absent or extra. Default: none.
        map_location (str): Where to load the tensors. Default: 'cpu'.
        logger (str): mmengine logger name. Default: 'current'.
    """
    checkpoint = CheckpointLoader.load_checkpoint(filename, map_location=map_location, logger=logger)
    state_dict = adapt_state_dict(model, extract_state_dict(checkpoint, prefix), optional, logger, prefix or '')
    model.load_state_dict(state_dict, strict=False)
    print_log(f'pretrained: loaded {len(state_dict)} tensors from {filename}', logger=logger)


def load_exact(model: nn.Module, filename: str) -> int:
    """Load a checkpoint that must hold exactly the model's tensors, with the model's shapes.

    Args:
        model (nn.Module): Target model.
        filename (str): Local checkpoint file (read by :func:`mmo1d.utils.load_checkpoint_file`), or
            a URL that mmengine's ``CheckpointLoader`` reads.

    Returns:
        int: How many tensors were loaded.

    Raises:
        RuntimeError: when keys are missing or unexpected or shapes differ: the counts and a few
            keys of each kind (nothing is loaded then).
    """
    if '://' in filename:
        checkpoint = CheckpointLoader.load_checkpoint(filename, map_location='cpu')
    else:
        checkpoint = load_checkpoint_file(filename)
    state_dict = extract_state_dict(checkpoint)
    target = model.state_dict()
    missing = [k for k in target if k not in state_dict]
    unexpected = [k for k in state_dict if k not in target]
    mismatched = {k: f'checkpoint {tuple(v.shape)}, model {tuple(target[k].shape)}' for k, v in state_dict.items()
                  if k in target and v.shape != target[k].shape}
    if missing or unexpected or mismatched:
        raise RuntimeError(f'{filename} does not fit {type(model).__name__}: '
                           + ' | '.join(_misfits(missing, unexpected, mismatched)))
    model.load_state_dict(state_dict, strict=True)
    return len(state_dict)
