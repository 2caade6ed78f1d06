"""The CUDA kernels' cache of angle tables.

The CUDA kernels turn each channel's angle into tables (tap offsets, the distinct points of the
line, their runs along an axis, the halo). These depend only on ``theta``, K, the rounding and the
pass, so they are built once per ``theta`` buffer and reused while that buffer lives unchanged: the
cache checks the buffer's storage and its version counter, so an in-place change (``theta.add_``,
``load_state_dict``) or a new tensor at a reused address is seen. A change that bypasses the version
counter, such as writing through ``theta.data``, is not: call :func:`clear_table_cache` after one.

``DistributedDataParallel(broadcast_buffers=True)``, PyTorch's default, copies every buffer from rank
0 before each forward pass, which moves theta's version counter: the tables are then rebuilt at every
iteration (correct, as fast as without the cache). mmengine's runners wrap models with
``broadcast_buffers=False``; theta is the same on every rank anyway. Angles made under
``torch.inference_mode`` have no version counter and are never cached.

The interpolated roundings (``'bilinear'``, ``'gaussian'``) build larger tables that also hold the
weights, merged per point. A forward that records its backward keeps them for that backward: the
input gradient reads them and the weight gradient, the last to read them, takes them back, so one
build serves the three passes of a training step. Every forward builds them anew and nothing but
its backward reads them (checking the angles' and the weight's storage and version counter), so a
weight or angle changed between steps, even through ``.data`` as averaged models are updated, is
always seen. Kept tables take about 3 KB per channel for bilinear taps at K=31, between a forward
and its backward (T-1D++ with learned angles, batch 64: 66 MiB more training peak memory on an H200).
"""
import torch

from . import _ext


def table_cache_size() -> int:
    """Number of cached and kept tables (0 when the CUDA kernels are not loaded)."""
    return int(torch.ops.mmo1d.table_cache_size()) if _ext._cuda_ready else 0


def clear_table_cache() -> None:
    """Forget every cached table structure; the next call of each convolution rebuilds its own."""
    if _ext._cuda_ready:
        torch.ops.mmo1d.clear_table_cache()


__all__ = ['clear_table_cache', 'table_cache_size']
