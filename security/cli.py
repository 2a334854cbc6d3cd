"""The ``sectorflow keys`` subcommand: make and list a beamline's CurveZMQ keys."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sectorflow._core.security import ROLES, KeyDirectory
from sectorflow.configs import Config

from .keys import SECRET_SUFFIX, generate


def register(subparsers: Any) -> None:
    """Add the ``keys`` subcommand (``keys generate ROLE NAME``, ``keys list``)."""
    from sectorflow.cli import add_config_argument

    keys = subparsers.add_parser(
        "keys",
        help="make and list the beamline's CurveZMQ keys ([security])",
        description="Key pairs in ZeroMQ's certificate format under [security] key_dir: "
        "<key_dir>/<role>/<name>.key (public: copy it to every host of the beamline, where it "
        "is that role's allowlist) and <name>.key_secret (mode 0600: keep it on the host that is "
        "that party). README.md, 'Keys', says who needs which.",
    )
    actions = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    make = actions.add_parser("generate", help="write a new key pair ROLE/NAME",
                              description="Write <key_dir>/ROLE/NAME.key and NAME.key_secret (0600); "
                              "never overwrites a pair.")
    make.add_argument("role", choices=ROLES, metavar="ROLE", help=f"one of {', '.join(ROLES)}")
    make.add_argument("name", metavar="NAME", help="the party (a host, a person, a session)")
    make.add_argument("--key-dir", metavar="DIR", default=None, help="default: [security] key_dir")
    add_config_argument(make)
    make.set_defaults(run=run_generate)
    show = actions.add_parser("list", help="list the public keys of every role and the secrets held here",
                              description="Print one line per certificate: role, name, public key, "
                              "and whether this directory holds its secret. Never prints a secret.")
    show.add_argument("--key-dir", metavar="DIR", default=None, help="default: [security] key_dir")
    add_config_argument(show)
    show.set_defaults(run=run_list)


def run_generate(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow keys generate ROLE NAME``."""
    public, secret = generate(args.key_dir or config.security.key_dir, args.role, args.name)
    print(f"public key: {public} (copy it to the {args.role} folder of every host's key directory)")
    print(f"secret key: {secret} (mode 0600; keep it on this host only)")
    return 0


def run_list(args: argparse.Namespace, config: Config) -> int:
    """``sectorflow keys list``."""
    key_dir = Path(args.key_dir or config.security.key_dir)
    keys = KeyDirectory(str(key_dir))
    for role in ROLES:
        for identity, public_key in sorted((v, k) for k, v in keys.allowlist([role]).items()):
            name = identity.split("/", 1)[1]
            held = (key_dir / role / f"{name}{SECRET_SUFFIX}").exists()
            print(f"{role:<10} {name:<24} {public_key}  {'secret held here' if held else ''}".rstrip())
    return 0


__all__ = ["register"]
