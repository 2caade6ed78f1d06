"""Utilities of mmo1d that need neither the models nor a toolbox (torch, numpy and mmengine only)."""
from .serialization import (
    CheckpointFileError,
    allow_mmengine_checkpoints,
    history_buffer_getattr,
    load_checkpoint_file,
    mmengine_checkpoint_globals,
)

__all__ = ['CheckpointFileError', 'allow_mmengine_checkpoints', 'history_buffer_getattr', 'load_checkpoint_file',
           'mmengine_checkpoint_globals']
