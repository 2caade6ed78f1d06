"""mmo1d.benchmark.model_builds: two builds' classifier results side by side, against ratios worked out
by hand from the records."""
import pytest

from mmo1d.benchmark.model_builds import compare_builds, summarize_builds


def _result(commit, records, gpu='NVIDIA H200', batch=64):
    env = {'gpu': gpu, 'batch_size': batch, 'img_size': 224, 'commit': commit, 'date': '2026-11-29 03:51 UTC',
           'command': 'python tools/analysis_tools/benchmark_model.py --kernel-times'}
    return {'env': env, 'records': records}


def _rec(model, mode, pas, ms, kernel_ms=None):
    rec = {'model': model, 'mode': mode, 'pass': pas, 'ms': ms}
    if kernel_ms is not None:
        rec['kernel_ms'] = kernel_ms
    return rec


OLD = _result('1b55faf', [
    _rec('timm convnext_tiny', 'bf16', 'train', 30.0, 26.13),
    _rec('ConvNeXt-T-1D++ (mmo1d)', 'bf16', 'train', 40.0, 33.26),
    _rec('ConvNeXt-T-1D++ (mmo1d)', 'fp16', 'infer', 10.0, 9.29),
])
NEW = _result('24be64f', [
    _rec('timm convnext_tiny', 'bf16', 'train', 33.0, 26.16),
    _rec('ConvNeXt-T-1D++ (mmo1d)', 'bf16', 'train', 36.0, 31.35),
    _rec('ConvNeXt-T-1D++ (mmo1d)', 'bf16', 'infer', 9.0),  # not in the old run: left out
    _rec('ConvNeXt-T-1D++ (mmo1d)', 'fp16', 'infer', 9.5),  # no kernel time in this run
])


def test_rows_pair_the_cases_of_both_runs():
    rows = compare_builds(OLD, NEW)
    assert [(r['model'], r['mode'], r['pass']) for r in rows] == [
        ('timm convnext_tiny', 'bf16', 'train'), ('ConvNeXt-T-1D++ (mmo1d)', 'bf16', 'train'),
        ('ConvNeXt-T-1D++ (mmo1d)', 'fp16', 'infer')]
    assert rows[1]['kernel_ratio'] == pytest.approx(31.35 / 33.26)
    assert rows[1]['ms_ratio'] == pytest.approx(0.9)
    assert rows[2]['kernel_ratio'] is None and rows[2]['ms_ratio'] == pytest.approx(0.95)


def test_summary_names_both_commits_and_the_ratios():
    md = summarize_builds(OLD, NEW)
    assert 'old: commit 1b55faf' in md and 'new: commit 24be64f' in md
    assert '| ConvNeXt-T-1D++ (mmo1d) | bf16 | train | 33.26 | 31.35 | 0.943 | 40.00 | 36.00 | 0.900 |' in md
    assert '| ConvNeXt-T-1D++ (mmo1d) | fp16 | infer | 9.29 | - | - | 10.00 | 9.50 | 0.950 |' in md


@pytest.mark.parametrize('other, message', [
    (_result('x', NEW['records'], gpu='NVIDIA H100 80GB HBM3'), 'differ in gpu'),
    (_result('x', NEW['records'], batch=32), 'differ in batch_size'),
    (_result('x', [_rec('ConvNeXt-T-2D++ (mmo1d)', 'bf16', 'train', 1.0)]), 'no model, mode and pass in common'),
])
def test_runs_that_cannot_be_compared_are_refused(other, message):
    with pytest.raises(ValueError, match=message):
        compare_builds(OLD, other)
