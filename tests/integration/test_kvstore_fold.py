"""A finished scan's parts folded into one summary by a real `sectorflow kvstore`
(kvstore/SPEC.md, "Folding"), written as the services write them, and what a peer can do about it:
the summary is the server's alone (a peer's is refused and counted), a running scan is never folded
or erased by the retention, and the oldest summaries go first past `[kvstore] scans_kept`."""

from __future__ import annotations

from collections.abc import Callable

from kvstore_support import (  # noqa: F401  (fixtures)
    KvServer,
    RawPeer,
    clients,
    raw_peer,
    server_status,
    start_kvstore,
)
from support import Processes, wait_until

from sectorflow.kvstore import Client
from sectorflow.live.subscriber import InstrumentLookup
from sectorflow.operations.scan_account import COMPLETE, PENDING, account, records_of
from sectorflow.protocol import (
    STATE_FINISHED,
    STATE_STREAMING,
    ProducerScanRecord,
    RelayScanRecord,
    ScanFileRecord,
    ScanRequestRecord,
    scan_file_key,
    scan_prefix,
    scan_producer_key,
    scan_relay_key,
    scan_request_key,
)
from sectorflow.protocol.scan_instrument import ScanInstrument, instrument_key
from sectorflow.protocol.scan_life import ScanClaim, claim_key
from sectorflow.protocol.scan_summary import decode_parts, encode, summary_key

SYNC_S = 10.0  # deadline of waits on replication; a failure guard, not a speed requirement
POSITIONS = 16  # a 4 x 4 scan, one receiver, one producer thread, one NodeGroup


def request(scan: int, requested_s: float = 100.0) -> bytes:
    return ScanRequestRecord(scan_number=scan, scan_x=4, scan_y=4, source="simulator", routing=["ng-a"],
                             producer_threads=[1], requested_s=requested_s).encode()


def producer(state: str, sent: int = POSITIONS, updated_s: float = 101.0) -> bytes:
    return ProducerScanRecord(receiver=0, thread=0, state=state, routing=["ng-a"], counts={"ng-a": POSITIONS},
                              owned=POSITIONS, lost_upstream=0, sent=sent, spilled=0, spill_file="", partial=False,
                              error="", updated_s=updated_s).encode()


def relay(forwarded: int = POSITIONS) -> bytes:
    return RelayScanRecord(thread=0, complete=True, forwarded={"ng-a": forwarded}, lost={}, dead=[],
                           updated_s=101.5).encode()


def file_record(counted: int = POSITIONS, written_s: float = 103.0) -> bytes:
    return ScanFileRecord(outcome="complete" if counted == POSITIONS else "incomplete",
                          path="/data/FOURD_counted.h5", extra_paths=[], positions=POSITIONS, frames_written=counted,
                          positions_missing=POSITIONS - counted, sectors_counted=[counted], reason="",
                          written_s=written_s).encode()


def counter(observer: Client, name: str) -> int:
    status = server_status(observer)
    return 0 if status is None else int(status.extra.get(name, 0))


def put(peer: RawPeer, observer: Client, key: str, body: bytes) -> None:
    """Writes ``key`` and waits until the server took it (it is in the replica, or the scan was folded)."""
    scan_summary = summary_key(int(key.split("/")[1]))

    def taken() -> bool:
        if observer.get(key) == body:
            return True
        summary = observer.get(scan_summary)
        part = key[len(scan_prefix(int(key.split("/")[1]))):]
        return summary is not None and decode_parts(summary).get(part) == body and observer.get(key) is None

    peer.kvset_until(key.encode(), body, taken, f"{key} taken")


def finish(peer: RawPeer, observer: Client, scan: int, counted: int = POSITIONS) -> dict[str, bytes]:
    """Writes a whole scan's parts as its services would, in their order; returns them by key."""
    parts = {claim_key(scan): ScanClaim("test:1:x", 99.0).encode(), scan_request_key(scan): request(scan),
             scan_producer_key(scan, 0, 0): producer(STATE_FINISHED), scan_relay_key(scan, 0): relay(),
             scan_file_key(scan): file_record(counted)}
    for key, body in parts.items():
        put(peer, observer, key, body)
    return parts


