"""README.md and docs/: every relative link resolves, and the README stays a front door.

The sdist's copy of the same pages is checked in ``test_sources_and_sdist.py``.
"""
import re
from pathlib import Path

from .markdown_links import anchors, broken, documentation, is_relative, links, resolve

REPO = Path(__file__).resolve().parents[2]
README = REPO / 'README.md'


def test_link_checker_on_a_known_tree(tmp_path):
    """An independent oracle: a small tree whose good and broken links are known by construction."""
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'img.png').write_bytes(b'')
    (tmp_path / 'docs' / 'page.md').write_text(
        "# The op's page\n\n## `rounding` and angles\n\n## Repeat\n\n## Repeat\n\n"
        '```bash\n# not a heading\n[in code](missing-in-fence.md)\n```\n')
    (tmp_path / 'README.md').write_text(
        '[page](docs/page.md) ![image](img.png "title") [anchor](docs/page.md#the-ops-page)\n'
        '[code anchor](docs/page.md#rounding-and-angles) [second](docs/page.md#repeat-1)\n'
        '[`code text`](docs/page.md) `[not a link](nowhere.md)` [web](https://example.com/x.md)\n'
        '[missing](docs/missing.md) ![missing image](docs/img.png) [bad anchor](docs/page.md#nope)\n'
        '[third repeat](docs/page.md#repeat-2) [outside](../elsewhere.md) [self](#nothing-here)\n')
    assert anchors(tmp_path / 'docs' / 'page.md') == {'the-ops-page', 'rounding-and-angles', 'repeat', 'repeat-1'}
    found = links(tmp_path / 'README.md')
    assert len(found) == 13 and [link.image for link in found].count(True) == 2
    assert broken(documentation(tmp_path), tmp_path) == [
        'README.md: docs/missing.md (no such file)',
        'README.md: docs/img.png (no such file)',
        'README.md: docs/page.md#nope (no heading with this anchor)',
        'README.md: docs/page.md#repeat-2 (no heading with this anchor)',
        f'README.md: ../elsewhere.md (outside {tmp_path.name})',
        'README.md: #nothing-here (no heading with this anchor)',
    ]


def test_every_relative_link_of_the_readme_and_docs_resolves():
    files = documentation(REPO)
    assert len(files) > 1
    assert broken(files, REPO) == []


def test_benchmarks_are_linked_through_the_index_and_the_kernel_notes_only():
    """Result files are renamed and replaced by new runs; the index says which file answers what."""
    allowed = {REPO / 'benchmarks' / 'README.md', REPO / 'benchmarks' / 'kernel_notes.md'}
    benchmarks = REPO / 'benchmarks'
    direct = [f'{link.source.relative_to(REPO)}: {link.target}' for path in documentation(REPO)
              for link in links(path) if is_relative(link.target)
              and benchmarks in resolve(link).parents and resolve(link) not in allowed]
    assert direct == []


def test_the_readme_is_a_front_door():
    text = README.read_text(encoding='utf-8')
    assert len(text.splitlines()) <= 200
    # Commit hashes belong in the result files and the kernel notes, not in the front page.
    hashes = re.findall(r'\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b', text)
    assert hashes == []
    # Its table of the manual links every page of docs/.
    linked = {resolve(link) for link in links(README) if is_relative(link.target)}
    pages = set((REPO / 'docs').glob('*.md'))
    assert pages - linked == set()
