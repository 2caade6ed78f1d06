"""Loading of the compiled op library ``mmo1d._C`` and, when needed, of its CUDA kernels.

``mmo1d._C`` registers the ``mmo1d`` op namespace with the CPU kernels, and the CUDA kernels when
it was built with a CUDA toolkit. When it was built without them and a tensor reaches the op on a
GPU, the CUDA sources are compiled once with ninja into the torch extensions cache and loaded
(``torch.utils.cpp_extension.load``); without sources or a toolkit, or for a GPU older than the
kernels need, the op raises an error that says how to get the kernels. The sources are those of
the source tree (``csrc/``, editable install) or those a built package carries (``mmo1d/csrc``).
"""
import logging
import os
import os.path as osp
from typing import List

import torch

from . import cuda_env
from .cuda_arch import check_build_targets

logger = logging.getLogger('mmo1d')

try:
    from mmo1d import _C
except ImportError as e:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        'mmo1d._C, the compiled op library, could not be imported. Build it with '
        '`pip install --no-build-isolation -e .` from the mmo1d source tree (or `make setup`). '
        f'Original error: {e}') from e

_PACKAGE = osp.dirname(osp.dirname(osp.abspath(__file__)))
_CSRC = cuda_env.find_csrc(_PACKAGE)
_cuda_ready = bool(_C.cuda_compiled())


def cuda_sources() -> List[str]:
    """The CUDA sources of the op that the package found (empty if none)."""
    return cuda_env.cuda_sources(_CSRC) if _CSRC else []


def ensure_cuda_kernels() -> None:
    """Make the CUDA kernels available: built in, or compiled just in time on first use."""
    global _cuda_ready
    if _cuda_ready:
        return
    sources = cuda_sources()
    if not sources:
        raise RuntimeError(
            'mmo1d was built without CUDA kernels and their sources (csrc/, or mmo1d/csrc in a built '
            f'package) are not available next to {_PACKAGE}. '
            'Reinstall from the source tree with a CUDA toolkit: '
            '`FORCE_CUDA=1 pip install --no-build-isolation -e .`')
    from torch.utils.cpp_extension import CUDA_HOME, load
    if CUDA_HOME is None:
        raise RuntimeError(
            'mmo1d was built without CUDA kernels and no CUDA toolkit (nvcc, CUDA_HOME) is '
            'available to compile them. Install a CUDA toolkit matching torch '
            f'{torch.version.cuda} and reinstall with `FORCE_CUDA=1 pip install '
            '--no-build-isolation -e .`')
    devices = [(torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
               for i in range(torch.cuda.device_count())]
    check_build_targets(os.environ.get('TORCH_CUDA_ARCH_LIST', ''), devices)
    logger.warning('mmo1d: compiling the CUDA kernels with ninja on first use (once per machine; '
                   'cached in the torch extensions directory)')
    load(
        name='mmo1d_cuda_kernels',
        sources=sources,
        extra_include_paths=[_CSRC] + cuda_env.cuda_include_dirs(CUDA_HOME),
        extra_cflags=['-O3', '-std=c++20'],
        extra_cuda_cflags=['-O3', '-std=c++20', '-lineinfo'],
        extra_ldflags=[f'-L{d}' for d in cuda_env.cuda_library_dirs(CUDA_HOME)],
        is_python_module=False,
        verbose=False)
    _cuda_ready = True
