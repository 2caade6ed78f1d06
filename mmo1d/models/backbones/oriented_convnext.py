"""ConvNeXt with oriented 1D kernels: the 1D, 1D++ and 2D++ models and the ConvNeXt baseline.

Kirchmeyer & Deng, "Convolutional Networks with Oriented 1D Kernels", ICCV 2023. The backbone
follows mmpretrain's ConvNeXt contract (``arch``, ``out_indices``, ``frozen_stages``, ``with_cp``,
``gap_before_final_norm``; submodules ``downsample_layers``, ``stages`` and ``norm{i}``), so
mmdet's and mmseg's ``LearningRateDecayOptimizerConstructor`` and mmpretrain's layer-decay
constructor treat it like ConvNeXt, and ConvNeXt checkpoints of mmpretrain load into the 2D parts
unchanged.
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import BaseModule, Sequential
from torch import Tensor, nn

from mmo1d.registry import MODELS

from ..layers import DepthwiseOrientedStem, LayerNorm2d, OrientedConvNeXtBlock, patchify_stem
from ..layers.depthwise import LAYOUTS
from ..utils.checkpoint import load_pretrained

KernelSizes = Union[str, Sequence[Union[int, Sequence[int]]]]


@MODELS.register_module()
class OrientedConvNeXt(BaseModule):
    """ConvNeXt backbone with oriented 1D depthwise kernels.

    Variants (paper Sec. 4):

    - ``'2d'``: ConvNeXt (7x7 depthwise convolutions, patchify stem), the baseline.
    - ``'1d'``: every depthwise convolution is an oriented 1xK kernel; depthwise 1D stem.
    - ``'1dpp'``: "1D++": oriented 1xK1 then, on the 4C hidden tensor, an oriented 1xK2 in
      residual form; depthwise 1D stem.
    - ``'2dpp'``: "2D++": the 1D++ block with its first convolution a 7x7 depthwise Conv2d;
      patchify stem.

    Angles: D contiguous groups of channels spread over 180 degrees; with layer-wise rotation the
    blocks of odd index within a stage are turned by 90 degrees. They are buffers (``theta``) with
    the pixel roundings; with an interpolating rounding and ``learnable_angles=True`` they are
    parameters (``theta``) that training turns.

    Args:
        arch (str | dict): ``'tiny'``, ``'small'``, ``'base'``, ``'large'`` or a dict with
            ``depths`` and ``channels``, four entries each. Default: 'tiny'.
        variant (str): ``'2d'``, ``'1d'``, ``'1dpp'`` or ``'2dpp'``. Default: '1d'.
        kernel_sizes (str | Sequence): ``'imagenet'`` (the classifiers: 1x31 everywhere),
            ``'downstream'`` (the detection / segmentation backbones: shorter in stages 3-4), or
            one entry per stage: an int for ``'1d'`` (oriented K) and ``'2d'`` (square K), a pair
            (K1, K2) for ``'1dpp'`` (oriented K1) and ``'2dpp'`` (square K1). Default: 'imagenet'.
        stem_kernel_size (int, optional): Oriented kernel length of the depthwise 1D stem;
            None gives the paper's (31 for 1D, 15 for 1D++). Ignored by '2d' and '2dpp'.
        directions (int): Number of directions D of the oriented kernels. Default: 8.
        layer_rotation (bool): Turn the oriented kernels of odd blocks by 90 degrees.
            Default: True.
        stem_channels (int): Width C0 of the depthwise 1D stem. Default: 64.
        in_channels (int): Input channels. Default: 3.
        drop_path_rate (float): Stochastic depth rate of the last block (linear from 0).
            Default: 0.
        layer_scale_init_value (float): Initial layer scale; 0 or less removes it. Default: 1e-6.
        out_indices (int | Sequence[int]): Stages whose outputs are returned, each through its
            own LayerNorm ``norm{i}``. Negative indices count from the end. Default: -1.
        gap_before_final_norm (bool): Average-pool each output to (N, C) before its norm, as the
            classifiers do. Default: True.
        frozen_stages (int): Freeze (no gradient, eval mode) the first ``frozen_stages`` stages
            and their downsampling layers (stage 0's is the stem). Default: 0.
        with_cp (bool): Activation checkpointing of every block. Default: False.
        rounding (str): How every oriented convolution reads its taps: ``'trunc'`` (the paper's
            models), ``'floor'``, ``'bilinear'`` or ``'gaussian'`` (see
            :func:`mmo1d.ops.oriented_dwconv1d`). Default: 'trunc'.
        learnable_angles (bool): Every oriented convolution learns its angles (needs
            ``'bilinear'`` or ``'gaussian'``). Default: False.
        sigma (float): Width of the gaussian band (``'gaussian'`` only). Default: 0.5.
        radius (float): Radius of the gaussian band (``'gaussian'`` only; not a whole number).
            Default: 1.5.
        depthwise_layout (str): How the '2d' and '2dpp' blocks' 7x7 depthwise convolution computes
            CUDA tensors (:class:`mmo1d.models.layers.DepthwiseConv2d`): ``'auto'`` on NCHW copies
            when ``cudnn.benchmark`` is off, else in the tensor's channels_last layout (cuDNN);
            ``'nchw'`` always on NCHW copies (ATen's depthwise kernel; in mmseg's UperNet step its
            copies cost the host what its calls save, see :mod:`mmo1d.models.layers.depthwise`);
            ``'input'`` always channels_last. Ignored by '1d' and '1dpp'. Default: 'auto'.
        out_channels_last (bool): Return the (N, C_i, H_i, W_i) outputs channels_last-strided, as
            the stages compute them. False returns contiguous tensors, as mmpretrain's ConvNeXt
            does, so that the necks and heads of mmseg and mmdet run as they do on it (one copy
            of each output). Default: False.
        init_cfg (dict | list[dict], optional): Initialisation; None gives the default,
            ``default_init_cfg``: truncated normal (std 0.02, zero bias) for convolutions and
            Linear layers, ones / zeros for LayerNorms.
            ``dict(type='Pretrained', checkpoint=..., prefix=...)`` loads weights with the rules
            of :func:`mmo1d.models.utils.adapt_state_dict`: oriented kernels are centre-cropped /
            zero-padded to this model's lengths, output norms absent from the checkpoint keep
            their initial values, anything else that does not fit is an error.

    Shapes:
        Input (N, in_channels, H, W). With the patchify stem stage i has stride 2^(i+2) (floor
        division, like Conv2d); with the depthwise 1D stem the stem gives ceil(ceil(H/2)/2).
        Output: a tuple with one (N, C_i, H_i, W_i) tensor per out index, or (N, C_i) with
        ``gap_before_final_norm``. Inside the backbone tensors are channels_last-strided; the
        outputs are contiguous unless ``out_channels_last``.
    """
    arch_settings: Dict[str, Dict[str, List[int]]] = {
        'tiny': dict(depths=[3, 3, 9, 3], channels=[96, 192, 384, 768]),
        'small': dict(depths=[3, 3, 27, 3], channels=[96, 192, 384, 768]),
        'base': dict(depths=[3, 3, 27, 3], channels=[128, 256, 512, 1024]),
        'large': dict(depths=[3, 3, 27, 3], channels=[192, 384, 768, 1536]),
    }
    kernel_size_settings: Dict[str, Dict[str, tuple]] = {
        '2d': dict(imagenet=(7, 7, 7, 7), downstream=(7, 7, 7, 7)),
        '1d': dict(imagenet=(31, 31, 31, 31), downstream=(31, 31, 27, 13)),
        '1dpp': dict(imagenet=((15, 31), ) * 4, downstream=((15, 31), (15, 31), (15, 27), (13, 13))),
        '2dpp': dict(imagenet=((7, 31), ) * 4, downstream=((7, 31), (7, 31), (7, 27), (7, 13))),
    }
    stem_kernel_size_settings: Dict[str, int] = {'1d': 31, '1dpp': 15}
    default_init_cfg: List[dict] = [
        dict(type='TruncNormal', layer=['Conv2d', 'Linear', 'OrientedDWConv1d'], std=0.02, bias=0.0),
        dict(type='Constant', layer=['LayerNorm'], val=1.0, bias=0.0),
    ]
    num_stages = 4

    def __init__(self,
                 arch: Union[str, dict] = 'tiny',
                 variant: str = '1d',
                 kernel_sizes: KernelSizes = 'imagenet',
                 stem_kernel_size: Optional[int] = None,
                 directions: int = 8,
                 layer_rotation: bool = True,
                 stem_channels: int = 64,
                 in_channels: int = 3,
                 drop_path_rate: float = 0.0,
                 layer_scale_init_value: float = 1e-6,
                 out_indices: Union[int, Sequence[int]] = -1,
                 gap_before_final_norm: bool = True,
                 frozen_stages: int = 0,
                 with_cp: bool = False,
                 rounding: str = 'trunc',
                 learnable_angles: bool = False,
                 sigma: float = 0.5,
                 radius: float = 1.5,
                 depthwise_layout: str = 'auto',
                 out_channels_last: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=self.default_init_cfg if init_cfg is None else init_cfg)
        self.depths, self.channels = self._parse_arch(arch)
        if variant not in self.kernel_size_settings:
            raise ValueError(f'unknown variant {variant!r}; choose one of {list(self.kernel_size_settings)}')
        self.variant = variant
        self.kernel_sizes = self._parse_kernel_sizes(variant, kernel_sizes)
        if directions < 1:
            raise ValueError(f'directions must be >= 1, got {directions}')
        if not 0.0 <= drop_path_rate < 1.0:
            raise ValueError(f'drop_path_rate must be in [0, 1), got {drop_path_rate}')
        if not 0 <= frozen_stages <= self.num_stages:
            raise ValueError(f'frozen_stages must be in [0, {self.num_stages}], got {frozen_stages}')
        self.out_indices = self._parse_out_indices(out_indices)
        self.gap_before_final_norm = gap_before_final_norm
        self.frozen_stages = frozen_stages
        self.directions = directions
        self.layer_rotation = layer_rotation
        self.rounding = rounding
        self.learnable_angles = learnable_angles
        oriented_cfg = dict(rounding=rounding, learnable_angles=learnable_angles, sigma=sigma, radius=radius)
        if depthwise_layout not in LAYOUTS:
            raise ValueError(f'depthwise_layout must be one of {LAYOUTS}, got {depthwise_layout!r}')
        self.depthwise_layout = depthwise_layout
        self.out_channels_last = out_channels_last
        if variant == '2d' and (rounding != 'trunc' or learnable_angles):
            raise ValueError("variant '2d' has no oriented convolution: rounding and learnable_angles do "
                             'not apply to it')

        oriented_first = variant in ('1d', '1dpp')
        self.downsample_layers = nn.ModuleList()
        if oriented_first:
            if stem_kernel_size is None:
                stem_kernel_size = self.stem_kernel_size_settings[variant]
            self.stem_kernel_size = stem_kernel_size
            self.downsample_layers.append(
                DepthwiseOrientedStem(in_channels, stem_channels, self.channels[0], stem_kernel_size,
                                      directions, oriented_cfg))
        else:
            self.stem_kernel_size = None
            self.downsample_layers.append(patchify_stem(in_channels, self.channels[0]))
        for i in range(1, self.num_stages):
            self.downsample_layers.append(
                nn.Sequential(
                    LayerNorm2d(self.channels[i - 1], autocast_output=True),
                    nn.Conv2d(self.channels[i - 1], self.channels[i], kernel_size=2, stride=2)))

        dpr = torch.linspace(0, drop_path_rate, sum(self.depths)).tolist()
        self.stages = nn.ModuleList()
        block_idx = 0
        for i in range(self.num_stages):
            first, mid = self.kernel_sizes[i] if variant in ('1dpp', '2dpp') else (self.kernel_sizes[i], None)
            self.stages.append(
                Sequential(*[
                    OrientedConvNeXtBlock(
                        self.channels[i],
                        kernel_size=first,
                        oriented=oriented_first,
                        mid_kernel_size=mid,
                        directions=directions,
                        angle_offset=0.5 if layer_rotation and j % 2 == 1 else 0.0,
                        drop_path_rate=dpr[block_idx + j],
                        layer_scale_init_value=layer_scale_init_value,
                        with_cp=with_cp,
                        oriented_cfg=oriented_cfg,
                        depthwise_layout=depthwise_layout) for j in range(self.depths[i])
                ]))
            block_idx += self.depths[i]
            if i in self.out_indices:
                self.add_module(f'norm{i}', LayerNorm2d(self.channels[i]))
        self._freeze_stages()

    def _parse_arch(self, arch: Union[str, dict]) -> Tuple[List[int], List[int]]:
        if isinstance(arch, str):
            if arch not in self.arch_settings:
                raise ValueError(f'unknown arch {arch!r}; choose one of {list(self.arch_settings)} '
                                 'or pass a dict with "depths" and "channels"')
            arch = self.arch_settings[arch]
        if not isinstance(arch, dict) or not {'depths', 'channels'} <= set(arch):
            raise ValueError(f'arch must be a name or a dict with "depths" and "channels", got {arch!r}')
        depths, channels = list(arch['depths']), list(arch['channels'])
        if len(depths) != self.num_stages or len(channels) != self.num_stages:
            raise ValueError(f'arch needs {self.num_stages} depths and {self.num_stages} channels, got '
                             f'depths={depths}, channels={channels}')
        if min(depths) < 1 or min(channels) < 1:
            raise ValueError(f'depths and channels must be positive, got depths={depths}, '
                             f'channels={channels}')
        return depths, channels

    def _parse_kernel_sizes(self, variant: str, kernel_sizes: KernelSizes) -> list:
        if isinstance(kernel_sizes, str):
            if kernel_sizes not in self.kernel_size_settings[variant]:
                raise ValueError(f'unknown kernel_sizes {kernel_sizes!r}; use "imagenet", "downstream" '
                                 f'or {self.num_stages} per-stage values')
            return list(self.kernel_size_settings[variant][kernel_sizes])
        kernel_sizes = list(kernel_sizes)
        if len(kernel_sizes) != self.num_stages:
            raise ValueError(f'kernel_sizes needs one entry per stage ({self.num_stages}), '
                             f'got {kernel_sizes}')
        pair = variant in ('1dpp', '2dpp')
        result = []
        for ks in kernel_sizes:
            values = tuple(ks) if pair and isinstance(ks, (list, tuple)) else ks
            flat = values if pair else (values, )
            if (pair and not (isinstance(values, tuple) and len(values) == 2)) or not all(
                    isinstance(k, int) and not isinstance(k, bool) and k > 0 and k % 2 == 1 for k in flat):
                what = 'a pair of odd ints (K1, K2)' if pair else 'an odd int'
                raise ValueError(f'variant {variant!r} needs {what} per stage in kernel_sizes, '
                                 f'got {kernel_sizes}')
            result.append(values)
        return result

    def _parse_out_indices(self, out_indices: Union[int, Sequence[int]]) -> List[int]:
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        result = []
        for index in out_indices:
            if not -self.num_stages <= index < self.num_stages:
                raise ValueError(f'out_indices must be in [-{self.num_stages}, {self.num_stages - 1}], '
                                 f'got {list(out_indices)}')
            result.append(index % self.num_stages)
        if len(set(result)) != len(result):
            raise ValueError(f'out_indices has duplicates: {list(out_indices)}')
        return sorted(result)

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        """Stage outputs through their norms.

        Args:
            x (Tensor): (N, in_channels, H, W) images.

        Returns:
            tuple[Tensor]: one (N, C_i, H_i, W_i) map per out index, or (N, C_i) with
            ``gap_before_final_norm``.
        """
        if x.dim() != 4:
            raise ValueError(f'OrientedConvNeXt expects (N, C, H, W) images, got shape {tuple(x.shape)}')
        # One copy of the image to NHWC memory; from here on no layer needs another.
        x = x.contiguous(memory_format=torch.channels_last)
        outs = []
        for i, stage in enumerate(self.stages):
            x = stage(self.downsample_layers[i](x))
            if i in self.out_indices:
                norm = getattr(self, f'norm{i}')
                if self.gap_before_final_norm:
                    outs.append(norm(x.mean((2, 3), keepdim=True)).flatten(1))
                else:
                    out = norm(x)
                    outs.append(out if self.out_channels_last else out.contiguous())
        return tuple(outs)

    def _freeze_stages(self) -> None:
        for i in range(self.frozen_stages):
            for module in (self.downsample_layers[i], self.stages[i]):
                module.eval()
                for param in module.parameters():
                    param.requires_grad = False

    def train(self, mode: bool = True) -> 'OrientedConvNeXt':
        """Set the training mode; frozen stages stay in eval mode."""
        super().train(mode)
        self._freeze_stages()
        return self

    def init_weights(self) -> None:
        """Initialise, then load the ``Pretrained`` entry of ``init_cfg`` if any.

        Pretrained weights go through :func:`mmo1d.models.utils.load_pretrained`, which resizes
        the oriented kernels and is strict about everything else; output norms (``norm{i}``)
        may be absent from the checkpoint or present for stages this model does not output.
        """
        cfgs = self.init_cfg if isinstance(self.init_cfg, list) else [self.init_cfg] if self.init_cfg else []
        pretrained = [cfg for cfg in cfgs if cfg['type'] == 'Pretrained']
        if not pretrained:
            super().init_weights()
            return
        if len(pretrained) > 1:
            raise ValueError(f'init_cfg has more than one Pretrained entry: {pretrained}')
        self.init_cfg = [cfg for cfg in cfgs if cfg['type'] != 'Pretrained']
        try:
            super().init_weights()
        finally:
            self.init_cfg = cfgs
        cfg = pretrained[0]
        load_pretrained(self, cfg['checkpoint'], prefix=cfg.get('prefix'),
                        optional=lambda key: re.match(r'norm\d+\.', key) is not None,
                        map_location=cfg.get('map_location', 'cpu'))

    def get_layer_depth(self, param_name: str, prefix: str = '') -> Tuple[int, int]:
        """Layer depth of a parameter for layer-wise lr decay (mmpretrain's ConvNeXt rule).

        Args:
            param_name (str): Parameter name.
            prefix (str): Prefix of the backbone's parameters (e.g. ``'backbone.'``).

        Returns:
            tuple[int, int]: The layer id of the parameter and the number of layers.
        """
        max_layer_id = 12 if self.depths[-2] > 9 else 6
        if not param_name.startswith(prefix):
            return max_layer_id + 1, max_layer_id + 2
        parts = param_name[len(prefix):].split('.')
        if parts[0] == 'downsample_layers':
            stage_id = int(parts[1])
            layer_id = (0, 2, 3, max_layer_id)[stage_id]
        elif parts[0] == 'stages':
            stage_id, block_id = int(parts[1]), int(parts[2])
            layer_id = (1, 2, 3 + block_id // 3, max_layer_id)[stage_id]
        else:
            layer_id = max_layer_id + 1
        return layer_id, max_layer_id + 2


__all__ = ['OrientedConvNeXt']
