"""The dashboard's small parts: the PNG encoder, the images' colour-bar spans and electrons per frame,
Slurm durations, the Prometheus collector."""

from __future__ import annotations

import io

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sectorflow.dashboard.metrics import make_registry
from sectorflow.dashboard.outline import mask_outline
from sectorflow.dashboard.images_source import ShownImages, with_magnitude
from sectorflow.dashboard.png import DIVERGING_RAMP, NOT_COUNTED_RGB, RAMP, colourise, encode_png
from sectorflow.dashboard.scan_groups import group_scans
from sectorflow.dashboard.sessions import slurm_seconds
from sectorflow.protocol import (
    OUTCOME_COMPLETE,
    SERVICE_STATES,
    NodeGroupRecord,
    ScanFileRecord,
    ScanRequestRecord,
    ServiceStatus,
    nodegroup_key,
    scan_file_key,
    scan_request_key,
    status_key,
)


def test_encode_png_gives_a_file_an_image_reader_reads_back_pixel_for_pixel() -> None:
    import matplotlib.image as image_module  # the plot extra, which make test installs

    rgb = np.random.default_rng(1).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    decoded = image_module.imread(io.BytesIO(encode_png(rgb)), format="png")
    assert decoded.shape == (7, 5, 3)
    assert np.array_equal(np.round(decoded * 255).astype(np.uint8), rgb)


def test_colourise_draws_uncounted_positions_apart_and_scales_up() -> None:
    values = np.array([[0.0, 1.0], [np.nan, 2.0]])
    rgb = colourise(values, scale=3)
    assert rgb.shape == (6, 6, 3)
    assert tuple(rgb[3, 0]) == NOT_COUNTED_RGB
    assert rgb[0, 0].sum() < rgb[0, 3].sum() < rgb[3, 3].sum()  # brighter with more electrons


def test_the_colour_bar_spans_each_image_from_its_smallest_to_largest_counted_value_on_the_ramp() -> None:
    com_x = np.array([[3.0, np.nan], [0.0, -1.0]])
    com_y = np.array([[4.0, np.nan], [1.0, 0.0]])
    shown = ShownImages(scan=1, scan_shape=(2, 2), images=with_magnitude({"com_x": com_x, "com_y": com_y}),
                        sums={"diffraction": np.array([[0.0, 6.0], [3.0, 0.0]])}, positions_counted=3)
    ranges = shown.ranges()
    assert ranges["com_x"] == [-1.0, 3.0] and ranges["com_magnitude"] == [1.0, 5.0]  # |(3, 4)| = 5
    assert ranges["diffraction"] == [0.0, 6.0]
    assert shown.electrons_per_frame == 3.0  # 9 electrons over 3 positions counted
    # The bar's ends are the colours of the smallest and largest value.
    rgb = colourise(np.array([[0.0, 1.0]]))
    assert (tuple(rgb[0, 0]), tuple(rgb[0, 1])) == (RAMP[0], RAMP[-1])
    nothing = ShownImages(scan=2, scan_shape=(1, 1), images={"bright_field": np.array([[np.nan]])})
    assert nothing.ranges() == {"bright_field": None} and nothing.electrons_per_frame is None


def test_the_centre_of_mass_is_drawn_on_a_diverging_map_centred_on_zero() -> None:
    from sectorflow.analysis import Context
    from sectorflow.analysis.builtin import CENTRE_OF_MASS

    com_x = np.array([[3.0, np.nan], [0.0, -1.0]])
    outputs = {o.name: o for o in CENTRE_OF_MASS.outputs(Context(frame_shape=(4, 4), centre_row=2.0, centre_col=2.0))}
    shown = ShownImages(scan=1, scan_shape=(2, 2), images={"com_x": com_x}, outputs=outputs)
    assert shown.diverging("com_x") and not shown.diverging("diffraction")
    # From -3 to +3: 0 in the middle of the bar, whatever the image's own extremes.
    assert shown.ranges()["com_x"] == [-3.0, 3.0]
    rgb = colourise(com_x, diverging=True)
    assert tuple(rgb[1, 0]) == DIVERGING_RAMP[2]  # 0: the ramp's middle, near white
    assert tuple(rgb[0, 0]) == DIVERGING_RAMP[-1] and tuple(rgb[0, 1]) == NOT_COUNTED_RGB
    assert rgb[1, 1, 2] > rgb[1, 1, 0]  # -1: bluish


@pytest.mark.parametrize(("text", "seconds"), [("1:30", 90.0), ("01:00:05", 3605.0), ("2-00:00:00", 172800.0),
                                               ("30", 1800.0), ("UNLIMITED", None), ("INVALID", None)])
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert slurm_seconds(text) == seconds


