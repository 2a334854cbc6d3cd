"""The dashboard of a stack whose aggregation tier has three members (protocol/SPEC.md, "The
aggregation tier"), from its JSON state and in a real headless browser: while a paced scan runs,
every member streams at a rate; after it, every member is up, has relayed bytes and carried a third
of the scan's frames; a member killed (SIGKILL, no stop) is marked down on the page, with the words of
``sectorflow status``, "the next scan goes without it", while the other two stay up.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from harness import free_port_block
from support import LOOPBACK, Processes, stack_up, wait_until
# browser: the fixture of the dashboard's test, a headless chromium.
from test_dashboard import PAGE_S, SCAN_S, SMALL_DETECTOR, START_S, browser, text  # noqa: F401

from sectorflow.orchestration import load_running

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

RECEIVERS = 4  # configs/local.toml's
TIER = 3
# 256 frames paced at 40 Hz: about 6 s of streaming (at least that, however loaded the machine), long
# enough for the page to see every member streaming at a rate.
SCAN_SHAPE, RATE_HZ = "16x16", 40.0
KILLED = 1


def state(url: str) -> dict[str, Any]:
    """The dashboard's state, as /api/state serves it."""
    with urllib.request.urlopen(url + "api/state", timeout=PAGE_S) as answer:
        return json.loads(answer.read())


def tier_rows(driver: Any) -> list[dict[str, Any]]:
    """The tier card's rows as the page shows them: each member's data attributes, class and cells."""
    return driver.execute_script("""
        return [...document.querySelectorAll('#tier tbody tr')].map(r => ({
            member: r.dataset.member, up: r.dataset.up, down: r.classList.contains('down'),
            colour: getComputedStyle(r.cells[0]).color, cells: [...r.cells].map(c => c.textContent)}));""")


def test_the_page_shows_each_member_of_the_tier_its_slice_rate_and_health(
        make_config, browser: Any, processes: Processes, tmp_path: Path) -> None:
    base = free_port_block(LOOPBACK, TIER * RECEIVERS)  # relay thread j of member j // R listens on base + j
    config, path = make_config(detector=SMALL_DETECTOR, dashboard={"update_ms": 200},
                               aggregator={"base_port": base, "tier": [LOOPBACK] * TIER})
    assert config.n_receivers == RECEIVERS and len(config.aggregator.hosts) == TIER
    run_dir = tmp_path / "run"
    url = config.dashboard.url()
    with stack_up(config, path, run_dir, tmp_path / "h5", START_S):
        browser.get(url)
        wait_until(lambda: text(browser, "connection") == "live", PAGE_S, "the page to show the kvstore live")
        wait_until(lambda: [m["up"] for m in state(url)["tier"]] == [True] * TIER, PAGE_S, "every member up")

        # A paced scan: every member streams its slice, at a rate the page shows.
        acquiring = processes.sectorflow("acquire", "--config", str(path), "--scan-number", "1", "--scan-shape",
                                         SCAN_SHAPE, "--rate", str(RATE_HZ), "--wait", "--timeout", str(SCAN_S),
                                         name="acquire-1")
        streaming = wait_until(lambda: (t := state(url)["tier"]) and all(
            m["state"] == "streaming" and m["bytes_per_s"] > 0 for m in t) and t, SCAN_S,
            "every member streaming at a rate")
        assert [m["share"] for m in streaming] == [1 / TIER] * TIER and {m["scan"] for m in streaming} == {1}
        assert processes.supervisor.wait("acquire-1", SCAN_S) == 0, processes.output(acquiring)

        # After it: every member up, with what it relayed, and its third of the scan's frames.
        members = wait_until(lambda: (t := state(url)["tier"]) and all(
            m["up"] and m["state"] == "idle" and m["bytes"] > 0 and m["messages"] > 0 for m in t) and t,
            PAGE_S, "every member idle after the scan, with bytes relayed")
        assert [(m["member"], m["host"], m["threads"]) for m in members] == [
            (i, LOOPBACK, [f"t{i * RECEIVERS + r}" for r in range(RECEIVERS)]) for i in range(TIER)]
        assert [m["share"] for m in members] == [1 / TIER] * TIER and [m["note"] for m in members] == [""] * TIER
        # Every sector went through one member or another: the members' messages add up to the scan's.
        sectors = 16 * 16 * RECEIVERS
        assert sum(m["messages"] for m in members) >= sectors, members
        rows = wait_until(lambda: (r := tier_rows(browser)) and len(r) == TIER and all(
            row["up"] == "true" and row["cells"][2] == "idle" and row["cells"][5] != "0 B" for row in r) and r,
            PAGE_S, "the three members up on the page, with bytes relayed")
        assert browser.execute_script("return document.getElementById('tier-card').hidden") is False
        assert [row["cells"][:2] + [row["cells"][3], row["cells"][7]] for row in rows] == [
            [str(i), LOOPBACK, f"t{i * RECEIVERS}-t{i * RECEIVERS + RECEIVERS - 1}", f"1/{TIER}"] for i in range(TIER)]
        assert not any(row["down"] for row in rows)
        assert text(browser, "tier-summary") == f"{TIER} of {TIER} members up; slices of scan 1"

        # A member killed (no stop, no goodbye): its statuses expire and the page marks it down.
        member = next(s for s in load_running(run_dir) if s.name == f"aggregator-{KILLED}")
        os.kill(member.pid, signal.SIGKILL)
        rows = wait_until(lambda: (r := tier_rows(browser)) and len(r) == TIER and r[KILLED]["down"] and r,
                          PAGE_S, f"member {KILLED} marked down on the page")
        killed = rows[KILLED]
        assert (killed["up"], killed["cells"][2]) == ("false", "down"), killed
        threads = f"t{KILLED * RECEIVERS}-t{KILLED * RECEIVERS + RECEIVERS - 1}"
        assert killed["cells"][-1] == f"no live status of {threads}: the next scan goes without it", killed
        assert killed["colour"] == browser.execute_script(
            "return getComputedStyle(document.querySelector('#tier .badge.down')).backgroundColor"), killed
        assert [row["up"] for i, row in enumerate(rows) if i != KILLED] == ["true"] * (TIER - 1), rows
        assert text(browser, "tier-summary") == f"{TIER - 1} of {TIER} members up; slices of scan 1"
        members = state(url)["tier"]
        assert [m["up"] for m in members] == [i != KILLED for i in range(TIER)], members
        assert (members[KILLED]["state"], members[KILLED]["note"]) == (
            "down", f"no live status of {threads}: the next scan goes without it")
