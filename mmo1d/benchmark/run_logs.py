"""What mmengine leaves of a training or test run, read back: the newest run folder, the logged
training windows, the process count, DistributedDataParallel's unused-parameter errors, and the
versions and commit a results file records.

Used by :mod:`mmo1d.benchmark.downstream_runs` and :mod:`mmo1d.benchmark.scaling`, which summarise
the short GPU runs of ``.dev_scripts/gpu_downstream.sh``.
"""
import importlib
import json
import re
from pathlib import Path
from typing import Dict, List, Optional

import torch

from .timing import git_commit


def world_size(log: Path) -> Optional[int]:
    """The number of processes mmengine reports in a train/test log (``GPU number: N``)."""
    found = re.search(r'^\s*GPU number: (\d+)$', log.read_text(errors='replace'), re.M)
    return int(found.group(1)) if found else None


def ddp_errors(log: Path) -> int:
    """Lines of DistributedDataParallel's error for parameters that received no gradient."""
    return sum('Expected to have finished reduction' in line
               for line in log.read_text(errors='replace').splitlines())


def latest_run(folder: Path) -> Path:
    """The newest of mmengine's ``YYYYMMDD_HHMMSS`` run folders in ``folder``.

    Raises:
        FileNotFoundError: if ``folder`` is missing or holds no run folder.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f'no run folder: {folder} does not exist')
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and p.name[:8].isdigit())
    if not runs:
        raise FileNotFoundError(f'no mmengine run folder (YYYYMMDD_HHMMSS) in {folder}')
    return runs[-1]


def train_records(train_dir: Path) -> List[Dict]:
    """The logged training windows (those with a loss) of the newest run in ``train_dir``.

    Raises:
        ValueError: if the run logged no window with a loss.
    """
    scalars = latest_run(train_dir) / 'vis_data' / 'scalars.json'
    records = [r for r in map(json.loads, scalars.read_text().splitlines()) if 'loss' in r]
    if not records:
        raise ValueError(f'no training record with a loss in {scalars}')
    return records


def versions() -> Dict[str, Optional[str]]:
    """Versions of the OpenMMLab packages the runs used (None where one is not installed)."""
    found = {}
    for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg'):
        try:
            found[name] = importlib.import_module(name).__version__
        except ImportError:
            found[name] = None
    return found


def environment() -> Dict[str, Optional[str]]:
    """The device, torch, CUDA, OpenMMLab versions and commit that a summary of runs records."""
    return dict(
        device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu',
        torch=torch.__version__,
        cuda=torch.version.cuda,
        **versions(),
        commit=git_commit(full=True),
    )
