"""Security: CurveZMQ keys, the beamline's key directory and the CURVE settings of every socket.

``sectorflow keys generate ROLE NAME`` writes a key pair in ZeroMQ's certificate format (keys.py);
``options.py`` turns the ``[security]`` table into the C++ ``CurveServer``/``CurveClient`` each
component's options carry; ``binds.py`` refuses a non-loopback bind without security.
"""

from sectorflow._core.security import (
    ROLES,
    Certificate,
    CurveClient,
    CurveServer,
    KeyDirectory,
    SecurityError,
    ZapStats,
    generate_keypair,
    is_z85_key,
    read_certificate,
)

__all__ = [
    "ROLES",
    "Certificate",
    "CurveClient",
    "CurveServer",
    "KeyDirectory",
    "SecurityError",
    "ZapStats",
    "generate_keypair",
    "is_z85_key",
    "read_certificate",
]
