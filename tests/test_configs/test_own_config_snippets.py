"""docs/own_config.md: every config on the page builds and trains, and the facts it states hold.

The configs are read from the page itself, so the page and the tests cannot drift apart. Each one is
built with its own widths (the ``in_channels`` written on the page are what the heads get) but one
block per stage and smaller heads, and takes one training step with the config's own optimizer on a
synthetic batch.
"""
import ast
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.model import MMDistributedDataParallel
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope
from test_downstream_configs import _build

from mmo1d.models.backbones.oriented_convnext import OrientedConvNeXt

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / 'docs' / 'own_config.md'
#: The stock configs the page covers.
BASES = (
    'mmdet::retinanet/retinanet_r50_fpn_1x_coco.py',
    'mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py',
    'mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py',
    'mmseg::deeplabv3plus/deeplabv3plus_r50-d8_4xb4-80k_ade20k-512x512.py',
    'mmseg::mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py',
    'mmseg::segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py',
    'mmpretrain::resnet/resnet50_8xb32_in1k.py',
)
#: Image size of the synthetic batches: not a multiple of 32, so that the preprocessors pad.
IMAGE_HW = (72, 88)


def _snippets() -> Dict[str, str]:
    """The page's python blocks that set ``_base_``, by base config."""
    blocks = re.findall(r'^```python\n(.*?)^```', DOC.read_text(), flags=re.S | re.M)
    snippets = {}
    for block in blocks:
        match = re.match(r"_base_ = '([^']+)'\n", block)
        if match:
            assert match.group(1) not in snippets, f'two snippets inherit {match.group(1)}'
            snippets[match.group(1)] = block
    return snippets


def _load(text: str) -> Config:
    return Config.fromstring(text, file_format='.py')


def _shrink(cfg: Config) -> None:
    """One block per stage (widths unchanged) and smaller transformer heads and crops."""
    backbone = cfg.model.backbone
    backbone.arch = dict(depths=[1] * 4, channels=OrientedConvNeXt.arch_settings[backbone.arch]['channels'])
    backbone.stem_channels = 16
    model = cfg.model
    if model.type == 'DINO':
        model.num_queries = 20
        model.encoder.num_layers = 1
        model.decoder.num_layers = 2
        model.dn_cfg.group_cfg.num_dn_queries = 10
    head = model.get('decode_head', {})
    if head.get('type') == 'Mask2FormerHead':
        head.num_queries = 10
        head.pixel_decoder.encoder.num_layers = 1
        head.transformer_decoder.num_layers = 3
        head.train_cfg.num_points = 256
    preprocessor = model.get('data_preprocessor', {})
    if preprocessor.get('size') is not None:
        preprocessor.size = (96, 96)


def _batch(cfg: Config) -> dict:
    """Two synthetic images with annotations, in the toolbox's own data structures.

    Two, not one: DeepLabV3+'s image-pooling branch has a BatchNorm over 1x1 maps.
    """
    height, width = IMAGE_HW
    images = [torch.randint(0, 256, (3, height, width), dtype=torch.uint8) for _ in range(2)]
    if cfg.default_scope == 'mmdet':
        from mmdet.testing import demo_mm_inputs

        return demo_mm_inputs(batch_size=2, image_shapes=[(3, height, width)] * 2, num_items=[3, 2], num_classes=80,
                              with_mask=True)
    if cfg.default_scope == 'mmseg':
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample

        samples = [SegDataSample(gt_sem_seg=PixelData(data=torch.randint(0, 4, (1, height, width)))) for _ in images]
        for sample in samples:
            sample.set_metainfo(dict(img_shape=(height, width), ori_shape=(height, width)))
        return dict(inputs=images, data_samples=samples)
    assert cfg.default_scope == 'mmpretrain'
    from mmpretrain.structures import DataSample

    return dict(inputs=images, data_samples=[DataSample().set_gt_label(label) for label in (3, 7)])


def _model(cfg: Config) -> torch.nn.Module:
    if cfg.default_scope == 'mmpretrain':
        cfg.model.setdefault('data_preprocessor', cfg.data_preprocessor)  # as mmengine's Runner does
    model = _build(cfg).train()
    assert type(model.backbone).__name__ == 'OrientedConvNeXt'
    return model


