"""The dashboard of `sectorflow up`, driven in a real headless browser (Debian's chromium through
chromium-driver and Selenium) and scraped by a real Prometheus (Debian's binary): during a scan the
page shows each receiver's progress with rate and time left and the live images with their colour
bars, the virtual detectors drawn on the summed pattern; at the end the outcome, and a history of
the scans newest first with their outcome, times, electrons per frame and thumbnail; the centre of
mass on a diverging ramp centred on 0, axes in scan positions, one time format; an aborted scan is
amber, its producers not in error, and its alert is dismissed; a past scan opens from the history with
its images from its file; with the NodeGroups stopped an alert
says so and a scan on disk shows no earlier scan's images; "kvstore unreachable" is raised while the kvstore is killed and clears
when it is back; a killed producer raises "producer ... lost"; no sessions card without Slurm, no tier card
with one aggregator; Prometheus' query API returns the scan's message
count from /metrics.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import free_port
from support import LOOPBACK, REPO, Processes, sectorflow_command, stack_up, wait_until

from sectorflow.configs import Config
from sectorflow.consumer.counting import read_counted_scan
from sectorflow.kvstore import Client, client_options
from sectorflow.consumer.nodegroup import scan_file_name
from sectorflow.orchestration import load_running
from sectorflow.orchestration.supervisor import stop_services

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

CHROMIUM, CHROMEDRIVER, PROMETHEUS = "/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/prometheus"
SMALL_DETECTOR = {"frame_rows": 64, "frame_cols": 64, "sector_rows": 16, "sector_cols": 64}
SCAN_SHAPE, RATE_HZ = (24, 24), 60.0  # about 10 s: long enough to watch it move
# The scan that is aborted: about a minute, so that it is still running whenever the abort comes.
ABORTED_RATE_HZ = 10.0
START_S, SCAN_S, PAGE_S = 60.0, 120.0, 30.0
# Set to copy the screenshots to docs/images/ (the README's), e.g. after changing the page.
UPDATE_SCREENSHOT = "SECTORFLOW_UPDATE_SCREENSHOT"
# The page's width in the screenshots: the README shows them at this size (small PNGs).
WINDOW = "1280,1400"


@dataclass
class Stack:
    config: Config
    path: Path
    run_dir: Path
    url: str


@pytest.fixture
def stack(make_config, tmp_path: Path) -> Iterator[Stack]:
    # A mask detector too: its outline is drawn on the summed pattern (a path beside the three circles).
    mask = np.zeros((SMALL_DETECTOR["frame_rows"], SMALL_DETECTOR["frame_cols"]), bool)
    mask[:6, :6] = True
    np.save(tmp_path / "corner.npy", mask)
    config, path = make_config(
        detector=SMALL_DETECTOR, simulator={"bright_field_radius_px": 10.0},
        counting={"background_threshold": 30.0, "xray_threshold": 1000.0}, dashboard={"update_ms": 200},
        nodegroup={"scan_timeout_s": 2.0},  # an aborted scan's file comes soon after its senders fall silent
        instrument={"scan_step_nm": 2.5},  # the scan axes get a physical scale
        analysis={"virtual_detectors": [{"name": "bright_field", "kind": "disk", "radius": 12.0},
                                          {"name": "dark_field", "kind": "annulus", "inner": 14.0, "outer": 30.0},
                                          {"name": "corner", "kind": "mask", "mask": str(tmp_path / "corner.npy")}]})
    run_dir = tmp_path / "run"
    with stack_up(config, path, run_dir, tmp_path / "h5", START_S):
        yield Stack(config, path, run_dir, config.dashboard.url())


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        # `make test` installs them (make deps): missing, the set-up is broken, not the test inapplicable.
        pytest.fail(f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
                    "make deps installs them")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WINDOW}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def text(driver: Any, element_id: str) -> str:
    return driver.execute_script(f"return document.getElementById({element_id!r}).textContent")


def progress(driver: Any) -> list[tuple[int, int]]:
    """(done, total) of every receiver's progress bar on the page."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#scan-progress .progress')].map(r => [r.dataset.done, r.dataset.total])")
    return [(int(done), int(total)) for done, total in rows]


