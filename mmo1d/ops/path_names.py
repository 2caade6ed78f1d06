"""Former names of the CUDA kernel paths, mapped to the current ones.

Each kernel family's paths are named after the family (``SegGather`` in ``csrc/cuda/seg_gather/``
serves the path ``'seg_gather'``); :func:`canonical_path` reads the names that earlier builds
returned (recorded benchmarks, notes, scripts) as the current ones.
"""
from typing import Dict

# Former path name -> current path name (the paths of the Interp family kept their names).
PATH_ALIASES: Dict[str, str] = {
    's2_nhwc': 's2_gather',
    'win_nhwc': 'win_gather',
    'win_classes_nhwc': 'win_gather_classes',
    'vec_nhwc': 'vec_gather',
    'seg_nchw': 'seg_gather',
    'vec_wgrad_nhwc': 'vec_wgrad',
    'vec_wgrad_classes_nhwc': 'vec_wgrad_classes',
    'seg_wgrad_nchw': 'seg_wgrad',
    'interp_win_nhwc': 'interp_win',
    'interp_seg_nchw': 'interp_seg',
    'interp_seg_wgrad_nchw': 'interp_seg_wgrad',
    'interp_vec_nhwc': 'interp_vec',
    'interp_vec_wgrad_nhwc': 'interp_vec_wgrad',
    'gather_nchw': 'general_gather_nchw',
    'gather_nhwc': 'general_gather_nhwc',
    'wgrad_nchw': 'general_wgrad_nchw',
    'wgrad_nhwc': 'general_wgrad_nhwc',
}


def canonical_path(name: str) -> str:
    """The current name of a kernel path given by its current or former name.

    A suffix such as ``'+nchw_copies'`` (see :func:`mmo1d.ops.oriented_dwconv1d_path`) is kept.

    Args:
        name (str): A path name, e.g. ``'seg_nchw'`` or ``'gather_nchw+nchw_copies'``.

    Returns:
        str: The name with its family part in the current spelling, e.g. ``'seg_gather'``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f'canonical_path: a path name must be a non-empty string, got {name!r}')
    base, plus, suffix = name.partition('+')
    return PATH_ALIASES.get(base, base) + plus + suffix
