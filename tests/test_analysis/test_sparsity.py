"""mmo1d.analysis.sparsity: density of a known kernel, the blocks found in every naming, the tool."""
import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from mmo1d.analysis import sparsity
from mmo1d.models import OrientedConvNeXt

TOOL = Path(__file__).resolve().parents[2] / 'tools' / 'analysis_tools' / 'analyze_sparsity.py'


def test_density_of_a_known_kernel():
    # Largest |w| is 2: the threshold is 0.1. Above it: 2, -0.5, 0.101, 0.11, -0.2 -> 5 of 10.
    weight = torch.tensor([2.0, -0.5, 0.101, -0.099, 0.11, 0.05, 0.0, -0.2, 0.09, 0.0]).view(1, 1, 1, 10)
    assert sparsity.kernel_density(weight) == pytest.approx(0.5)
    assert sparsity.kernel_density(weight, fraction=0.01) == pytest.approx(0.8)
    assert sparsity.kernel_density(torch.zeros(3, 7)) == 0.0


def tiny_model(variant):
    return OrientedConvNeXt(arch=dict(depths=[2, 1, 3, 1], channels=[4, 8, 8, 8]), variant=variant,
                            kernel_sizes=[(5, 7)] * 4 if variant.endswith('pp') else [5] * 4, stem_kernel_size=5,
                            stem_channels=4)


@pytest.mark.parametrize('variant', ['1d', '1dpp', '2dpp'])
def test_report_of_a_model_with_known_kernels(variant):
    """Block j of stage s keeps s + j + 1 non-zero weights of equal magnitude: its density is known, and
    the ++ blocks' second (mid) convolution, set dense, must not be counted."""
    model = tiny_model(variant)
    expected = {}
    with torch.no_grad():
        for s, stage in enumerate(model.stages):
            for j, block in enumerate(stage):
                weight = block.depthwise_conv.weight
                weight.zero_()
                weight.view(-1)[:s + j + 1] = -1.0
                expected[s, j] = (s + j + 1) / weight.numel()
                if block.mid_conv is not None:
                    block.mid_conv.weight.fill_(1.0)
    state = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    report = sparsity.sparsity_report(state)
    assert {(b['stage'], b['block']): b['density'] for b in report['blocks']} == pytest.approx(expected)
    numel = {s: model.stages[s][0].depthwise_conv.weight.numel() for s in range(4)}
    for entry in report['stages']:
        s, depth = entry['stage'], len(model.stages[entry['stage']])
        densities = [expected[s, j] for j in range(depth)]
        assert entry['blocks'] == depth
        assert entry['mean'] == pytest.approx(np.mean(densities))
        assert entry['pooled'] == pytest.approx(sum(d * numel[s] for d in densities) / (numel[s] * depth))


def test_the_names_of_other_releases_are_found():
    w = torch.ones(4, 1, 7, 7)
    authors_pp = {'stages.0.0.dwconv1.weight': w, 'stages.0.0.dwconv2.weight': torch.ones(16, 1, 1, 31),
                  'stages.1.0.dwconv.conv.weight': w}
    assert [(b['stage'], b['block']) for b in sparsity.sparsity_report(authors_pp)['blocks']] == [(0, 0), (1, 0)]
    timm = {'stages.2.blocks.3.conv_dw.weight': w, 'stages.2.blocks.3.conv_pw.weight': w}
    assert [(b['stage'], b['block']) for b in sparsity.sparsity_report(timm)['blocks']] == [(2, 3)]
    assert sparsity.checkpoint_state_dict({'model': authors_pp, 'epoch': 3}) is authors_pp
    with pytest.raises(KeyError, match='no first depthwise convolution'):
        sparsity.sparsity_report({'head.weight': w})
    with pytest.raises(ValueError, match='two depthwise convolutions'):
        sparsity.sparsity_report({'a.stages.0.0.dwconv.weight': w, 'b.stages.0.0.dwconv.weight': w})


def test_tool_writes_json_and_figure(tmp_path):
    spec = importlib.util.spec_from_file_location('analyze_sparsity', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    paths = []
    for variant in ('1d', '2dpp'):
        paths.append(tmp_path / f'{variant}.pth')
        model = tiny_model(variant)
        torch.save({'meta': {'epoch': 1}, 'state_dict': {f'backbone.{k}': v for k, v in model.state_dict().items()}},
                   paths[-1])
    out = tmp_path / 'figs' / 'tiny'
    reports = tool.main([str(p) for p in paths] + ['--names', 'T-1D', 'T-2D++', '--out', str(out)])
    saved = json.loads(out.with_suffix('.json').read_text())
    assert list(saved) == ['T-1D', 'T-2D++'] and saved == json.loads(json.dumps(reports))
    assert [len(saved[n]['blocks']) for n in saved] == [7, 7]
    assert saved['T-2D++']['blocks'][0]['kernel_shape'] == [1, 5, 5]
    image = np.asarray(Image.open(out.with_suffix('.png')))
    assert image.shape[:2] == (380, 1100) and image.std() > 0
    with pytest.raises(SystemExit, match=f'^error: checkpoint not found: {tmp_path / "missing.pth"}$'):
        tool.main([str(tmp_path / 'missing.pth'), '--out', str(out)])


def test_tool_reads_a_release_that_keeps_its_arguments(tmp_path):
    """The authors' and official ConvNeXt checkpoints hold ``args`` (an argparse.Namespace) beside ``model``;
    the tool reads them as the converter does, and refuses a file that is not a checkpoint in one line."""
    spec = importlib.util.spec_from_file_location('analyze_sparsity', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    model = tiny_model('1d')
    with torch.no_grad():
        for block in (b for stage in model.stages for b in stage):
            block.depthwise_conv.weight.zero_()
            block.depthwise_conv.weight[:, ..., 0] = 1.0  # one tap in 5 of every kernel
    release = tmp_path / 'convnext_1d.pth'
    torch.save({'model': model.state_dict(), 'epoch': 299, 'args': argparse.Namespace(model='convnext_1d', lr=4e-3)},
               release)
    reports = tool.main([str(release), '--out', str(tmp_path / 'sparsity')])
    assert [s['pooled'] for s in reports['convnext_1d']['stages']] == pytest.approx([0.2] * 4)
    notes = tmp_path / 'notes.pth'
    notes.write_text('not a checkpoint\n')
    with pytest.raises(SystemExit, match=f'^error: {notes} is not a PyTorch checkpoint'):
        tool.main([str(notes), '--out', str(tmp_path / 'sparsity')])
