"""mmo1d.benchmark.op_tables: the GPU op benchmark's ratios, the README table, float16 next to bfloat16."""
from mmo1d.analysis.plots import plot_op_benchmark
from mmo1d.benchmark.op_tables import readme_table, summarize


def _record(impl, ms, angle=None, pass_='fwd', peak=100, dtype='bfloat16', layout='channels_last'):
    return dict(impl=impl, dtype=dtype, layout='nchw' if impl == 'torch_horizontal' else layout, H=56, K=31,
                angle_deg=angle, **{'pass': pass_}, ms=ms, peak_mem_bytes=peak)


def _env():
    return {'gpu': 'Test GPU', 'batch': 64, 'channels': 512, 'rounds': 3, 'repeats': 51,
            'copy_bandwidth_GBps': 3000.0, 'torch': 'x', 'cuda': 'x', 'cudnn': 1, 'driver': 'x', 'commit': 'abc1234',
            'date': 'x', 'command': 'python tools/analysis_tools/benchmark_op.py --dtypes float16'}


def test_readme_table_uses_the_slowest_angle():
    records = [_record('torch_horizontal', 2.0), _record('torch_2d_7x7', 0.8), _record('masked_2d', 90.0)]
    records += [_record('mmo1d', 0.5 + 0.05 * i, angle=22.5 * i) for i in range(8)]
    records.append(_record('mmo1d', 0.6, angle='mixed8'))
    result = {'env': _env(), 'records': records}
    slowest = 0.5 + 0.05 * 7
    assert f'| {slowest:.2f} | 2.00 ({slowest / 2.0:.2f}x) | 0.80 ({slowest / 0.8:.2f}x) |' in readme_table(result)
    summary = summarize(result)
    assert 'median of 51 repeats in 3 interleaved rounds' in summary and 'commit abc1234' in summary
    row = next(line for line in summary.splitlines() if line.startswith('| 56 | 31 |'))
    # slowest angle, mixed8, horizontal, 7x7, masked, the two ratios, spread (slowest / fastest angle)
    assert row.startswith(f'| 56 | 31 | {slowest:.3f} | 0.600 | 2.000 | 0.800 | 90.000 | {slowest / 2:.2f}x | '
                          f'{slowest / 0.8:.2f}x | {slowest / 0.5:.2f} |')


def test_float16_is_benchmarked_like_bfloat16(tmp_path):
    records = []
    for dtype, ms in (('bfloat16', 1.0), ('float16', 0.8)):
        for pass_, scale in (('fwd', 1.0), ('fwdbwd', 3.0)):
            records += [_record('torch_horizontal', 2.0 * scale, pass_=pass_, dtype=dtype),
                        _record('torch_2d_7x7', 0.5 * scale, pass_=pass_, dtype=dtype),
                        _record('mmo1d', ms * scale, angle='mixed8', pass_=pass_, dtype=dtype)]
            records += [_record('mmo1d', ms * scale, angle=22.5 * i, pass_=pass_, dtype=dtype) for i in range(8)]
    result = {'env': _env(), 'records': records}
    summary = summarize(result)
    assert summary.index('## bfloat16, channels_last, forward\n') < summary.index(
        '## float16, channels_last, forward\n')
    assert '## float16, channels_last, forward + backward\n' in summary
    assert 'Command: `python tools/analysis_tools/benchmark_op.py --dtypes float16`' in summary
    # Roofline of 2-byte elements: x and y of N*C*H*H halves over the slowest angle's time.
    roof = 100 * 2 * 64 * 512 * 56 * 56 * 2 / 0.8e-3 / 3000e9
    fp16_fwd = summary.split('## float16, channels_last, forward\n')[1].split('\n\n')[0].strip().splitlines()[2]
    assert fp16_fwd.startswith('| 56 | 31 | 0.800 |') and f'| {roof:.0f}% |' in fp16_fwd
    table = readme_table(result)
    assert '| float16, channels_last | fwd | 56 | 0.80 | 2.00 (0.40x) | 0.50 (1.60x) |' in table
    assert '| float16, channels_last | fwdbwd | 56 | 2.40 | 6.00 (0.40x) | 1.50 (1.60x) |' in table
    fig = plot_op_benchmark(result, str(tmp_path / 'op.png'))
    assert [ax.get_title() for ax in fig.axes] == [
        f'{dtype} channels_last, {name}, H=56' for dtype in ('bfloat16', 'float16')
        for name in ('forward', 'forward + backward')]


def test_two_layouts_of_one_dtype_get_their_own_tables():
    records = [_record('torch_horizontal', 2.0, dtype='float32'), _record('torch_2d_7x7', 1.0, dtype='float32')]
    records.append(_record('torch_2d_7x7', 4.0, dtype='float32', layout='nchw'))
    for layout, ms in (('nchw', 1.0), ('channels_last', 3.0)):
        records += [_record('mmo1d', ms, angle=a, dtype='float32', layout=layout) for a in (0.0, 'mixed8')]
    summary = summarize({'env': _env(), 'records': records})
    nchw = summary.split('## float32, nchw, forward\n')[1].split('\n\n')[0]
    cl = summary.split('## float32, channels_last, forward\n')[1].split('\n\n')[0]
    assert '| 56 | 31 | 1.000 | 1.000 | 2.000 | 4.000 |' in nchw  # its own 7x7 baseline
    assert '| 56 | 31 | 3.000 | 3.000 | 2.000 | 1.000 |' in cl
