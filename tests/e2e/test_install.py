"""The deployment install of docs/deployment.md, run as written from a read-only checkout: the package builds
outside the source tree, at the lock's versions, and its command and C++ core work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "/opt/sectorflow"
INSTALL_S = 1200  # a Release build of the C++ core on 2 busy cores, and the wheels from PyPI

pytestmark = pytest.mark.slow


def readme_install_lines() -> list[str]:
    """The shell lines between docs/deployment.md's deployment-install markers."""
    readme = (ROOT / "docs" / "deployment.md").read_text()
    begin = readme.index("<!-- deployment-install:begin")
    block = readme[readme.index("```sh\n", begin) + len("```sh\n"): readme.index("```", readme.index("```sh\n", begin) + 5)]
    assert "<!-- deployment-install:end -->" in readme[begin:]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture
def read_only_checkout(tmp_path: Path) -> Iterator[Path]:
    """The checkout's tracked files, behind a read-only bind mount (root ignores permission bits)."""
    if os.geteuid() != 0:
        pytest.fail("the read-only checkout is a bind mount: run the tests as root (make test)")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    source = tmp_path / "source"
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    mounted = tmp_path / "checkout"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        yield mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


def test_the_readme_install_works_from_a_read_only_checkout(read_only_checkout: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "opt"
    prefix.mkdir()
    script = "set -eu\n" + "\n".join(line.replace(PREFIX, str(prefix)) for line in readme_install_lines())
    # The machine's own interpreter, as a deployment's `python3`; not this test's venv.
    base = Path(getattr(sys, "_base_executable", sys.executable)).parent
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{base}:{env.get('PATH', '')}"
    done = subprocess.run(["bash", "-c", script], cwd=read_only_checkout, env=env, capture_output=True, text=True,
                          timeout=INSTALL_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    venv = prefix / ".venv"
    help_text = subprocess.run([str(venv / "bin" / "sectorflow"), "--help"], capture_output=True, text=True,
                               cwd=tmp_path, timeout=60)
    assert help_text.returncode == 0 and "kvstore" in help_text.stdout, help_text.stderr
    core = subprocess.run([str(venv / "bin" / "python"), "-c", "import sectorflow._core"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert core.returncode == 0, core.stderr
    # Every package the recipe installed is at the lock's version (the venv's own pip and setuptools aside).
    freeze = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.split()
    locked = {pin.lower().replace("_", "-") for pin in (prefix / "constraints.txt").read_text().split()}
    installed = {pin.lower().replace("_", "-") for pin in freeze}
    own = {pin for pin in installed if pin.split("==")[0] in ("sectorflow", "pip", "setuptools")}
    assert installed - own and installed - own <= locked, installed - own - locked
