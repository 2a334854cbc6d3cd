"""The LiberTEM bridge's parts (libertem_bridge/SPEC.md): its bytes are the asi_tpx3 package's own
reference encoder's, positions leave in order with the missing ones empty and counted, chunks fit
the receiver's slots, and a listening address beyond loopback is refused with one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sectorflow.errors import UsageError
from sectorflow.libertem_bridge import asi_wire, parse_listen
from sectorflow.libertem_bridge.bridge import _chunks
from sectorflow.libertem_bridge.in_order import InOrder, Released


def random_frames(seed: int, frames: int, pixels: int, most: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, most + 1, frames)
    counts[1] = 0  # an empty frame among them
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.uint32)
    indices = np.concatenate([np.sort(rng.choice(pixels, c, replace=False)) for c in counts]).astype(np.uint32)
    return indptr, indices


def test_the_bridges_bytes_equal_the_packages_reference_encoder() -> None:
    import libertem_asi_tpx3 as tpx3  # the lock's `libertem` group, which `make test` installs
    # make_sim_data writes one acquisition of sequence 1, 512 x 512 pixels, one chunk, u32 arrays.
    nav_shape = (5, 7)
    indptr, indices = random_frames(3, 35, 512 * 512, 40)
    reference = bytes(tpx3.make_sim_data(nav_shape, indptr.tolist(), indices.tolist(), [1] * len(indices)))
    ours = b"".join([asi_wire.acquisition_start(1, nav_shape, (512, 512)), asi_wire.scan_start(1),
                     *asi_wire.array_chunk(indptr, indices), asi_wire.scan_end(1), asi_wire.acquisition_end(1)])
    assert ours == reference


def test_a_shape_the_header_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="a frame of 70000 x 4 does not fit the asi_tpx3 header"):
        asi_wire.acquisition_start(1, (2, 2), (70000, 4))


def test_chunks_fit_the_bound_and_carry_every_frame_in_order() -> None:
    indptr, indices = random_frames(5, 500, 576 * 576, 60)
    released = Released(0, indptr, indices, 0)
    chunks = list(_chunks(released, 4096))
    assert len(chunks) > 1
    for chunk_indptr, chunk_indices in chunks:
        assert asi_wire.chunk_bytes(len(chunk_indptr) - 1, len(chunk_indices)) <= 4096
        assert chunk_indptr[0] == 0 and chunk_indptr[-1] == len(chunk_indices)
    lengths = np.concatenate([np.diff(p) for p, _ in chunks])
    np.testing.assert_array_equal(lengths, np.diff(indptr))
    np.testing.assert_array_equal(np.concatenate([i for _, i in chunks]), indices)


def test_a_frame_larger_than_a_chunk_goes_alone() -> None:
    indptr = np.array([0, 1, 2001, 2002], np.uint32)
    chunks = list(_chunks(Released(0, indptr, np.arange(2002, dtype=np.uint32), 0), 1024))
    assert [len(p) - 1 for p, _ in chunks] == [1, 1, 1]


def events(*pixels: int) -> np.ndarray:
    return np.array(pixels, np.uint32)


def test_frames_leave_in_position_order_whatever_order_they_come_in() -> None:
    order = InOrder(positions=4, empty_after_s=1.0)
    order.add(2, events(9), now=0.0)
    order.add(1, events(5, 6), now=0.0)
    assert order.release(now=0.1, closed=False) is None  # position 0 has not come, nor waited long
    order.add(0, events(), now=0.2)
    order.add(3, events(1), now=0.2)
    released = order.release(now=0.3, closed=False)
    assert released is not None and released.first == 0 and released.empty == 0
    assert released.indptr.tolist() == [0, 0, 2, 3, 4] and released.indices.tolist() == [5, 6, 9, 1]
    assert order.done and order.empty == 0 and order.late == 0


def test_a_position_that_never_comes_goes_empty_after_the_latency_and_is_counted() -> None:
    order = InOrder(positions=5, empty_after_s=2.0)
    order.add(0, events(1), now=0.0)
    order.add(2, events(3), now=0.0)  # position 1 is missing from here on
    first = order.release(now=1.9, closed=False)
    assert first is not None and first.indptr.tolist() == [0, 1]
    assert order.release(now=1.95, closed=False) is None
    given_up = order.release(now=2.0, closed=False)
    assert given_up is not None and given_up.first == 1 and given_up.empty == 1
    assert given_up.indptr.tolist() == [0, 0, 1] and given_up.indices.tolist() == [3]
    # It comes after all: too late, left out and counted.
    order.add(1, events(7), now=2.1)
    assert order.late == 1
    # The scan ends with positions 3 and 4 never come: both go empty.
    end = order.release(now=2.2, closed=True)
    assert end is not None and end.indptr.tolist() == [0, 0, 0] and end.empty == 2
    assert order.done and order.empty == 3


def test_a_position_twice_or_outside_the_scan_is_counted_late() -> None:
    order = InOrder(positions=2, empty_after_s=1.0)
    order.add(1, events(1), now=0.0)
    order.add(1, events(2), now=0.0)
    order.add(2, events(3), now=0.0)
    assert order.late == 2


@pytest.mark.parametrize("address", ["10.1.2.3:8283", "0.0.0.0:8283", "beamline-pc:8283"])
def test_a_listening_address_beyond_loopback_is_refused_without_allow_remote(address: str) -> None:
    with pytest.raises(UsageError, match="is not a loopback address, and the asi_tpx3 stream has no authentication"):
        parse_listen(address, allow_remote=False)
    assert parse_listen(address, allow_remote=True)[1] == 8283


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.1:port", ":8283", "127.0.0.1:70000"])
def test_a_listening_address_that_is_not_host_port_is_refused(address: str) -> None:
    with pytest.raises(UsageError, match="is not HOST:PORT"):
        parse_listen(address, allow_remote=False)


@pytest.mark.parametrize(("address", "allow_remote"), [("10.1.2.3:8283", True), ("127.0.0.1:8283", True),
                                                       ("0.0.0.0:8283", False)])
def test_with_security_on_the_bridge_listens_on_loopback_only(address: str, allow_remote: bool) -> None:
    # LiberTEM's client carries no key: the bridge knows who it is only by its socket on this host.
    with pytest.raises(UsageError, match=r"with \[security\] on the bridge serves loopback only .*\(ssh -L"):
        parse_listen(address, allow_remote=allow_remote, secured=True)
    assert parse_listen("127.0.0.1:8283", allow_remote=False, secured=True) == ("127.0.0.1", 8283)


def test_loopback_addresses_are_accepted() -> None:
    assert parse_listen("127.0.0.1:0", allow_remote=False) == ("127.0.0.1", 0)
    assert parse_listen("[::1]:8283", allow_remote=False) == ("::1", 8283)
    assert parse_listen("localhost:8283", allow_remote=False) == ("localhost", 8283)


def test_the_command_refuses_a_remote_address_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from sectorflow.cli import main

    assert main(["libertem", "--listen", "192.0.2.7:8283"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sectorflow libertem: error: --listen '192.0.2.7:8283': 192.0.2.7 is not a loopback address")
    assert len(err.strip().splitlines()) == 1


def test_a_scan_holds_a_bounded_number_of_frames_and_counts_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    from sectorflow.libertem_bridge import in_order

    monkeypatch.setattr(in_order, "MAX_HELD_FRAMES", 3)
    order = InOrder(positions=10, empty_after_s=1.0)
    for position in range(1, 6):  # position 0 missing: nothing can go yet
        order.add(position, events(position), now=0.0)
    assert len(order.pending) == 3 and order.late == 2


def test_the_status_says_what_the_bridge_did_and_the_last_scan_only_once_there_is_one() -> None:
    from sectorflow.libertem_bridge import AcquisitionServer, BridgeCounters
    from sectorflow.libertem_bridge.server import Delivery
    from sectorflow.libertem_bridge.status import bridge_status

    server = AcquisitionServer("127.0.0.1", 0, 1 << 20)
    try:
        fresh = bridge_status(BridgeCounters(), server, None)
        assert (fresh.state, fresh.scan, fresh.messages) == ("idle", 0, 0)
        assert fresh.extra["client_connected"] is False and fresh.extra["listen"] == f"127.0.0.1:{server.address[1]}"
        assert "last_scan" not in fresh.extra and "last_scan_empty" not in fresh.extra
        counters = BridgeCounters(scans_served=1, positions_empty=2, last_scan=4, last_scan_served=True,
                                  last_scan_positions=12, last_scan_empty=2)
        server.totals.delivered = Delivery(frames=10, positions=12)  # what its clients read
        streaming = bridge_status(counters, server, 5)
        assert (streaming.state, streaming.scan, streaming.messages) == ("streaming", 5, 12)
        assert {k: streaming.extra[k] for k in ("last_scan", "last_scan_served", "last_scan_empty", "frames_dropped",
                                                "clients_dropped")} == {
            "last_scan": 4, "last_scan_served": True, "last_scan_empty": 2, "frames_dropped": 0, "clients_dropped": 0}
        assert bridge_status(counters, server, None).scan == 4
    finally:
        server.close()


def test_the_status_is_named_after_the_viewer_key_or_the_operator_key_standing_in(make_config, tmp_path: Path) -> None:
    from keyring import Keyring

    from sectorflow.errors import SectorflowError
    from sectorflow.libertem_bridge.status import status_name

    keyring = Keyring(tmp_path / "keys")
    config, _ = make_config(security={"enabled": True, "key_dir": str(keyring.beamline)})
    assert status_name(config) == "bob"
    (keyring.beamline / "viewer" / "bob.key_secret").unlink()  # a host that may command may also look
    assert status_name(config) == "alice"
    (keyring.beamline / "operator" / "alice.key").unlink()
    with pytest.raises(SectorflowError, match="operator/: no public certificate"):
        status_name(config)
