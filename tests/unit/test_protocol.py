"""The wire contracts: round trips across the C++ codec and plain msgpack, and every rejection."""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import pytest

from sectorflow.protocol import (
    DATA_HEADER_VERSION,
    DataHeader,
    Geometry,
    InfoMessage,
    ProtocolError,
    check_payload,
    decode_data,
    decode_header,
    decode_info,
    encode_header,
    encode_info,
    peek_frame,
)

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN_HEADER = DataHeader(
    scan_number=7, frame_number=5001234, sector=3, scan_x=128, scan_y=64, position_x=82, position_y=9, thread_id=2
)
GOLDEN_INFO = InfoMessage(
    scan_number=7, receiver=3, thread_id=2, scan_x=128, scan_y=64,
    routing=["ng-a", "ng-b"], counts={"ng-a": 2048, "ng-b": 2047},
)
FIELDS = ["version", "scan_number", "frame_number", "sector", "scan_x", "scan_y", "position_x", "position_y",
          "thread_id"]


def header_list(**changes: object) -> list:
    values = dict(zip(FIELDS, [DATA_HEADER_VERSION, 7, 5001234, 3, 128, 64, 82, 9, 2]))
    values.update(changes)
    return [values[f] for f in FIELDS]


def info_dict(**changes: object) -> dict:
    info = {"version": 1, "kind": "info", "scan_number": 7, "receiver": 3, "thread_id": 2, "scan_x": 128,
            "scan_y": 64, "routing": ["ng-a", "ng-b"], "counts": {"ng-a": 2048, "ng-b": 2047}}
    info.update(changes)
    return info


def test_header_encoded_by_cpp_reads_as_plain_msgpack_array() -> None:
    assert msgpack.unpackb(encode_header(GOLDEN_HEADER)) == header_list()


def test_header_from_plain_msgpack_decodes_in_cpp() -> None:
    assert decode_header(msgpack.packb(header_list())) == GOLDEN_HEADER


def test_golden_header_bytes_decode_and_reencode_identically() -> None:
    golden = (DATA / "data_header_v2.bin").read_bytes()
    assert decode_header(golden) == GOLDEN_HEADER
    assert encode_header(GOLDEN_HEADER) == golden


def test_a_relays_header_carries_its_run_as_version_3() -> None:
    # What a relay thread sends the NodeGroups (SPEC.md, "Runs of a scan at the NodeGroups").
    golden = (DATA / "data_header_v3.bin").read_bytes()
    assert msgpack.unpackb(golden) == [3, *header_list()[1:], 305419896]
    header = decode_header(golden)
    assert header.run == 305419896 and peek_frame(golden) == (7, 5001234)
    assert encode_header(header) == golden
    assert decode_header((DATA / "data_header_v2.bin").read_bytes()).run == 0


def test_peek_frame_reads_scan_and_frame_number() -> None:
    assert peek_frame(encode_header(GOLDEN_HEADER)) == (7, 5001234)


def test_decode_accepts_any_buffer_without_copying_semantics() -> None:
    assert decode_header(memoryview(encode_header(GOLDEN_HEADER))) == GOLDEN_HEADER


def test_header_position_is_scan_major() -> None:
    assert GOLDEN_HEADER.position == 9 * 128 + 82


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\xc1", "not valid msgpack"),
        (b"", "not valid msgpack"),
        (msgpack.packb({"version": 1}), "expected a msgpack array, got a map"),
        (msgpack.packb(header_list()[:-1]), "expected 9 or 10 fields, got 8"),
        (msgpack.packb(header_list() + [0, 0]), "expected 9 or 10 fields, got 11"),
        # Ten fields are a version-3 header (with the run), nine a version-2 one.
        (msgpack.packb(header_list() + [0]), "field 'version' (index 0): expected 3, got 2 (in a header of 10 fields)"),
        (msgpack.packb(header_list(version=3)), "field 'version' (index 0): expected 2, got 3 (in a header of 9 fields)"),
        (msgpack.packb(header_list(version=3) + [2**32]), "field 'run' (index 9): expected a value below 2^32"),
        (msgpack.packb(header_list(version=1)), "field 'version' (index 0): expected 2, got 1"),
        (msgpack.packb(header_list(scan_number="7")), "field 'scan_number' (index 1): expected an unsigned integer, got a string"),
        (msgpack.packb(header_list(frame_number=-1)), "field 'frame_number' (index 2): expected an unsigned integer, got a negative integer"),
        (msgpack.packb(header_list(sector=1.0)), "field 'sector' (index 3): expected an unsigned integer, got a float"),
        (msgpack.packb(header_list(scan_x=2**32)), "field 'scan_x' (index 4): expected a value below 2^32"),
        (msgpack.packb(header_list(scan_y=0)), "scan 7, frame 5001234, sector 3: scan shape 128 x 0 outside 1..65535 per side"),
        (msgpack.packb(header_list(scan_y=65536)), "scan shape 128 x 65536 outside 1..65535 per side"),
        (msgpack.packb(header_list(position_x=128)), "probe position (128, 9) lies outside the scan of 128 x 64"),
        (msgpack.packb(header_list()) + b"\x00", "1 bytes after the msgpack object"),
        # Five bytes that declare an array of 2^32 - 1 elements: refused before anything is allocated.
        (b"\xdd\xff\xff\xff\xff", "not valid msgpack within its bounds"),
        (msgpack.packb(header_list(thread_id=None)), "field 'thread_id' (index 8): expected an unsigned integer, got nil"),
    ],
)
def test_decoder_rejects_malformed_headers_naming_the_field(frame: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)):
        decode_header(frame)


