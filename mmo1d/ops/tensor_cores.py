"""Whether the CUDA op may use tensor cores.

The tensor-core path (``mma_nhwc``) serves the stride-1 forward and input gradient of float16 and
bfloat16 channels_last tensors (C a multiple of 16) on GPUs of compute capability 8.0 and above. Its
products are exact in float32, as on the other paths; only the order of the float32 additions
differs (tensor cores add 16 products at a time), so results differ from the exact paths' in the
last bits of the float32 sum, well below the float16/bfloat16 rounding of the output. One
difference in kind: a non-finite input pixel turns into NaN every output of its 8-pixel segments
within reach of the line's runs (``0 * inf``), where the other paths leave the outputs that do not
read it finite.

Tensor cores are allowed unless the environment variable ``MMO1D_TENSOR_CORES=0`` is set when the
CUDA kernels load; :func:`set_tensor_cores` changes it at run time (as
``torch.backends.cudnn.allow_tf32`` does for cuDNN).
"""
import os

import torch

from . import _ext


def set_tensor_cores(enabled: bool) -> bool:
    """Allow (True) or forbid (False) the tensor-core path; returns the previous setting.

    Without CUDA kernels loaded the setting has nothing to act on: it returns what the environment
    variable gives and keeps nothing.
    """
    if _ext._cuda_ready:
        return bool(torch.ops.mmo1d.set_tensor_cores(bool(enabled)))
    return tensor_cores_enabled()


def tensor_cores_enabled() -> bool:
    """Whether the tensor-core path may serve calls."""
    if _ext._cuda_ready:
        return bool(torch.ops.mmo1d.tensor_cores_enabled())
    return os.environ.get('MMO1D_TENSOR_CORES', '1') != '0'


__all__ = ['set_tensor_cores', 'tensor_cores_enabled']
