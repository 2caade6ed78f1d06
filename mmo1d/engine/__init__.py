"""Training-time helpers of the oriented 1D kernel models (Kirchmeyer & Deng, ICCV 2023): hooks."""
from .hooks import AngleLoggerHook

__all__ = ['AngleLoggerHook']
