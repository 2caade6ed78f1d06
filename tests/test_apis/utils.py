"""Helpers of the inference API tests."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import torch

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / 'demo' / 'demo.jpg'


def run_python(code: str, args: List[str], cwd: Path, timeout: int = 600) -> str:
    """Run ``python -c code args`` in a fresh process; fail with its output's tail; return stdout."""
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONWARNINGS': 'ignore'}
    proc = subprocess.run([sys.executable, '-c', code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f'failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}'
    return proc.stdout


def saved_state_dict(checkpoint: Path) -> Dict[str, object]:
    """The weights a checkpoint holds, read without the safe mode (the test wrote the file)."""
    return torch.load(checkpoint, map_location='cpu', weights_only=False)['state_dict']


def assert_same_weights(loaded: Dict[str, object], checkpoint: Path, prefix: Optional[str] = None) -> None:
    """Every tensor of ``checkpoint`` is in ``loaded`` with the same value, and nothing else."""
    saved = saved_state_dict(checkpoint)
    assert sorted(loaded) == sorted(saved)
    for key, value in saved.items():
        assert torch.equal(loaded[key], value), f'{prefix or checkpoint.name}: {key} differs'
