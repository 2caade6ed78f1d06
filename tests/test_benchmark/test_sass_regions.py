"""mmo1d.benchmark.sass_regions on a SASS page laid out as ``ncu --page source --csv`` writes it."""
import csv
from pathlib import Path

from mmo1d.benchmark import sass_regions

HEADER = ['Address', 'Source', 'Warp Stall Sampling (All Samples)', 'Warp Stall Sampling (Not-issued Samples)',
          '# Samples', 'Instructions Executed', 'Thread Instructions Executed']
# (instruction, times executed, stall samples): a prologue run once per warp, a loop body run 10
# times as often, a tail.
SASS = [('LDC R1, c[0x0][0x28]', 4, 1), ('S2R R0, SR_TID.X', 4, 1), ('BAR.SYNC 0x0', 4, 30)] + \
       [(f'FFMA R{i}, R{i}, R2, R{i}', 40, 5) for i in range(6)] + [('STG.E [R4.64], R6', 4, 3), ('EXIT', 4, 0)]


def write_sass(path: Path) -> None:
    with open(path, 'w', newline='') as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(['Kernel Name', 'void k(float *)'])
        w.writerow(HEADER)
        for i, (src, executed, samples) in enumerate(SASS):
            w.writerow([hex(0x100 + 16 * i), f'      {src}', samples, samples, samples, executed, 32 * executed])


def test_regions_group_runs_of_equal_counts(tmp_path: Path) -> None:
    path = tmp_path / 'k_sass.csv'
    write_sass(path)
    kernel, source, executed, samples = sass_regions.load(str(path))
    assert kernel == 'void k(float *)' and source[3].startswith('FFMA') and executed[3] == 40
    assert sass_regions.regions(executed) == [[0, 2, 4], [3, 8, 40], [9, 10, 4]]
    out = sass_regions.report(str(path), top=2).splitlines()
    # 260 instructions and 65 stall samples in all; the loop: 240 of them and 30 samples, in one row.
    loop = next(line for line in out if line.lstrip().startswith('3-8'))
    assert f'{100 * 240 / 260:10.1f}%' in loop and f'{100 * 30 / 65:12.1f}%' in loop
    assert out[-2].split()[:2] == ['2', '30'] and 'BAR.SYNC' in out[-2]
