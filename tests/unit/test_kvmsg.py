"""The kvmsg codec against the Clone pattern's wire format (ZeroMQ Guide, chapter 5, CHP).

Golden frames in tests/data/*.frames were written with ``struct`` from the CHP description, not
with our codec: each frame is a 4-byte big-endian length followed by its bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import msgpack
import pytest

from sectorflow.kvstore import (
    KVMSG_FRAMES,
    KvMsg,
    KvstoreError,
    check_key,
    check_msgpack,
    decode_kvmsg,
    decode_properties,
    decode_sequence,
    encode_kvmsg,
    encode_properties,
    encode_sequence,
    new_uuid,
)

DATA = Path(__file__).resolve().parents[1] / "data"


def read_frames(name: str) -> list[bytes]:
    raw = (DATA / name).read_bytes()
    frames, offset = [], 0
    while offset < len(raw):
        (size,) = struct.unpack_from("!I", raw, offset)
        frames.append(raw[offset + 4 : offset + 4 + size])
        offset += 4 + size
    return frames


GOLDEN_KVPUB = KvMsg(
    key="status/producer/r0t0",
    sequence=1234567890123,
    uuid=bytes(range(0x10, 0x20)),
    properties={"ttl": "2.5"},
    body=msgpack.packb({"version": 1, "state": "streaming"}),
)


def test_encode_gives_the_golden_frames_of_a_kvpub() -> None:
    assert encode_kvmsg(GOLDEN_KVPUB) == read_frames("kvmsg_kvpub.frames")


def test_decode_reads_the_golden_frames_of_a_kvpub() -> None:
    msg = decode_kvmsg(read_frames("kvmsg_kvpub.frames"))
    assert msg == GOLDEN_KVPUB
    assert msg.ttl_s == 2.5
    assert msgpack.unpackb(msg.body) == {"version": 1, "state": "streaming"}


def test_golden_kthxbai_carries_the_sequence_and_the_subtree() -> None:
    msg = decode_kvmsg(read_frames("kvmsg_kthxbai.frames"))
    assert (msg.key, msg.sequence, msg.uuid, msg.properties, msg.body) == ("KTHXBAI", 42, b"", {}, b"status/")


def test_a_kvmsg_is_five_frames_in_the_guide_order() -> None:
    frames = encode_kvmsg(KvMsg(key="k", sequence=7, body=b"\x01"))
    assert KVMSG_FRAMES == 5
    assert frames == [b"k", struct.pack("!q", 7), b"", b"", b"\x01"]


@pytest.mark.parametrize("sequence", [0, 1, 255, 256, 2**40 + 3, 2**63 - 1, -1])
def test_sequence_is_eight_bytes_network_order(sequence: int) -> None:
    assert encode_sequence(sequence) == struct.pack("!q", sequence)
    assert decode_sequence(struct.pack("!q", sequence)) == sequence


def test_properties_are_name_value_lines() -> None:
    assert encode_properties({"ttl": "5", "owner": "r0"}) == b"owner=r0\nttl=5\n"
    assert decode_properties(b"ttl=5\nowner=a=b\n") == {"ttl": "5", "owner": "a=b"}


def test_properties_accept_a_last_line_without_newline_and_empty_lines() -> None:
    assert decode_properties(b"ttl=5\n\nx=1") == {"ttl": "5", "x": "1"}
    assert decode_properties(b"") == {}


def test_property_line_without_equals_is_rejected() -> None:
    with pytest.raises(KvstoreError, match=r"property line 'ttl' is not name=value"):
        decode_properties(b"ttl\n")


def test_property_names_cannot_hold_equals_or_newline() -> None:
    with pytest.raises(KvstoreError, match="must be non-empty without '=' or newline"):
        encode_properties({"a=b": "1"})
    with pytest.raises(KvstoreError, match="holds a newline"):
        encode_properties({"a": "1\n2"})


def test_wrong_frame_count_is_rejected_naming_the_frames() -> None:
    with pytest.raises(KvstoreError, match=r"kvmsg: 3 frames, expected 5 \(key, sequence, uuid, properties, body\)"):
        decode_kvmsg([b"k", struct.pack("!q", 1), b""])


def test_short_sequence_is_rejected_naming_the_key() -> None:
    frames = [b"nodegroups/a", b"\x00\x01\x02\x03", b"", b"", b"\x01"]
    with pytest.raises(KvstoreError, match=r"kvmsg 'nodegroups/a': sequence frame of 4 bytes, expected 8"):
        decode_kvmsg(frames)


def test_uuid_must_be_sixteen_bytes_or_empty() -> None:
    frames = [b"k", struct.pack("!q", 1), b"abc", b"", b"\x01"]
    with pytest.raises(KvstoreError, match=r"uuid frame of 3 bytes, expected 16 or none"):
        decode_kvmsg(frames)


def test_empty_and_overlong_keys_are_rejected() -> None:
    with pytest.raises(KvstoreError, match="empty key"):
        decode_kvmsg([b"", struct.pack("!q", 1), b"", b"", b""])
    with pytest.raises(KvstoreError, match="key of 256 bytes, at most 255 allowed"):
        decode_kvmsg([b"k" * 256, struct.pack("!q", 1), b"", b"", b""])


def test_decode_takes_any_buffer() -> None:
    frames = [memoryview(frame) for frame in read_frames("kvmsg_kvpub.frames")]
    assert decode_kvmsg(frames) == GOLDEN_KVPUB


def test_ttl_property_in_seconds() -> None:
    msg = KvMsg(key="k")
    assert msg.ttl_s == 0
    msg.ttl_s = 1.5
    assert msg.properties == {"ttl": "1.5"}
    msg.ttl_s = 0
    assert msg.properties == {}
    assert KvMsg(key="k", properties={"ttl": "30"}).ttl_s == 30


def test_bad_ttl_property_is_an_error_naming_the_value() -> None:
    msg = KvMsg(key="status/x/y", properties={"ttl": "soon"})
    with pytest.raises(KvstoreError, match=r"kvmsg 'status/x/y': property ttl='soon' is not a number of seconds"):
        _ = msg.ttl_s


def test_empty_body_means_delete() -> None:
    assert KvMsg(key="k").is_delete()
    assert not KvMsg(key="k", body=b"\xc0").is_delete()


def test_check_msgpack_accepts_exactly_one_object() -> None:
    check_msgpack(msgpack.packb({"a": [1, 2.5, "x"]}))
    with pytest.raises(KvstoreError, match="is not valid msgpack"):
        check_msgpack(b"\xc1")
    with pytest.raises(KvstoreError, match="is not valid msgpack"):
        check_msgpack(msgpack.packb("truncated string")[:-3])
    with pytest.raises(KvstoreError, match="2 bytes follow the first object"):
        check_msgpack(b"\x01\x02\x03")


def test_new_uuid_is_a_random_version_4_uuid() -> None:
    first, second = new_uuid(), new_uuid()
    assert len(first) == 16 and first != second
    assert first[6] >> 4 == 4 and first[8] >> 6 == 0b10


@pytest.mark.parametrize("key", ["HUGZ", "KTHXBAI", "ICANHAZ?"])
def test_command_words_cannot_be_set_as_keys(key: str) -> None:
    with pytest.raises(KvstoreError, match="protocol command word"):
        check_key(key)


def test_keys_and_properties_that_are_not_utf8_are_rejected() -> None:
    # Every replica hands keys to Python as str: a key that is not text would break them all.
    with pytest.raises(KvstoreError, match=r"kvmsg 'nodegroups/\\xff': key is not valid UTF-8; keys are text"):
        decode_kvmsg([b"nodegroups/\xff", struct.pack("!q", 1), b"", b"", b"\x01"])
    with pytest.raises(KvstoreError, match="properties are not valid UTF-8"):
        decode_kvmsg([b"k", struct.pack("!q", 1), b"", b"ttl=\xc0\x80\n", b"\x01"])
    assert decode_kvmsg([b"status/\xc3\xa9t\xc3\xa9", struct.pack("!q", 1), b"", b"", b"\x01"]).key == "status/été"


def test_a_properties_frame_above_its_bound_is_rejected() -> None:
    frames = [b"k", struct.pack("!q", 1), b"", b"ttl=1\n" + b"x=" * 600, b"\x01"]
    with pytest.raises(KvstoreError, match="kvmsg 'k': properties frame of 1206 bytes, at most 1024 allowed"):
        decode_kvmsg(frames)


def test_check_msgpack_refuses_headers_claiming_more_than_the_body_holds() -> None:
    # An array header claiming 2^32 - 1 elements: msgpack-c's unpack would reserve them all before
    # reading one; the check parses without building anything and finds the elements missing.
    with pytest.raises(KvstoreError, match="insufficient bytes"):
        check_msgpack(b"\xdd\xff\xff\xff\xff")
    with pytest.raises(KvstoreError, match="insufficient bytes"):
        check_msgpack(b"\xdf\x00\x01\x00\x00")
    check_msgpack(msgpack.packb([[1, 2], {"a": "b" * 100}]))
