"""No test parameter or fixture of this suite takes the name of a fixture of pytest or a common plugin.

A parametrised argument named ``benchmark`` breaks the whole run once pytest-benchmark is installed
(``INTERNALERROR ... unexpected type for benchmark in funcargs``); a local fixture of such a name
silently replaces the plugin's.
"""
import ast
from pathlib import Path
from typing import Iterator, Tuple

TESTS = Path(__file__).resolve().parents[1]
PLUGIN_FIXTURES = frozenset({
    # pytest itself
    'cache', 'capfd', 'capfdbinary', 'caplog', 'capsys', 'capsysbinary', 'doctest_namespace', 'monkeypatch',
    'pytestconfig', 'record_property', 'record_testsuite_property', 'record_xml_attribute', 'recwarn',
    'request', 'testdir', 'pytester', 'tmp_path', 'tmp_path_factory', 'tmpdir', 'tmpdir_factory',
    # pytest-benchmark
    'benchmark', 'benchmark_weave',
    # pytest-mock
    'mocker', 'class_mocker', 'module_mocker', 'package_mocker', 'session_mocker',
    # pytest-xdist
    'worker_id', 'testrun_uid',
    # pytest-asyncio, pytest-httpserver, pytest-httpx, requests-mock, pytest-datadir, pytest-subtests
    'event_loop', 'httpserver', 'httpx_mock', 'requests_mock', 'datadir', 'shared_datadir', 'subtests',
    # Faker, syrupy, pytest-freezer, pytest-randomly
    'faker', 'snapshot', 'freezer', 'randomly_seed',
})


def _decorator_name(node: ast.expr) -> str:
    """``pytest.mark.parametrize`` for ``@pytest.mark.parametrize(...)``, ``pytest.fixture`` for ``@pytest.fixture``."""
    if isinstance(node, ast.Call):
        node = node.func
    return ast.unparse(node)


def _parametrized_names(call: ast.Call) -> Iterator[str]:
    argnames = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == 'argnames'), None)
    if isinstance(argnames, ast.Constant) and isinstance(argnames.value, str):
        yield from (name.strip() for name in argnames.value.split(','))
    elif isinstance(argnames, (ast.List, ast.Tuple)):
        yield from (e.value for e in argnames.elts if isinstance(e, ast.Constant))


def names_in(source: str) -> Iterator[Tuple[int, str]]:
    """(line, name) of every parametrised argument and every fixture defined in a test module."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _decorator_name(node).endswith('mark.parametrize'):
            yield from ((node.lineno, name) for name in _parametrized_names(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_decorator_name(d).endswith('fixture') for d in node.decorator_list):
                yield node.lineno, node.name


def test_the_scan_finds_a_clash():
    source = ("import pytest\n@pytest.mark.parametrize('benchmark', [0])\ndef test_a(benchmark): ...\n"
              "@pytest.mark.parametrize(('x', 'mocker'), [(0, 1)])\ndef test_b(x, mocker): ...\n"
              "@pytest.fixture(scope='module')\ndef capsys(): ...\n")
    assert {name for _, name in names_in(source)} & PLUGIN_FIXTURES == {'benchmark', 'mocker', 'capsys'}


def test_no_test_shadows_a_plugin_fixture():
    clashes = [f'{path.relative_to(TESTS.parent)}:{line}: {name}'
               for path in sorted(TESTS.rglob('*.py'))
               for line, name in names_in(path.read_text())
               if name in PLUGIN_FIXTURES]
    assert not clashes, ('these parameters or fixtures take the name of a fixture of pytest or a common plugin; '
                         'rename them: ' + ', '.join(clashes))