def test_a_finished_scan_folds_into_one_summary_whose_account_equals_the_parts(
        make_config: Callable, processes: Processes, clients: Callable[..., Client]) -> None:
    server = start_kvstore(make_config, processes)
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    peer = RawPeer(server.port)
    try:
        # Not over: the request and a producer still streaming stay as they are.
        put(peer, observer, scan_request_key(1), request(1))
        put(peer, observer, scan_producer_key(1, 0, 0), producer(STATE_STREAMING, sent=5))
        assert observer.get(summary_key(1)) is None
        running = account(records_of(observer.subtree(scan_prefix(1)), 1))
        assert running.outcome == PENDING
        parts = finish(peer, observer, 1, counted=POSITIONS - 2)
        wait_until(lambda: set(observer.subtree(scan_prefix(1))) == {summary_key(1)}, SYNC_S, "scan 1 folded")
        folded = observer.subtree(scan_prefix(1))
        assert decode_parts(folded[summary_key(1)]) == {key[len(scan_prefix(1)):]: body for key, body in parts.items()}
        from_parts, from_summary = account(records_of(parts, 1)), account(records_of(folded, 1))
        assert from_summary.outcome == from_parts.outcome != PENDING
        assert from_summary.line() == from_parts.line() and from_summary.breakdown() == from_parts.breakdown()
        assert "14 counted + 0 spilled + 2 missing = 16 sectors" in from_summary.line()

        # A part written after the fold (a late record) is folded in, replacing the old one.
        put(peer, observer, scan_relay_key(1, 0), relay(forwarded=POSITIONS - 1))
        wait_until(lambda: decode_parts(observer.get(summary_key(1)) or b"\x80").get("aggregator/t0") ==
                   relay(forwarded=POSITIONS - 1) and observer.get(scan_relay_key(1, 0)) is None, SYNC_S,
                   "the late relay record folded in")

        # The number stays claimed: a create of its folded claim is refused.
        before = counter(observer, "creates_refused")
        peer.kvset_until(claim_key(1).encode(), ScanClaim("other:2:y", 200.0).encode(),
                         lambda: counter(observer, "creates_refused") > before, "the claim refused",
                         properties=b"create=1\n")
        assert observer.get(claim_key(1)) is None

        # A replay: the request written again is a new run, kept apart until that run is over.
        put(peer, observer, scan_request_key(1), request(1, requested_s=300.0))
        put(peer, observer, scan_producer_key(1, 0, 0), producer(STATE_STREAMING, sent=0, updated_s=301.0))
        assert observer.get(scan_request_key(1)) is not None and observer.get(summary_key(1)) is not None
        put(peer, observer, scan_producer_key(1, 0, 0), producer(STATE_FINISHED, updated_s=302.0))
        put(peer, observer, scan_file_key(1), file_record(written_s=303.0))
        wait_until(lambda: set(observer.subtree(scan_prefix(1))) == {summary_key(1)}, SYNC_S, "the replay folded")
        assert account(records_of(observer.subtree(scan_prefix(1)), 1)).outcome == COMPLETE
        # The server publishes its counters at its next heartbeat.
        wait_until(lambda: counter(observer, "scans_folded") == 3, SYNC_S, "three folds counted")
    finally:
        peer.close()


