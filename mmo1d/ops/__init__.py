from . import onnx_lowering  # noqa: F401  (export decompositions and ONNX symbolics of the ops)
from .layer_norm import autocast_output_dtype, layer_norm_last
from .oriented_dwconv1d import (
                                OrientedDWConv1d,
                                oriented_angles,
                                oriented_dwconv1d,
                                oriented_dwconv1d_gelu,
                                oriented_dwconv1d_path,
                                oriented_dwconv1d_paths,
)
from .path_names import PATH_ALIASES, canonical_path
from .reference import oriented_dwconv1d_reference, tap_offsets
from .scaled_residual import scaled_residual
from .table_cache import clear_table_cache, table_cache_size

__all__ = [
    'autocast_output_dtype', 'canonical_path', 'clear_table_cache', 'layer_norm_last', 'oriented_dwconv1d',
    'oriented_dwconv1d_gelu', 'oriented_dwconv1d_path',
    'oriented_dwconv1d_paths', 'OrientedDWConv1d', 'PATH_ALIASES', 'oriented_angles', 'oriented_dwconv1d_reference',
    'scaled_residual', 'table_cache_size', 'tap_offsets'
]
