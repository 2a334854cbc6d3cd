"""The base of sectorflow's own errors: entry points print these as one line, no traceback.

Every error a user can meet derives from ``SectorflowError``: the configuration's ``ConfigError``,
the C++ components' errors (``ProtocolError``, ``KvstoreError``, ``ProducerError``, ...), and a
missing optional package (``require``).
"""

from __future__ import annotations

import importlib
from types import ModuleType


class SectorflowError(Exception):
    """A failure a user can act on; the message names the thing, the value and the way out."""


class SectorflowValueError(SectorflowError, ValueError):
    """A value that cannot be used (a configuration, a message, a file): still a ``ValueError``."""


class UsageError(SectorflowValueError):
    """A command-line argument that cannot be used: entry points exit 2 for it, as argparse does."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or raise SectorflowError saying which extra installs it.

    Args:
        module: what to import ("matplotlib.pyplot").
        extra: the sectorflow extra that provides it ("plot").
        purpose: what it is needed for, for the message ("to draw the scan's PNG").
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise SectorflowError(
            f"{module.split('.')[0]} is needed {purpose} but cannot be imported ({error}); "
            f"install it with: pip install '.[{extra}]' in the sectorflow checkout (it is not on PyPI)"
        ) from None


def import_mpi() -> ModuleType:
    """``mpi4py.MPI``, or SectorflowError saying how to get an mpi4py that loads this machine's MPI.

    PyPI's mpi4py wheel looks for ``libmpi.so.12``, which Debian's MPICH ships as
    ``libmpich.so.12``: without the Makefile's link its import fails with an ImportError naming the
    library (docs/building.md, "Why Debian's MPICH").
    """
    try:
        return importlib.import_module("mpi4py.MPI")
    except ModuleNotFoundError as error:
        if error.name not in ("mpi4py", "mpi4py.MPI"):
            raise
        raise SectorflowError(
            "mpi4py is not installed; NodeGroups need the nodegroup extra, built against this machine's MPI: "
            "pip install --no-binary mpi4py '.[nodegroup]' in the sectorflow checkout"
        ) from None
    except (ImportError, RuntimeError) as error:
        raise SectorflowError(
            f"mpi4py cannot load an MPI library ({error}); in a checkout `make venv` links Debian's MPICH for "
            "PyPI's wheel, elsewhere build mpi4py against this machine's MPI: pip install --no-binary mpi4py "
            "--force-reinstall mpi4py (with mpicc on the PATH)"
        ) from None


__all__ = ["SectorflowError", "SectorflowValueError", "import_mpi", "require"]