def panel(driver: Any, index: int) -> dict[str, Any]:
    """What a panel of the images card shows: its image (once loaded), the colour bar's span and the
    colour at its top and bottom, and the detectors drawn on it."""
    return driver.execute_script("""
        const p = document.getElementById(`panel-${arguments[0]}`), i = p.querySelector('img');
        const c = p.querySelector('canvas'), g = c.getContext('2d');
        const top = [...g.getImageData(7, 0, 1, 1).data.slice(0, 3)];
        const bottom = [...g.getImageData(7, c.height - 1, 1, 1).data.slice(0, 3)];
        const middle = [...g.getImageData(7, Math.floor(c.height / 2), 1, 1).data.slice(0, 3)];
        const bar = p.querySelector('.colourbar').dataset;
        const texts = (selector) => [...p.querySelectorAll(selector)].map(t => t.textContent);
        return {name: i.dataset.name, scan: i.dataset.scan, loaded: i.complete && i.naturalWidth > 0,
                width: i.getBoundingClientRect().width, min: bar.min, max: bar.max, top, bottom, middle,
                diverging: bar.diverging, ticks: texts('.bar-ticks span'),
                axis_x: texts('.axis-x span'), axis_y: texts('.axis-y span'),
                maxLabel: p.querySelector('.bar-max').textContent,
                circles: p.querySelectorAll('svg circle').length, paths: p.querySelectorAll('svg path').length};""",
        index)


