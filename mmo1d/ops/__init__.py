from .oriented_dwconv1d import OrientedDWConv1d, oriented_angles, oriented_dwconv1d
from .reference import oriented_dwconv1d_reference, tap_offsets

__all__ = [
    'oriented_dwconv1d', 'OrientedDWConv1d', 'oriented_angles', 'oriented_dwconv1d_reference',
    'tap_offsets'
]
