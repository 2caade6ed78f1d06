"""Training-time helpers of the oriented 1D kernel models (Kirchmeyer & Deng, ICCV 2023): hooks."""
from .hooks import AngleLoggerHook, AngleWarmupHook

__all__ = ['AngleLoggerHook', 'AngleWarmupHook']
