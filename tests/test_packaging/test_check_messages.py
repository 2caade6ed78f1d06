"""No TORCH_CHECK in csrc streams a shape or an integer into its message (csrc/common.h says why).

On a torch 2.11 build, a failing check whose message streamed an integer or an ``IntArrayRef`` ended the
process with SIGSEGV instead of raising; the sources format them with ``shape_str`` or
``std::to_string``. This scan reads each check's arguments after its condition.
"""
import re
from pathlib import Path
from typing import List

CSRC = Path(__file__).resolve().parents[2] / 'csrc'
CHECK = re.compile(r'\bTORCH_CHECK\w*\(')
# A call whose value is an integer or a list of integers.
INTEGER_CALL = re.compile(r'(\.|->)(sizes|size|numel|dim|stride|strides|element_size|storage_offset)\(')
FORMATTED = ('shape_str(', 'std::to_string(')


def macro_args(text: str, start: int) -> List[str]:
    """The top-level arguments of the call whose '(' ends just before ``start``."""
    args, current, depth, quote, i = [], '', 0, None, start
    while i < len(text):
        c = text[i]
        current += c
        if quote:
            if c == '\\':
                current += text[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in '"\'':
            quote = c
        elif c in '([{':
            depth += 1
        elif c in ')]}':
            if depth == 0:
                args.append(current[:-1])
                return args
            depth -= 1
        elif c == ',' and depth == 0:
            args.append(current[:-1])
            current = ''
        i += 1
    raise ValueError(f'unclosed call at offset {start}')


def streamed_integers(text: str) -> List[str]:
    found = []
    for match in CHECK.finditer(text):
        line = text.count('\n', 0, match.start()) + 1
        for arg in macro_args(text, match.end())[1:]:
            arg = arg.strip()
            if arg.startswith('"') or any(f in arg for f in FORMATTED):
                continue
            if INTEGER_CALL.search(arg):
                found.append(f'line {line}: {arg}')
    return found


def test_the_scan_finds_a_streamed_shape_and_integer():
    text = ('TORCH_CHECK(a.dim() == 1, "bad (", a.size(0), ") ", shape_str(a), f(x, y), '
            'b->sizes());\nTORCH_CHECK(ok, "C = ", std::to_string(c.size(1)), ", ", c.scalar_type());')
    assert streamed_integers(text) == ['line 1: a.size(0)', 'line 1: b->sizes()']


def test_checks_format_integers_as_strings():
    sources = [p for p in sorted(CSRC.rglob('*')) if p.suffix in ('.h', '.cpp', '.cu', '.cuh')]
    assert len(sources) > 20 and sum(len(CHECK.findall(p.read_text())) for p in sources) > 50
    found = [f'{p.relative_to(CSRC)} {hit}' for p in sources for hit in streamed_integers(p.read_text())]
    assert found == [], 'format these with shape_str or std::to_string:\n' + '\n'.join(found)
