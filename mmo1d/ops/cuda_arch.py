"""The GPU architectures mmo1d's CUDA kernels can serve, and the check of a build's architectures.

The kernels stage their tiles in shared memory with ``cp.async`` (asynchronous global-to-shared
copies), which exists from compute capability 8.0 (Ampere) on; nvcc rejects it for older targets.
``TORCH_CUDA_ARCH_LIST`` is read as torch reads it (``torch.utils.cpp_extension``): entries
separated by ``;`` or spaces, each ``MAJOR.MINOR`` with an optional family suffix (``9.0a``) and
``+PTX``, or a name such as ``Ampere`` that stands for several entries.

Used by ``setup.py`` (ahead-of-time build) and by the just-in-time build of ``mmo1d.ops._ext``;
imports neither torch nor anything of mmo1d so that ``setup.py`` can load it by path.
"""
import re
from typing import List, NamedTuple, Sequence, Tuple

MIN_CAPABILITY = (8, 0)
#: torch's names of architectures and the entries each stands for (``_get_cuda_arch_flags``).
#: Combined names come first: they are replaced before the names they contain.
NAMED_ARCHES = (
    ('Kepler+Tesla', '3.7'),
    ('Kepler', '3.5+PTX'),
    ('Maxwell+Tegra', '5.3'),
    ('Maxwell', '5.0;5.2+PTX'),
    ('Pascal', '6.0;6.1+PTX'),
    ('Volta+Tegra', '7.2'),
    ('Volta', '7.0+PTX'),
    ('Turing', '7.5+PTX'),
    ('Ampere+Tegra', '8.7'),
    ('Ampere', '8.0;8.6+PTX'),
    ('Ada', '8.9+PTX'),
    ('Hopper', '9.0+PTX'),
    ('Blackwell+Tegra', '11.0'),
    ('Blackwell', '10.0;10.3;12.0;12.1+PTX'),
    ('Rubin', '10.7+PTX'),
)
_ENTRY = re.compile(r'^(\d+)\.(\d)([a-z]?)(\+PTX)?$')
_WHY = ('its CUDA kernels copy tiles to shared memory with cp.async, which needs compute capability '
        f'{MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]} (sm_{MIN_CAPABILITY[0]}{MIN_CAPABILITY[1]}, Ampere) or newer')


class CudaArch(NamedTuple):
    """One entry of an architecture list: ``9.0a+PTX`` is ``CudaArch(9, 0, 'a', True)``."""

    major: int
    minor: int
    suffix: str
    ptx: bool

    @property
    def capability(self) -> Tuple[int, int]:
        return self.major, self.minor

    def __str__(self) -> str:
        return f'{self.major}.{self.minor}{self.suffix}' + ('+PTX' if self.ptx else '')


def parse_arch_list(value: str) -> List[CudaArch]:
    """The entries of a ``TORCH_CUDA_ARCH_LIST`` value, named architectures expanded.

    Raises:
        ValueError: if an entry is neither ``MAJOR.MINOR[suffix][+PTX]`` nor a known name.
    """
    expanded = value.replace(' ', ';')
    for name, entries in NAMED_ARCHES:
        expanded = expanded.replace(name, entries)
    arches = []
    for entry in filter(None, expanded.split(';')):
        match = _ENTRY.match(entry)
        if match is None:
            names = ', '.join(name for name, _ in NAMED_ARCHES)
            raise ValueError(f'TORCH_CUDA_ARCH_LIST={value!r}: cannot read the entry {entry!r}; write '
                             f'MAJOR.MINOR with an optional suffix and +PTX (e.g. 8.0, 8.6, 9.0a, 9.0+PTX) '
                             f'or one of {names}')
        major, minor, suffix, ptx = match.groups()
        arches.append(CudaArch(int(major), int(minor), suffix, ptx is not None))
    return arches


def check_arch_list(value: str) -> List[CudaArch]:
    """The entries of ``value`` (see :func:`parse_arch_list`) if the kernels can serve all of them.

    Raises:
        ValueError: if an entry cannot be read, or names an architecture below
            :data:`MIN_CAPABILITY`; the message names the entries and what to do.
    """
    arches = parse_arch_list(value)
    if not arches:
        raise ValueError(f'TORCH_CUDA_ARCH_LIST={value!r} names no architecture')
    too_old = [str(a) for a in arches if a.capability < MIN_CAPABILITY]
    if too_old:
        kept = ';'.join(str(a) for a in arches if a.capability >= MIN_CAPABILITY) or '8.0'
        raise ValueError(
            f'TORCH_CUDA_ARCH_LIST={value!r} asks for {", ".join(too_old)}, which mmo1d cannot build: '
            f'{_WHY}. Build for supported GPUs only (e.g. TORCH_CUDA_ARCH_LIST="{kept}"), or without '
            'CUDA kernels (FORCE_CUDA=0): the CPU kernels run anywhere.')
    return arches


def check_capabilities(devices: Sequence[Tuple[str, Tuple[int, int]]]) -> None:
    """Check GPUs, given as ``(name, (major, minor))``, for the kernels.

    Raises:
        RuntimeError: if a GPU's compute capability is below :data:`MIN_CAPABILITY`.
    """
    too_old = [f'{name} (sm_{major}{minor})' for name, (major, minor) in devices if (major, minor) < MIN_CAPABILITY]
    if too_old:
        raise RuntimeError(
            f'mmo1d cannot build its CUDA kernels for {", ".join(too_old)}: {_WHY}. Use a newer GPU, '
            'hide this one (CUDA_VISIBLE_DEVICES), or run the op on the CPU.')


def check_build_targets(arch_list: str, devices: Sequence[Tuple[str, Tuple[int, int]]]) -> None:
    """Check what a CUDA build will target, decided as torch decides it.

    Args:
        arch_list: the value of ``TORCH_CUDA_ARCH_LIST``; empty or ``'native'`` means the
            visible GPUs.
        devices: the visible GPUs as ``(name, (major, minor))``.

    Raises:
        ValueError: from :func:`check_arch_list` for a list that names an unsupported target.
        RuntimeError: from :func:`check_capabilities` for an unsupported visible GPU.
    """
    if arch_list and arch_list != 'native':
        check_arch_list(arch_list)
    else:
        check_capabilities(devices)
