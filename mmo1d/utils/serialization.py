"""Loading mmengine training checkpoints with ``torch.load``'s safe (``weights_only``) mode.

Since torch 2.6 ``torch.load`` defaults to ``weights_only=True``, and mmengine 0.10.7 calls it
without that argument: ``mmengine.runner.load_checkpoint``, and through it mmseg's ``init_model``,
mmdet's ``init_detector``, the toolboxes' inferencers and ``load_from`` / ``--resume``. A
checkpoint written by mmengine's ``Runner`` holds, besides the weights, the message hub's
``HistoryBuffer`` objects with numpy arrays and scalars in their statistics, and is refused with
``UnpicklingError: ... HistoryBuffer was not an allowed global``.

:func:`allow_mmengine_checkpoints` (called by ``import mmo1d``) adds to torch's allow-list exactly
what such a checkpoint refers to, instead of turning the safe mode off:

- ``mmengine.logging.HistoryBuffer``;
- ``builtins.getattr``, restricted to the four statistics methods a ``HistoryBuffer`` pickles
  (torch saves with pickle protocol 2, which stores ``HistoryBuffer.min`` as
  ``getattr(HistoryBuffer, 'min')``): :func:`history_buffer_getattr` resolves those and refuses
  every other attribute, so a checkpoint cannot reach other attributes through it;
- numpy's array and scalar reconstructors, ``ndarray``, ``dtype`` and the ``numpy.dtypes``
  classes (the type of each dtype instance, which unpickling builds);
- ``argparse.Namespace``, in which the authors' and the official ConvNeXt training checkpoints keep
  their arguments (``args``): an attribute holder, whose unpickling runs no code of its own.

Everything else stays refused: a checkpoint still cannot run arbitrary code.

:func:`load_checkpoint_file` is how mmo1d's tools read a checkpoint file themselves (the toolboxes'
APIs read theirs through mmengine, with the same allow-list): one safe ``torch.load`` with errors that
name the file and what is wrong with it.
"""
import argparse
import builtins
import importlib
import os.path as osp
import pickle
import re
from typing import Any, Callable, List, Tuple, Union

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

SafeGlobal = Union[Callable, Tuple[Callable, str]]
# The statistics methods HistoryBuffer._set_default_statistics puts in its class-level table.
HISTORY_BUFFER_METHODS = ('min', 'max', 'current', 'mean')


def history_buffer_getattr(obj: Any, name: str) -> Any:
    """``getattr`` for unpickling, limited to ``HistoryBuffer.{min,max,current,mean}``.

    Registered under the name ``builtins.getattr``, which is how pickle protocol 2 refers to
    ``getattr`` when it stores an unbound method.

    Args:
        obj (Any): The object the checkpoint asks an attribute of.
        name (str): The attribute's name.

    Returns:
        Any: ``getattr(obj, name)`` for one of the allowed methods.

    Raises:
        pickle.UnpicklingError: for any other object or attribute.
    """
    if obj is HistoryBuffer and name in HISTORY_BUFFER_METHODS:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'the checkpoint asks for getattr({getattr(obj, "__qualname__", type(obj).__name__)}, {name!r}); '
        'mmo1d only allows the statistics methods of mmengine.logging.HistoryBuffer '
        f'{HISTORY_BUFFER_METHODS}. Load a checkpoint you trust with torch.load(..., weights_only=False).')


def numpy_pickle_globals() -> List[SafeGlobal]:
    """The numpy objects that pickled arrays, scalars and dtypes refer to.

    numpy 2 pickles name ``numpy._core.multiarray``, numpy 1 ``numpy.core.multiarray``; both names
    are registered so that checkpoints written under either version load.

    Returns:
        list: Objects and ``(object, qualified name)`` pairs for ``torch.serialization.add_safe_globals``.
    """
    entries: List[SafeGlobal] = [np.ndarray, np.dtype]
    entries += [cls for name in dir(np.dtypes)
                if isinstance(cls := getattr(np.dtypes, name), type) and name.endswith('DType')]
    for module_name in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in ('scalar', '_reconstruct'):
            entries.append((getattr(module, attr), f'{module_name}.{attr}'))
    return entries


def mmengine_checkpoint_globals() -> List[SafeGlobal]:
    """Everything beyond torch's defaults that an mmengine training checkpoint, or one of the
    authors' or official ConvNeXt releases, refers to.

    Returns:
        list: ``HistoryBuffer``, the restricted ``builtins.getattr``, :func:`numpy_pickle_globals`
        and ``argparse.Namespace``.
    """
    getattr_name = f'{builtins.__name__}.{builtins.getattr.__name__}'
    return [HistoryBuffer, (history_buffer_getattr, getattr_name), argparse.Namespace] + numpy_pickle_globals()


def allow_mmengine_checkpoints() -> None:
    """Let ``torch.load`` read full mmengine training checkpoints in its safe mode.

    Adds :func:`mmengine_checkpoint_globals` to torch's process-wide allow-list. Idempotent;
    a no-op on torch < 2.4, which has no allow-list (nor a safe default).
    """
    add_safe_globals = getattr(torch.serialization, 'add_safe_globals', None)
    if add_safe_globals is not None:
        add_safe_globals(mmengine_checkpoint_globals())


class CheckpointFileError(ValueError):
    """A file that :func:`load_checkpoint_file` cannot take for a checkpoint; the message names it."""


def load_checkpoint_file(path: str, map_location: str = 'cpu') -> dict:
    """Read a checkpoint file with ``torch.load``'s safe mode and mmo1d's allow-list.

    Args:
        path (str): A local file written by ``torch.save``.
        map_location (str): Where to put the tensors. Default: 'cpu'.

    Returns:
        dict: The checkpoint as saved (a state dict, or a dict holding one).

    Raises:
        FileNotFoundError: if ``path`` is not a file.
        CheckpointFileError: if it is not a ``torch.save`` file (a text file, a truncated download),
            refers to objects outside the allow-list, or holds something other than a dict.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    allow_mmengine_checkpoints()
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        refused = re.search(r'GLOBAL (\S+) was not an allowed global', str(e))
        if refused:
            raise CheckpointFileError(
                f'{path} refers to {refused.group(1)}, which a safe torch.load does not restore; if you trust '
                'the file, read it with torch.load(path, weights_only=False) and save its tensors alone') from e
        raise CheckpointFileError(f'{path} is not a PyTorch checkpoint (not a file written by torch.save)') from e
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a file that is not a checkpoint makes torch.load raise
        # The unpickler stops where the bytes stop making sense (a text file gives KeyError: <the code
        # of its first letter>, IndexError...), the zip reader at a file cut short (RuntimeError).
        cause = f': {str(e).split(". ")[0]}' if isinstance(e, RuntimeError) else ''
        raise CheckpointFileError(f'{path} is not a PyTorch checkpoint (not a file written by torch.save, or '
                                  f'one cut short{cause})') from e
    if not isinstance(checkpoint, dict):
        raise CheckpointFileError(f'{path} holds a {type(checkpoint).__name__}, not a checkpoint dict')
    return checkpoint
