"""sectorflow: stream detector sectors into HPC compute-node memory and reduce them on the fly."""

__version__ = "0.1.0"
__all__ = ["__version__"]