def _optim_wrapper(cfg: Config, model: torch.nn.Module):
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        return build_optim_wrapper(model, cfg.optim_wrapper)


SNIPPETS = _snippets()


def test_page_covers_every_stock_config() -> None:
    assert sorted(SNIPPETS) == sorted(BASES)
    for text in SNIPPETS.values():
        cfg = _load(text)
        assert cfg.custom_imports.imports[-1] == 'mmo1d' and cfg.custom_imports.allow_failed_imports is False
        assert cfg.model.backbone.type == 'mmo1d.OrientedConvNeXt'
        assert set(cfg.model.backbone) >= {'arch', 'variant', 'kernel_sizes', 'out_indices', 'gap_before_final_norm'}
        assert 'init_cfg' not in cfg.model.backbone  # nothing of the ResNet left


@pytest.mark.parametrize('base', BASES, ids=[b.split('/')[-1][:-3] for b in BASES])
def test_snippet_trains_one_step(base: str) -> None:
    torch.manual_seed(0)
    cfg = _load(SNIPPETS[base])
    _shrink(cfg)
    model = _model(cfg)
    optim_wrapper = _optim_wrapper(cfg, model)
    stem = model.backbone.downsample_layers[0]
    before = [p.detach().clone() for p in stem.parameters()]

    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        data = model.data_preprocessor(_batch(cfg), training=True)
        if cfg.default_scope != 'mmpretrain':
            assert [s % 32 for s in data['inputs'].shape[-2:]] == [0, 0]  # padded to a multiple of 32
        losses = model(**data, mode='loss')
    loss, log_vars = model.parse_losses(losses)
    assert log_vars and all(torch.isfinite(torch.as_tensor(v)) for v in log_vars.values()), log_vars
    optim_wrapper.backward(loss)
    missing = [n for n, p in model.backbone.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing  # DDP without find_unused_parameters needs a gradient for each of them
    optim_wrapper.step()
    assert any(not torch.equal(b, a) for b, a in zip(before, stem.parameters()))


def _unread_output(base: str) -> Config:
    """The snippet with the stock config's out indices: an output that no head reads."""
    cfg = _load(SNIPPETS[base])
    cfg.model.backbone.out_indices = (0, 1, 2, 3)
    channels = OrientedConvNeXt.arch_settings[cfg.model.backbone.arch]['channels']
    if base.startswith('mmdet::retinanet'):
        cfg.model.neck.update(in_channels=channels, start_level=1)
    else:
        cfg.model.decode_head.in_index = 3
        cfg.model.auxiliary_head.in_index = 2
    return cfg


@pytest.mark.parametrize('base, unused', [(BASES[0], 'norm0'), (BASES[3], 'norm1')], ids=['retinanet', 'deeplabv3plus'])
def test_unread_output_leaves_its_norm_without_gradient(base: str, unused: str) -> None:
    cfg = _unread_output(base)
    _shrink(cfg)
    model = _model(cfg)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        data = model.data_preprocessor(_batch(cfg), training=True)
        loss, _ = model.parse_losses(model(**data, mode='loss'))
    loss.backward()
    missing = {n.split('.')[0] for n, p in model.backbone.named_parameters() if p.grad is None}
    assert missing == {unused}


@contextmanager
def _ddp_train_step(cfg: Config) -> Iterator[Callable[[], dict]]:
    """A training step under DistributedDataParallel (one CPU process, gloo), wrapped as mmengine does."""
    model = _model(cfg)
    optim_wrapper = _optim_wrapper(cfg, model)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group('gloo', init_method=f'file://{os.path.join(tmp, "store")}', rank=0, world_size=1)
        try:
            ddp = MMDistributedDataParallel(module=model)
            with DefaultScope.overwrite_default_scope(cfg.default_scope):
                yield lambda: ddp.train_step(_batch(cfg), optim_wrapper)
        finally:
            dist.destroy_process_group()


def test_ddp_rejects_an_unread_output_and_takes_the_snippet() -> None:
    torch.manual_seed(0)
    stock = _unread_output(BASES[0])
    _shrink(stock)
    with _ddp_train_step(stock) as step:
        assert torch.isfinite(step()['loss'])
        with pytest.raises(RuntimeError, match='Expected to have finished reduction in the prior iteration'):
            step()
    cfg = _load(SNIPPETS[BASES[0]])
    _shrink(cfg)
    with _ddp_train_step(cfg) as step:
        for _ in range(2):
            assert torch.isfinite(step()['loss'])


def test_mmseg_resnet_base_needs_pretrained_none() -> None:
    base = BASES[3]
    line = re.search(r'^ *pretrained=None,.*\n', SNIPPETS[base], flags=re.M)
    assert line, 'the DeepLabV3+ snippet sets model.pretrained=None'
    cfg = _load(SNIPPETS[base].replace(line.group(0), ''))
    assert cfg.model.pretrained == 'open-mmlab://resnet50_v1c'
    with pytest.raises(TypeError, match="unexpected keyword argument 'pretrained'"):
        _build(cfg)


def _table(header: str) -> List[List[str]]:
    """The cells of the markdown table whose header row starts with ``header``."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith('|'):
            break
        rows.append([cell.strip().strip('`') for cell in line.strip('|').split('|')])
    return rows


def test_channel_table_is_the_arch_table() -> None:
    rows = _table('| `arch` |')
    named = {row[0].strip("'"): row for row in rows if row[0].startswith("'")}
    assert set(named) == set(OrientedConvNeXt.arch_settings)
    for arch, (_, depths, channels) in named.items():
        assert [int(d) for d in depths.split('-')] == OrientedConvNeXt.arch_settings[arch]['depths']
        assert ast.literal_eval(channels) == OrientedConvNeXt.arch_settings[arch]['channels']
    custom = dict(depths=[1, 1, 1, 1], channels=[8, 24, 40, 56])
    backbone = OrientedConvNeXt(arch=custom, stem_channels=8, kernel_sizes='downstream', out_indices=(0, 1, 2, 3),
                                gap_before_final_norm=False).eval()
    with torch.no_grad():
        outs = backbone(torch.rand(1, 3, 64, 64))
    assert [o.shape[1] for o in outs] == custom['channels']
    assert [64 // o.shape[2] for o in outs] == [4, 8, 16, 32]


def test_map_size_table() -> None:
    rows = _table('| input |')
    assert rows
    arch = dict(depths=[1, 1, 1, 1], channels=[8, 8, 8, 8])
    for row in rows:
        height, width = (int(s) for s in row[0].split('x'))
        for variants, sizes in ((('1d', '1dpp'), row[1]), (('2d', '2dpp'), row[2])):
            expected = [int(s) for s in sizes.split(',')]
            for variant in variants:
                backbone = OrientedConvNeXt(arch=arch, variant=variant, stem_channels=8, kernel_sizes='downstream',
                                            out_indices=(0, 1, 2, 3), gap_before_final_norm=False).eval()
                with torch.no_grad():
                    outs = backbone(torch.rand(1, 3, height, width))
                assert [tuple(o.shape[2:]) for o in outs] == [(s, s) for s in expected], (row, variant)


@pytest.mark.parametrize('variant', ['1d', '2d'])
def test_segformer_optimizer_norm_keys(variant: str) -> None:
    """SegFormer's custom key 'norm' takes weight decay off the norms the page names, not the others."""
    cfg = _load(SNIPPETS[BASES[5]])
    _shrink(cfg)
    cfg.model.backbone.variant = variant
    model = _model(cfg)
    names = {id(p): n for n, p in model.backbone.named_parameters()}
    decay = {names[id(p)]: group['weight_decay'] for group in _optim_wrapper(cfg, model).optimizer.param_groups
             for p in group['params'] if id(p) in names}
    no_decay = {n for n, wd in decay.items() if wd == 0 and n.endswith('.weight')}
    expected = {f'norm{i}.weight' for i in range(4)} | {f'stages.{i}.0.norm.weight' for i in range(4)}
    if variant == '1d':
        expected |= {f'downsample_layers.0.norm{i}.weight' for i in (1, 2, 3)}
    else:
        assert decay['downsample_layers.0.1.weight'] > 0
    assert no_decay == expected
    assert all(decay[f'downsample_layers.{i}.0.weight'] > 0 for i in (1, 2, 3))
