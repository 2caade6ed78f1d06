from .oriented_convnext import OrientedConvNeXt

__all__ = ['OrientedConvNeXt']
