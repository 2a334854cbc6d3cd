"""The pure helpers of bench/: /proc parsing, ratios, tables, the targets table of BENCHMARKS.md,
configuration variants written as TOML, and the layouts the scaling benchmark runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import tomllib
from pathlib import Path

import pytest

from bench import BenchmarkResult, Target
from bench.config_file import config_tables
from bench.memory import growth_rows
from bench.pvapy import _tool
from bench.proc_stats import TICKS_PER_S, by_thread_name, descendants, stat_cpu_ticks, stat_parent, status_kib
from bench.ratios import median, per_gb, ratio
from bench.report import TARGETS_BEGIN, TARGETS_END, cell, merge_targets, section, table, target_rows
from bench.scaling import layout, variant
from bench.time_to_science import machine_bound
from bench.transport import Run, single_sector, thread_rows
from harness import write_toml
from sectorflow.configs import config_from_dict

STATUS = """Name:\tpython3
VmPeak:\t  912384 kB
VmHWM:\t  430112 kB
VmRSS:\t  120004 kB
Threads:\t7
"""
# The command name holds a space and a parenthesis, as /proc allows.
STAT = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194304 1500 0 0 0 250 75 0 0 20 0 7 0 123 456 789"


def test_status_kib_reads_the_named_field() -> None:
    assert status_kib(STATUS, "VmHWM") == 430112
    assert status_kib(STATUS, "VmRSS") == 120004
    assert status_kib(STATUS, "VmSwap") is None


def test_status_kib_refuses_a_line_without_kb() -> None:
    with pytest.raises(ValueError, match=r"expected 'Threads: <number> kB'"):
        status_kib(STATUS, "Threads")


def test_stat_fields_survive_a_command_name_with_spaces_and_parentheses() -> None:
    assert stat_parent(STAT) == 17
    assert stat_cpu_ticks(STAT) == 250 + 75


def test_descendants_walk_the_whole_tree_and_nothing_else() -> None:
    parents = {10: 1, 11: 10, 12: 10, 13: 11, 20: 1, 21: 20}
    assert descendants(parents, 10) == [11, 12, 13]
    assert descendants(parents, 13) == []


def test_ratio_median_and_per_gb_handle_nothing_moved() -> None:
    assert ratio(1.5, 3.0) == 0.5
    assert ratio(1.0, 0.0) == 0.0
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([]) == 0.0
    assert per_gb(2.0, 4_000_000_000) == 0.5
    assert per_gb(2.0, 0) == 0.0


def test_a_run_reports_payload_gigabytes_and_messages_per_second() -> None:
    run = Run(messages=20_000, bytes=3_317_760_000, seconds=2.0)
    assert run.gb_s == pytest.approx(1.65888)
    assert run.messages_s == 10_000.0
    assert Run(messages=0, bytes=0, seconds=0.0).gb_s == 0.0


def test_cells_format_numbers_by_size() -> None:
    assert cell(22578.04) == "22,578.0"
    assert cell(0.4249) == "0.42"
    assert cell(16384) == "16,384"
    assert cell(True) == "yes"
    assert cell("128 x 128") == "128 x 128"


def test_table_pads_columns_to_the_widest_cell() -> None:
    assert table(["path", "GB/s"], [["raw", 3.75], ["proxy", 1.5]]).splitlines() == [
        "| path  | GB/s |",
        "|-------|------|",
        "| raw   | 3.75 |",
        "| proxy | 1.50 |",
    ]


def test_a_section_names_command_machine_files_and_targets() -> None:
    result = BenchmarkResult(columns=["a"], rows=[[1.0]], notes=["a note"],
                             targets=[Target("x/y", ">= 0.45", "0.42", False)])
    host = {"cores": 2, "cpu": "Xeon", "memory_gib": 23.5, "load_average_1min": 0.5, "python": "3.11.7"}
    text = section("transport", result, "python -m bench", host, dt.datetime(2026, 11, 23, 10, 5), 40.2,
                   "bench/results/t.json", "bench/results/t.png")
    assert text.splitlines()[:5] == [
        "## 2026-11-23 10:05 UTC: transport",
        "",
        "Command: `python -m bench` (40 s for this benchmark)  ",
        "Machine: 2 cores (Xeon), 23.5 GiB memory, load average 0.50 at start, Python 3.11.7  ",
        "Raw figures: `bench/results/t.json`, plot: `bench/results/t.png` (on the machine that ran it; "
        "bench/results/ is not committed)",
    ]
    assert "- a note" in text
    assert "- target: x/y: >= 0.45, measured 0.42: MISSED" in text


def _targets_block(ledger: str) -> list[str]:
    block = ledger.split(TARGETS_BEGIN, 1)[1].split(TARGETS_END, 1)[0]
    return [line.split("|")[1].strip() + ":" + line.split("|")[4].strip()
            for line in block.strip().splitlines()[2:]]


def test_targets_table_is_inserted_before_the_first_dated_section() -> None:
    ledger = "# Benchmarks\n\nintro\n\n## 2026-11-22 04:06 UTC: counting\n\nold\n"
    when = dt.datetime(2026, 11, 23, 10, 0)
    merged = merge_targets(ledger, "transport", target_rows("transport", [Target("c/a", ">= 0.45", "0.42", False)],
                                                            when), ["transport", "counting"])
    assert merged.index("## Targets") < merged.index(TARGETS_BEGIN) < merged.index("## 2026-11-22 04:06 UTC")
    assert merged.endswith("## 2026-11-22 04:06 UTC: counting\n\nold\n")
    assert _targets_block(merged) == ["transport:0.42"]
    assert "**no**" in merged


def test_targets_of_a_benchmark_are_replaced_and_the_others_kept_in_registry_order() -> None:
    when = dt.datetime(2026, 11, 23, 10, 0)
    order = ["transport", "counting", "memory"]
    ledger = merge_targets("# Benchmarks\n", "memory", target_rows("memory", [Target("rss", "<= 1.10x", "2.1x", False)],
                                                                   when), order)
    ledger = merge_targets(ledger, "transport", target_rows("transport", [Target("c/a", ">= 0.45", "0.40", False)],
                                                            when), order)
    ledger = merge_targets(ledger, "transport", target_rows("transport", [Target("c/a", ">= 0.45", "0.47", True)],
                                                            when), order)
    assert _targets_block(ledger) == ["transport:0.47", "memory:2.1x"]
    assert ledger.count(TARGETS_BEGIN) == 1 and ledger.count("## Targets") == 1


def test_a_configuration_variant_survives_toml_and_the_loader(local_config, tmp_path) -> None:
    changed = dataclasses.replace(
        local_config,
        aggregator=dataclasses.replace(local_config.aggregator, hwm=50, base_port=7100),
        receivers=tuple(dataclasses.replace(r, threads=4) for r in local_config.receivers),
        slurm=dataclasses.replace(local_config.slurm, environment={"OMP_NUM_THREADS": "1"}),
    )
    written = write_toml(config_tables(changed), tmp_path / "variant.toml")
    again = config_from_dict(tomllib.loads(written.read_text()), source=changed.source)
    assert again == changed


def test_single_sector_makes_a_frame_of_one_sector_and_one_receiver(local_config) -> None:
    single = single_sector(local_config)
    d = single.detector
    assert (d.frame_rows, d.frame_cols, d.n_sectors) == (144, 576, 1)
    assert d.sector_bytes == local_config.detector.sector_bytes == 165_888
    assert single.n_receivers == 1 and single.receivers[0].threads == 1


@pytest.mark.parametrize(("nodegroups", "expected"), [(1, (1, 1)), (2, (2, 1)), (4, (2, 2))])
def test_nodegroups_are_spread_over_at_most_two_ranks(nodegroups: int, expected: tuple[int, int]) -> None:
    assert layout(nodegroups) == expected


def test_a_scaling_variant_sets_threads_and_groups_per_rank(local_config) -> None:
    changed, ranks = variant(local_config, 4, 2)
    assert ranks == 2
    assert changed.nodegroup.groups_per_rank == 2
    assert {r.threads for r in changed.receivers} == {2}


def test_growth_rows_pair_services_present_in_both_runs() -> None:
    rows = growth_rows({"aggregator": 430_080, "kvstore": 51_200, "gone": 1}, {"aggregator": 929_792, "kvstore": 51_200})
    assert rows == [("aggregator", 420.0, 908.0, pytest.approx(2.1619, abs=1e-4)), ("kvstore", 50.0, 50.0, 1.0)]


def test_the_file_workflow_writes_a_simulated_scan_of_local_toml_as_raw_files_stempy_reads(tmp_path: Path) -> None:
    # local.toml draws a specimen, which places each frame by the scan's width: the benchmark's
    # simulation must pass it (time_to_science once failed at its first frame for lack of it).
    import numpy as np
    import stempy.io

    from bench.file_workflow import write_raw_scan
    from sectorflow.configs import load_config
    from sectorflow.protocol import find_raw_files
    from sectorflow.simulator import simulator_from_config

    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "local.toml")
    written = write_raw_scan(config, 7, 3, 2, tmp_path)
    geometry = config.geometry()
    assert written == 3 * 2 * geometry.frame_rows * geometry.frame_cols * 2  # uint16 pixels
    reader = stempy.io.reader(find_raw_files(str(tmp_path), 7), stempy.io.FileVersion.VERSION5, backend="multi-pass")
    assert tuple(reader.scan_shape) == (2, 3)  # (rows, columns)
    simulator = simulator_from_config(config)
    for position in range(3 * 2):
        blocks = reader.read_frames(position)
        assert len(blocks) == 1
        frame = np.asarray(blocks[0].data).reshape(geometry.frame_rows, geometry.frame_cols)
        np.testing.assert_array_equal(frame, simulator.frame(7, position, scan_x=3))


def test_the_machine_bound_spreads_the_stacks_cpu_over_every_core() -> None:
    # A file workflow of 300 s against a stack that used 60 CPU seconds: on 2 cores at best 30 s, 10x.
    assert machine_bound(300.0, 60.0, 2) == pytest.approx(10.0)
    assert machine_bound(300.0, 60.0, 1) == pytest.approx(5.0)
    assert machine_bound(300.0, 0.0, 2) == 0.0  # no CPU figures (a service's /proc unreadable): no bound


def test_a_tool_of_the_venv_is_found_when_the_venv_is_not_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make bench` runs .venv/bin/python without activating the venv: PvaPy's console scripts sit
    # beside the interpreter, not on PATH.
    monkeypatch.setenv("PATH", "/nonexistent")
    interpreter = Path(sys.executable)
    assert Path(_tool(interpreter.name)) == interpreter.parent / interpreter.name
    with pytest.raises(RuntimeError, match="install the optional group 'pvapy'"):
        _tool("no-such-tool-anywhere")


def test_threads_of_one_name_add_up_and_a_name_may_hold_spaces_and_parentheses() -> None:
    io = "41 (ZMQbg/IO/0) S 1 41 1 0 -1 4194368 0 0 0 0 300 100 0 0 20 0 9 0 5 0 0"
    again = io.replace("300 100", "50 50")
    odd = io.replace("(ZMQbg/IO/0)", "(a (b) c)").replace("300 100", "7 3")
    seconds = by_thread_name([io, again, odd])
    assert seconds == pytest.approx({"ZMQbg/IO/0": 500 / TICKS_PER_S, "a (b) c": 10 / TICKS_PER_S})


def test_the_thread_table_gives_each_threads_cpu_per_gb_and_its_share_of_the_process() -> None:
    gb = 1_000_000_000
    runs = {"pipeline": [Run(1, gb, 1.0, {"sink": 0.4}, {"sink": {"sf-receive-0": 0.1, "ZMQbg/IO/0": 0.3,
                                                                     "python": 0.001}}),
                         Run(1, 2 * gb, 1.0, {"sink": 0.8}, {"sink": {"sf-receive-0": 0.2, "ZMQbg/IO/0": 0.6}})],
            "proxy": [Run(1, gb, 1.0, {"proxy": 0.5})]}  # no threads read: no rows
    assert thread_rows(runs) == [["pipeline: sink", "ZMQbg/IO/0", pytest.approx(0.3), "75%"],
                                 ["pipeline: sink", "sf-receive-0", pytest.approx(0.1), "25%"]]
