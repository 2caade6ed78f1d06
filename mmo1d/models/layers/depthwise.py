"""The KxK depthwise convolution of the 2D and 2D++ blocks, and the memory layout it runs in.

PyTorch sends a depthwise convolution on channels_last tensors to cuDNN in every case, and one on
NCHW tensors with a 7x7 kernel to its own depthwise kernels (cuDNN's depthwise path is chosen for
NCHW only for 1x1, 3x3 and 5x5 filters; ``use_cudnn_depthwise`` in ATen's ``Convolution.cpp``).
Without ``torch.backends.cudnn.benchmark`` cuDNN's algorithm comes from its heuristics, whose choices
for NHWC grouped convolutions can be very slow at some shapes (e.g. PyTorch issue 34977). That is
how mmdet's recipes train: ``env_cfg.cudnn_benchmark=False``, a new input shape every iteration.

:class:`DepthwiseConv2d` therefore computes on CUDA tensors in NCHW, as the stock ConvNeXt configs
do, when ``cudnn.benchmark`` is off, and returns a channels_last tensor as the block expects. With
``cudnn.benchmark`` on (mmseg's recipes, the classifiers' benchmark) and on other devices it is
``nn.Conv2d`` on the tensor as it comes. ``layout`` overrides that choice. In mmseg's UperNet step
(2 images per GPU, a step that waits on the host) cuDNN's calls cost the host more than ATen's
depthwise kernel's, but the NCHW copies cost as much again: T-2D++ with ``layout='nchw'`` took as
long as with the default on an H200, with more GPU time (``benchmarks/results/downstream_h200.md``).
"""
import torch
from torch import Tensor, nn

#: The layouts DepthwiseConv2d computes a CUDA tensor in.
LAYOUTS = ('auto', 'nchw', 'input')


class DepthwiseConv2d(nn.Conv2d):
    """``nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)``
    whose layout on CUDA follows ``cudnn.benchmark`` unless ``layout`` says otherwise (see the module
    docstring). Same parameters and state-dict keys as that ``nn.Conv2d``.

    Args:
        channels (int): Input and output channels (one filter each).
        kernel_size (int): K of the KxK kernel, odd.
        layout (str): How a CUDA tensor is computed: ``'auto'`` on an NCHW copy when
            ``cudnn.benchmark`` is off, else as it comes; ``'nchw'`` always on an NCHW copy (ATen's
            depthwise kernel); ``'input'`` always as it comes (cuDNN's NHWC path for channels_last).
            Default: 'auto'.
    """

    def __init__(self, channels: int, kernel_size: int, layout: str = 'auto') -> None:
        super().__init__(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)
        if layout not in LAYOUTS:
            raise ValueError(f'layout must be one of {LAYOUTS}, got {layout!r}')
        self.layout = layout

    def computes_in_nchw(self, x: Tensor) -> bool:
        """Whether this call runs on an NCHW copy of ``x``: CUDA input with ``layout='nchw'``, or with
        ``'auto'`` and ``cudnn.benchmark`` off."""
        if not x.is_cuda or self.layout == 'input':
            return False
        return self.layout == 'nchw' or not torch.backends.cudnn.benchmark

    def forward(self, x: Tensor) -> Tensor:
        """(N, C, H, W) -> (N, C, H, W); channels_last memory when computed in NCHW."""
        if not self.computes_in_nchw(x):
            return super().forward(x)
        # A (C, 1, K, K) weight of a model moved to channels_last has channels_last strides, which
        # alone would send the call to cuDNN's NHWC path: view it with NCHW strides (no copy).
        weight = self.weight.flatten(1).view(self.weight.shape)
        out = self._conv_forward(x.contiguous(), weight, self.bias)
        return out.contiguous(memory_format=torch.channels_last)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f', layout={self.layout!r}' if self.layout != 'auto' else '')


__all__ = ['LAYOUTS', 'DepthwiseConv2d']
