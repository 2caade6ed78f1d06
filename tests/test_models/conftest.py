import logging

import pytest
from mmengine.logging import MMLogger


class _Records(logging.Handler):

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    @property
    def text(self) -> str:
        return '\n'.join(self.messages)


@pytest.fixture
def mm_log():
    """Messages sent to mmengine's current logger during the test."""
    logger = MMLogger.get_current_instance()
    handler = _Records()
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
