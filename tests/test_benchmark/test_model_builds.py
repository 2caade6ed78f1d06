"""mmo1d.benchmark.model_builds: two builds' classifier results side by side, against ratios worked out
by hand from the records."""
import pytest

from mmo1d.benchmark.model_builds import MIN_MOVE_MS, compare_builds, kernel_moves, summarize_builds


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


WG = 'void mmo1d::cuda::vec_wgrad_nhwc_kernel<c10::BFloat16, 7, 1, true>(mmo1d::cuda::VecWgradParams<c10::BFloat16>)'
ACROSS = 'void mmo1d::cuda::wgrad_nhwc_across_kernel<c10::BFloat16, float>(int)'
CLASSES = 'void mmo1d::cuda::vec_wgrad_nhwc_kernel<c10::BFloat16, 8, 2, false>(mmo1d::cuda::VecWgradParams<...>)'
GATHER = 'void mmo1d::cuda::win_gather_nhwc_kernel<c10::BFloat16, 4, 1, true>(int)'


def _with_kernels(rec, steps, kernels):
    return {**rec, 'kernel_steps': steps, 'own_kernels': [{'name': n, 'total_ms': ms, 'count': 1} for n, ms in kernels]}


def test_kernel_moves_per_step_largest_first():
    old = _result('9567a2f', [_with_kernels(_rec('ConvNeXt-T-1D-la (mmo1d)', 'bf16', 'train', 38.0, 36.95), 5,
                                            [(GATHER, 32.8), (WG, 9.65), (ACROSS, 16.85)])])
    new = _result('74bbf17', [_with_kernels(_rec('ConvNeXt-T-1D-la (mmo1d)', 'bf16', 'train', 37.0, 35.41), 5,
                                            [(GATHER, 32.8 + MIN_MOVE_MS * 5 / 2), (WG, 8.9), (CLASSES, 11.05)])])
    rows = kernel_moves(old, new)
    # Per step (5 steps): the across kernel gone (3.37 -> 0), the classes' new (0 -> 2.21), the grouped
    # kernel 1.93 -> 1.78; the gather moved by less than MIN_MOVE_MS and is left out.
    assert [(r['kernel'], round(r['old_ms'], 3), round(r['new_ms'], 3)) for r in rows] == [
        ('wgrad_nhwc_across_kernel<BFloat16, float>', 3.37, 0.0),
        ('vec_wgrad_nhwc_kernel<BFloat16, 8, 2, false>', 0.0, 2.21),
        ('vec_wgrad_nhwc_kernel<BFloat16, 7, 1, true>', 1.93, 1.78)]
    assert rows[2]['delta_ms'] == pytest.approx(-0.15)
    assert kernel_moves(old, new, top=1)[0]['kernel'] == 'wgrad_nhwc_across_kernel<BFloat16, float>'
    md = summarize_builds(old, new)
    assert '| ConvNeXt-T-1D-la (mmo1d) | bf16 | train | `vec_wgrad_nhwc_kernel<BFloat16, 8, 2, false>` | 0.000 | ' \
           '2.210 | +2.210 |' in md


def test_kernel_moves_need_both_runs_kernel_lists():
    # OLD and NEW (above) list no kernels: no section.
    assert kernel_moves(OLD, NEW) == []
    assert 'moved most' not in summarize_builds(OLD, NEW)
