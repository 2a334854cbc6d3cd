"""A beamline's CurveZMQ keys for a test (``from keyring import Keyring``), made with the product's
own ``sectorflow.security.keys.generate``: one key directory holding a pair of every role (what
a local stack with every service on one host holds), and key directories of strangers who hold
the beamline's public certificates but a pair of their own that no allowlist lists."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sectorflow.configs import Config
from sectorflow.kvstore import Client, client_options
from sectorflow.security import ROLES, read_certificate
from sectorflow.security.options import with_key_dir
from sectorflow.security.keys import PUBLIC_SUFFIX, generate
from sectorflow.security.options import tier_member_key_name

# The name of each role's pair in the beamline's directory.
NAMES = {"kvstore": "server", "aggregator": "aggregator", "producer": "receivers", "nodegroup": "session",
         "operator": "alice", "viewer": "bob"}


class Keyring:
    """Key directories under ``root``: ``beamline`` (every role's pair) and strangers' (``stranger``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.beamline = root / "beamline"
        for role in ROLES:
            generate(self.beamline, role, NAMES[role])

    def tier(self, members: int) -> Path:
        """Adds a pair for each member of an aggregation tier (``aggregator/member-<i>``, each
        host's own; here all on one host, as the local stack runs them); returns the directory."""
        for member in range(members):
            generate(self.beamline, "aggregator", tier_member_key_name(member))
        return self.beamline

    def pair(self, role: str) -> tuple[str, str]:
        """(public, secret) Z85 keys of the beamline's ``role``."""
        certificate = read_certificate(str(self.beamline / role / f"{NAMES[role]}.key_secret"))
        return certificate.public_key, certificate.secret_key

    def public(self, role: str) -> str:
        return self.pair(role)[0]

    def stranger(self, name: str, role: str, admitted: bool = False) -> Path:
        """A key directory holding a new pair of ``role`` named ``name`` and the beamline's server
        certificates (kvstore, aggregator). ``admitted``: its public key is added to the beamline's
        allowlist of ``role`` (a second party of that role), before services start."""
        folder = self.root / name
        generate(folder, role, name)
        for server in ("kvstore", "aggregator"):
            if server != role:
                (folder / server).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.beamline / server / f"{NAMES[server]}{PUBLIC_SUFFIX}",
                                folder / server / f"{NAMES[server]}{PUBLIC_SUFFIX}")
        if admitted:
            shutil.copyfile(folder / role / f"{name}{PUBLIC_SUFFIX}", self.beamline / role / f"{name}{PUBLIC_SUFFIX}")
        return folder

    def stranger_pair(self, name: str, role: str) -> tuple[str, str]:
        certificate = read_certificate(str(self.root / name / role / f"{name}.key_secret"))
        return certificate.public_key, certificate.secret_key


#: Deadline of a role's client sync; a failure guard, not a speed requirement.
CLIENT_SYNC_S = 20.0


@pytest.fixture
def keyring(tmp_path: Path) -> Keyring:
    return Keyring(tmp_path / "keys")


@pytest.fixture
def clients() -> Iterator[Callable[..., Client]]:
    """``clients(config, role, key_dir=None)``: a synced kvstore client of that role's key (the
    keyring's beamline keys, or those in ``key_dir``), closed at teardown."""
    made: list[Client] = []

    def make(config: Config, role: str, key_dir: Path | None = None) -> Client:
        if key_dir is not None:
            config = with_key_dir(config, key_dir)
        client = Client(client_options(config, role=role))
        made.append(client)
        assert client.wait_synced(CLIENT_SYNC_S), f"a {role} client did not sync"
        return client

    yield make
    for client in made:
        client.close()
