"""Locations of CUDA headers and libraries for building the op's CUDA kernels.

Used by ``setup.py`` (ahead-of-time build) and by the just-in-time build; imports nothing from
mmo1d so that ``setup.py`` can load it before the package is built.
"""
import glob
import os.path as osp
import sys
from typing import List


def cuda_include_dirs(cuda_home: str) -> List[str]:
    """Extra include directories: the CUDA math-library headers that torch's CUDA headers include.

    Minimal toolkits (nvcc + runtime) lack e.g. ``cusparse.h``; torch's CUDA wheels ship the
    headers in the ``nvidia`` pip packages, which are used when the toolkit has none.
    """
    if osp.exists(osp.join(cuda_home, 'include', 'cusparse.h')):
        return []
    for site in sys.path:
        hits = sorted(glob.glob(osp.join(site, 'nvidia', '*', 'include', 'cusparse.h')))
        hits += sorted(glob.glob(osp.join(site, 'nvidia', 'cusparse', 'include', 'cusparse.h')))
        if hits:
            return [osp.dirname(hits[0])]
    return []


def cuda_library_dirs(cuda_home: str) -> List[str]:
    """Extra library directories: some toolkits keep libcudart in ``lib/`` rather than ``lib64/``."""
    return [d for d in (osp.join(cuda_home, 'lib'),) if osp.isdir(d)]
