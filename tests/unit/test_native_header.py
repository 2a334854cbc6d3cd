"""The 4D Camera receivers' native header (protocol/SPEC.md, "Two dialects"), read as the detector's
software writes it: a plain msgpack array of nine unsigned integers, built here from the field
list and not through the project's codec."""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import pytest

from sectorflow.protocol import (
    DATA_HEADER_VERSION,
    Geometry,
    NativeHeader,
    ProtocolError,
    decode_header,
    decode_native_data,
    decode_native_header,
    encode_header,
    encode_native_header,
    to_data_header,
)

DATA = Path(__file__).resolve().parents[1] / "data"
FIELDS = ["scan_number", "frame_number", "num_frames_this_thread", "nSTEM_positions_per_row_m1", "nSTEM_rows_m1",
          "STEM_x_position_in_row", "STEM_row_in_scan", "thread_id", "module"]
GEOMETRY = Geometry(576, 576, 144, 576, 2)
GOLDEN = NativeHeader(scan_number=7, frame_number=5001234, frames_this_thread=2048, positions_per_row_m1=127,
                      rows_m1=63, position_x=82, position_y=9, thread_id=2, module=3)


def native(**changes: object) -> bytes:
    values = dict(zip(FIELDS, [7, 5001234, 2048, 127, 63, 82, 9, 2, 3]))
    values.update(changes)
    return msgpack.packb([values[f] for f in FIELDS])


def test_golden_bytes_decode_and_reencode_identically() -> None:
    golden = (DATA / "native_header.bin").read_bytes()
    assert golden == native()
    assert decode_native_header(golden) == GOLDEN
    assert encode_native_header(GOLDEN) == golden


def test_the_forwarded_sfsp_header_keeps_frame_counter_position_and_thread() -> None:
    forwarded = to_data_header(GOLDEN)
    assert msgpack.unpackb(encode_header(forwarded)) == [DATA_HEADER_VERSION, 7, 5001234, 3, 128, 64, 82, 9, 2]
    assert decode_header(encode_header(forwarded)).position == 9 * 128 + 82


def test_small_values_in_any_msgpack_integer_width_decode_alike() -> None:
    # The detector's software may pack a 3 as a fixint, a uint8 or a uint32: all are the same field.
    wide = b"\x99" + b"".join(b"\xce" + value.to_bytes(4, "big") for value in [7, 5001234, 2048, 127, 63, 82, 9, 2, 3])
    assert decode_native_header(wide) == GOLDEN


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\xc1", "not valid msgpack"),
        (msgpack.packb({"scan_number": 7}), "expected a msgpack array, got a map"),
        (msgpack.packb(list(msgpack.unpackb(native()))[:-1]), "expected 9 fields, got 8"),
        (native(frame_number=-1), "field 'frame_number' (index 1): expected an unsigned integer, got a negative"),
        (native(module="3"), "field 'module' (index 8): expected an unsigned integer, got a string"),
        (native(scan_number=2**32), "field 'scan_number' (index 0): expected a value below 2^32"),
        (native(nSTEM_rows_m1=65535), "scan of 128 x 65536 positions"),
        (native(nSTEM_positions_per_row_m1=2**32 - 1), "outside 1..65535 per side"),
        (native(STEM_row_in_scan=64), "probe position (82, 64) lies outside the scan of 128 x 64"),
        (native(num_frames_this_thread=0), "field 'num_frames_this_thread' is 0; a thread sends 1 to 8192 frames"),
        (native(num_frames_this_thread=8193), "field 'num_frames_this_thread' is 8193"),
        (native() + b"\x00", "1 bytes after the msgpack object"),
        (b"\xdd\xff\xff\xff\xff", "not valid msgpack within its bounds"),
    ],
)
def test_malformed_native_headers_are_refused_naming_the_field(frame: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)):
        decode_native_header(frame)


def test_decode_native_data_checks_module_thread_payload_and_limits() -> None:
    assert decode_native_data(native(), GEOMETRY.sector_bytes, GEOMETRY, 128 * 64, 3, 4) == GOLDEN
    cases = [
        ((native(), GEOMETRY.sector_bytes, GEOMETRY, 128 * 64, 2, 4), "came on the port of sector 2"),
        ((native(), GEOMETRY.sector_bytes, GEOMETRY, 128 * 64, 3, 2),
         "field 'thread_id' must be below 2 ([[receivers]] threads of this receiver"),
        ((native(), 10, GEOMETRY, 128 * 64, 3, 4), "payload of 10 bytes, expected 165888"),
        ((native(), GEOMETRY.sector_bytes, GEOMETRY, 100, 3, 4), "more than the 100 positions allowed"),
    ]
    for args, message in cases:
        with pytest.raises(ProtocolError, match=re.escape(message)):
            decode_native_data(*args)
