"""Socket buffer sizes against what the kernel grants: ``[aggregator] sndbuf_bytes`` and
``[nodegroup] rcvbuf_bytes`` above ``net.core.wmem_max``/``rmem_max`` are cut to it silently by the
kernel (ZeroMQ sets SO_SNDBUF/SO_RCVBUF, not the FORCE variants), and a set size turns the kernel's
autotuning off: a WAN hop would then run with a smaller window than configured. Said once at start.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

SYSCTL_DIR = Path("/proc/sys/net/core")


def granted_bytes(requested: int, sysctl: str, sysctl_dir: Path = SYSCTL_DIR) -> int | None:
    """The buffer Linux gives a socket asking for ``requested`` bytes (twice the request, capped at
    twice ``sysctl``), or None where the sysctl cannot be read (not Linux)."""
    try:
        ceiling = int((sysctl_dir / sysctl).read_text())
    except (OSError, ValueError):
        return None
    return 2 * min(requested, ceiling)


def warn_if_capped(setting: str, requested: int, sysctl: str, sysctl_dir: Path = SYSCTL_DIR) -> str | None:
    """Log (and return) one warning if ``requested`` (0: autotuning, fine) is above the kernel's ceiling."""
    granted = granted_bytes(requested, sysctl, sysctl_dir) if requested > 0 else None
    if granted is None or granted >= 2 * requested:
        return None
    message = (f"{setting} = {requested} is above this host's net.core.{sysctl} = {granted // 2}: each socket gets "
               f"{granted} bytes (the kernel's double of its ceiling) and no autotuning; raise net.core.{sysctl} "
               "(docs/deployment.md, 'Long fat links') or lower the setting")
    log.warning(message)
    return message
