"""CPU seconds per GB: each service of path (c) against the anchor doing the same hop in the same
transport run, plain and with CURVE, and each encrypted hop against its plain hop plus the cipher.

On a machine whose cores every process shares, a ratio of two paths' rates measures how they share the
cores; what a facility buys cores for is each service's CPU seconds per GB moved, the currency of
BENCHMARKS.md's CPU-per-GB targets. Figures are medians over the rounds of a run: each run's CPU seconds
of one process during the transfer over the GB that reached the end of its path. Pure arithmetic over the
runs' figures, so that it is tested on fixed numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench import Target
from bench.ratios import median, per_gb, ratio

#: Per run: process name -> CPU seconds during the transfer, and the payload bytes the path moved.
RunCpu = tuple[Mapping[str, float], int]

NODEGROUP_GOAL = 1.3    # NodeGroup, counting off, at most this times the raw PULL sink's CPU per GB
AGGREGATOR_GOAL = 0.7   # aggregator at most this times libzmq zmq_proxy's
ENCRYPTED_GOAL = 1.3    # an encrypted hop at most this times (the plain hop + the cipher floor)


@dataclass(frozen=True)
class Floor:
    """The cipher's own CPU seconds per GB on one core (bench/cpp/cipher_floor.cpp)."""

    seal: float  # crypto_box_easy_afternm: what a CURVE sender's I/O thread adds per GB at least
    open: float  # crypto_box_open_easy_afternm: what a CURVE receiver's adds

    def of(self, ciphers: str) -> float:
        """The floor of a process that seals ("seal"), opens ("open") or does both ("both")."""
        return {"seal": self.seal, "open": self.open, "both": self.seal + self.open}[ciphers]


@dataclass(frozen=True)
class Pairing:
    """A service of path (c) and its anchor: (path, process) of each, plain and with CURVE."""

    service: str
    anchor: str
    plain: tuple[tuple[str, str], tuple[str, str]]  # (service's (path, process), anchor's (path, process))
    curve: tuple[tuple[str, str], tuple[str, str]]
    ciphers: str  # what the service and its anchor do with CURVE: "seal", "open" or "both"
    goal: float   # the target on the plain ratio of CPU per GB


PAIRINGS = (
    Pairing("producer", "raw cppzmq sender", (("pipeline", "producer-0"), ("raw", "sender")),
            (("pipeline-curve", "producer-0"), ("raw-curve", "sender")), "seal", 0.0),
    Pairing("aggregator", "libzmq zmq_proxy", (("aggregator", "aggregator"), ("proxy", "proxy")),
            (("pipeline-curve", "aggregator"), ("proxy-curve", "proxy")), "both", AGGREGATOR_GOAL),
    Pairing("NodeGroup, counting off", "raw cppzmq PULL sink", (("pipeline", "sink"), ("raw", "sink")),
            (("pipeline-curve", "sink"), ("raw-curve", "sink")), "open", NODEGROUP_GOAL),
)

# Each encrypted hop: the path with it encrypted, and the same path with that hop plain; the two
# differ by that one hop's encryption, so every process of the path counts.
HOPS = (
    ("(a) raw cppzmq hop", "raw-curve", "raw"),
    ("aggregator -> NodeGroup (the WAN hop)", "pipeline-curve-wan", "pipeline"),
    ("producer -> aggregator (the receivers' hop)", "pipeline-curve", "pipeline-curve-wan"),
)


def process_cpu_per_gb(runs: Sequence[RunCpu], process: str) -> float:
    """Median over ``runs`` of one process's CPU seconds per GB moved."""
    return median(per_gb(cpu.get(process, 0.0), moved) for cpu, moved in runs)


def path_cpu_per_gb(runs: Sequence[RunCpu]) -> float:
    """Median over ``runs`` of every process's CPU seconds together per GB moved."""
    return median(per_gb(sum(cpu.values()), moved) for cpu, moved in runs)


