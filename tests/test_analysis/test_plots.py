"""mmo1d.analysis.plots: the figures hold the numbers of the results, and the redraw tool."""
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmo1d.analysis import plots

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / 'tools' / 'analysis_tools' / 'plot_benchmarks.py'
OP_JSON = ROOT / 'benchmarks' / 'results' / 'op_h100.json'
MODELS_JSON = ROOT / 'benchmarks' / 'results' / 'models_tiny_h100.json'


def op_result():
    recs = []
    for pas, scale in (('fwd', 1.0), ('fwdbwd', 3.0)):
        for k in (7, 31):
            recs += [dict(impl='mmo1d', dtype='float32', layout='nchw', H=14, K=k, angle_deg=a, ms=scale * (k + a / 90),
                          **{'pass': pas}) for a in (90.0, 0.0, 45.0)]
            recs.append(dict(impl='mmo1d', dtype='float32', layout='nchw', H=14, K=k, angle_deg='mixed8', ms=scale * k,
                             **{'pass': pas}))
            recs.append(dict(impl='torch_horizontal', dtype='float32', layout='nchw', H=14, K=k, angle_deg=None,
                             ms=scale * 2 * k, **{'pass': pas}))
        recs.append(dict(impl='torch_2d_7x7', dtype='float32', layout='nchw', H=14, K=7, angle_deg=None, ms=scale * 5,
                         **{'pass': pas}))
    return {'env': {'gpu': 'Test GPU', 'batch': 2, 'channels': 8}, 'records': recs}


def test_op_figure_shows_every_angle_and_baseline(tmp_path):
    fig = plots.plot_op_benchmark(op_result(), str(tmp_path / 'op.png'))
    axes = fig.axes
    assert len(axes) == 2  # float32 fwd and fwdbwd at H=14
    for ax, scale in zip(axes, (1.0, 3.0)):
        curves = [line for line in ax.lines if len(line.get_xdata()) == 3]
        assert [list(line.get_xdata()) for line in curves] == [[0.0, 45.0, 90.0]] * 2
        assert [list(line.get_ydata()) for line in curves] == [[scale * k, scale * (k + 0.5), scale * (k + 1)]
                                                              for k in (7, 31)]
        levels = sorted(line.get_ydata()[0] for line in ax.lines if len(line.get_xdata()) == 2)  # axhline
        assert levels == [scale * 5, scale * 14, scale * 62]
    assert_png_size(tmp_path / 'op.png', fig)


def test_model_figure_bars_and_ratios(tmp_path):
    recs = []
    for model, ips in (('timm convnext_tiny', 100.0), ('ConvNeXt-T (mmo1d)', 110.0), ('ConvNeXt-T-1D (mmo1d)', 90.0),
                       ('ConvNeXt-T-1D++ (mmo1d)', None)):
        recs.append(dict(model=model, mode='fp32', ms=None if ips is None else 64e3 / ips, img_per_s=ips,
                         **{'pass': 'infer'}))
    fig = plots.plot_model_benchmark({'env': {'gpu': 'Test GPU'}, 'records': recs}, str(tmp_path / 'm.png'))
    (ax, ) = fig.axes
    assert [p.get_height() for p in ax.patches] == [100.0, 110.0, 90.0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ['1.10x', '0.90x', 'OOM']
    assert [t.get_text() for t in ax.get_xticklabels()] == ['T timm', 'T 2D', 'T 1D', 'T 1D++']
    assert_png_size(tmp_path / 'm.png', fig)


def test_committed_results_are_drawn(tmp_path):
    for source in (OP_JSON, MODELS_JSON):
        result = json.loads(source.read_text())
        kind = plots.benchmark_kind(result)
        draw = plots.plot_op_benchmark if kind == 'op' else plots.plot_model_benchmark
        fig = draw(result, str(tmp_path / f'{source.stem}.png'))
        assert_png_size(tmp_path / f'{source.stem}.png', fig)
    assert plots.benchmark_kind({'records': [{'site': 'x'}]}) is None
    with pytest.raises(ValueError, match='model benchmark'):
        plots.plot_model_benchmark(op_result(), str(tmp_path / 'x.png'))


def test_tool_writes_the_figure_next_to_each_json(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location('plot_benchmarks', TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    (tmp_path / 'op.json').write_text(json.dumps(op_result()))
    shutil.copy(MODELS_JSON, tmp_path / 'models_x.json')
    (tmp_path / 'other.json').write_text(json.dumps({'env': {}, 'records': [{'site': 'stem'}]}))
    written = tool.main([str(tmp_path / n) for n in ('op.json', 'models_x.json', 'other.json')])
    assert written == [str(tmp_path / 'op.png'), str(tmp_path / 'models_x.png')]
    assert not (tmp_path / 'other.png').exists() and 'skipped' in capsys.readouterr().out
    for png in written:
        assert np.asarray(Image.open(png)).std() > 0


def assert_png_size(path, fig, dpi=100):
    width, height = fig.get_size_inches()
    image = np.asarray(Image.open(path))
    assert image.shape[:2] == (round(height * dpi), round(width * dpi))


def test_op_benchmark_tool_draws_its_figure(tmp_path, monkeypatch):
    """benchmark_op.py writes the figure next to its JSON (its GPU run replaced by the committed result)."""
    spec = importlib.util.spec_from_file_location('benchmark_op', TOOL.parent / 'benchmark_op.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    result = json.loads(OP_JSON.read_text())
    monkeypatch.setattr(tool, 'run', lambda args: result)
    tool.main(['--out-dir', str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ['op_h100.json', 'op_h100.md', 'op_h100.png']
    # One panel per (dtype, pass) row and size column of the result, at the plotting module's scale.
    drawn = plots.plot_op_benchmark(result, str(tmp_path / 'again.png'))
    assert len(drawn.axes) == len({(r['dtype'], r['pass']) for r in result['records']}) * len(
        {r['H'] for r in result['records']})
    assert_png_size(tmp_path / 'op_h100.png', drawn)
