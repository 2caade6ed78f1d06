"""Build and install mmo1d.

The compiled module ``mmo1d._C`` always holds the op schema and the CPU kernels. The CUDA kernels
are compiled into it when a CUDA toolkit is found (``CUDA_HOME``) and torch is a CUDA build, or
when ``FORCE_CUDA=1``; ``FORCE_CUDA=0`` builds the CPU kernels only. ``TORCH_CUDA_ARCH_LIST``
selects the GPU architectures (default without a visible GPU: 8.0;8.6;8.9;9.0+PTX).

Install with ``pip install --no-build-isolation -e .`` into an environment that has torch.
"""
import glob
import importlib.util
import os
import os.path as osp

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

ROOT = osp.dirname(osp.abspath(__file__))
DEFAULT_ARCH_LIST = '8.0;8.6;8.9;9.0+PTX'


def load_cuda_env():
    spec = importlib.util.spec_from_file_location('cuda_env', osp.join(ROOT, 'mmo1d', 'ops', 'cuda_env.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_version() -> str:
    scope: dict = {}
    with open(osp.join(ROOT, 'mmo1d', 'version.py')) as f:
        exec(f.read(), scope)
    return scope['__version__']


def want_cuda() -> bool:
    force = os.environ.get('FORCE_CUDA', '')
    if force == '1':
        if CUDA_HOME is None or torch.version.cuda is None:
            raise RuntimeError('FORCE_CUDA=1 but no CUDA toolkit (CUDA_HOME) or a CPU-only torch '
                               f'(torch.version.cuda={torch.version.cuda}) was found')
        return True
    if force == '0':
        return False
    return CUDA_HOME is not None and torch.version.cuda is not None


def make_extension():
    sources = [osp.relpath(p, ROOT) for p in sorted(glob.glob(osp.join(ROOT, 'csrc', '*.cpp')))]
    sources += [osp.relpath(p, ROOT) for p in sorted(glob.glob(osp.join(ROOT, 'csrc', 'cpu', '*.cpp')))]
    cxx_flags = ['-O3', '-std=c++20']
    if not want_cuda():
        return CppExtension('mmo1d._C', sources, extra_compile_args={'cxx': cxx_flags})
    if not os.environ.get('TORCH_CUDA_ARCH_LIST') and not torch.cuda.is_available():
        os.environ['TORCH_CUDA_ARCH_LIST'] = DEFAULT_ARCH_LIST
    sources += [osp.relpath(p, ROOT) for p in sorted(glob.glob(osp.join(ROOT, 'csrc', 'cuda', '*.cu')))]
    cuda_env = load_cuda_env()
    return CUDAExtension(
        'mmo1d._C',
        sources,
        define_macros=[('MMO1D_WITH_CUDA', None)],
        include_dirs=cuda_env.cuda_include_dirs(CUDA_HOME),
        library_dirs=cuda_env.cuda_library_dirs(CUDA_HOME),
        extra_compile_args={
            'cxx': cxx_flags,
            'nvcc': ['-O3', '-std=c++20', '-lineinfo'],
        })


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
    install_requires=['torch>=2.4', 'numpy'],
    extras_require={
        'mm': ['mmengine==0.10.7', 'mmcv==2.1.0', 'mmdet==3.3.0', 'mmsegmentation==1.2.2',
               'mmpretrain==1.2.0', 'ftfy', 'regex'],
        'tests': ['pytest', 'ruff'],
    },
    ext_modules=[make_extension()],
    cmdclass={'build_ext': BuildExtension},
    zip_safe=False,
)
