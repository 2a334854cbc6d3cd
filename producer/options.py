"""Producer options from a loaded configuration: one ``ProducerOptions`` per producer thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sectorflow._core.producer import ProducerOptions
from sectorflow.configs import Config
from sectorflow.errors import SectorflowError
from sectorflow.security.options import aggregator_keys, data_client_curve


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
    return _member_endpoints(config, config.aggregator.hosts, receiver)


def standby_endpoints(config: Config, receiver: int) -> list[str]:
    """Per member i, where the standby aggregator listens for ``receiver`` while it holds member i's
    lease: member i's port on standby_host ([] with no standby configured)."""
    host = config.aggregator.standby_host
    return _member_endpoints(config, [host] * len(config.aggregator.hosts), receiver) if host else []


def _member_endpoints(config: Config, hosts: Sequence[str], receiver: int) -> list[str]:
    base = config.aggregator.base_port
    return [f"tcp://{host}:{base + member * config.n_receivers + receiver}" for member, host in enumerate(hosts)]


def producer_options(config: Config, receiver: int, thread_id: int,
                     warn: Callable[[str], None] | None = None) -> ProducerOptions:
    """The options of thread ``thread_id`` of receiver ``receiver`` (sector ``receiver``).

    ``warn`` takes the one line a thread logs when it starts spilling a scan (standard error if None).

    Raises:
        SectorflowError: the receiver or thread is not in the configuration.
    """
    check_receiver(config, receiver)
    threads = config.receivers[receiver].threads
    if not 0 <= thread_id < threads:
        raise SectorflowError(f"receiver {receiver} has {threads} producer threads; thread {thread_id} does not exist")
    options = ProducerOptions(
        geometry=config.geometry(),
        receiver=receiver,
        thread_id=thread_id,
        threads=threads,
        wire=config.receivers[receiver].wire,
        aggregator_endpoints=aggregator_endpoints(config, receiver),
        send_hwm=config.producer.send_hwm,
        fallback_dir=config.producer.fallback_dir,
        status_ttl_s=config.kvstore.ttl_s,
        scan_record_ttl_s=config.kvstore.scan_record_ttl_s,
        send_timeout_ms=config.producer.send_timeout_ms,
        warn=warn,
    )
    options.standby_endpoints = standby_endpoints(config, receiver)
    options.curve = data_client_curve(config, "producer")
    options.aggregator_keys = aggregator_keys(config, "producer")
    return options
