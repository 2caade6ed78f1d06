from .checkpoint import adapt_state_dict, extract_state_dict, load_pretrained, resize_oriented_kernel
from .complexity import flop_analyzer, model_complexity, oriented_dwconv1d_flop_jit, register_flop_handles

__all__ = [
    'adapt_state_dict', 'extract_state_dict', 'load_pretrained', 'resize_oriented_kernel', 'flop_analyzer',
    'model_complexity', 'oriented_dwconv1d_flop_jit', 'register_flop_handles'
]