def samples_of(registry: CollectorRegistry) -> dict[str, list]:
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def scrape(entries: dict[str, bytes]) -> dict[str, list]:
    registry, durations = make_registry(lambda: entries, lambda: True)
    durations.observe(group_scans(entries))  # what the follower does at each update
    return samples_of(registry)


def test_metrics_carry_every_published_counter_with_service_receiver_and_nodegroup_labels() -> None:
    entries = {
        status_key("producer", "r2t0"): ServiceStatus(
            state="streaming", scan=4, messages=10, bytes=1000, updated_s=1.0,
            extra={"receiver": 2, "thread": 0, "spilled": 3, "messages_total": 25, "bytes_total": 2500,
                   "spilled_total": 7}).encode(),
        status_key("nodegroup", "ng-a"): ServiceStatus(
            state="idle", scan=4, messages=40, bytes=4000, updated_s=1.0,
            extra={"frames_complete": 9, "frames_incomplete": 1, "pool_slots_in_use": 5, "malformed": 2,
                   "malformed_header": 2, "frames_dropped": 5}).encode(),
        status_key("kvstore", "server"): ServiceStatus(state="idle", scan=0, messages=0, bytes=0, updated_s=1.0,
                                                       extra={"unauthorised": 6, "keys": 12}).encode(),
        status_key("libertem", "pc"): ServiceStatus(
            state="idle", scan=4, messages=4, bytes=400, updated_s=1.0,
            extra={"client_connected": True, "scans_served": 1, "positions_empty": 2, "frames_dropped": 0,
                   "clients_dropped": 1}).encode(),
        nodegroup_key("ng-a"): NodeGroupRecord(uid="ng-a", host="h", ports=[1], node="n", rank=0,
                                               status="idle").encode(),
        scan_request_key(4): ScanRequestRecord(scan_number=4, scan_x=2, scan_y=2, source="simulator",
                                               routing=["ng-a"], producer_threads=[1], requested_s=10.0).encode(),
        scan_file_key(4): ScanFileRecord(outcome=OUTCOME_COMPLETE, path="/f.h5", extra_paths=[], positions=4,
                                         frames_written=4, positions_missing=0, sectors_counted=[4], reason="",
                                         written_s=13.0).encode(),
    }
    samples = scrape(entries)
    producer = {"service": "producer", "name": "r2t0", "receiver": "2"}
    group = {"service": "nodegroup", "name": "ng-a", "nodegroup": "ng-a"}
    # A producer thread's counters take every scan it sent; its current scan's numbers are gauges.
    assert (producer, 25.0) in samples["sectorflow_messages_total"]
    assert (producer, 2500.0) in samples["sectorflow_bytes_total"]
    assert (producer, 7.0) in samples["sectorflow_spilled_sectors_total"]
    assert samples["sectorflow_producer_scan_messages"] == [(producer, 10.0)]
    assert samples["sectorflow_producer_scan_spilled_sectors"] == [(producer, 3.0)]
    assert (group, 4000.0) in samples["sectorflow_bytes_total"]
    assert (group, 9.0) in samples["sectorflow_frames_complete_total"]
    assert (group, 1.0) in samples["sectorflow_frames_incomplete_total"]
    assert (group, 5.0) in samples["sectorflow_pool_frames"]
    bridge = {"service": "libertem", "name": "pc"}
    assert (bridge, 4.0) in samples["sectorflow_messages_total"]  # positions sent to LiberTEM
    assert samples["sectorflow_libertem_positions_empty_total"] == [(bridge, 2.0)]
    assert samples["sectorflow_libertem_clients_dropped_total"] == [(bridge, 1.0)]
    # The bridge's, not the NodeGroup's field of the same name: a service's own counters are its own.
    assert samples["sectorflow_libertem_frames_dropped_total"] == [(bridge, 0.0)]
    assert ({**group, "kind": "header"}, 2.0) in samples["sectorflow_refused_messages_total"]
    assert ({"service": "kvstore", "name": "server", "kind": "unauthorised"},
            6.0) in samples["sectorflow_refused_messages_total"]
    # A state set: one series per state, 1 for the one the service is in.
    states = {labels["state"]: value for labels, value in samples["sectorflow_service_state"]
              if labels["name"] == "r2t0"}
    assert states == {state: float(state == "streaming") for state in SERVICE_STATES}
    assert samples["sectorflow_nodegroups_registered"] == [({}, 1.0)]
    assert samples["sectorflow_scan_duration_seconds_count"] == [({}, 1.0)]
    assert samples["sectorflow_scan_duration_seconds_sum"] == [({}, 3.0)]


