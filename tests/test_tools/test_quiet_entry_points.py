"""Entry points hide the known-harmless upstream warnings and still show everyone else's.

Each script runs twice in a fresh process: as a script (``quiet_upstream()`` first), and as a
control whose ``main()`` is called without it, which shows that the upstream warnings do occur.
The config imports a module that raises a warning of its own and, from its own module, the text
of a silenced mmseg warning: both must show either way.
"""
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

REPO = Path(__file__).resolve().parents[2]
SEG_CFG = REPO / 'configs' / 'demo' / 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
PROBE = """import warnings
warnings.warn('mmo1d probe: a warning of ours', UserWarning)
warnings.warn('Default ``avg_non_ignore`` is False (raised by the probe)', UserWarning)
"""
SILENCED = ('pkg_resources is deprecated as an API', '``build_loss`` would be deprecated soon',
            'Default ``avg_non_ignore`` is False')
LOCAL_VIS = "Failed to add <class 'mmengine.visualization.vis_backend.LocalVisBackend'>"
CONTROL = 'import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="control")["main"]()'


@pytest.fixture(scope='module')
def probe(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """The directory of the warning module, and a copy of the demo config that imports it."""
    root = tmp_path_factory.mktemp('quiet')
    (root / 'warn_probe.py').write_text(PROBE)
    config = root / 'probe_config.py'
    config.write_text(f"_base_ = '{SEG_CFG}'\n"
                      "custom_imports = dict(imports=['mmo1d', 'warn_probe'], allow_failed_imports=False)\n")
    return root, config


@pytest.fixture(scope='module')
def checkpoint(probe: Tuple[Path, Path]) -> Path:
    """Untrained weights of the demo segmentor with the dataset meta a trained checkpoint has."""
    from mmseg.datasets import ADE20KDataset

    with DefaultScope.overwrite_default_scope('mmseg'):
        from mmseg.registry import MODELS

        model = MODELS.build(Config.fromfile(str(SEG_CFG)).model)
    path = probe[0] / 'seg.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {'dataset_meta': dict(ADE20KDataset.METAINFO)}}, path)
    return path


def _warnings(script: Path, args: List[str], cwd: Path, quiet: bool) -> List[Tuple[str, str]]:
    """``(file name, text)`` of every warning the script printed."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONWARNINGS'}
    env.update(OMP_NUM_THREADS='1', PYTHONPATH=os.pathsep.join([str(cwd), env.get('PYTHONPATH', '')]))
    command = [sys.executable, str(script), *args] if quiet else [sys.executable, '-c', CONTROL, str(script), *args]
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return [(Path(f).name, text) for f, text in re.findall(r'^(\S+\.py):\d+: \w+: (.*)$', proc.stderr, re.M)]


def _upstream(caught: List[Tuple[str, str]], text: str) -> bool:
    return any(m.startswith(text) for f, m in caught if f != 'warn_probe.py')


def _command(tool: str, config: Path, checkpoint: Path, out: Path) -> Tuple[Path, List[str], Tuple[str, ...]]:
    """The script, its arguments and the upstream warnings it would print."""
    if tool == 'get_flops':
        return REPO / 'tools' / 'analysis_tools' / 'get_flops.py', [str(config), '--shape', '64', '64'], SILENCED
    args = [str(REPO / 'demo' / 'demo.jpg'), str(config), str(checkpoint), '--out-file', str(out), '--device', 'cpu']
    return REPO / 'demo' / 'image_demo.py', args, SILENCED + (LOCAL_VIS, )


@pytest.mark.parametrize('tool', ['get_flops', 'image_demo'])
def test_upstream_noise_is_hidden_and_other_warnings_show(tool: str, probe: Tuple[Path, Path],
                                                          checkpoint: Path, tmp_path: Path) -> None:
    root, config = probe
    script, args, silenced = _command(tool, config, checkpoint, tmp_path / 'out.png')
    ours = [('warn_probe.py', 'mmo1d probe: a warning of ours'),
            ('warn_probe.py', 'Default ``avg_non_ignore`` is False (raised by the probe)')]
    loud = _warnings(script, args, root, quiet=False)
    assert all(_upstream(loud, text) for text in silenced), loud
    quiet = _warnings(script, args, root, quiet=True)
    assert not any(_upstream(quiet, text) for text in silenced), quiet
    for caught in (loud, quiet):
        assert all(w in caught for w in ours), caught
