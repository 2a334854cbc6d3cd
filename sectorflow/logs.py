"""One log line format for every service: time, level, service, message.

Only entry points call ``configure_logging``; modules use ``logging.getLogger(__name__)``.
Messages about a scan start with "scan N:" so that grep finds a scan across services.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)-7s %(service)s %(message)s"


class _ServiceFilter(logging.Filter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self.service
        return True


def configure_logging(service: str, level: str = "INFO") -> None:
    """Send sectorflow's logs to stderr, tagged with ``service`` (e.g. "producer[2]")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_ServiceFilter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
