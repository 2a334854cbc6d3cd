"""The arithmetic of CPU seconds per GB in bench/: services against their anchors, encrypted hops
against their plain hop plus the cipher floor, the targets they give, and the full detector's
cores and hosts; and how a result's further tables are written into BENCHMARKS.md."""

from __future__ import annotations

import datetime as dt

import pytest

from bench import BenchmarkResult, Table
from bench.cpu_per_gb import Floor, compare, hops, path_cpu_per_gb, process_cpu_per_gb, targets
from bench.full_detector import Costs, detector_gb_s, hosts_for, rows
from bench.report import section

GB = 1_000_000_000


def _runs(**cpu_per_gb: list[dict[str, float]]) -> dict[str, list[tuple[dict[str, float], int]]]:
    """Runs of 2 GB each whose processes used the given CPU seconds per GB."""
    return {path: [({name: s * 2 for name, s in each.items()}, 2 * GB) for each in rounds]
            for path, rounds in cpu_per_gb.items()}


RUNS = _runs(
    raw=[{"sender": 0.20, "sink": 0.25}, {"sender": 0.22, "sink": 0.20}, {"sender": 0.21, "sink": 0.24}],
    proxy=[{"proxy": 0.60, "sender": 0.2, "sink": 0.3}] * 3,
    aggregator=[{"aggregator": 0.40, "sender": 0.2, "sink": 0.3}] * 3,
    pipeline=[{"producer-0": 0.16, "aggregator": 0.5, "sink": 0.30}] * 3,
    **{"raw-curve": [{"sender": 1.0, "sink": 1.1}] * 3,
       "proxy-curve": [{"proxy": 2.0, "sender": 1.0, "sink": 1.1}] * 3,
       "pipeline-curve-wan": [{"producer-0": 0.16, "aggregator": 1.3, "sink": 1.2}] * 3,
       "pipeline-curve": [{"producer-0": 0.9, "aggregator": 2.0, "sink": 1.2}] * 3},
)
FLOOR = Floor(seal=0.6, open=0.5)


def test_a_process_figure_is_the_median_of_its_rounds_and_a_path_counts_every_process() -> None:
    assert process_cpu_per_gb(RUNS["raw"], "sender") == pytest.approx(0.21)
    assert process_cpu_per_gb(RUNS["raw"], "sink") == pytest.approx(0.24)
    assert path_cpu_per_gb(RUNS["raw"]) == pytest.approx(0.45)
    assert process_cpu_per_gb([], "sink") == 0.0


def test_each_service_meets_its_anchor_plain_and_with_curve_over_plain_plus_floor() -> None:
    table = {(c.service, c.curve): c for c in compare(RUNS, FLOOR)}
    nodegroup = table[("NodeGroup, counting off", False)]
    assert (nodegroup.cpu, nodegroup.anchor_cpu) == pytest.approx((0.30, 0.24))
    assert nodegroup.ratio == pytest.approx(1.25)
    assert nodegroup.rounds == pytest.approx([0.30 / 0.25, 0.30 / 0.20, 0.30 / 0.24])
    aggregator = table[("aggregator", False)]
    assert aggregator.service_at == ("aggregator", "aggregator") and aggregator.anchor_at == ("proxy", "proxy")
    assert aggregator.ratio == pytest.approx(0.40 / 0.60)
    # With CURVE a relay both opens and seals; the sink only opens, the sender only seals.
    curve_aggregator = table[("aggregator", True)]
    assert curve_aggregator.floor == pytest.approx(1.1)
    assert curve_aggregator.over_plain == pytest.approx(2.0 / (0.40 + 1.1))
    assert curve_aggregator.anchor_over_plain == pytest.approx(2.0 / (0.60 + 1.1))
    assert table[("NodeGroup, counting off", True)].over_plain == pytest.approx(1.2 / (0.30 + 0.5))
    assert table[("producer", True)].over_plain == pytest.approx(0.9 / (0.16 + 0.6))
    assert table[("producer", True)].anchor_over_plain == pytest.approx(1.0 / (0.21 + 0.6))


