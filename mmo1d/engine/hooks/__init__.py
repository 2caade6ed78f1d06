from .angle_logger_hook import AngleLoggerHook

__all__ = ['AngleLoggerHook']
