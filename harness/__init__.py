"""What the tests and the benchmarks share: free loopback ports and TOML files. Not installed:
``pytest`` and ``python -m bench`` run from the repository root, where ``import harness`` finds it.
"""

from .ports import free_port, free_port_block
from .toml_files import deep_update, write_toml

__all__ = ["deep_update", "free_port", "free_port_block", "write_toml"]
