"""What the tests and the benchmarks share: free loopback ports, TOML files, command lines. Not installed:
``pytest`` and ``python -m bench`` run from the repository root, where ``import harness`` finds it.
"""

from .commands import acquire_command
from .ports import free_port, free_port_block
from .toml_files import deep_update, write_toml

__all__ = ["acquire_command", "deep_update", "free_port", "free_port_block", "write_toml"]
