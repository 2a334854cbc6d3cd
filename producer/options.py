"""Producer options from a loaded configuration: one ``ProducerOptions`` per producer thread.

The keys are mapped once, in C++ (producer/src/from_config.cpp), for this daemon and a receiver
program alike; this module hands the configuration over and adds the warning callback.
"""

from __future__ import annotations

from collections.abc import Callable

from sectorflow._core import producer as _core
from sectorflow._core.producer import ProducerOptions
from sectorflow.configs import Config, beamline_of
from sectorflow.errors import SectorflowError


def check_receiver(config: Config, receiver: int) -> None:
    """Raise SectorflowError unless ``receiver`` is one of the configuration's receivers."""
    if not 0 <= receiver < config.n_receivers:
        raise SectorflowError(
            f"receiver {receiver}: {config.source} has {config.n_receivers} receivers ([[receivers]]), "
            f"expected 0 to {config.n_receivers - 1}"
        )


def aggregator_endpoints(config: Config, receiver: int) -> list[str]:
    """Where each member i of the aggregation tier listens for ``receiver``:
    tcp://<member i's host>:(base_port + i x receivers + receiver); one member without a tier."""
    return _core.aggregator_endpoints(beamline_of(config), receiver)


def standby_endpoints(config: Config, receiver: int) -> list[str]:
    """Per member i, where the standby aggregator listens for ``receiver`` while it holds member i's
    lease: member i's port on standby_host ([] with no standby configured)."""
    return _core.standby_endpoints(beamline_of(config), receiver)


def producer_options(config: Config, receiver: int, thread_id: int,
                     warn: Callable[[str], None] | None = None) -> ProducerOptions:
    """The options of thread ``thread_id`` of receiver ``receiver`` (sector ``receiver``), its CURVE
    keys from ``[security] key_dir`` included.

    ``warn`` takes the one line a thread logs when it starts spilling a scan (standard error if None).

    Raises:
        ConfigError: the receiver or thread is not in the configuration.
        SecurityError: a key ``[security]`` asks for is missing.
    """
    options = _core.producer_options(beamline_of(config), receiver, thread_id)
    options.warn = warn
    return options
