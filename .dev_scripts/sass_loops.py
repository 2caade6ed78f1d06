"""Static instruction counts of a compiled kernel's loops, from its SASS: no GPU needed.

    python .dev_scripts/sass_loops.py build/temp.*/csrc/cuda/vec_wgrad/vec_wgrad.o \
        'vec_wgrad_nhwc_kernel<c10::BFloat16, 13, 1>' [--range 0x81a0 0x89c0]

Disassembles the object (or shared library) with ``cuobjdump -sass`` (from CUDA_HOME/bin, PATH, or
the copy that ships with Triton), picks the one kernel whose demangled name contains the given text,
and prints every loop (a backward branch and the code between its target and itself) with its
length and the count of each opcode, innermost first; ``--range LO HI`` counts one address range
instead (e.g. one branch of a loop body). The counts are static: one pass over the code, not what
ncu counts at run time.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
from collections import Counter
from typing import Dict, List, Tuple

LINE = re.compile(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;')


def cuobjdump() -> str:
    """The cuobjdump to run."""
    cuda_home = os.environ.get('CUDA_HOME', '/usr/local/cuda')
    cands = [os.path.join(cuda_home, 'bin', 'cuobjdump'), shutil.which('cuobjdump')]
    try:
        import triton
        cands += glob.glob(os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'cuobjdump'))
    except ImportError:
        pass
    for c in cands:
        if c and os.path.isfile(c):
            return c
    raise SystemExit('cuobjdump not found: install the CUDA toolkit binaries or set CUDA_HOME')


def kernels(path: str) -> Dict[str, List[Tuple[int, str]]]:
    """Every kernel of ``path``: demangled name -> [(address, instruction)]."""
    sass = subprocess.run([cuobjdump(), '-sass', path], capture_output=True, text=True, check=True).stdout
    code: Dict[str, List[Tuple[int, str]]] = {}
    name = None
    for line in sass.splitlines():
        if 'Function :' in line:
            name = line.split('Function :')[1].strip()
            code[name] = []
        elif name is not None:
            m = LINE.match(line)
            if m:
                code[name].append((int(m.group(1), 16), m.group(2)))
    # One c++filt call for every name (it demangles one name per line).
    names = subprocess.run(['c++filt'], input='\n'.join(code), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, code.values())) if len(names) == len(code) else code


def opcode(instr: str) -> str:
    words = instr.split()
    return (words[1] if words[0].startswith('@') else words[0]).split('.')[0]


def count(code: List[Tuple[int, str]], lo: int, hi: int) -> Tuple[int, Counter]:
    body = [i for a, i in code if lo <= a <= hi]
    return len(body), Counter(opcode(i) for i in body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('object', help='a .o or .so with sm_XX code')
    parser.add_argument('kernel', help='text of the demangled kernel name (must pick exactly one)')
    parser.add_argument('--range', nargs=2, metavar=('LO', 'HI'), help='count this address range (hex) only')
    args = parser.parse_args()
    found = {n: c for n, c in kernels(args.object).items() if args.kernel in n}
    if len(found) != 1:
        names = '\n  '.join(found) or '(none)'
        raise SystemExit(f'{len(found)} kernels match {args.kernel!r}:\n  {names}')
    (name, code), = found.items()
    print(f'{name}: {len(code)} instructions')
    if args.range:
        lo, hi = (int(v, 16) for v in args.range)
        n, ops = count(code, lo, hi)
        print(f'{lo:#x}-{hi:#x}: {n} instructions: {dict(ops.most_common())}')
        return
    loops = []
    for addr, instr in code:
        if opcode(instr) == 'BRA':
            m = re.search(r'0x([0-9a-f]+)', instr)
            if m and int(m.group(1), 16) < addr:
                loops.append((int(m.group(1), 16), addr))
    for lo, hi in sorted(loops, key=lambda r: r[1] - r[0]):
        n, ops = count(code, lo, hi)
        print(f'loop {lo:#x}-{hi:#x}: {n} instructions: {dict(ops.most_common(12))}')


if __name__ == '__main__':
    main()
