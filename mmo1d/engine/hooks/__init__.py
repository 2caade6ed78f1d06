from .angle_logger_hook import AngleLoggerHook
from .angle_warmup_hook import AngleWarmupHook

__all__ = ['AngleLoggerHook', 'AngleWarmupHook']