def test_decode_data_checks_the_header_against_geometry_limits_and_port() -> None:
    geometry = Geometry(576, 576, 144, 576, 2)
    header = encode_header(GOLDEN_HEADER)
    assert decode_data(header, geometry.sector_bytes, geometry, 128 * 64, 3) == GOLDEN_HEADER
    with pytest.raises(ProtocolError, match=re.escape("more than the 8191 positions allowed ([limits] max_scan_positions)")):
        decode_data(header, geometry.sector_bytes, geometry, 128 * 64 - 1, 3)
    with pytest.raises(ProtocolError, match=re.escape("came on the port of sector 2 (receiver r sends sector r only)")):
        decode_data(header, geometry.sector_bytes, geometry, 128 * 64, 2)
    with pytest.raises(ProtocolError, match=re.escape("payload of 1 bytes, expected 165888")):
        decode_data(header, 1, geometry, 128 * 64, 3)


def test_peek_rejects_a_wrong_version_too() -> None:
    with pytest.raises(ProtocolError, match="expected 2, got 9"):
        peek_frame(msgpack.packb(header_list(version=9)))


def test_protocol_error_is_a_value_error() -> None:
    assert issubclass(ProtocolError, ValueError)


def test_payload_of_the_geometry_size_is_accepted() -> None:
    check_payload(GOLDEN_HEADER, 144 * 576 * 2, Geometry(576, 576, 144, 576, 2))


def test_payload_of_the_wrong_size_names_scan_frame_sector_and_sizes() -> None:
    with pytest.raises(ProtocolError) as error:
        check_payload(GOLDEN_HEADER, 1000, Geometry(576, 576, 144, 576, 2))
    assert str(error.value) == (
        "scan 7, frame 5001234, sector 3: payload of 1000 bytes, expected 165888 (144 x 576 pixels of 2 bytes)"
    )


def test_sector_outside_the_geometry_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="sector index must be below 2"):
        check_payload(GOLDEN_HEADER, 16 * 32 * 2, Geometry(32, 32, 16, 32, 2))


def test_geometry_whose_sectors_do_not_tile_the_frame_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="sectors of 100 x 576 do not tile a frame of 576 x 576"):
        Geometry(576, 576, 100, 576, 2)


def test_geometry_places_sectors_row_major() -> None:
    g = Geometry(64, 64, 32, 16, 2)
    assert g.n_sectors == 8
    assert [(g.sector_row0(s), g.sector_col0(s)) for s in (0, 3, 4, 7)] == [(0, 0), (0, 48), (32, 0), (32, 48)]


def test_info_round_trips_between_cpp_and_plain_msgpack() -> None:
    assert msgpack.unpackb(encode_info(GOLDEN_INFO)) == info_dict()
    assert decode_info(msgpack.packb(info_dict())) == GOLDEN_INFO


def test_an_info_carries_its_run_when_it_has_one() -> None:
    golden = (DATA / "info_v1_run.bin").read_bytes()
    assert msgpack.unpackb(golden) == {**info_dict(), "run": 305419896}
    info = decode_info(golden)
    assert info.run == 305419896 and encode_info(info) == golden
    assert decode_info((DATA / "info_v1.bin").read_bytes()).run == 0
    with pytest.raises(ProtocolError, match=re.escape("field 'run'")):
        decode_info(msgpack.packb({**info_dict(), "run": -1}))


def test_golden_info_bytes_decode_and_reencode_identically() -> None:
    golden = (DATA / "info_v1.bin").read_bytes()
    assert decode_info(golden) == GOLDEN_INFO
    assert encode_info(GOLDEN_INFO) == golden


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (msgpack.packb([1, 2]), "expected a msgpack map"),
        (b"\x81", "not valid msgpack"),
        (msgpack.packb({k: v for k, v in info_dict().items() if k != "routing"}), "missing field 'routing'"),
        (msgpack.packb(info_dict(version=2)), "info message: version 2, this program reads version 1"),
        (msgpack.packb(info_dict(kind="data")), "field 'kind': expected 'info', got 'data'"),
        (msgpack.packb(info_dict(scan_number=-3)), "field 'scan_number': expected an unsigned integer"),
        (msgpack.packb(info_dict(routing=["ng-b", "ng-a"])), "field 'routing': expected sorted UIDs without duplicates"),
        (msgpack.packb(info_dict(routing=["ng-a", "ng-a"])), "field 'routing': expected sorted UIDs without duplicates"),
        (msgpack.packb(info_dict(counts={"ng-z": 1})), "UID 'ng-z' is not in the routing list"),
        (msgpack.packb(info_dict(counts=[1, 2])), "field 'counts': expected a map of names to counts"),
        (msgpack.packb(info_dict(scan_x=0)), "scan shape 0 x 64 outside 1..65535 per side"),
        (msgpack.packb(info_dict(routing=["", "ng-a"], counts={})), "uid '' must be non-empty and hold no '/'"),
        (msgpack.packb(info_dict(counts={"ng-a": 8000, "ng-b": 193})), "8193 messages announced for a scan of 8192"),
        (msgpack.packb(info_dict(routing=[f"ng-{i:04d}" for i in range(4097)], counts={})), "not valid msgpack within"),
        (b"\xdf\xff\xff\xff\xff", "not valid msgpack within its bounds"),
        (b"\x80" * (4 * 1024 * 1024 + 1), "bytes, more than the 4194304 allowed"),
    ],
)
def test_info_decoder_rejects_malformed_messages_naming_the_key(message: bytes, error: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(error)):
        decode_info(message)