def per_round(runs: Mapping[str, Sequence[RunCpu]], a: tuple[str, str], b: tuple[str, str]) -> list[float]:
    """a's CPU per GB / b's, round by round ((path, process) each): the two ran minutes apart at most."""
    return [ratio(per_gb(x[0].get(a[1], 0.0), x[1]), per_gb(y[0].get(b[1], 0.0), y[1]))
            for x, y in zip(runs[a[0]], runs[b[0]])]


@dataclass(frozen=True)
class Comparison:
    """One row of the table: a service (plain or with CURVE) against its anchor."""

    service: str
    anchor: str
    curve: bool
    service_at: tuple[str, str]
    anchor_at: tuple[str, str]
    cpu: float          # the service's CPU seconds per GB
    anchor_cpu: float
    rounds: list[float]  # service / anchor, round by round
    floor: float        # the cipher floor of what it ciphers (0 plain)
    over_plain: float   # with CURVE: cpu / (the service plain + floor); 0 plain
    anchor_over_plain: float

    @property
    def ratio(self) -> float:
        return ratio(self.cpu, self.anchor_cpu)


def compare(runs: Mapping[str, Sequence[RunCpu]], floor: Floor) -> list[Comparison]:
    """Every pairing plain then with CURVE (see PAIRINGS)."""
    rows = []
    for p in PAIRINGS:
        plain_cpu = process_cpu_per_gb(runs[p.plain[0][0]], p.plain[0][1])
        plain_anchor = process_cpu_per_gb(runs[p.plain[1][0]], p.plain[1][1])
        for curve, (at, anchor_at) in ((False, p.plain), (True, p.curve)):
            cpu = process_cpu_per_gb(runs[at[0]], at[1])
            anchor_cpu = process_cpu_per_gb(runs[anchor_at[0]], anchor_at[1])
            f = floor.of(p.ciphers) if curve else 0.0
            rows.append(Comparison(
                p.service, p.anchor, curve, at, anchor_at, cpu, anchor_cpu, per_round(runs, at, anchor_at), f,
                ratio(cpu, plain_cpu + f) if curve else 0.0, ratio(anchor_cpu, plain_anchor + f) if curve else 0.0))
    return rows


@dataclass(frozen=True)
class Hop:
    """An encrypted hop: its path's CPU per GB against the path with the hop plain, plus the floor."""

    name: str
    encrypted: str
    plain: str
    cpu: float        # every process of the encrypted path, CPU seconds per GB
    plain_cpu: float  # every process of the plain one
    floor: float      # seal + open

    @property
    def ratio(self) -> float:
        return ratio(self.cpu, self.plain_cpu + self.floor)


def hops(runs: Mapping[str, Sequence[RunCpu]], floor: Floor) -> list[Hop]:
    """Every encrypted hop of HOPS."""
    return [Hop(name, encrypted, plain, path_cpu_per_gb(runs[encrypted]), path_cpu_per_gb(runs[plain]),
                floor.of("both")) for name, encrypted, plain in HOPS]


def targets(comparisons: Sequence[Comparison], encrypted: Sequence[Hop]) -> list[Target]:
    """The Targets table's rows: each plain pairing with a goal, then each encrypted hop."""
    found = []
    for c in comparisons:
        goal = next(p.goal for p in PAIRINGS if p.service == c.service)
        if not c.curve and goal > 0:
            found.append(Target(f"CPU-s/GB: {c.service} vs {c.anchor}", f"<= {goal:.2f}x", f"{c.ratio:.2f}x",
                                0 < c.ratio <= goal))
    for h in encrypted:
        found.append(Target(f"CPU-s/GB: {h.name} with CURVE vs plain + cipher floor", f"<= {ENCRYPTED_GOAL:.2f}x",
                            f"{h.ratio:.2f}x", 0 < h.ratio <= ENCRYPTED_GOAL))
    return found
