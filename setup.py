"""Build and install mmo1d.

The compiled module ``mmo1d._C`` always holds the op schema and the CPU kernels. The CUDA kernels
are compiled into it when ``FORCE_CUDA=1``, or, with ``FORCE_CUDA`` unset, when a CUDA toolkit is
found (``CUDA_HOME``), torch is a CUDA build and a GPU is visible (``mmo1d/utils/cuda_build.py``);
``FORCE_CUDA=0`` builds the CPU kernels only. Without a GPU, the CUDA kernels are compiled just in
time when one appears (``mmo1d/ops/_ext.py``). ``TORCH_CUDA_ARCH_LIST`` selects the GPU
architectures (default without a visible GPU: 8.0;8.6;8.9;9.0+PTX, the 8.x ones from compute_80's
PTX); the kernels need compute capability 8.0 or newer, and older targets are refused before
compiling.

A built package (wheel, ``pip install .``) also carries the C++ and CUDA sources as ``mmo1d/csrc``,
for the just-in-time build of the CUDA kernels when ``mmo1d._C`` was built without them.

Install with ``pip install --no-build-isolation .`` (or ``-e .``) into an environment that has torch.
"""
import importlib.util
import os
import os.path as osp
import shutil
import sys
from types import ModuleType

import torch
from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = osp.dirname(osp.abspath(__file__))
CSRC = osp.join(ROOT, 'csrc')
DEFAULT_ARCH_LIST = '8.0;8.6;8.9;9.0+PTX'
# nvcc's targets for DEFAULT_ARCH_LIST: the 8.x machine code from compute_80's PTX, so that nvcc's
# front end runs twice per file instead of four times (0.66-0.72x a file's compile time). The
# kernels use nothing newer than 8.0; compared with cuobjdump -sass, 8.0, 8.9 and 9.0 get the same
# code as with a PTX per architecture, and 8.6 too but for three instances of the interpolated
# taps' table builder, 8 integer address instructions shorter (no floating-point operation differs).
DEFAULT_GENCODE = ['-gencode=arch=compute_80,code=sm_80', '-gencode=arch=compute_80,code=sm_86',
                   '-gencode=arch=compute_80,code=sm_89', '-gencode=arch=compute_90,code=compute_90',
                   '-gencode=arch=compute_90,code=sm_90']
# The test dependencies; the ONNX ones run the export tests through ONNX Runtime.
TEST_REQUIRES = ['pytest', 'pytest-xdist', 'ruff', 'onnx>=1.23.2', 'onnxruntime>=1.32.0', 'onnxscript>=0.7.2']


