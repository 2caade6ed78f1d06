"""Utilities of mmo1d that need neither the models nor a toolbox (torch, numpy and mmengine only)."""
from .serialization import allow_mmengine_checkpoints, history_buffer_getattr, mmengine_checkpoint_globals

__all__ = ['allow_mmengine_checkpoints', 'history_buffer_getattr', 'mmengine_checkpoint_globals']
