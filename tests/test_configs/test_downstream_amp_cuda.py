"""The real UperNet and Cascade Mask R-CNN ++ configs' backbones at their crop sizes under AMP.

One training step (forward + backward) of each backbone (the configs' networks, layer scale 1) as
mmseg's / mmdet's ``AmpOptimWrapper`` runs it: float32 NCHW images in, autocast to float16 (the
toolboxes' default) or bfloat16. Gradients are checked against the same step in float32: all of
them together, and each parameter's for gross errors.
"""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from mmo1d.registry import MODELS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {
    'upernet-t-1dpp': ('mmseg/oriented-convnext-tiny-1dpp_upernet_8xb2-amp-160k_ade20k-512x512.py', (512, 512)),
    'upernet-t-2dpp': ('mmseg/oriented-convnext-tiny-2dpp_upernet_8xb2-amp-160k_ade20k-512x512.py', (512, 512)),
    # mmdet pads multi-scale images (480-800 short side, 1333 long side at most) to multiples of 32.
    'cascade-t-1dpp': ('mmdet/cascade-mask-rcnn_oriented-convnext-t-1dpp_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
                       (800, 1344)),
    'cascade-t-2dpp': ('mmdet/cascade-mask-rcnn_oriented-convnext-t-2dpp_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
                       (640, 1088)),
}


def _step(backbone: torch.nn.Module, images: torch.Tensor, dtype) -> dict:
    """Gradients of a loss that reaches every output scale with unit gradients (a fixed random
    projection of each output). In float16 the loss is scaled as AmpOptimWrapper's dynamic
    GradScaler does: the largest power of two whose gradients stay finite."""
    scale = 2.0**24 if dtype == torch.float16 else 1.0
    while True:
        backbone.zero_grad(set_to_none=True)
        with torch.autocast('cuda', dtype=dtype, enabled=dtype is not None):
            outs = backbone(images)
        g = torch.Generator(device='cuda').manual_seed(1)
        loss = sum((o.float() * torch.randn(o.shape, device='cuda', generator=g)).sum() for o in outs)
        (scale * loss).backward()
        grads = {n: p.grad.detach().float() / scale for n, p in backbone.named_parameters() if p.grad is not None}
        if dtype != torch.float16 or scale <= 2.0**-24 or all(torch.isfinite(g).all() for g in grads.values()):
            return grads
        scale /= 2


@pytest.mark.parametrize('name', list(CONFIGS))
def test_backbone_trains_under_amp(name):
    path, (h, w) = CONFIGS[name]
    cfg = Config.fromfile(str(REPO / 'configs' / path))
    backbone_cfg = cfg.model.backbone.copy()
    backbone_cfg.type = backbone_cfg.type.replace('mmo1d.', '')
    backbone_cfg.drop_path_rate = 0.0  # the same network in every step
    # Layer scale 1 instead of the recipe's 1e-6: at 1e-6 the blocks' gradients are ~1e-12 of the
    # 1D stem's, a range no single float16 loss scale holds (a property of the format, not of the
    # kernels); at 1 every parameter's gradient is representable and comparable.
    backbone_cfg.layer_scale_init_value = 1.0
    torch.manual_seed(0)
    backbone = MODELS.build(backbone_cfg).cuda().train()
    backbone.init_weights()
    images = torch.randn(2, 3, h, w, device='cuda')
    ref = _step(backbone, images, None)
    assert len(ref) == sum(1 for p in backbone.parameters() if p.requires_grad)
    for dtype, tol in ((torch.float16, 2e-2), (torch.bfloat16, 6e-2)):
        grads = _step(backbone, images, dtype)
        assert grads.keys() == ref.keys()
        for n, g in grads.items():
            assert torch.isfinite(g).all(), f'{name} {dtype}: non-finite gradient of {n}'
            err = ((g - ref[n]).norm() / ref[n].norm().clamp_min(1e-12)).item()
            assert err < 0.3, f'{name} {dtype}: gradient of {n} off by {err:.3g} (relative)'
        flat, flat_ref = (torch.cat([d[n].flatten() for n in ref]) for d in (grads, ref))
        err = ((flat - flat_ref).norm() / flat_ref.norm()).item()
        assert err < tol, f'{name} {dtype}: gradients off by {err:.3g} (relative)'