def test_the_shipped_grafana_dashboard_queries_only_metrics_the_dashboard_publishes() -> None:
    import json
    import re

    from sectorflow.configs import CONFIG_DIR
    from sectorflow.dashboard.metrics import COUNTERS, GAUGES

    board = json.loads((CONFIG_DIR / "grafana" / "sectorflow.json").read_text())
    published = {"sectorflow_messages_total", "sectorflow_bytes_total", "sectorflow_refused_messages_total",
                 "sectorflow_nodegroups_registered", "sectorflow_kvstore_reachable",
                 "sectorflow_scan_duration_seconds_bucket"}
    published |= {f"sectorflow_{name}_total" for name, _ in COUNTERS.values()}
    published |= {f"sectorflow_{name}" for name, _ in GAUGES.values()}
    queried = {name for panel in board["panels"] for target in panel["targets"]
               for name in re.findall(r"sectorflow_[a-z_]+", target["expr"])}
    assert queried and queried <= published, queried - published


def finished_scan(scan: int, requested_s: float, written_s: float) -> dict[str, bytes]:
    return {
        scan_request_key(scan): ScanRequestRecord(scan_number=scan, scan_x=1, scan_y=1, source="simulator",
                                                  routing=["ng-a"], producer_threads=[1],
                                                  requested_s=requested_s).encode(),
        scan_file_key(scan): ScanFileRecord(outcome=OUTCOME_COMPLETE, path="/f.h5", extra_paths=[], positions=1,
                                            frames_written=1, positions_missing=0, sectors_counted=[1], reason="",
                                            written_s=written_s).encode(),
    }


def test_scan_durations_count_each_scan_once_even_one_that_came_and_left_the_listed_scans_between_scrapes() -> None:
    registry, durations = make_registry(lambda: {}, lambda: True)
    replica: dict[str, bytes] = {}
    for scan, requested_s, written_s in ((1, 10.0, 12.0), (2, 20.0, 25.0), (3, 30.0, 38.0), (3, 40.0, 41.0)):
        replica.update(finished_scan(scan, requested_s, written_s))  # the last: scan 3 run again
        for _update in range(2):  # the follower's updates list the newest two scans
            durations.observe(group_scans(replica).newest(2))
    samples = samples_of(registry)  # one scrape after all: scan 1 is not listed any more
    assert samples["sectorflow_scan_duration_seconds_count"] == [({}, 4.0)]  # 2 s, 5 s, 8 s, 1 s
    assert samples["sectorflow_scan_duration_seconds_sum"] == [({}, 16.0)]


def test_a_mask_detectors_outline_is_the_edges_of_its_pixels_and_is_left_out_when_too_long() -> None:
    mask = np.zeros((4, 5), bool)
    mask[1:3, 1:4] = True  # rows 1-2, columns 1-3: the square [1, 3) x [1, 4)
    assert mask_outline(mask) == "M1 1H4 M1 3H4 M1 1V3 M4 1V3"
    scattered = np.random.default_rng(5).random((128, 128)) < 0.5
    assert mask_outline(scattered) is None  # about 16,000 runs of edges: more than a page draws at every update


def test_metrics_name_the_active_kvstore_server_and_aggregator_and_count_failovers_and_takeovers() -> None:
    samples = scrape({
        status_key("kvstore", "server"): ServiceStatus(
            state="idle", scan=0, messages=0, bytes=0, updated_s=1.0,
            extra={"pair": "backup", "pair_state": "active", "peer": "127.0.0.1:7001", "peer_state": "passive",
                   "failovers": 1, "splits": 3}).encode(),
        status_key("aggregator", "active"): ServiceStatus(
            state="streaming", scan=0, messages=0, bytes=0, updated_s=1.0,
            extra={"holder": "hostb:42:ab", "host": "hostb", "pid": 42, "takeovers": 2}).encode(),
    })
    assert samples["sectorflow_active"] == [({"service": "aggregator", "name": "hostb:42"}, 1.0),
                                            ({"service": "kvstore", "name": "backup"}, 1.0)]
    assert samples["sectorflow_kvstore_failovers_total"] == [({"service": "kvstore", "name": "server"}, 1.0)]
    assert samples["sectorflow_kvstore_splits_total"] == [({"service": "kvstore", "name": "server"}, 3.0)]
    assert samples["sectorflow_aggregator_takeovers_total"] == [
        ({"service": "aggregator", "name": "active"}, 2.0)]


def test_a_single_kvstore_server_is_no_active_series() -> None:
    samples = scrape({status_key("kvstore", "server"): ServiceStatus(
        state="idle", scan=0, messages=0, bytes=0, updated_s=1.0, extra={"keys": 3}).encode()})
    assert "sectorflow_active" not in samples and "sectorflow_kvstore_failovers_total" not in samples
