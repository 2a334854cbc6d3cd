"""Writing key pairs in ZeroMQ's certificate format (what ``zmq.auth`` reads and writes).

``<key_dir>/<role>/<name>.key`` holds the public key and may be copied anywhere;
``<name>.key_secret`` holds both keys, is created with mode 0600 (never readable by anyone else,
not even for a moment) and stays on the host that is that party.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from sectorflow._core.security import ROLES, SecurityError, generate_keypair

PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"

_BANNER = """\
#   ****  Generated on {when} by sectorflow keys generate  ****
#   ZeroMQ CURVE {kind} Certificate
#   {advice}

metadata
    role = "{role}"
    name = "{name}"
curve
"""


def generate(key_dir: str | Path, role: str, name: str) -> tuple[Path, Path]:
    """Write a new key pair of ``role`` named ``name``; returns (public file, secret file).

    Raises:
        SecurityError: an unknown role, a name that is not a plain file name, or a pair of that
            name that already exists (never overwritten: its public key may be in allowlists).
    """
    if role not in ROLES:
        raise SecurityError(f"no role '{role}'; the roles are {', '.join(ROLES)}")
    if not name or name.startswith(".") or "/" in name or name != name.strip():
        raise SecurityError(f"key name {name!r}: expected a plain file name (letters, digits, -, _)")
    folder = Path(key_dir) / role
    folder.mkdir(parents=True, exist_ok=True)
    public, secret = folder / f"{name}{PUBLIC_SUFFIX}", folder / f"{name}{SECRET_SUFFIX}"
    for path in (public, secret):
        if path.exists():
            raise SecurityError(f"{path}: exists; a key pair is never overwritten (remove it first to replace it)")
    pair = generate_keypair()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    _write(secret, _BANNER.format(when=when, kind="Secret", role=role, name=name,
                                  advice="DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.")
           + f'    public-key = "{pair.public_key}"\n    secret-key = "{pair.secret_key}"\n', 0o600)
    _write(public, _BANNER.format(when=when, kind="Public", role=role, name=name,
                                  advice="Exchange securely, or check its contents after the exchange.")
           + f'    public-key = "{pair.public_key}"\n', 0o644)
    return public, secret


def _write(path: Path, text: str, mode: int) -> None:
    # O_EXCL: never follow or reuse a file someone else made; the mode applies from creation on.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, mode)  # the umask may have taken bits off a public file
