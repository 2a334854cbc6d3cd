"""The aggregator (protocol/SPEC.md steps 4 and 5): the relay between producers and NodeGroups.

Thread r of the C++ ``Aggregator`` binds a PULL socket on ``bind_host:base_port + r``, learns each
scan's routing list from the info messages of receiver r's T_r producer threads, sends every
NodeGroup of the list its expected count once all T_r infos are in, and moves each data message
unchanged to ``routing[frame_number % len(routing)]``. NodeGroups are found in the kvstore
(``nodegroups/<uid>``, ``NodeGroupRecord.endpoint(r)``). Every message is checked as a NodeGroup
would check it; refused ones are counted per kind (``sectorflow.protocol.REFUSAL_KINDS``) and
dropped. A NodeGroup that is gone, or whose send stays blocked for ``[aggregator]
send_timeout_ms``, is dead for the scan: its messages of the scan are counted lost by uid and no
longer awaited. Each thread writes its account of a scan, ``scans/<n>/aggregator/t<r>``, when the
scan closes and at once when it declares a NodeGroup dead; data of a scan it has no state for (it
restarted) rebuilds the scan from the producer threads' records ``scans/<n>/producer/r<R>t<T>``.
At most ``[limits] max_open_scans`` scans are open per thread; opening one more closes the one
opened first. ``sectorflow aggregator --config F`` runs it as a daemon publishing
``status/aggregator/t<r>``.
"""

from sectorflow._core.aggregator import (
    Aggregator,
    AggregatorError,
    AggregatorOptions,
    RelayStats,
    ScanSummary,
)

from .daemon import run_aggregator, summary_line, thread_status
from .options import aggregator_options

__all__ = [
    "Aggregator",
    "AggregatorError",
    "AggregatorOptions",
    "RelayStats",
    "ScanSummary",
    "aggregator_options",
    "run_aggregator",
    "summary_line",
    "thread_status",
]