def test_a_summary_from_a_peer_is_refused_and_counted_and_the_running_scan_keeps_its_parts(
        make_config: Callable, processes: Processes, clients: Callable[..., Client]) -> None:
    server = start_kvstore(make_config, processes)
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    peer = RawPeer(server.port)
    try:
        put(peer, observer, scan_request_key(4), request(4))
        put(peer, observer, scan_producer_key(4, 0, 0), producer(STATE_STREAMING, sent=3))
        # What a hostile folder sends: a summary saying the running scan is complete, which would
        # erase its parts.
        forged = encode({"request": request(4), "producer/r0t0": producer(STATE_FINISHED), "file": file_record()},
                        104.0)
        peer.kvset_until(summary_key(4).encode(), forged, lambda: counter(observer, "refused_fold") >= 1,
                         "the forged summary refused")
        finish(peer, observer, 5)
        wait_until(lambda: observer.get(summary_key(5)) is not None, SYNC_S, "scan 5 folded")
        # Nor may a peer erase a folded scan's summary.
        peer.kvset_until(summary_key(5).encode(), b"", lambda: counter(observer, "refused_fold") >= 2,
                         "the deletion refused")
        assert observer.get(summary_key(4)) is None and observer.get(summary_key(5)) is not None
        assert observer.get(scan_request_key(4)) == request(4)
        assert account(records_of(observer.subtree(scan_prefix(4)), 4)).outcome == PENDING
        # Each refused write is counted: kvset_until may have sent one again before the count was seen.
        status = server_status(observer)
        assert status is not None and status.extra["refused_fold"] >= 2
        # The daemon logs its new refusals once a second.
        wait_until(lambda: "summary, which only the server folds" in server.log() and
                   "only the kvstore server writes a scan's summary" in server.log(), SYNC_S, "the refusal logged")
    finally:
        peer.close()


def test_past_scans_kept_the_oldest_summaries_go_first_and_a_running_scan_stays_whole(
        make_config: Callable, processes: Processes, clients: Callable[..., Client]) -> None:
    server = start_kvstore(make_config, processes, kvstore={"scans_kept": 2})
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    peer = RawPeer(server.port)
    try:
        # The oldest scan of all is still running: the retention counts summaries only.
        put(peer, observer, scan_request_key(1), request(1))
        put(peer, observer, scan_producer_key(1, 0, 0), producer(STATE_STREAMING, sent=3))
        for scan in range(2, 7):
            finish(peer, observer, scan)
            wait_until(lambda scan=scan: observer.get(summary_key(scan)) is not None, SYNC_S, f"scan {scan} folded")
        wait_until(lambda: counter(observer, "summaries_dropped") == 3, SYNC_S, "three summaries dropped")
        kept = {scan for scan in range(2, 7) if observer.get(summary_key(scan)) is not None}
        assert kept == {5, 6}
        assert not any(observer.subtree(scan_prefix(scan)) for scan in (2, 3, 4))
        assert set(observer.subtree(scan_prefix(1))) == {scan_request_key(1), scan_producer_key(1, 0, 0)}
        wait_until(lambda: counter(observer, "scans_summarised") == 2, SYNC_S, "two scans summarised")
    finally:
        peer.close()


def test_a_live_view_that_joins_after_the_fold_finds_the_scans_instrument_settings_in_its_summary(
        make_config: Callable, processes: Processes, clients: Callable[..., Client]) -> None:
    """``sectorflow view`` of a short scan under load: its replica may sync only after the scan was
    over and folded, when ``scans/<n>/instrument`` is a part of the summary, not a key."""
    server = start_kvstore(make_config, processes)
    observer = clients(server.config)
    assert observer.wait_synced(SYNC_S)
    peer = RawPeer(server.port)
    settings = ScanInstrument.of(server.config.instrument, {"scan_step_nm": 2.5, "convergence_mrad": 25.0})
    try:
        put(peer, observer, scan_request_key(1), request(1))
        put(peer, observer, instrument_key(1), settings.encode())
        finish(peer, observer, 1)
        wait_until(lambda: set(observer.subtree(scan_prefix(1))) == {summary_key(1)}, SYNC_S, "scan 1 folded")
        lookup = InstrumentLookup(server.config)
        try:
            known = lookup.of(1, wait_s=SYNC_S)
        finally:
            lookup.close()
        assert known == settings.known()
        assert known["scan_step"] == {"value": 2.5, "units": "nm", "source": "acquire"}
    finally:
        peer.close()
