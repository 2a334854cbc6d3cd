"""Prints the entries of the lock (hashes included) that an install needs, from pip's report.

``python image/lock_subset.py REPORT.json requirements.lock`` reads the report of a dry-run
``pip install --report`` and prints, for every package it would install, that package's entry of
the lock, so that the image's wheels are downloaded against the lock's hashes. A package the lock
does not pin (sectorflow itself aside) is an error: the lock is the one list of versions.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entries(lock: str) -> dict[str, str]:
    """Normalised package name -> its entry (the pin line and its hash lines)."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lock.splitlines():
        if match := _NAME.match(line):
            current = entries.setdefault(_normal(match.group(1)), [])
            current.append(line)
        elif current is not None and line.startswith("    --hash="):
            current.append(line)
        else:
            current = None
    return {name: "\n".join(lines) for name, lines in entries.items()}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: lock_subset.py REPORT.json LOCK", file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text())
    entries = lock_entries(Path(argv[1]).read_text())
    names = sorted(_normal(item["metadata"]["name"]) for item in report["install"])
    missing = [name for name in names if name != "sectorflow" and name not in entries]
    if missing:
        print(f"lock_subset.py: error: the lock pins no version of {', '.join(missing)}: run `make lock`",
              file=sys.stderr)
        return 1
    print("\n".join(entries[name] for name in names if name != "sectorflow"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
