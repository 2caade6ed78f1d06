"""Two builds of the op timed alternately in one run: the A/B of a kernel change.

Two builds of ``mmo1d._C`` register the same op names, so they cannot share a process: each build
runs the benchmark in processes of its own, the builds taking turns (old, new, old, new, ...) so that
a slow spell of a shared machine falls on both. The old build is an earlier source tree with its
extension built in place (``python setup.py build_ext --inplace`` in it); its runs import a package
made of the current tree's Python code with the old tree's op (``mmo1d/ops`` and the compiled
library, and ``csrc`` for a just-in-time build), so that both builds run the same benchmark code.
"""
import hashlib
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
from typing import Callable, Dict, List, Sequence, Tuple

#: Record fields that hold a measurement; every other field names the case.
MEASURES = ('ms', 'host_us', 'kernel_ms')
#: Record fields that are neither the case nor its measurement.
DETAILS = ('round_ms', 'round_us', 'peak_mem_bytes', 'paths', 'path', 'build', 'alternation', 'own_kernel_ms',
           'launches', 'kernel_steps', 'top_kernels')


def _compiled_libraries(package: str) -> List[str]:
    return sorted(name for name in os.listdir(package) if name.startswith('_C') and name.endswith(('.so', '.pyd')))


def overlay_package(old_root: str, new_package: str, dest: str) -> str:
    """Lay out ``dest/mmo1d``: links to every entry of ``new_package`` but the op (``ops/`` and the compiled
    library), which link to ``old_root``'s, and ``dest/csrc`` linked to ``old_root/csrc``. Returns ``dest``
    (to put first on ``PYTHONPATH``).

    Raises:
        FileNotFoundError: if ``old_root`` has no ``mmo1d/ops`` or no compiled library next to it.
    """
    old_package = osp.join(old_root, 'mmo1d')
    if not osp.isdir(osp.join(old_package, 'ops')):
        raise FileNotFoundError(f'{old_root} is not an mmo1d source tree (no mmo1d/ops)')
    libraries = _compiled_libraries(old_package)
    if not libraries:
        raise FileNotFoundError(f'no compiled mmo1d._C in {old_package}: build it in place first '
                                f'(cd {old_root} && python setup.py build_ext --inplace)')
    package = osp.join(dest, 'mmo1d')
    os.makedirs(package)
    for name in os.listdir(new_package):
        if name in ('ops', '__pycache__') or name in _compiled_libraries(new_package):
            continue
        os.symlink(osp.join(osp.abspath(new_package), name), osp.join(package, name))
    for name in ['ops'] + libraries:
        os.symlink(osp.join(osp.abspath(old_package), name), osp.join(package, name))
    if osp.isdir(osp.join(old_root, 'csrc')):
        os.symlink(osp.join(osp.abspath(old_root), 'csrc'), osp.join(dest, 'csrc'))
    return dest


def sources_fingerprint(root: str) -> str:
    """The sha1 (12 digits) of the files under ``root/csrc`` in path order, as
    ``find csrc -type f | LC_ALL=C sort | xargs cat | sha1sum`` prints it; ``'none'`` without csrc."""
    csrc = osp.join(root, 'csrc')
    if not osp.isdir(csrc):
        return 'none'
    paths = sorted(osp.relpath(osp.join(d, f), root) for d, _, files in os.walk(csrc) for f in files)
    digest = hashlib.sha1()
    for path in paths:
        with open(osp.join(root, path), 'rb') as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def strip_options(argv: Sequence[str], options: Dict[str, int]) -> List[str]:
    """``argv`` without each option of ``options`` (name -> number of values it takes), written either
    ``--name value`` or ``--name=value``."""
    out, i = [], 0
    while i < len(argv):
        name = argv[i].split('=', 1)[0]
        if name in options:
            i += 1 if '=' in argv[i] else 1 + options[name]
            continue
        out.append(argv[i])
        i += 1
    return out


