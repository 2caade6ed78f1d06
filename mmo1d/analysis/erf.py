"""Effective receptive field (ERF) of a backbone, computed as RepLKNet does.

Kirchmeyer & Deng ("Convolutional Networks with Oriented 1D Kernels", ICCV 2023, appendix) report
ERF maps following RepLKNet (Ding et al., CVPR 2022): for each image, the gradient of the central
point of the last stage's output with respect to the input image,

    map = sum over input channels of ReLU(d (sum_c ReLU(y[c, h/2, w/2])) / d x),

averaged over images. The map is then read on a log scale, ``log10(map + 1)`` divided by its
maximum, and summarised by the *high-contribution area ratios*: for a threshold t (20, 30, 50 and
99%), the area of the smallest centred square whose scores sum to more than t of the total,
relative to the image. Smaller ratios mean a more concentrated ERF.
"""
import logging
import os.path as osp
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, DefaultScope
from mmengine.runner import load_checkpoint
from torch import Tensor, nn

from .plots import save_figure

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp')
THRESHOLDS = (0.2, 0.3, 0.5, 0.99)
# ImageNet statistics in RGB order, on the 0-255 scale of the OpenMMLab data preprocessors.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def build_model(config: Union[str, Config], checkpoint: Optional[str] = None,
                cfg_options: Optional[dict] = None) -> nn.Module:
    """The model of an mmpretrain, mmseg or mmdet config, in eval mode, without parameter gradients.

    The config's ``default_scope`` picks the toolbox (mmengine imports its registry on demand).
    Without a checkpoint the model is initialised as a runner would (``init_weights()``, so with the
    config's ``init_cfg``, e.g. the paper's truncated-normal initialisation).

    Args:
        config (str | Config): Config file or loaded config.
        checkpoint (str, optional): Weights to load (mmengine's ``load_checkpoint``, strict).
        cfg_options (dict, optional): Settings merged into the config first.

    Returns:
        nn.Module: The model.
    """
    cfg = Config.fromfile(config) if isinstance(config, str) else config
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if 'model' not in cfg:
        raise KeyError(f'the config {getattr(cfg, "filename", config)} has no model')
    with DefaultScope.overwrite_default_scope(cfg.get('default_scope', None)):
        model = MODELS.build(cfg.model)
    if checkpoint:
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    elif hasattr(model, 'init_weights'):
        # mmengine logs the initialisation of every parameter at INFO level: keep warnings only.
        logger = MMLogger.get_current_instance()
        level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            model.init_weights()
        finally:
            logger.setLevel(level)
    return model.eval().requires_grad_(False)


def data_normalisation(config: Union[str, Config]) -> Tuple[Tuple[float, ...], Tuple[float, ...], bool]:
    """How the config's ``data_preprocessor`` normalises images: mean, std and channel order.

    The toolboxes load images as BGR; ``bgr_to_rgb`` (mmdet, mmseg) or ``to_rgb`` (mmpretrain) makes
    the network see RGB, and the mean and std are then in RGB order. Without a data preprocessor:
    ImageNet's statistics, RGB.

    Returns:
        tuple: ``(mean, std, rgb)``: per-channel values on the 0-255 scale in the order the network
        sees, and whether that order is RGB.
    """
    cfg = Config.fromfile(config) if isinstance(config, str) else config
    pre = cfg.get('model', {}).get('data_preprocessor', None) or cfg.get('data_preprocessor', None)
    if not pre:
        return IMAGENET_MEAN, IMAGENET_STD, True
    mean, std = pre.get('mean', IMAGENET_MEAN), pre.get('std', IMAGENET_STD)
    if len(mean) != 3 or len(std) != 3:
        raise ValueError(f'expected 3-channel mean and std in the data preprocessor, got {mean} and {std}')
    rgb = bool(pre.get('bgr_to_rgb', pre.get('to_rgb', False)))
    return tuple(float(m) for m in mean), tuple(float(s) for s in std), rgb


def list_images(root: str, limit: Optional[int] = None) -> List[str]:
    """Image files under ``root`` (recursively, sorted), at most ``limit`` of them.

    Raises:
        FileNotFoundError: if ``root`` is not a folder or holds no image.
    """
    if not osp.isdir(root):
        raise FileNotFoundError(f'image folder not found: {root}')
    paths = sorted(str(p) for p in Path(root).rglob('*') if p.suffix.lower() in IMAGE_EXTENSIONS)
    if not paths:
        raise FileNotFoundError(f'no image ({", ".join(IMAGE_EXTENSIONS)}) under {root}')
    return paths[:limit] if limit else paths