def load_module(*path: str) -> ModuleType:
    """A module of the package loaded by its path, before the package is built."""
    spec = importlib.util.spec_from_file_location(osp.splitext(path[-1])[0], osp.join(ROOT, *path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cuda_env = load_module('mmo1d', 'ops', 'cuda_env.py')
cuda_arch = load_module('mmo1d', 'ops', 'cuda_arch.py')
version_check = load_module('mmo1d', 'utils', 'version_check.py')
cuda_build = load_module('mmo1d', 'utils', 'cuda_build.py')


def read_version() -> str:
    scope: dict = {}
    with open(osp.join(ROOT, 'mmo1d', 'version.py')) as f:
        exec(f.read(), scope)
    return scope['__version__']


def want_cuda() -> bool:
    """Whether to compile the CUDA kernels (``cuda_build``'s rule); says why in one line."""
    try:
        build, reason = cuda_build.decide_from_environment()
    except (ValueError, RuntimeError) as e:
        raise SystemExit(f'error: {e}') from e
    print(f'mmo1d: {reason}', file=sys.stderr)
    return build


def openmp_flags() -> list:
    """``-fopenmp`` where torch runs at::parallel_for on OpenMP (Linux builds): without it the inline
    at::parallel_for of the CPU kernels compiles to a serial loop. The extension then uses the OpenMP
    runtime torch has loaded (same soname), so torch.set_num_threads applies to it."""
    return ['-fopenmp'] if sys.platform.startswith('linux') and torch.backends.openmp.is_available() else []


def make_extension():
    sources = [osp.relpath(p, ROOT) for p in cuda_env.cpp_sources(CSRC)]
    # Baseline instruction set only (no -march): the CPU kernels pick AVX2 / AVX-512 variants at run time.
    # -g0: Python's CFLAGS, which setuptools passes first, carry -g; the C++ objects' debug information was
    # most of their size and a sixth of their compile time.
    cxx_flags = ['-O3', '-std=c++20', '-g0'] + openmp_flags()
    link_flags = openmp_flags()
    if not want_cuda():
        return CppExtension('mmo1d._C', sources, extra_compile_args={'cxx': cxx_flags}, extra_link_args=link_flags)
    nvcc_flags = ['-O3', '-std=c++20', '-lineinfo']
    if not os.environ.get('TORCH_CUDA_ARCH_LIST') and not torch.cuda.is_available():
        os.environ['TORCH_CUDA_ARCH_LIST'] = DEFAULT_ARCH_LIST  # what the build checks (BuildExt)
        nvcc_flags += DEFAULT_GENCODE  # torch adds no targets of its own where these are given
    sources += [osp.relpath(p, ROOT) for p in cuda_env.cuda_sources(CSRC)]
    return CUDAExtension(
        'mmo1d._C',
        sources,
        define_macros=[('MMO1D_WITH_CUDA', None)],
        include_dirs=cuda_env.cuda_include_dirs(CUDA_HOME),
        library_dirs=cuda_env.cuda_library_dirs(CUDA_HOME),
        extra_link_args=link_flags,
        extra_compile_args={
            'cxx': cxx_flags,
            'nvcc': nvcc_flags,
        })


class BuildExt(BuildExtension):
    """torch's extension builder that first refuses GPU architectures the kernels cannot serve."""

    def build_extensions(self) -> None:
        if any(isinstance(s, str) and s.endswith('.cu') for ext in self.extensions for s in ext.sources):
            devices = [(torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
                       for i in range(torch.cuda.device_count())]
            try:
                cuda_arch.check_build_targets(os.environ.get('TORCH_CUDA_ARCH_LIST', ''), devices)
            except (ValueError, RuntimeError) as e:
                raise SystemExit(f'error: {e}') from e
        super().build_extensions()


class BuildPy(build_py):
    """Python modules plus the C++ and CUDA sources, copied to ``mmo1d/csrc`` of the build.

    An editable install reads ``csrc/`` of the source tree instead and copies nothing.
    """

    def run(self) -> None:
        super().run()
        if getattr(self, 'editable_mode', False):
            return
        for path in cuda_env.build_files(CSRC):
            target = osp.join(self.build_lib, 'mmo1d', 'csrc', osp.relpath(path, CSRC))
            os.makedirs(osp.dirname(target), exist_ok=True)
            shutil.copyfile(path, target)


setup(
    name='mmo1d',
    version=read_version(),
    description='Oriented 1D kernels (ICCV 2023) for OpenMMLab: a compiled op and ConvNeXt-1D '
    'backbones for mmdet, mmsegmentation and mmpretrain',
    long_description=open(osp.join(ROOT, 'README.md')).read(),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    python_requires='>=3.9',
    packages=find_packages(exclude=('tests', 'tests.*', 'configs', 'tools')),
    install_requires=['torch>=2.4', 'numpy'] + version_check.requirements(),
    extras_require={
        'mm': ['mmengine==0.10.7', 'mmcv==2.1.0', 'mmdet==3.3.0', 'mmsegmentation==1.2.2',
               'mmpretrain==1.2.0', 'ftfy', 'regex'],
        'tests': TEST_REQUIRES,
    },
    ext_modules=[make_extension()],
    cmdclass={'build_ext': BuildExt, 'build_py': BuildPy},
    zip_safe=False,
)
