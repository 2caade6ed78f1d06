"""``import mmo1d`` lets torch.load's safe mode read Runner checkpoints, and nothing more."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer

from mmo1d.utils import history_buffer_getattr, mmengine_checkpoint_globals

from .utils import run_python

pytestmark = pytest.mark.skipif(not hasattr(torch.serialization, 'add_safe_globals'),
                                reason='torch without weights_only allow-lists')

# mmengine's own loader, first without mmo1d (as any process starts), then after importing it.
RELOAD = """
import json, pickle, sys, torch
from mmengine.runner import CheckpointLoader
path = sys.argv[1]
unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
try:
    CheckpointLoader.load_checkpoint(path, map_location='cpu')
    refused = ''
except pickle.UnpicklingError as error:
    refused = str(error)
import mmo1d
checkpoint = CheckpointLoader.load_checkpoint(path, map_location='cpu')
scalars = checkpoint['message_hub']['log_scalars']
print(json.dumps(dict(unsafe=unsafe, refused=refused, scalars={k: type(v).__name__ for k, v in scalars.items()},
                      still_unsafe=torch.serialization.get_unsafe_globals_in_checkpoint(path))))
"""


def _names(entries: list) -> set:
    return {e[1] if isinstance(e, tuple) else f'{e.__module__}.{e.__qualname__}' for e in entries}


def test_runner_checkpoint_is_refused_before_and_loads_after_import(trained: dict) -> None:
    run = trained['seg']
    result = json.loads(run_python(RELOAD, [str(run['checkpoint'])], run['cwd']).strip().splitlines()[-1])
    assert 'HistoryBuffer' in result['refused']
    # What the checkpoint needs beyond torch's defaults is exactly covered by the allow-list.
    assert 'mmengine.logging.history_buffer.HistoryBuffer' in result['unsafe']
    assert any(name.startswith('numpy.') for name in result['unsafe'])
    assert set(result['unsafe']) <= _names(mmengine_checkpoint_globals())
    assert result['still_unsafe'] == []
    assert result['scalars']['train/loss'] == 'HistoryBuffer'
    assert 'val/mIoU' in result['scalars']


def test_history_buffers_with_numpy_round_trip_in_safe_mode(tmp_path: Path) -> None:
    buffer = HistoryBuffer()
    for value in (1.5, np.float64(2.5), 3.5):
        buffer.update(value)
    path = tmp_path / 'hub.pth'
    torch.save({'hub': buffer, 'array': np.arange(4, dtype=np.int64)}, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded['hub'].mean() == 2.5 and loaded['hub'].statistics('max') == 3.5
    np.testing.assert_array_equal(loaded['array'], np.arange(4))


class _NotAllowed:
    """A class that no allow-list names."""


class _ReachesForInit:
    """Pickles as ``getattr(HistoryBuffer, '__init__')``: an attribute outside the statistics."""

    def __reduce__(self) -> tuple:
        return getattr, (HistoryBuffer, '__init__')


@pytest.mark.parametrize('obj, message', [
    (_NotAllowed(), '_NotAllowed'),
    (_ReachesForInit(), "getattr\\(HistoryBuffer, '__init__'\\)"),
])
def test_other_globals_and_attributes_stay_refused(obj: object, message: str, tmp_path: Path) -> None:
    path = tmp_path / 'bad.pth'
    torch.save({'x': obj}, path)
    with pytest.raises(pickle.UnpicklingError, match=message):
        torch.load(path)


def test_restricted_getattr() -> None:
    assert history_buffer_getattr(HistoryBuffer, 'mean') is HistoryBuffer.mean
    with pytest.raises(pickle.UnpicklingError, match="getattr\\(ndarray, 'tofile'\\)"):
        history_buffer_getattr(np.ndarray, 'tofile')
