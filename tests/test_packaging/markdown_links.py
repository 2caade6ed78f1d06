"""The relative links and images of markdown files, and which of them do not resolve.

A link resolves when its file (or folder) exists under the given root and, for a link into a
markdown file with ``#anchor``, that file has a heading whose GitHub anchor is ``anchor``. Links
inside code (fenced blocks and inline spans) are not links; links with a scheme (``https:``,
``mailto:``) are not checked.
"""
import re
from pathlib import Path
from typing import Dict, List, NamedTuple, Set
from urllib.parse import unquote, urlsplit

_FENCE = re.compile(r'^ {0,3}(```|~~~)[^\n]*\n.*?^ {0,3}\1[^\n]*$', re.S | re.M)
_INLINE_CODE = re.compile(r'(`+)(.+?)\1', re.S)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_LINK = re.compile(r'(!?)\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)')
_HEADING = re.compile(r'^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$', re.M)


class Link(NamedTuple):
    source: Path  #: the markdown file
    target: str  #: as written
    image: bool


def _prose(text: str) -> str:
    """The text without code: fenced blocks removed, inline code spans replaced by their content
    with brackets and parentheses dropped (a span is never a link, but may be a link's text)."""
    text = _FENCE.sub('', text)
    return _INLINE_CODE.sub(lambda m: re.sub(r'[\[\]()]', '', m.group(2)), text)


def links(path: Path) -> List[Link]:
    """Every link and image of a markdown file, external ones included."""
    return [Link(path, m.group(2), bool(m.group(1))) for m in _LINK.finditer(_prose(path.read_text(encoding='utf-8')))]


def anchors(path: Path) -> Set[str]:
    """The anchors GitHub gives the headings of a markdown file (``-1``, ``-2`` for repeats)."""
    seen: Dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_prose(path.read_text(encoding='utf-8'))):
        text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1))  # a link in a heading: its text
        slug = re.sub(r'[^\w\- ]', '', text.strip().lower()).replace(' ', '-')
        out.add(slug if slug not in seen else f'{slug}-{seen[slug]}')
        seen[slug] = seen.get(slug, 0) + 1
    return out


def is_relative(target: str) -> bool:
    parts = urlsplit(target)
    return not parts.scheme and not parts.netloc


def resolve(link: Link) -> Path:
    """The file or folder a relative link points to (the source file itself for ``#anchor``)."""
    path = unquote(urlsplit(link.target).path)
    return (link.source.parent / path).resolve() if path else link.source.resolve()


def broken(files: List[Path], root: Path) -> List[str]:
    """``'FILE: TARGET (why)'`` for every relative link of ``files`` that does not resolve under ``root``."""
    root = root.resolve()
    problems = []
    for path in files:
        for link in links(path):
            if not is_relative(link.target):
                continue
            where = f'{path.resolve().relative_to(root).as_posix()}: {link.target}'
            if link.target.startswith('/'):
                problems.append(f'{where} (absolute path)')
                continue
            target = resolve(link)
            if root != target and root not in target.parents:
                problems.append(f'{where} (outside {root.name})')
            elif not target.exists():
                problems.append(f'{where} (no such file)')
            else:
                anchor = urlsplit(link.target).fragment
                if anchor and target.suffix == '.md' and unquote(anchor) not in anchors(target):
                    problems.append(f'{where} (no heading with this anchor)')
    return problems


def documentation(root: Path) -> List[Path]:
    """README.md and every markdown page under docs/."""
    return [root / 'README.md'] + sorted((root / 'docs').rglob('*.md'))
