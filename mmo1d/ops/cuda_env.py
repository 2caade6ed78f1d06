"""The op's C++ and CUDA sources, and the CUDA headers and libraries their build needs.

Used by ``setup.py`` (ahead-of-time build) and by the just-in-time build; imports nothing from
mmo1d so that ``setup.py`` can load it before the package is built.

Sources live in ``csrc/`` of the source tree, which a built package also carries as
``mmo1d/csrc``. Every ``.cpp`` file is a C++ source compiled into ``mmo1d._C`` unless a folder on
its path is named ``cuda``; every ``.cu`` file and the ``.cpp`` files under a ``cuda`` folder are
CUDA sources, compiled only with CUDA. Folders nest to any depth; sources include each other by
paths relative to themselves or to ``csrc/``.
"""
import glob
import os
import os.path as osp
import sys
from typing import List, Optional

#: Suffixes of the files the build reads: sources and headers.
SOURCE_SUFFIXES = ('.cpp', '.cu')
HEADER_SUFFIXES = ('.h', '.hpp', '.cuh')


def find_csrc(package_dir: str) -> Optional[str]:
    """The sources of the package in ``package_dir``: ``<package_dir>/csrc`` in a built package,
    else ``csrc/`` of the source tree (the folder with ``setup.py``) that holds the package;
    ``None`` when neither exists."""
    shipped = osp.join(package_dir, 'csrc')
    if osp.isdir(shipped):
        return shipped
    root = osp.dirname(package_dir)
    if osp.isfile(osp.join(root, 'setup.py')) and osp.isdir(osp.join(root, 'csrc')):
        return osp.join(root, 'csrc')
    return None


def _files(csrc: str, suffixes: tuple) -> List[str]:
    found = (glob.glob(osp.join(csrc, '**', f'*{s}'), recursive=True) for s in suffixes)
    return sorted(p for paths in found for p in paths)


def _cuda_only(path: str, csrc: str) -> bool:
    return path.endswith('.cu') or 'cuda' in osp.relpath(path, csrc).split(os.sep)[:-1]


def cpp_sources(csrc: str) -> List[str]:
    """The C++ sources of ``mmo1d._C`` built with or without CUDA (schemas, CPU kernels)."""
    return [p for p in _files(csrc, ('.cpp', )) if not _cuda_only(p, csrc)]


def cuda_sources(csrc: str) -> List[str]:
    """The sources compiled only with CUDA: every ``.cu`` file and the ``.cpp`` files under a
    ``cuda`` folder."""
    return [p for p in _files(csrc, SOURCE_SUFFIXES) if _cuda_only(p, csrc)]


def build_files(csrc: str) -> List[str]:
    """Every file under ``csrc`` that a build reads: the sources and the headers."""
    return _files(csrc, SOURCE_SUFFIXES + HEADER_SUFFIXES)


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
