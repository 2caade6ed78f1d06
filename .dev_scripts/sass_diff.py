"""Which kernels of two builds compile to the same SASS: no GPU needed.

    python .dev_scripts/sass_diff.py OLD.o NEW.o [--only win_gather] [--sub ', false>$' '>']

Disassembles both objects (``cuobjdump -sass``, as ``sass_loops.py`` finds it) and pairs their
kernels by demangled name without the parameter list; ``--sub PATTERN REPL`` (repeatable) rewrites
the new build's names first, e.g. to drop a template argument the new build added with a default.
Prints each kernel as identical (instruction for instruction), differing (with both lengths and the
first differing index), or found in one build only. A kernel whose SASS is identical runs exactly as
before: an A/B of the two builds need not time it.
"""
import argparse
import re
from typing import Dict, List

from sass_loops import kernels


def by_name(path: str, subs: List[List[str]]) -> Dict[str, List[str]]:
    """Kernel name (its parameter list dropped, ``subs`` applied) -> its instructions."""
    out = {}
    for name, code in kernels(path).items():
        key = name.split('(')[0]
        for pattern, repl in subs:
            key = re.sub(pattern, repl, key)
        out[key] = [instr for _, instr in code]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('old', help='the previous build: a .o or .so with sm_XX code')
    parser.add_argument('new', help='the new build')
    parser.add_argument('--only', default='', help='only kernels whose name contains this text')
    parser.add_argument('--sub', nargs=2, action='append', default=[], metavar=('PATTERN', 'REPL'),
                        help="regex substitution on the new build's kernel names")
    args = parser.parse_args()
    old, new = by_name(args.old, []), by_name(args.new, args.sub)
    same = 0
    for key in sorted(set(old) | set(new)):
        if args.only not in key:
            continue
        a, b = old.get(key), new.get(key)
        if a is None or b is None:
            print(f'only in {"new" if a is None else "old"}: {key}')
        elif a == b:
            same += 1
            print(f'identical ({len(a)} instructions): {key}')
        else:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print(f'differ ({len(a)} -> {len(b)} instructions, from index {first}): {key}')
    print(f'{same} identical')


if __name__ == '__main__':
    main()
