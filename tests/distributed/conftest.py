"""What the channels log: a handler on their own logger (whatever the logging set-up a command left behind), and
a bounded wait for a line logged by a listener's thread."""

from __future__ import annotations

import logging
import time

import pytest


class Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def refusals(self, at_least: int = 1, within: float = 5.0) -> list[str]:
        """The refusals logged, once ``at_least`` of them were (or ``within`` seconds passed)."""
        deadline = time.monotonic() + within
        while len(self._refused()) < at_least and time.monotonic() < deadline:
            time.sleep(0.02)  # the listener's thread logs after it closed the connection: polled, bounded
        return self._refused()

    def _refused(self) -> list[str]:
        return [line for line in self.lines if "refused a channel connection" in line]


@pytest.fixture
def channel_log():
    logger = logging.getLogger("graphshard.distributed.transport.channel")
    handler, level = Logged(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)