def load_image(path: str, size: int, mean: Sequence[float] = IMAGENET_MEAN,
               std: Sequence[float] = IMAGENET_STD, rgb: bool = True) -> Tensor:
    """An image resized (bicubic) to ``size`` x ``size`` and normalised: (3, size, size) float32.

    Args:
        path (str): Image file.
        size (int): Side of the square input.
        mean (Sequence[float]): Per-channel mean on the 0-255 scale, in the channel order below.
        std (Sequence[float]): Per-channel standard deviation on the 0-255 scale.
        rgb (bool): Channels in RGB order (else BGR). Default: True.
    """
    from PIL import Image  # a dependency of matplotlib

    with Image.open(path) as image:
        pixels = np.asarray(image.convert('RGB').resize((size, size), Image.BICUBIC), dtype=np.float32)
    x = torch.from_numpy(pixels if rgb else pixels[..., ::-1].copy()).permute(2, 0, 1)
    return (x - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)


def input_gradient_map(features: Callable[[Tensor], Tensor], image: Tensor) -> Tensor:
    """RepLKNet's contribution scores of one batch: (H, W) float32.

    Args:
        features (callable): Maps (N, 3, H, W) images to (N, C, h, w) features.
        image (Tensor): (N, 3, H, W) normalised images.

    Returns:
        Tensor: ``ReLU(grad)`` summed over the batch and the input channels, where ``grad`` is the
        gradient of ``sum_c ReLU(y[:, c, h // 2, w // 2])`` with respect to the input.
    """
    x = image.detach().clone().requires_grad_(True)
    out = features(x)
    if out.dim() != 4:
        raise ValueError(f'the ERF needs (N, C, h, w) features, got shape {tuple(out.shape)}')
    centre = F.relu(out[:, :, out.shape[2] // 2, out.shape[3] // 2]).sum()
    (grad, ) = torch.autograd.grad(centre, x)
    return F.relu(grad).sum((0, 1)).float()


def accumulate_erf(features: Callable[[Tensor], Tensor], images: Iterable[Tensor],
                   device: torch.device) -> Tuple[np.ndarray, int, int]:
    """Average of :func:`input_gradient_map` over images, one image per pass.

    Images whose map holds a NaN are skipped, as RepLKNet does.

    Args:
        features (callable): Maps (1, 3, H, W) images to (1, C, h, w) features.
        images (Iterable[Tensor]): (3, H, W) normalised images.
        device (torch.device): Where to run.

    Returns:
        tuple: the (H, W) float64 mean map, the number of images used, the number skipped.
    """
    total, used, skipped = None, 0, 0
    for image in images:
        scores = input_gradient_map(features, image[None].to(device)).double().cpu().numpy()
        if np.isnan(scores).any():
            skipped += 1
            continue
        total = scores if total is None else total + scores
        used += 1
    if total is None:
        raise RuntimeError(f'no ERF could be computed: all {skipped} images gave NaN gradients')
    return total / used, used, skipped


def normalise(erf: np.ndarray) -> np.ndarray:
    """RepLKNet's display scale: ``log10(erf + 1)`` divided by its maximum (zeros stay zeros)."""
    scaled = np.log10(np.asarray(erf, dtype=np.float64) + 1)
    peak = scaled.max()
    return scaled / peak if peak > 0 else scaled


def area_ratios(erf: np.ndarray, thresholds: Sequence[float] = THRESHOLDS) -> Dict[str, Optional[dict]]:
    """High-contribution area ratios of a (normalised) ERF map, RepLKNet's ``get_rectangle``.

    For each threshold t: the smallest centred square of odd side ``2 i + 1`` (i >= 1) whose scores
    sum to more than ``t`` of the map's total, and its area relative to the map.

    Args:
        erf (np.ndarray): (H, W) non-negative scores, usually :func:`normalise`'d.
        thresholds (Sequence[float]): Fractions in (0, 1). Default: 0.2, 0.3, 0.5, 0.99.

    Returns:
        dict: ``{str(t): {'side': int, 'area_ratio': float}}``; None for a threshold no square
        below half the map reaches (as RepLKNet, which stops at i = H // 2 - 1).
    """
    erf = np.asarray(erf, dtype=np.float64)
    h, w = erf.shape
    total = erf.sum()
    if total <= 0:
        raise ValueError('the ERF map is zero everywhere: no area ratio can be computed')
    result: Dict[str, Optional[dict]] = {}
    for t in thresholds:
        result[str(t)] = None
        for i in range(1, h // 2):
            if erf[h // 2 - i:h // 2 + 1 + i, w // 2 - i:w // 2 + 1 + i].sum() / total > t:
                side = 2 * i + 1
                result[str(t)] = dict(side=side, area_ratio=side * side / (h * w))
                break
    return result


class LayerOutput(nn.Module):
    """The output of one submodule of a model, captured by a forward hook.

    Args:
        model (nn.Module): The model.
        layer (str): Dotted name of the submodule in ``model.named_modules()``.
        forward_fn (callable, optional): What to run on the input. Default: ``model.backbone`` for a
            layer under ``backbone.`` (detectors and segmentors need more than images to run as a
            whole), else ``model``.
    """

    def __init__(self, model: nn.Module, layer: str, forward_fn: Optional[Callable[[Tensor], object]] = None) -> None:
        super().__init__()
        modules = dict(model.named_modules())
        if layer not in modules:
            raise KeyError(f'no submodule {layer!r} in {type(model).__name__}; name one of '
                           f'{[n for n in modules if n.count(".") <= 2 and n][:20]}...')
        self.model, self.layer = model, modules[layer]
        if forward_fn is None:
            backbone = getattr(model, 'backbone', None)
            forward_fn = backbone if layer.startswith('backbone.') and isinstance(backbone, nn.Module) else model
        self.forward_fn = forward_fn

    def forward(self, x: Tensor) -> Tensor:
        """(N, 3, H, W) -> the layer's output."""
        captured: List[Tensor] = []
        handle = self.layer.register_forward_hook(lambda module, args, out: captured.append(out))
        try:
            self.forward_fn(x)
        finally:
            handle.remove()
        if not captured:
            raise RuntimeError('the chosen layer did not run in the forward pass')
        return captured[-1]


def last_stage_name(model: nn.Module) -> str:
    """Dotted name of the last stage of ``model.backbone`` (``backbone.stages.<last>``).

    Raises:
        ValueError: if the model has no ``backbone.stages`` (name the layer explicitly then).
    """
    stages = getattr(getattr(model, 'backbone', None), 'stages', None)
    if not isinstance(stages, (nn.ModuleList, nn.Sequential)) or len(stages) == 0:
        raise ValueError(f'{type(model).__name__} has no backbone.stages: pass the layer whose output the '
                         'ERF is taken of (e.g. backbone.layer4)')
    return f'backbone.stages.{len(stages) - 1}'


def draw_erf_maps(path: str, maps: Sequence[np.ndarray], titles: Sequence[str],
                  ratios: Optional[Sequence[Dict[str, Optional[dict]]]] = None,
                  panel_inches: float = 3.2, dpi: int = 100) -> Figure:
    """Heatmaps of normalised ERF maps side by side, with their area ratios.

    Args:
        path (str): PNG to write.
        maps (Sequence[np.ndarray]): (H, W) normalised maps (values in [0, 1]).
        titles (Sequence[str]): One title per map.
        ratios (Sequence[dict], optional): :func:`area_ratios` of each map, printed under it.
        panel_inches (float): Width of one panel. Default: 3.2.
        dpi (int): Resolution. Default: 100.

    Returns:
        Figure: the figure written: ``(panel_inches * len(maps) + 0.8, panel_inches + 1.0)`` inches.
    """
    if not maps or len(maps) != len(titles) or (ratios is not None and len(ratios) != len(maps)):
        raise ValueError('draw_erf_maps needs one title (and one set of ratios, if any) per map')
    width, height = panel_inches * len(maps) + 0.8, panel_inches + 1.0
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    image = None
    for i, (ax, erf, title) in enumerate(zip(axes, maps, titles)):
        image = ax.imshow(erf, cmap='RdYlGn', vmin=0, vmax=1, interpolation='nearest')
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title, fontsize=9)
        if ratios is not None:
            parts = [f"{float(t):.0%}: {'-' if r is None else format(r['area_ratio'], '.3f')}"
                     for t, r in ratios[i].items()]
            ax.set_xlabel('area ratio at ' + ', '.join(parts[:2]) + '\n' + ', '.join(parts[2:]), fontsize=7)
    fig.subplots_adjust(left=0.1 / width, right=1 - 0.7 / width, bottom=0.55 / height, top=1 - 0.35 / height,
                        wspace=0.05)
    cax = fig.add_axes((1 - 0.55 / width, 0.55 / height, 0.12 / width, 1 - 0.9 / height))
    fig.colorbar(image, cax=cax)
    save_figure(fig, path, dpi)
    return fig
