"""Deployment helpers: ONNX export of models containing mmo1d's ops and checks with ONNX Runtime.

Needs torch, and ``onnx``, ``onnxscript`` and ``onnxruntime`` when used (imported on first use).
The ops themselves are lowered to standard operators by :mod:`mmo1d.ops.onnx_lowering`.
"""
from .adaptive_pools import legacy_export_problem, record_adaptive_pools
from .onnx import export_onnx, max_abs_difference, non_standard_ops, run_onnxruntime

__all__ = [
    'export_onnx', 'legacy_export_problem', 'max_abs_difference', 'non_standard_ops', 'record_adaptive_pools',
    'run_onnxruntime'
]