def history(driver: Any) -> list[list[str]]:
    """The scan history's rows, newest first, as the page shows their cells' text."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#history tbody tr')].map(r => [...r.cells].map(c => c.textContent))")


def thumbnails(driver: Any) -> list[bool]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#history img.thumbnail')].map(i => i.complete && i.naturalWidth > 0)")


def table_rows(driver: Any, table_id: str) -> list[list[str]]:
    """A table's body rows as the page shows their cells' text."""
    return driver.execute_script(
        f"return [...document.querySelectorAll('#{table_id} tbody tr')].map(r => [...r.cells].map(c => c.textContent))")


def alert_ids(driver: Any) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('#alerts .alert')].map(a => a.dataset.id)")


def keep_screenshot(driver: Any, tmp_path: Path, name: str) -> None:
    screenshot = tmp_path / name
    assert driver.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get(UPDATE_SCREENSHOT):  # in 128 colours: small, and the colour bars keep their steps fine
        from PIL import Image  # matplotlib's dependency, in the lock

        with Image.open(screenshot) as image:
            image.convert("RGB").quantize(colors=128).save(REPO / "docs" / "images" / name, optimize=True)


def acquire(processes: Processes, stack: Stack, scan: int, rate_hz: float = RATE_HZ) -> Any:
    x, y = SCAN_SHAPE
    return processes.sectorflow("acquire", "--config", str(stack.path), "--scan-number", str(scan),
                                "--scan-shape", f"{x}x{y}", "--rate", str(rate_hz), "--wait", "--timeout",
                                str(SCAN_S), name=f"acquire-{scan}")


def prometheus_sum(port: int, metric: str) -> float | None:
    """The sum of ``metric`` over its series, as Prometheus holds it; None before its first scrape."""
    result = prometheus_query(port, f"sum({metric})")
    return float(result[0]["value"][1]) if result else None


def assert_follows_prometheus_rules(exposition: str, scans: int) -> None:
    """What Prometheus' naming and instrumentation rules ask of /metrics, checked on every family:
    counters named ``_total``, no empty label value, every state set whole with one state at 1, and
    the scan-duration histogram counting each finished scan once."""
    from prometheus_client.parser import text_string_to_metric_families

    from sectorflow.protocol import SERVICE_STATES

    families = list(text_string_to_metric_families(exposition))
    assert families
    states: dict[tuple[str, str], dict[str, float]] = {}
    for family in families:
        assert family.name.startswith("sectorflow_"), family.name
        for sample in family.samples:
            assert all(value != "" for value in sample.labels.values()), sample
            if family.type == "counter":
                assert sample.name in (f"{family.name}_total", f"{family.name}_created"), sample
            if family.name == "sectorflow_service_state":
                states.setdefault((sample.labels["service"], sample.labels["name"]), {})[sample.labels["state"]] = \
                    sample.value
    assert states and all(sorted(s) == sorted(SERVICE_STATES) and sorted(s.values()).count(1.0) == 1
                          and sum(s.values()) == 1.0 for s in states.values()), states
    durations = next(f for f in families if f.name == "sectorflow_scan_duration_seconds")
    assert [s.value for s in durations.samples if s.name.endswith("_count")] == [float(scans)]


def test_the_page_follows_a_scan_to_its_outcome_images_and_history_and_its_alerts_clear(
        stack: Stack, browser: Any, processes: Processes, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from sectorflow.dashboard.png import DIVERGING_RAMP, RAMP

    browser.get(stack.url)
    wait_until(lambda: text(browser, "connection") == "live", PAGE_S, "the page to show the kvstore live")
    wait_until(lambda: "producer" in text(browser, "services"), PAGE_S, "the producers in the services table")
    # The header names the kvstore and its stack (kvstore/SPEC.md, "The stack's identity").
    with Client(client_options(stack.config)) as client:
        assert client.wait_synced(PAGE_S)
        assert f":{stack.config.kvstore.port}, stack {client.stack_id}, sequence " in text(browser, "kvstore-address")
    # A local stack has no Slurm: no sessions card (squeue, if installed, answers nothing here).
    assert browser.execute_script("return document.getElementById('sessions-card').hidden") is True

    # One aggregator, no tier: no tier card (tests/e2e/test_dashboard_tier.py has a tier of three).
    assert browser.execute_script("return document.getElementById('tier-card').hidden") is True
    with urllib.request.urlopen(stack.url + "api/state", timeout=PAGE_S) as answer:
        assert json.loads(answer.read())["tier"] == []
    # No LiberTEM bridge, no LiberTEM card; a bridge with a client connected has one.
    assert browser.execute_script("return document.getElementById('libertem-card').hidden") is True
    bridge = processes.sectorflow("libertem", "--config", str(stack.path), "--listen", "127.0.0.1:0", name="libertem")
    port = int(wait_until(lambda: re.search(r"listening on 127\.0\.0\.1:(\d+)", processes.output(bridge)), PAGE_S,
                          "the bridge to listen").group(1))
    reader = socket.create_connection((LOOPBACK, port))  # reads the acquisitions as LiberTEM would, to the end
    request.addfinalizer(reader.close)  # also when the test fails
    drained = threading.Thread(target=lambda: all(iter(lambda: reader.recv(1 << 16), b"")), daemon=True)
    drained.start()
    bridge_row = wait_until(lambda: (r := table_rows(browser, "libertem")) and "client connected" in r[0][2] and r[0],
                            PAGE_S, "the bridge and its client on the page")
    assert bridge_row[1] == f"127.0.0.1:{port}" and bridge_row[3] == "no scan yet"
    with Client(client_options(stack.config)) as client:
        wait_until(lambda: client.wait_synced(PAGE_S) and all(
            int(s.extra.get("live_frames_subscribers", 0)) >= 1 for s in client.statuses("nodegroup").values()),
            PAGE_S, "the bridge subscribed to the NodeGroups' live stream")

    acquiring = acquire(processes, stack, 1)
    positions = SCAN_SHAPE[0] * SCAN_SHAPE[1]
    seen_midway = wait_until(
        lambda: [p for p in progress(browser) if 0 < p[0] < positions] and progress(browser), SCAN_S,
        "a receiver's progress between 0 and the scan's positions on the page")
    assert all(total == positions for _, total in seen_midway)
    assert len(seen_midway) == stack.config.n_receivers
    # The rate and time left, as acquire --wait computes them, once two progress records came.
    def rate_and_time_left() -> str | None:
        shown = text(browser, "scan-eta")
        return shown if " left" in shown and "sectors/s" in shown else None

    eta = wait_until(rate_and_time_left, SCAN_S, "the scan's rate and time left")
    assert eta.startswith("running for ")
    # The scan in progress is drawn from the NodeGroups' live stream, before its file exists, each
    # image with its colour bar; the virtual detectors' three circles and the mask's outline are drawn
    # on the summed pattern.
    live = wait_until(lambda: "(counting, live)" in text(browser, "images-scan") and (p := panel(browser, 0))["loaded"]
                      and p["max"] and p, SCAN_S, "scan 1's live bright-field image with its colour bar mid-scan")
    assert (live["name"], live["scan"]) == ("bright_field", "1") and live["width"] >= 400
    # The bar runs the ramp the images are drawn with: its brightest anchor at the top, its darkest at
    # the bottom (a pixel in from each end: within a few levels of the anchor).
    assert max(abs(a - b) for a, b in zip(live["top"] + live["bottom"], RAMP[-1] + RAMP[0])) <= 8, live
    pattern = wait_until(lambda: (p := panel(browser, 1))["loaded"] and p, SCAN_S, "the live summed pattern")
    assert (pattern["name"], pattern["circles"], pattern["paths"]) == ("diffraction", 3, 1)

    # The screenshot once the images show something to see (a third of the positions; on a loaded
    # machine the scan may be over by then: the live images were checked above).
    def a_third_counted() -> bool:
        counted = re.match(r"scan 1, ([\d,]+) positions", text(browser, "images-scan"))
        return counted is not None and int(counted[1].replace(",", "")) >= positions / 3

    wait_until(a_third_counted, SCAN_S, "a third of scan 1's positions in the images")
    keep_screenshot(browser, tmp_path, "dashboard-scan.png")
    assert processes.supervisor.wait("acquire-1", SCAN_S) == 0, processes.output(acquiring)

    wait_until(lambda: text(browser, "scan-outcome") == "complete", PAGE_S, "the page to show scan 1 complete")
    assert progress(browser) == [(positions, positions)] * stack.config.n_receivers
    from_file = ("const t = document.getElementById('images-scan').textContent;"
                 "return !t.includes('live') && !t.includes('file to come')")
    loaded = wait_until(lambda: browser.execute_script(from_file) and (p := panel(browser, 0))["loaded"]
                        and p["scan"] == "1" and p, PAGE_S, "scan 1's bright-field image from its file")
    assert float(loaded["min"]) < float(loaded["max"])
    assert "scan 1, 576 positions" in text(browser, "images-scan")
    rows = wait_until(lambda: (r := history(browser)) and "FOURD_0000000001_counted.h5" in r[0][-1] and r, PAGE_S,
                      "scan 1 in the history")
    scan, started, duration, to_file, per_frame, outcome = rows[0][:6]
    assert (scan, outcome) == ("1", "complete") and started != "-" and duration.endswith(" s") and to_file.endswith(" s")
    assert float(per_frame) > 0
    assert wait_until(lambda: thumbnails(browser) == [True], PAGE_S, "scan 1's thumbnail in the history")
    # The bridge's last scan, in the words acquire --wait prints under its account.
    # The last scan's line comes as the bridge has queued the scan, the positions sent as the reader has
    # taken them: the page may show the one a heartbeat before the other.
    bridge_row = wait_until(lambda: (r := table_rows(browser, "libertem")) and r[0][3].startswith("scan 1: ")
                            and r[0][4] == str(positions) and r[0], PAGE_S,
                            "the bridge's last scan on the page, every position sent")
    assert bridge_row[3] == f"scan 1: 0 of {positions} positions sent empty (never came in time)", bridge_row
    keep_screenshot(browser, tmp_path, "dashboard.png")
    # Every choice of image draws, with its colour bar: the centre of mass's magnitude, say.
    browser.execute_script("const s = document.querySelector('#panel-0 select'); s.value = 'com_magnitude';"
                           "s.dispatchEvent(new Event('change'))")
    com = wait_until(lambda: (p := panel(browser, 0))["name"] == "com_magnitude" and p["loaded"] and p, PAGE_S,
                     "the centre of mass magnitude")
    assert float(com["max"]) > 0 and com["circles"] == 0
    # A component of the centre of mass is signed: a diverging ramp centred on 0 (blue, white, red), its bar
    # from -m to +m with ticks between, 0 the middle one; the axes give scan positions.
    browser.execute_script("const s = document.querySelector('#panel-0 select'); s.value = 'com_x';"
                           "s.dispatchEvent(new Event('change'))")
    com_x = wait_until(lambda: (p := panel(browser, 0))["name"] == "com_x" and p["loaded"] and p, PAGE_S,
                       "the centre of mass x")
    assert com_x["diverging"] == "true" and float(com_x["min"]) == -float(com_x["max"]) < 0, com_x
    assert com_x["ticks"][2] == "0" and len(com_x["ticks"]) == 5, com_x
    assert max(abs(a - b) for a, b in zip(com_x["middle"], DIVERGING_RAMP[2])) <= 8, com_x  # 0: near white
    assert max(abs(a - b) for a, b in zip(com_x["top"], DIVERGING_RAMP[-1])) <= 8, com_x
    assert com_x["axis_x"] == ["0 (0 nm)", "11 (27.50 nm)", "23 (57.50 nm)", "scan x (positions), 2.50 nm a step"]
    assert com_x["axis_y"] == ["0", "11", "23", "scan y (positions)"]
    assert panel(browser, 1)["axis_x"] == ["0", "31", "63", "detector x (px)"]  # the pattern: detector pixels
    # One time format on the page: the header's, the alerts' and the history's.
    assert re.fullmatch(r"updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text(browser, "updated"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", history(browser)[0][1])

    # Scan 2, aborted mid-way: its alert (with its time) is dismissed from the page, and the history
    # lists both scans, newest first, each with its outcome.
    acquire(processes, stack, 2, rate_hz=ABORTED_RATE_HZ)
    wait_until(lambda: [p for p in progress(browser) if p[0] > 0] and text(browser, "scan-number") == "2", SCAN_S,
               "scan 2 under way on the page")
    aborted = sectorflow_command("abort", "--config", str(stack.path), "2", timeout_s=60)
    assert aborted.returncode == 0, aborted.stderr
    assert processes.supervisor.wait("acquire-2", SCAN_S) == 4
    wait_until(lambda: "scan/2/aborted" in alert_ids(browser), PAGE_S, "the aborted scan's alert")
    assert [r[0] for r in history(browser)] == ["2", "1"]
    assert [r[5] for r in history(browser)] == ["aborted", "complete"]
    browser.execute_script("document.querySelector('#alerts .alert[data-id=\"scan/2/aborted\"] .dismiss').click()")
    assert "scan/2/aborted" not in alert_ids(browser)
    browser.refresh()  # dismissed for this browser, also after a reload
    wait_until(lambda: text(browser, "connection") == "live" and history(browser), PAGE_S, "the page again")
    assert "scan/2/aborted" not in alert_ids(browser)
    # Aborted is amber, and the producers that stopped for the abort are not in error, nor is any alert red.
    assert text(browser, "scan-outcome") == "aborted"
    assert browser.execute_script("return getComputedStyle(document.getElementById('scan-outcome')).backgroundColor"
                                  ) == "rgb(224, 163, 58)"
    assert not [r for r in table_rows(browser, "services") if r[0] == "producer" and r[2] == "error"], \
        table_rows(browser, "services")
    assert browser.execute_script("return document.querySelectorAll('#alerts .alert.error').length") == 0
    keep_screenshot(browser, tmp_path, "dashboard-aborted.png")

    # Scan 1 opens from the history: its images from its file, which stay while the page updates, until
    # "back to the latest".
    latest = wait_until(lambda: (p := panel(browser, 0))["loaded"] and p, PAGE_S, "the latest scan's images")
    browser.execute_script("document.querySelector('#history button.open-scan[data-scan=\"1\"]').click()")
    opened = wait_until(lambda: "from its file (history)" in text(browser, "images-scan")
                        and (p := panel(browser, 0))["scan"] == "1" and p["loaded"] and p, PAGE_S,
                        "scan 1's images opened from the history")
    shown = text(browser, "images-scan")
    assert shown.startswith("scan 1, 576 positions") and shown.endswith(scan_file_name(1)), shown
    assert float(opened["min"]) < float(opened["max"]) and opened["axis_x"][-1].startswith("scan x (positions)")
    assert browser.execute_script("return document.getElementById('images-latest').hidden") is False
    source = browser.execute_script("return document.querySelector('#panel-0 img').src")
    assert source.endswith(f"/images/{opened['name']}.png?scan=1"), source
    # The picture is scan 1's file's, drawn as the server draws any image.
    from sectorflow.dashboard.images_source import shown_from_file
    from sectorflow.dashboard.png import array_png

    file_view = shown_from_file(1, str(stack.run_dir.parent / "h5" / scan_file_name(1)))
    data, log_scale = file_view.picture(opened["name"])
    with urllib.request.urlopen(source, timeout=PAGE_S) as answer:
        assert answer.read() == array_png(data, log_scale, diverging=file_view.diverging(opened["name"]))
    before = text(browser, "updated")
    wait_until(lambda: text(browser, "updated") != before, PAGE_S, "a later update of the page")
    assert panel(browser, 0)["scan"] == "1" and "from its file (history)" in text(browser, "images-scan")
    browser.execute_script("document.getElementById('images-latest').click()")
    wait_until(lambda: "history" not in text(browser, "images-scan") and panel(browser, 0)["scan"] == latest["scan"],
               PAGE_S, "the latest scan's images again")
    assert browser.execute_script("return document.getElementById('images-latest').hidden") is True

    # The NodeGroups stop: an alert says none is registered, and scan 3 goes to disk; the page shows no
    # image of scan 2 under it, but says why there is none.
    stop_services([s for s in load_running(stack.run_dir) if s.name == "nodegroups"], SCAN_S)
    wait_until(lambda: "no-nodegroup" in alert_ids(browser), PAGE_S, "the alert that no NodeGroup is registered")
    acquire(processes, stack, 3)
    assert processes.supervisor.wait("acquire-3", SCAN_S) == 0
    wait_until(lambda: text(browser, "scan-number") == "3" and text(browser, "scan-outcome") == "on disk, not counted",
               PAGE_S, "scan 3 on disk on the page")
    assert text(browser, "images-none") == ("scan 3 went to disk, not counted (no NodeGroup registered): no images "
                                            "until it is replayed")
    # Not drawn at all (not merely flagged hidden): no panel takes room on the page.
    assert browser.execute_script(
        "return document.querySelector('#images-card .images').getBoundingClientRect().height") == 0
    assert browser.execute_script("return document.getElementById('images-none').getBoundingClientRect().height") > 0
    keep_screenshot(browser, tmp_path, "dashboard-fallback.png")

    kvstore = next(service for service in load_running(stack.run_dir) if service.name == "kvstore")
    os.kill(kvstore.pid, signal.SIGKILL)
    wait_until(lambda: text(browser, "connection") == "kvstore unreachable", PAGE_S,
               "the page to say the kvstore is unreachable")
    wait_until(lambda: alert_ids(browser) == ["kvstore-unreachable"], PAGE_S, "the unreachable kvstore's alert")
    assert "kvstore unreachable" in text(browser, "alerts")
    processes.sectorflow("kvstore", "--config", str(stack.path), name="kvstore-again")
    wait_until(lambda: text(browser, "connection") == "live", PAGE_S, "the page to show the restarted kvstore live")
    wait_until(lambda: "kvstore-unreachable" not in alert_ids(browser), PAGE_S, "the kvstore's alert to clear")
    wait_until(lambda: text(browser, "services").count("producer") == stack.config.n_receivers, PAGE_S,
               "every producer back in the services table (they publish again to the new server)")

    # A producer killed (no stop, no goodbye): its status expires and a red alert says it is lost.
    producer = next(service for service in load_running(stack.run_dir) if service.name == "producer-0")
    os.kill(producer.pid, signal.SIGKILL)
    lost = wait_until(lambda: [a for a in alert_ids(browser) if a.startswith("producer-lost/r0t")], PAGE_S,
                      "the alert that receiver 0's producer is lost")
    assert lost == [f"producer-lost/r0t{t}" for t in range(stack.config.receivers[0].threads)], lost
    assert "producer r0t0 lost: its status expired without a stop" in text(browser, "alerts")
    assert browser.execute_script(
        "return document.querySelector('#alerts .alert[data-id=\"producer-lost/r0t0\"]').classList.contains('error')")


def test_a_read_only_dashboard_refuses_to_act(stack: Stack) -> None:
    request = urllib.request.Request(stack.url + "api/scans", data=b'{"scan_number": 9, "scan_x": 2, "scan_y": 2}',
                                     method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    assert "read-only" in json.loads(refused.value.read())["error"]


def prometheus_query(port: int, query: str) -> list[dict]:
    url = f"http://{LOOPBACK}:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())["data"]["result"]
    except OSError:
        return []  # not serving yet


def test_prometheus_scrapes_the_scans_message_count(stack: Stack, processes: Processes, tmp_path: Path) -> None:
    if not Path(PROMETHEUS).exists():
        pytest.fail(f"needs Debian's prometheus ({PROMETHEUS}): make deps installs it")
    port = free_port(LOOPBACK)
    dashboard = f"{stack.config.dashboard.bind_host}:{stack.config.dashboard.port}"
    config = tmp_path / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sectorflow\n"
                      f"    static_configs:\n      - targets: ['{dashboard}']\n")
    processes.start(PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address={LOOPBACK}:{port}", name="prometheus")
    wait_until(lambda: prometheus_query(port, 'up{job="sectorflow"} == 1'), PAGE_S, "Prometheus to scrape /metrics")

    acquiring = acquire(processes, stack, 1)
    assert processes.supervisor.wait("acquire-1", SCAN_S) == 0, processes.output(acquiring)
    sectors = SCAN_SHAPE[0] * SCAN_SHAPE[1] * stack.config.n_receivers

    def sent() -> float | None:
        result = prometheus_query(port, 'sum(sectorflow_messages_total{service="producer"})')
        return float(result[0]["value"][1]) if result else None

    wait_until(lambda: sent() == sectors, PAGE_S, f"Prometheus to hold the producers' {sectors} messages")
    relayed = prometheus_query(port, 'sum(sectorflow_messages_total{service="aggregator"})')
    assert float(relayed[0]["value"][1]) == sectors
    wait_until(lambda: prometheus_query(port, "sectorflow_scan_duration_seconds_count == 1"), PAGE_S,
               "the scan's duration in the histogram")
    # The science of the scan: its positions and electrons, as many as its file holds.
    counted = read_counted_scan(tmp_path / "h5" / scan_file_name(1))  # the stack fixture's output
    electrons = sum(len(position) for position in counted.events)
    assert electrons > 0
    wait_until(lambda: prometheus_sum(port, "sectorflow_positions_counted_total") == len(counted.events), PAGE_S,
               f"Prometheus to hold the scan's {len(counted.events)} positions counted")
    assert prometheus_sum(port, "sectorflow_electrons_counted_total") == electrons
    # Each registered analysis the NodeGroups ran, by name: every counted frame went through it.
    for analysis in ("virtual_detectors", "centre_of_mass", "summed_pattern"):
        assert prometheus_sum(port, f'sectorflow_analysis_frames_total{{analysis="{analysis}"}}') == \
            len(counted.events), analysis
    per_frame = prometheus_query(port, "sectorflow_scan_electrons_per_frame")
    assert sum(float(series["value"][1]) for series in per_frame) > 0

    # A second scan: the producers' counters go on growing (their status numbers start again), and
    # every family of /metrics still follows Prometheus' rules.
    acquiring = acquire(processes, stack, 2, rate_hz=0.0)
    assert processes.supervisor.wait("acquire-2", SCAN_S) == 0, processes.output(acquiring)
    wait_until(lambda: sent() == 2 * sectors, PAGE_S, f"Prometheus to hold the producers' {2 * sectors} messages")
    wait_until(lambda: prometheus_query(port, "sectorflow_scan_duration_seconds_count == 2"), PAGE_S,
               "the second scan's duration in the histogram")
    with urllib.request.urlopen(stack.url + "metrics", timeout=10) as answer:
        assert_follows_prometheus_rules(answer.read().decode(), scans=2)
