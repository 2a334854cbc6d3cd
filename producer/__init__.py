"""The producer: receiver-side sector streaming with automatic fallback to disk.

``Producer`` (C++, ``sectorflow::producer``) is one producer thread: per scan it fixes the routing
list (the request's, or the sorted ``nodegroups/*`` of its kvstore replica), decides once between
streaming and fallback (no NodeGroup), publishes the decision in ``status/producer/r<R>t<T>``,
then sends two-part data messages to aggregator thread r on a PUSH socket that blocks at
``producer.send_hwm`` (never drops), after an info message (``wire = "sectorflow"``) or under the
4D Camera receivers' own header with no info message (``wire = "native"``), or writes raw
version-5 files to ``producer.fallback_dir``. Thread t of T sends the probe positions p with
p % T == t, as frame numbers ``ScanRequest.first_frame`` + p (the detector's counter);
``Producer.send`` takes that frame number. Sources:
``simulator_source`` (the detector simulator) and ``ReplaySource`` (raw files of a scan); a
``SiblingGate`` keeps a receiver's threads within ``producer.max_lead_frames`` of each other.
``ProducerDaemon`` runs ``sectorflow producer``; ``sectorflow acquire`` (sectorflow.operations) requests a scan.
"""

from sectorflow._core.producer import (
    STOP_CHECK_MS,
    Mode,
    Producer,
    ProducerError,
    ProducerOptions,
    ProducerStopped,
    ReplaySource,
    ScanDecision,
    ScanRequest,
    ScanResult,
    SectorSource,
    SiblingGate,
    check_first_frame,
    check_routing,
    count_routes,
    routing_from_replica,
    simulator_source,
    thread_share,
)

from .daemon import ProducerDaemon
from .options import aggregator_endpoints, check_receiver, producer_options

__all__ = [
    "STOP_CHECK_MS",
    "Mode",
    "Producer",
    "ProducerDaemon",
    "ProducerError",
    "ProducerOptions",
    "ProducerStopped",
    "ReplaySource",
    "ScanDecision",
    "ScanRequest",
    "ScanResult",
    "SectorSource",
    "SiblingGate",
    "aggregator_endpoints",
    "check_first_frame",
    "check_receiver",
    "check_routing",
    "count_routes",
    "producer_options",
    "routing_from_replica",
    "simulator_source",
    "thread_share",
]
