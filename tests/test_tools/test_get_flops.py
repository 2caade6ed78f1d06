"""tools/analysis_tools/get_flops.py on the demo configs (small inputs)."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch
from mmengine.analysis import FlopAnalyzer, get_model_complexity_info
from mmengine.config import Config
from mmengine.model import revert_sync_batchnorm
from mmengine.registry import DefaultScope

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / 'configs' / 'demo'
SEG_CFG = DEMO / 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
DET_CFG = DEMO / 'cascade-mask-rcnn_oriented-convnext-demo-1d_fpn_4conv1fc-giou_ms-crop-200iter_coco-demo.py'
_spec = importlib.util.spec_from_file_location('get_flops', REPO / 'tools' / 'analysis_tools' / 'get_flops.py')
get_flops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(get_flops)
DUMMY_ROIS = get_flops.DUMMY_MASK_ROIS


def test_segmentor_flops_are_get_model_complexity_info(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / 'flops.jsonl'
    result = get_flops.main([str(SEG_CFG), '--shape', '128', '192', '--json', str(out)])
    assert json.loads(out.read_text()) == result and result['input'] == [1, 3, 128, 192]
    printed = capsys.readouterr().out
    assert f"Flops: {result['flops'] / 1e9:.1f}G\nParams: {result['params'] / 1e6:.2f}M\n" in printed
    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import MODELS

        model = revert_sync_batchnorm(MODELS.build(Config.fromfile(str(SEG_CFG)).model))
    model.auxiliary_head = None
    model.eval()
    info = get_model_complexity_info(model, inputs=torch.rand(1, 3, 128, 192), show_table=False, show_arch=False)
    assert (result['flops'], result['params']) == (info['flops'], info['params'])


def test_detector_flops_and_the_masks_of_100_rois() -> None:
    result = get_flops.main([str(DET_CFG), '--shape', '128', '160', '--cfg-options',
                             'model.test_cfg.rpn.max_per_img=160'])
    rois = result['proposals']
    assert DUMMY_ROIS < rois <= 160
    # Oracle: the config's mask head (one per stage, three alike) alone on one RoI feature.
    with DefaultScope.overwrite_default_scope('mmdet'):
        from mmdet.registry import MODELS

        head = MODELS.build(Config.fromfile(str(DET_CFG)).model.roi_head.mask_head).eval()
    per_roi = FlopAnalyzer(head, (torch.zeros(1, 256, 14, 14), )).unsupported_ops_warnings(False).total()
    assert result['mask_head_flops'] == 3 * rois * per_roi
    assert result['flops_masks_of_100_rois'] == result['flops'] - 3 * (rois - DUMMY_ROIS) * per_roi


def test_other_toolboxes_are_named(tmp_path: Path) -> None:
    config = tmp_path / 'cls.py'
    config.write_text("default_scope = 'mmpretrain'\n")
    with pytest.raises(ValueError, match="default_scope is 'mmpretrain'"):
        get_flops.main([str(config), '--shape', '224', '224'])
    with pytest.raises(FileNotFoundError, match='config file not found'):
        get_flops.main([str(tmp_path / 'missing.py'), '--shape', '224', '224'])


def test_printed_in_the_units_of_the_readme_tables() -> None:
    """The committed counts, formatted as the tool prints them, are the cells of the FLOPs table."""
    assert get_flops.format_flops(939840817152) == '939.8G' and get_flops.format_flops(2171603696640) == '2171.6G'
    assert get_flops.format_params(59150454) == '59.15M'
    rows = json.loads((REPO / 'benchmarks' / 'results' / 'flops_downstream_tiny_cpu.json').read_text())['rows']
    table = (REPO / 'docs' / 'inference.md').read_text()
    for row in rows:
        cells = [get_flops.format_flops(row['flops']), get_flops.format_params(row['params'])]
        if 'flops_masks_of_100_rois' in row:
            cells.append(get_flops.format_flops(row['flops_masks_of_100_rois']))
        assert all(f' {cell} ' in table for cell in cells), (row['config'], cells)
