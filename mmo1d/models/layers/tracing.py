"""Whether a layer runs in a graph capture rather than eagerly."""
import torch


def traced_or_compiled() -> bool:
    """Traced (``torch.jit.trace``, the ONNX exporter) or compiled (``torch.compile``,
    ``torch.export``): the layers then call ops with lowerings instead of their eager-only forms
    (the padded Linear, the product without its bias, the residual kernel)."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


__all__ = ['traced_or_compiled']