def alternate(tool: str, argv: Sequence[str], builds: Dict[str, str], alternations: int, workdir: str,
              runner: Callable = subprocess.run) -> Tuple[Dict, List[Dict]]:
    """Run ``python tool *argv --records-out FILE`` once per build and alternation, the builds taking turns,
    each with its path first on ``PYTHONPATH``.

    Returns:
        The environment record of the last build's first run (the current build's, listed last), and
        every record tagged with ``build`` and ``alternation``.

    Raises:
        RuntimeError: if a run fails.
    """
    envs: Dict[str, Dict] = {}
    records = []
    for alternation in range(alternations):
        for build, path in builds.items():
            out = osp.join(workdir, f'{build}_{alternation}.json')
            env = dict(os.environ)
            env['PYTHONPATH'] = os.pathsep.join(p for p in (path, env.get('PYTHONPATH')) if p)
            print(f'== {build} build, run {alternation + 1} of {alternations}', flush=True)
            proc = runner([sys.executable, tool, *argv, '--records-out', out], env=env)
            if proc.returncode != 0:
                raise RuntimeError(f'the run of the {build} build ({path}) failed with exit status {proc.returncode}')
            with open(out) as f:
                result = json.load(f)
            envs.setdefault(build, result['env'])
            records += [dict(rec, build=build, alternation=alternation) for rec in result['records']]
    return envs.get(list(builds)[-1], {}), records


def case_key(rec: Dict) -> Tuple:
    """The fields that name a record's case, in a hashable form."""
    return tuple((k, json.dumps(v)) for k, v in sorted(rec.items()) if k not in MEASURES + DETAILS)


def compare(records: List[Dict], old: str = 'old', new: str = 'new') -> List[Dict]:
    """Per case timed by both builds and per measure its records hold (``ms``, ``host_us``, ``kernel_ms``):
    the case's fields, the measure, the median over alternations of each build, new / old, each
    alternation's value and each build's kernel path."""
    groups: Dict[Tuple, Dict[str, List[Dict]]] = {}
    for rec in records:
        groups.setdefault(case_key(rec), {}).setdefault(rec['build'], []).append(rec)
    rows = []
    for key, by_build in groups.items():
        if old not in by_build or new not in by_build:
            continue
        for measure in MEASURES:
            if not all(measure in r for b in (old, new) for r in by_build[b]):
                continue
            values = {b: [r[measure] for r in by_build[b]] for b in (old, new)}
            row = {k: json.loads(v) for k, v in key}
            row.update(measure=measure, old=statistics.median(values[old]), new=statistics.median(values[new]),
                       old_runs=values[old], new_runs=values[new],
                       old_path=by_build[old][0].get('path'), new_path=by_build[new][0].get('path'))
            row['ratio'] = round(row['new'] / row['old'], 4) if row['old'] else None
            rows.append(row)
    return rows


def summarize(result: Dict) -> str:
    """Markdown: per case, each build's median over the alternations, new / old and every run."""
    env, rows = result['env'], result['rows']
    builds = result['builds']
    fields = [k for k in rows[0] if k not in ('measure', 'old', 'new', 'old_runs', 'new_runs', 'old_path',
                                                'new_path', 'ratio')] if rows else []
    shown = [k for k in fields if len({json.dumps(r[k]) for r in rows}) > 1] or fields[:1]
    lines = [f"# Two builds of the op on {env.get('gpu')}", '',
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, driver {env.get('driver')}, {env.get('date')}; "
             f"{result['alternations']} alternations of the builds, each value the median of its run.", '',
             f"Command: `{result['command']}`", '',
             f"old: `{builds['old']['path']}` (sources {builds['old']['sources']}); new: `{builds['new']['path']}` "
             f"(sources {builds['new']['sources']}, commit {env.get('commit')}).", '',
             'Fields the same in every case: ' + ', '.join(f'{k}={rows[0][k]}' for k in fields if k not in shown)
             if rows else 'No case was timed by both builds.', '',
             '| ' + ' | '.join(shown) + ' | measure | old | new | new / old | old runs | new runs | paths |',
             '|' + '---|' * (len(shown) + 7)]
    for r in rows:
        paths = r['new_path'] if r['old_path'] == r['new_path'] else f"{r['old_path']} -> {r['new_path']}"
        ratio = '-' if r['ratio'] is None else f"{r['ratio']:.3f}"
        runs = [' '.join(f'{v:.4g}' for v in r[f'{b}_runs']) for b in ('old', 'new')]
        lines.append('| ' + ' | '.join(str(r[k]) for k in shown)
                     + f" | {r['measure']} | {r['old']:.4g} | {r['new']:.4g} | {ratio} | {runs[0]} | {runs[1]} | "
                     f"{paths or '-'} |")
    return '\n'.join(lines)
