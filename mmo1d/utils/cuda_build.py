"""Whether a build of ``mmo1d._C`` compiles the CUDA kernels, and why.

Used by ``setup.py`` and ``.dev_scripts/setup_env.sh`` (``python mmo1d/utils/cuda_build.py``
prints the decision); imports nothing from mmo1d, and torch only in
:func:`decide_from_environment`, so that both can load it by its path before the package is built.

The rule: ``FORCE_CUDA=1`` compiles them (and fails without a CUDA toolkit or with a CPU-only
torch); ``FORCE_CUDA=0`` never does; unset, they are compiled when a CUDA toolkit and a CUDA build
of torch are present and a GPU is visible. Without a GPU they could not run, and compiling them
takes about 11 minutes on 2 cores: the build keeps the CPU kernels only, and a GPU that appears
later gets the CUDA kernels compiled just in time by ``mmo1d.ops`` on the first call on it.
"""
import os
from typing import Callable, Optional, Tuple

#: The message's hint where the kernels are left out although a toolkit is there.
JIT_NOTE = ('a GPU that appears later gets them compiled just in time on the first call on it (once, then '
            'cached); FORCE_CUDA=1 compiles them now')


def cuda_build_decision(force_cuda: Optional[str], cuda_home: Optional[str], torch_cuda: Optional[str],
                        gpu_visible: Callable[[], bool]) -> Tuple[bool, str]:
    """Decide whether to compile the CUDA kernels.

    Args:
        force_cuda (str, optional): The ``FORCE_CUDA`` environment variable: ``'1'``, ``'0'``, or
            None / ``''`` when unset.
        cuda_home (str, optional): The CUDA toolkit torch found (``torch.utils.cpp_extension.CUDA_HOME``).
        torch_cuda (str, optional): ``torch.version.cuda`` (None for a CPU-only torch).
        gpu_visible (callable): Returns whether a GPU is visible (``torch.cuda.is_available``);
            called only when the answer matters.

    Returns:
        tuple[bool, str]: Whether to compile them, and a one-line reason.

    Raises:
        ValueError: for a ``FORCE_CUDA`` other than ``'1'``, ``'0'`` or unset.
        RuntimeError: for ``FORCE_CUDA=1`` without a CUDA toolkit or with a CPU-only torch.
    """
    force = force_cuda or ''
    if force not in ('', '0', '1'):
        raise ValueError(f'FORCE_CUDA must be 1, 0 or unset, got {force!r}')
    if force == '0':
        return False, 'FORCE_CUDA=0: building the CPU kernels only'
    if cuda_home is None or torch_cuda is None:
        missing = 'no CUDA toolkit (nvcc, CUDA_HOME) was found' if cuda_home is None else \
            f'torch is a CPU-only build (torch.version.cuda={torch_cuda})'
        if force == '1':
            raise RuntimeError(f'FORCE_CUDA=1 asks for the CUDA kernels, but {missing}')
        return False, f'{missing}: building the CPU kernels only'
    if force == '1':
        return True, 'FORCE_CUDA=1: compiling the CUDA kernels too'
    if not gpu_visible():
        return False, f'no GPU is visible: building the CPU kernels only; {JIT_NOTE}'
    return True, 'a GPU, a CUDA toolkit and a CUDA torch are present: compiling the CUDA kernels too'


def decide_from_environment() -> Tuple[bool, str]:
    """:func:`cuda_build_decision` for this process: ``FORCE_CUDA``, torch's toolkit, torch, the GPUs."""
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    return cuda_build_decision(os.environ.get('FORCE_CUDA'), CUDA_HOME, torch.version.cuda,
                               torch.cuda.is_available)


if __name__ == '__main__':
    import logging
    import sys

    # torch's note on which toolkit it found, at import: the decision below says what matters.
    logging.getLogger('torch.utils.cpp_extension').setLevel(logging.ERROR)
    try:
        build, reason = decide_from_environment()
    except (ValueError, RuntimeError) as e:
        sys.exit(f'error: {e}')
    print(('cuda ' if build else 'cpu ') + reason)