def test_an_encrypted_hop_is_its_path_against_the_path_with_that_hop_plain_plus_seal_and_open() -> None:
    found = {h.name: h for h in hops(RUNS, FLOOR)}
    raw = found["(a) raw cppzmq hop"]
    assert raw.ratio == pytest.approx(2.1 / (0.45 + 1.1))
    wan = found["aggregator -> NodeGroup (the WAN hop)"]
    assert (wan.cpu, wan.plain_cpu) == pytest.approx((2.66, 0.96))
    receivers = found["producer -> aggregator (the receivers' hop)"]
    assert receivers.ratio == pytest.approx(4.1 / (2.66 + 1.1))


def test_targets_are_the_plain_goals_then_every_encrypted_hop() -> None:
    found = targets(compare(RUNS, FLOOR), hops(RUNS, FLOOR))
    assert [(t.name, t.goal, t.measured, t.met) for t in found] == [
        ("CPU-s/GB: aggregator vs libzmq zmq_proxy", "<= 0.70x", "0.67x", True),
        ("CPU-s/GB: NodeGroup, counting off vs raw cppzmq PULL sink", "<= 1.30x", "1.25x", True),
        ("CPU-s/GB: (a) raw cppzmq hop with CURVE vs plain + cipher floor", "<= 1.30x", "1.35x", False),
        ("CPU-s/GB: aggregator -> NodeGroup (the WAN hop) with CURVE vs plain + cipher floor", "<= 1.30x",
         "1.29x", True),
        ("CPU-s/GB: producer -> aggregator (the receivers' hop) with CURVE vs plain + cipher floor", "<= 1.30x",
         "1.09x", True),
    ]


def test_a_service_that_moved_nothing_misses_its_target() -> None:
    empty = dict(RUNS, pipeline=[({}, 0)] * 3)
    nodegroup = next(t for t in targets(compare(empty, FLOOR), []) if "NodeGroup" in t.name)
    assert (nodegroup.measured, nodegroup.met) == ("0.00x", False)


def test_the_full_detector_streams_57_7_gb_s_over_five_cards_per_tier() -> None:
    frame = 576 * 576 * 2
    assert detector_gb_s(frame) == pytest.approx(57.729, abs=1e-3)
    assert hosts_for(57.729) == 5
    assert hosts_for(25.0) == 2 and hosts_for(25.01) == 3


def test_cores_are_cpu_per_gb_times_the_stream_and_counting_per_frame_times_the_rate() -> None:
    costs = Costs(producer=0.2, aggregator=0.5, nodegroup=0.3, producer_curve=0.9, aggregator_curve=2.0,
                  nodegroup_curve=1.2)
    # A stream of exactly 50 GB/s: 100 frames/s of 0.5 GB.
    table = {r[0]: r for r in rows(costs, {20: 0.001, 2000: 0.01}, frame_bytes=GB // 2, frames_s=100)}
    assert table["aggregator"][2:] == pytest.approx([25.0, 100.0, 4, 6.25, 25.0])
    assert table["NodeGroups: + counting at 20 e/frame"][2:4] == pytest.approx([15.0 + 0.1, 60.0 + 0.1])
    assert table["NodeGroups: + counting at 2,000 e/frame"][1] == "10.000 ms/frame"
    assert table["all services, 2,000 e/frame"][2:5] == pytest.approx([10.0 + 25.0 + 15.0 + 1.0,
                                                                       45.0 + 100.0 + 60.0 + 1.0, 12])


def test_a_section_writes_each_further_table_under_its_title() -> None:
    result = BenchmarkResult(columns=["a"], rows=[[1.0]], notes=["a note"],
                             tables=[Table("the cores", ["service", "cores"], [["aggregator", 28.9]])])
    host = {"cores": 2, "cpu": "Xeon", "memory_gib": 23.5, "load_average_1min": 0.5, "python": "3.11.7"}
    text = section("transport", result, "python -m bench", host, dt.datetime(2026, 11, 26, 7, 0), 40.0,
                   "bench/results/t.json", "bench/results/t.png")
    lines = text.splitlines()
    at = lines.index("the cores:")
    assert lines[at + 2:at + 5] == ["| service    | cores |", "|------------|-------|", "| aggregator | 28.90 |"]
    assert lines.index("- a note") > at
