"""A folder named mmo1d in the working directory shadows an editable install: the failure names it.

With ``pip install -e`` (what ``make setup`` does), running a snippet from the folder that holds a
clone named ``mmo1d`` imports the clone as an empty namespace package: ``custom_imports`` then do
nothing, and the user used to see an unrelated ``UnpicklingError ... HistoryBuffer`` when the
toolbox loaded a Runner checkpoint.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.logging import HistoryBuffer

REPO = Path(__file__).resolve().parents[2]
SEG_DEMO = REPO / 'configs' / 'demo' / 'oriented-convnext-demo-1d_upernet_1xb8-500iter_ade20k-demo-128x128.py'
# What a user runs: the toolbox's API on an mmo1d config and a checkpoint written by the Runner.
SNIPPET = """
import sys
import mmo1d
print('shadowed' if getattr(mmo1d, '__file__', None) is None else 'package', flush=True)
from mmseg.apis import init_model
init_model(sys.argv[1], sys.argv[2], device='cpu')
"""


def test_the_error_names_the_shadowing_folder(tmp_path: Path) -> None:
    clone = tmp_path / 'mmo1d'
    (clone / 'configs').mkdir(parents=True)
    (clone / 'README.md').write_text('a clone of the repository, without __init__.py at its top\n')
    checkpoint = tmp_path / 'iter_500.pth'
    torch.save({'state_dict': {}, 'message_hub': {'log_scalars': {'loss': HistoryBuffer()}}}, checkpoint)
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore'}
    proc = subprocess.run([sys.executable, '-c', SNIPPET, str(SEG_DEMO), str(checkpoint)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    if proc.stdout.startswith('package'):
        pytest.skip('mmo1d is not an editable install here: a folder named mmo1d in the working directory does '
                    'not shadow it')
    assert proc.stdout.startswith('shadowed'), (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f'RuntimeError: `import mmo1d` found the folder {clone} (no __init__.py'), last
    assert f'instead of the installed package at {REPO / "mmo1d"}' in last and 'rename that folder' in last
    assert 'HistoryBuffer' not in proc.stderr
