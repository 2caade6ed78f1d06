"""mmo1d.utils.load_checkpoint_file: the safe loader every tool reads checkpoint files with."""
import argparse
from pathlib import Path

import pytest
import torch

from mmo1d.utils import CheckpointFileError, load_checkpoint_file


class _Custom:
    """A class that no allow-list names."""


def test_a_release_with_its_arguments_loads(tmp_path: Path) -> None:
    path = tmp_path / 'release.pth'
    weights = {'stem.weight': torch.randn(4, 3, 2, 2)}
    torch.save({'model': weights, 'epoch': 299, 'args': argparse.Namespace(model='convnext_tiny', lr=4e-3)}, path)
    checkpoint = load_checkpoint_file(str(path))
    assert torch.equal(checkpoint['model']['stem.weight'], weights['stem.weight'])
    assert checkpoint['args'] == argparse.Namespace(model='convnext_tiny', lr=4e-3)


def test_files_that_are_not_checkpoints_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f'^checkpoint not found: {tmp_path / "missing.pth"}$'):
        load_checkpoint_file(str(tmp_path / 'missing.pth'))
    for name, content in [('notes.pth', b'not weights\n'), ('experiment.pth', b'experiment notes, not weights\n')]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(CheckpointFileError, match=f'^{tmp_path / name} is not a PyTorch checkpoint'):
            load_checkpoint_file(str(tmp_path / name))
    whole = tmp_path / 'whole.pth'
    torch.save({'w': torch.zeros(1000)}, whole)
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(whole.read_bytes()[:1000])
    with pytest.raises(CheckpointFileError, match=f'^{cut} is not a PyTorch checkpoint .*cut short'):
        load_checkpoint_file(str(cut))
    tensor = tmp_path / 'tensor.pth'
    torch.save(torch.zeros(3), tensor)
    with pytest.raises(CheckpointFileError, match=f'^{tensor} holds a Tensor, not a checkpoint dict$'):
        load_checkpoint_file(str(tensor))


def test_other_objects_stay_refused_and_are_named(tmp_path: Path) -> None:
    path = tmp_path / 'pickled.pth'
    torch.save({'state_dict': {}, 'extra': _Custom()}, path)
    with pytest.raises(CheckpointFileError, match=f'^{path} refers to .*_Custom, which a safe torch.load does not '
                                                  'restore'):
        load_checkpoint_file(str(path))
