"""The C++ benchmark programs of bench/cpp, built on demand in their own CMake tree.

``python -m bench`` must work from a fresh clone after ``make build``, which does not build them
(SECTORFLOW_BUILD_BENCH is off there, to keep ``make build`` as it is). So the first benchmark that
needs them configures the root project once in ``build/bench-cpp`` with SECTORFLOW_BUILD_BENCH=ON
and without Python, then builds only their targets; later calls are ninja's no-op check.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD_DIR = REPO / "build" / "bench-cpp"
TARGETS = ("zmq_hop", "producer_feed", "cipher_floor")
BUILD_TIMEOUT_S = 600.0


class BuildError(RuntimeError):
    """The benchmark programs could not be built; the message ends with the build's output."""


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{' '.join(argv)}: not done after {BUILD_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise BuildError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{tail}")


def build_programs() -> dict[str, Path]:
    """Build (or bring up to date) the benchmark programs; returns target name -> executable.

    Raises BuildError naming the failed step, with the end of its output.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake not found on the PATH: run 'make deps' (Debian packages) first")
    if not (BUILD_DIR / "CMakeCache.txt").exists():
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run([cmake, "-S", str(REPO), "-B", str(BUILD_DIR), *generator, "-DCMAKE_BUILD_TYPE=Release",
              "-DSECTORFLOW_BUILD_BENCH=ON", "-DSECTORFLOW_PYTHON=OFF"])
    _run([cmake, "--build", str(BUILD_DIR), "--target", *TARGETS])
    programs = {name: BUILD_DIR / "bench" / "cpp" / name for name in TARGETS}
    for name, path in programs.items():
        if not path.exists():
            raise BuildError(f"{name}: built, but no executable at {path}")
    return programs
