""".dev_scripts/ncu_sass_regions.py on a SASS page laid out as ``ncu --page source --csv`` writes it, and
``.dev_scripts/time_channels_last_builds.py summarize`` and ``time_nchw_builds.py summarize`` on the JSON lines
their ``run`` prints."""
import csv
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / '.dev_scripts' / f'{name}.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


HEADER = ['Address', 'Source', 'Warp Stall Sampling (All Samples)', 'Warp Stall Sampling (Not-issued Samples)',
          '# Samples', 'Instructions Executed', 'Thread Instructions Executed']
# (instruction, times executed, stall samples): a prologue run once per warp, a loop body run 10
# times as often, a tail.
SASS = [('LDC R1, c[0x0][0x28]', 4, 1), ('S2R R0, SR_TID.X', 4, 1), ('BAR.SYNC 0x0', 4, 30)] + \
       [(f'FFMA R{i}, R{i}, R2, R{i}', 40, 5) for i in range(6)] + [('STG.E [R4.64], R6', 4, 3), ('EXIT', 4, 0)]


def _write_sass(path: Path) -> None:
    with open(path, 'w', newline='') as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(['Kernel Name', 'void k(float *)'])
        w.writerow(HEADER)
        for i, (src, executed, samples) in enumerate(SASS):
            w.writerow([hex(0x100 + 16 * i), f'      {src}', samples, samples, samples, executed, 32 * executed])


def test_sass_regions_group_runs_of_equal_counts(tmp_path: Path, capsys) -> None:
    tool = _tool('ncu_sass_regions')
    path = tmp_path / 'k_sass.csv'
    _write_sass(path)
    kernel, source, executed, samples = tool.load(str(path))
    assert kernel == 'void k(float *)' and source[3].startswith('FFMA') and executed[3] == 40
    assert tool.regions(executed) == [[0, 2, 4], [3, 8, 40], [9, 10, 4]]
    tool.main([str(path), '--top', '2'])
    out = capsys.readouterr().out.splitlines()
    # 260 instructions and 65 stall samples in all; the loop: 240 of them and 30 samples, in one row.
    loop = next(line for line in out if line.lstrip().startswith('3-8'))
    assert f'{100 * 240 / 260:10.1f}%' in loop and f'{100 * 30 / 65:12.1f}%' in loop
    assert out[-2].split()[:2] == ['2', '30'] and 'BAR.SYNC' in out[-2]


def test_build_summary_takes_medians_per_tag(tmp_path: Path, capsys) -> None:
    tool = _tool('time_channels_last_builds')
    lines = []
    for tag, fwd in (('old', 1.0), ('new', 0.9), ('old', 1.2), ('new', 0.8), ('old', 1.1), ('new', 0.85)):
        lines.append(dict(tag=tag, dtype='bfloat16', case=[64, 384, 56, 31, 'mixed'], fwd=fwd, bwd_input=2 * fwd,
                          bwd_weight=3 * fwd, path='win_nhwc'))
    lines.append(dict(tag='old', dtype='float32', case=[2, 16, 8, 7, 'mixed'], fwd=1.0, bwd_input=1.0, path='x'))
    lines.append(dict(tag='new', dtype='float32', case=[2, 16, 8, 7, 'mixed'], fwd=0.5, bwd_input=2.0, path='x'))
    path = tmp_path / 'ab.jsonl'
    path.write_text(''.join(json.dumps(r) + '\n' for r in lines))
    tool.summarize(str(path), 'old', 'new')
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith('bfloat16') and 'fwd 1.100 -> 0.850 (0.773)' in out[1]
    assert 'bwd_input 2.200 -> 1.700 (0.773)' in out[1] and 'bwd_weight 3.300 -> 2.550 (0.773)' in out[1]
    # A run without the weight gradient's column (an older file) shows the columns it has.
    assert 'fwd 1.000 -> 0.500 (0.500)' in out[2] and 'bwd_weight' not in out[2]


def test_nchw_build_summary_takes_medians_per_build(tmp_path: Path) -> None:
    """``time_nchw_builds.py summarize``: per case the median of each build's rounds and new / old."""
    tool = _tool('time_nchw_builds')
    path = tmp_path / 'ab.jsonl'
    rounds = {'old': [1.0, 3.0, 2.0], 'new': [1.5, 1.4, 9.0]}
    with open(path, 'w') as f:
        f.write('a line that is not JSON\n')
        for i in range(3):
            for tag, times in rounds.items():
                f.write(json.dumps(dict(tag=tag, shape='64x512x28', angle='0', pas='fwd', ms=times[i])) + '\n')
    lines = tool.summarize(str(path)).splitlines()
    assert len(lines) == 2
    cells = lines[1].split()
    assert cells[:3] == ['64x512x28', '0', 'fwd']
    assert [float(v) for v in cells[3:6]] == [2.0, 1.5, 0.75]
    assert lines[1].endswith('1.0000 3.0000 2.0000 | 1.5000 1.4000 9.0000')
