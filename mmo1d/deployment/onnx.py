"""ONNX export of a PyTorch model and its check against ONNX Runtime.

Either exporter of ``torch.onnx.export`` works on models containing mmo1d's ops with no change to
the model: ``dynamo=True`` (``torch.export``-based, torch's default) or ``dynamo=False`` (the
TorchScript-based one, deprecated by torch); both emit standard ONNX operators only.
"""
import io
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

#: ONNX domains of the standard operator sets.
STANDARD_DOMAINS = ('', 'ai.onnx')


def export_onnx(model: nn.Module,
                inputs: Tuple[torch.Tensor, ...],
                path: Optional[str] = None,
                dynamo: bool = True,
                opset_version: Optional[int] = None,
                input_names: Optional[Sequence[str]] = None,
                output_names: Optional[Sequence[str]] = None) -> Any:
    """Export ``model(*inputs)`` to ONNX with static shapes.

    Args:
        model (nn.Module): The model, in the mode to export (usually ``eval()``).
        inputs (tuple[Tensor]): Example inputs.
        path (str, optional): Where to write the ``.onnx`` file (weights inside it). Default: None.
        dynamo (bool): Use the ``torch.export``-based exporter; False for the TorchScript one.
            Default: True.
        opset_version (int, optional): ONNX opset, at least 17 (mmo1d's lowerings need it).
            Default: None, the exporter's default.
        input_names (Sequence[str], optional): Names of the graph inputs. Default: None.
        output_names (Sequence[str], optional): Names of the graph outputs. Default: None.

    Returns:
        onnx.ModelProto: The exported model.
    """
    import onnx

    from mmo1d.ops.onnx_lowering import MIN_OPSET
    if opset_version is not None and opset_version < MIN_OPSET:
        raise ValueError(f'export_onnx: opset_version must be >= {MIN_OPSET}, got {opset_version}')
    names = dict(input_names=list(input_names) if input_names else None,
                 output_names=list(output_names) if output_names else None)
    with torch.no_grad():
        if dynamo:
            program = torch.onnx.export(model, tuple(inputs), dynamo=True, opset_version=opset_version,
                                        verbose=False, **names)
            proto = program.model_proto
        else:
            buffer = io.BytesIO()
            torch.onnx.export(model, tuple(inputs), buffer, dynamo=False, opset_version=opset_version, **names)
            proto = onnx.load_from_string(buffer.getvalue())
    if path is not None:
        onnx.save(proto, path)
    return proto


def non_standard_ops(model: Any) -> List[str]:
    """``domain::op_type`` of every node outside the standard ONNX domains (graph and functions).

    Args:
        model (onnx.ModelProto | str): The model or the path of its file.

    Returns:
        list[str]: Sorted, unique; empty when only standard operators are used.
    """
    import onnx
    if isinstance(model, str):
        model = onnx.load(model, load_external_data=False)
    nodes = list(model.graph.node) + [node for function in model.functions for node in function.node]
    return sorted({f'{node.domain}::{node.op_type}' for node in nodes if node.domain not in STANDARD_DOMAINS})


def run_onnxruntime(model: Any, inputs: Sequence[torch.Tensor], threads: Optional[int] = None) -> List[np.ndarray]:
    """Run a model with ONNX Runtime on the CPU.

    Args:
        model (onnx.ModelProto | str): The model or the path of its file.
        inputs (Sequence[Tensor]): One tensor per graph input, in order.
        threads (int, optional): Intra-op threads; None lets ONNX Runtime choose. Default: None.

    Returns:
        list[np.ndarray]: The graph outputs, in order.
    """
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    source = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(source, options, providers=['CPUExecutionProvider'])
    graph_inputs = session.get_inputs()
    if len(graph_inputs) != len(inputs):
        raise ValueError(f'run_onnxruntime: the model has {len(graph_inputs)} inputs, got {len(inputs)} tensors')
    feed = {arg.name: t.detach().cpu().numpy() for arg, t in zip(graph_inputs, inputs)}
    return session.run(None, feed)


def max_abs_difference(expected: Sequence[torch.Tensor], actual: Sequence[np.ndarray]) -> float:
    """Largest absolute difference between PyTorch outputs and ONNX Runtime outputs.

    Args:
        expected (Sequence[Tensor]): PyTorch outputs (flattened from the model's output structure).
        actual (Sequence[np.ndarray]): ONNX Runtime outputs, in the same order.

    Returns:
        float: ``max |expected - actual|`` over all elements of all outputs.
    """
    if len(expected) != len(actual):
        raise ValueError(f'max_abs_difference: {len(expected)} PyTorch outputs but {len(actual)} ONNX outputs')
    diff = 0.0
    for t, a in zip(expected, actual):
        t = t.detach().cpu().numpy()
        if t.shape != a.shape:
            raise ValueError(f'max_abs_difference: output shapes differ: {t.shape} (PyTorch) vs {a.shape} (ONNX)')
        if t.size:
            diff = max(diff, float(np.abs(t.astype(np.float64) - a.astype(np.float64)).max()))
    return diff
