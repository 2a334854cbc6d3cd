"""The keys a streaming session's NodeGroups need, in a directory only the job's user can read.

The batch script names the directory, never a key: Slurm keeps scripts where others may read
them. The directory (mode 0700, made by ``mkdtemp``) holds a copy of the submitter's nodegroup
pair, the kvstore's and the aggregator's public certificates, and the viewers' and operators'
(the allowlist of the live stream), laid out as a key directory.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sectorflow.configs import Config

from .keys import PUBLIC_SUFFIX, SECRET_SUFFIX
from sectorflow._core.security import tier_member_key_name

from .options import key_directory

PREFIX = "session-keys-"


def make_session_key_dir(config: Config, parent: Path) -> Path:
    """Copy what a session's NodeGroups need into a new private directory under ``parent``.

    Raises:
        SecurityError: the key directory lacks the nodegroup secret or the kvstore's or the
            aggregator's public certificate (the same checks the NodeGroups would make).
    """
    keys = key_directory(config)
    keys.own("nodegroup")  # exactly one, readable: fail here, not in the job
    keys.public_key("kvstore")
    if len(config.aggregator.hosts) > 1:  # a tier: each member's certificate
        for member in range(len(config.aggregator.hosts)):
            keys.public_key("aggregator", tier_member_key_name(member))
    else:
        keys.public_key("aggregator")
    source = Path(keys.path)
    parent.mkdir(parents=True, exist_ok=True)
    target = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    try:
        for role, suffixes in (("nodegroup", (SECRET_SUFFIX, PUBLIC_SUFFIX)), ("kvstore", (PUBLIC_SUFFIX,)),
                               ("aggregator", (PUBLIC_SUFFIX,)), ("viewer", (PUBLIC_SUFFIX,)),
                               ("operator", (PUBLIC_SUFFIX,))):
            folder = target / role
            folder.mkdir(mode=0o700)
            for suffix in suffixes:
                for file in sorted((source / role).glob(f"*{suffix}")):  # "*.key" leaves out "*.key_secret"
                    copy = folder / file.name
                    shutil.copyfile(file, copy)
                    copy.chmod(0o600)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target
