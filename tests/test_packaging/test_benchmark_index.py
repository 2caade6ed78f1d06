"""benchmarks/README.md indexes every file under benchmarks/ (but itself and the kernel notes, which it
links), and names only files that exist.

The index names files in backticks, a set of suffixes in braces (``op_h100.{json,md,png}``), several
files of one row separated by commas.
"""
import re
from pathlib import Path
from typing import Set

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / 'benchmarks'
# A file name in backticks: a stem, then one suffix or a brace set of suffixes.
_NAME = re.compile(r'`([A-Za-z0-9_.\-]+?)\.(\{[a-z0-9,]+\}|[a-z0-9]+)`')


def indexed_names(text: str) -> Set[str]:
    """The file names the index text lists, brace sets expanded."""
    names = set()
    for stem, suffix in _NAME.findall(text):
        for one in suffix.strip('{}').split(','):
            names.add(f'{stem}.{one}')
    return names


def test_name_parser_on_known_text() -> None:
    text = ('| `op_h100.{json,md,png}` | x | `python tools/a.py --out-dir OUT_DIR` |\n'
            '| `a_cpu.json`, `b_cpu.json` | y | `bash .dev_scripts/gpu.sh tests OUT_DIR` |')
    assert indexed_names(text) == {'op_h100.json', 'op_h100.md', 'op_h100.png', 'a_cpu.json', 'b_cpu.json'}


def test_every_benchmark_file_is_indexed_and_no_result_is_named_by_a_commit() -> None:
    index = (BENCHMARKS / 'README.md').read_text()
    names = indexed_names(index)
    files = sorted(p for p in BENCHMARKS.rglob('*') if p.is_file() and p.name not in ('README.md', 'kernel_notes.md'))
    missing = [str(p.relative_to(REPO)) for p in files if p.name not in names]
    assert missing == [], f'files under benchmarks/ without a row in benchmarks/README.md: {missing}'
    # A results file is named by what it measures and where, not by a commit.
    hashed = [p.name for p in files if re.search(r'(^|_)[0-9a-f]{7,}(_|\.)', p.name)]
    assert hashed == []
    assert len(files) + 1 < 60


def test_the_index_names_only_files_that_exist() -> None:
    index = (BENCHMARKS / 'README.md').read_text()
    present = {p.name for p in BENCHMARKS.rglob('*') if p.is_file()}
    # Names in the index that look like results files of this folder (a machine tag before the suffix).
    listed = {n for n in indexed_names(index) if re.search(r'_(cpu|h100|h200)(x\d+)?\.[a-z]+$', n)}
    assert sorted(listed - present) == []


def test_the_kernel_notes_stay_one_readable_page() -> None:
    lines = (BENCHMARKS / 'kernel_notes.md').read_text().splitlines()
    assert len(lines) < 400
    # They describe the kernels as they are: no version diary.
    assert not [line for line in lines if re.match(r'#+ .*\b[Vv]ersion \d', line)]
