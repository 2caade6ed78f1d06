"""mmo1d.utils.version_check: the mmengine / mmcv ranges, checked on import as mmdet and mmseg do."""
import subprocess
import sys
from pathlib import Path

import mmcv
import mmengine
import pytest
from packaging.requirements import Requirement

from mmo1d.utils.version_check import VERSION_RANGES, check_versions, installed_versions, requirements

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_stack_passes():
    assert installed_versions() == {'mmengine': mmengine.__version__, 'mmcv': mmcv.__version__}
    check_versions()


@pytest.mark.parametrize('name, version', [
    ('mmcv', '1.7.2'), ('mmcv', '2.0.0rc3'), ('mmcv', '2.0.0rc4'), ('mmcv', '2.0.1'), ('mmcv', '2.1.0'),
    ('mmcv', '2.2.0'), ('mmengine', '0.9.1'), ('mmengine', '0.10.0'), ('mmengine', '0.10.7'), ('mmengine', '1.0.0'),
])
def test_check_agrees_with_the_pip_requirement(name, version):
    """mmengine's digit_version (the check) and packaging's specifiers (pip) accept the same versions."""
    [requirement] = [Requirement(r) for r in requirements() if r.startswith(name + '>')]
    accepted = requirement.specifier.contains(version, prereleases=True)
    if accepted:
        check_versions({name: version})
    else:
        low, high = VERSION_RANGES[name]
        with pytest.raises(AssertionError, match=rf'=={version} is used but incompatible with mmo1d\. '
                                                 rf'Please install {name}>={low}, <{high}\.'):
            check_versions({name: version})


def test_setup_requires_the_checked_ranges():
    """setup.py's install_requires holds the ranges the import checks."""
    code = ('import setuptools; setuptools.setup = lambda **kw: print(kw["install_requires"]); '
            'exec(open("setup.py").read(), {"__file__": "setup.py", "__name__": "__main__"})')
    proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    install_requires = eval(proc.stdout.strip().splitlines()[-1])
    assert set(requirements()) <= set(install_requires)


def test_import_mmo1d_ops_needs_torch_only():
    """With mmengine (and so the toolboxes) unimportable, mmo1d.ops still imports and runs."""
    code = ('import sys\n'
            'for name in ("mmengine", "mmcv", "mmdet", "mmseg", "mmpretrain"):\n'
            '    sys.modules[name] = None\n'
            'import torch\n'
            'from mmo1d.ops import oriented_dwconv1d\n'
            'y = oriented_dwconv1d(torch.ones(1, 2, 5, 5), torch.ones(2, 3), torch.zeros(2))\n'
            'print(tuple(y.shape), "mmo1d.models" in sys.modules)\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ['(1,', '2,', '5,', '5)', 'False']
