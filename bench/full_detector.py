"""The full detector: the cores each service needs for the 4D Camera at full rate, and the hosts
that its network implies, from the CPU seconds per GB the transport benchmark measures and the
counting cost per frame of bench/counting.py.

At a beamline each service has cores of its own, so a service needs (its CPU seconds per GB) x
(the GB/s it must carry) cores, and counting (its CPU seconds per frame) x (frames/s). Hosts: the
stream must cross a network card into and out of each tier; at 12.5 GB/s per 100 GbE card (one
per host), a tier carrying the whole stream needs ceil(57.7 / 12.5) = 5 of them. Pure arithmetic,
tested on fixed numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FRAMES_S = 87_000   # the 4D Camera's full frame rate (docs/architecture.md)
NIC_GB_S = 12.5     # one 100 GbE card, one direction
DOSES = (20, 200, 2000)  # electrons per frame

TITLE = "cores needed per service for the 4D Camera at 87,000 frames/s"
COLUMNS = ["service", "cost (plain; with CURVE)", "cores, plain", "cores, CURVE on every hop",
           "hosts (one 100 GbE card each)", "cores per host, plain", "cores per host, CURVE"]


@dataclass(frozen=True)
class Costs:
    """What the transport benchmark measured: CPU seconds per GB of each service, plain and with CURVE."""

    producer: float
    aggregator: float
    nodegroup: float  # receive and assemble, counting off
    producer_curve: float
    aggregator_curve: float
    nodegroup_curve: float


def detector_gb_s(frame_bytes: int, frames_s: int = FRAMES_S) -> float:
    """The detector's stream in GB/s."""
    return frame_bytes * frames_s / 1e9


def hosts_for(gb_s: float, nic_gb_s: float = NIC_GB_S) -> int:
    """Hosts of one card each that carry ``gb_s`` in one direction."""
    return math.ceil(gb_s / nic_gb_s - 1e-9)


def rows(costs: Costs, counting_s_per_frame: Mapping[int, float], frame_bytes: int,
         frames_s: int = FRAMES_S) -> list[list[object]]:
    """The table (COLUMNS): producers, aggregator, NodeGroups without then with counting at each dose, totals.

    ``counting_s_per_frame``: electrons per frame -> CPU seconds of counting one frame on one core.
    """
    gb_s = detector_gb_s(frame_bytes, frames_s)
    hosts = hosts_for(gb_s)
    table: list[list[object]] = []

    def row(name: str, cost: str, plain: float, curve: float) -> list[object]:
        return [name, cost, plain, curve, hosts, plain / hosts, curve / hosts]

    producers = row("producers (every receiver)", f"{costs.producer:.2f}; {costs.producer_curve:.2f} CPU-s/GB",
                    costs.producer * gb_s, costs.producer_curve * gb_s)
    aggregator = row("aggregator", f"{costs.aggregator:.2f}; {costs.aggregator_curve:.2f} CPU-s/GB",
                     costs.aggregator * gb_s, costs.aggregator_curve * gb_s)
    receive = row("NodeGroups: receive and assemble (counting off)",
                  f"{costs.nodegroup:.2f}; {costs.nodegroup_curve:.2f} CPU-s/GB",
                  costs.nodegroup * gb_s, costs.nodegroup_curve * gb_s)
    table += [producers, aggregator, receive]
    for dose in sorted(counting_s_per_frame):
        counting = counting_s_per_frame[dose] * frames_s
        table.append(row(f"NodeGroups: + counting at {dose:,} e/frame",
                         f"{counting_s_per_frame[dose] * 1e3:.3f} ms/frame", receive[2] + counting, receive[3] + counting))
    for dose in sorted(counting_s_per_frame):
        counting = counting_s_per_frame[dose] * frames_s
        plain = producers[2] + aggregator[2] + receive[2] + counting
        curve = producers[3] + aggregator[3] + receive[3] + counting
        table.append([f"all services, {dose:,} e/frame", "-", plain, curve, 3 * hosts, plain / (3 * hosts),
                      curve / (3 * hosts)])
    return table


def notes(frame_bytes: int, frames_s: int = FRAMES_S) -> list[str]:
    """What the table assumes, for its notes."""
    gb_s = detector_gb_s(frame_bytes, frames_s)
    return [
        f"full detector: {frames_s:,} frames/s of {frame_bytes:,} bytes = {gb_s:.1f} GB/s; cores = CPU-s/GB x "
        f"{gb_s:.1f} GB/s (counting: s/frame x {frames_s:,} frames/s on top of the NodeGroups' receive); hosts: "
        f"{gb_s:.1f} / {NIC_GB_S} GB/s per 100 GbE card = {hosts_for(gb_s)} per tier (receivers, aggregator, "
        f"NodeGroups; the aggregator's cards carry the stream in and out, full duplex), "
        f"{3 * hosts_for(gb_s)} for the three tiers. CURVE: every hop encrypted (producers seal, the aggregator "
        "opens and seals, NodeGroups open); with [security] plain_receivers the producers' and the aggregator's "
        "figures fall between the two columns.",
    ]


def quoted(table: Sequence[Sequence[object]]) -> dict[str, list[object]]:
    """The table by service name, for the JSON details."""
    return {str(r[0]): list(r[1:]) for r in table}
