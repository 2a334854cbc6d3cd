"""The live stream's messages (live/SPEC.md): how a NodeGroup's publisher packs a batch of
counted frames and how a subscriber reads it back. One implementation for both sides."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from sectorflow.configs.schema import IMAGE_NAME, MAX_VIRTUAL_DETECTORS, RESERVED_IMAGE_NAMES

#: Topics: the first frame of every message; a subscriber subscribes to one.
IMAGES = b"images"
FRAMES = b"frames"
#: What a subscriber sends to a publisher's socket to start and to stop receiving.
SUBSCRIBE = b"subscribe"
UNSUBSCRIBE = b"unsubscribe"
#: What a subscriber sends after reading message ``seq``: ``ack <seq>`` (decimal).
ACK = b"ack "
#: Version of the header, refused by a reader that does not know it. 3: an images message cuts its
#: events per frame (offsets), so that a reader computes any registered analysis from them. 4: its
#: per-frame values are the NodeGroups' kernel columns its header names (com_x and com_y among them),
#: each float32.
VERSION = 4
#: Largest side of a scan or a frame a message may name (the protocol's MAX_SCAN_SIDE): a reader
#: allocates images of these shapes, so a message cannot make it allocate more.
MAX_SIDE = 65535

# The arrays after the header, per topic, in order, with their dtypes (little-endian). An images
# message carries one more array per kernel column its header names, after offsets: COLUMN.
_ARRAYS = {
    IMAGES: (("position", "<u8"), ("offsets", "<u8")),
    FRAMES: (("position", "<u8"), ("offsets", "<u8")),
}
COLUMN = "<f4"
#: The most virtual detectors an images message may name (the configuration's bound).
MAX_DETECTORS = MAX_VIRTUAL_DETECTORS
#: The most kernel columns an images message may carry: the detectors' and as many again for the
#: other kernels (centre of mass, medium angle, ...), a bound on what a reader decodes.
MAX_COLUMNS = 2 * MAX_VIRTUAL_DETECTORS
#: Array names of the layout itself, which no column may take.
_LAYOUT_NAMES = ("position", "offsets", "events")


def _layout(topic: bytes, columns: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Every array of a message, in order: the topic's, the kernel columns' (images), the events."""
    return (*_ARRAYS[topic], *((name, COLUMN) for name in columns), ("events", "<u4"))


@dataclass
class Batch:
    """One message: a NodeGroup's frames of one scan counted since its previous message."""

    topic: bytes
    uid: str
    scan: int
    scan_shape: tuple[int, int]  # (rows, cols) of probe positions
    frame_shape: tuple[int, int]
    end: bool  # the NodeGroup has counted every frame of the scan it will count
    arrays: dict[str, np.ndarray]
    seq: int = 0  # the publisher's number of this message on its socket, acknowledged by the reader
    columns: tuple[str, ...] = ()  # images: the kernel columns whose arrays it carries, in order
    detectors: tuple[str, ...] = ()  # images: which of the columns are the virtual detectors' (an image each)

    @property
    def frames(self) -> int:
        return len(self.arrays["position"])


def ack(seq: int) -> bytes:
    """The request acknowledging message ``seq`` and every one before it."""
    return ACK + str(seq).encode()


def parse_ack(request: bytes) -> int | None:
    """The sequence number of an ``ack`` request, None if ``request`` is not one."""
    digits = request[len(ACK):]
    if not request.startswith(ACK) or not digits.isdigit() or len(digits) > 20:
        return None
    return int(digits)


def encode(batch: Batch, seq: int = 0) -> list[bytes]:
    """The multipart message of ``batch``, numbered ``seq``."""
    header = {"v": VERSION, "uid": batch.uid, "scan": batch.scan, "scan_shape": list(batch.scan_shape),
              "frame_shape": list(batch.frame_shape), "end": batch.end, "seq": seq}
    columns = batch.columns if batch.topic == IMAGES else ()
    if batch.topic == IMAGES:
        header["columns"] = list(columns)
        header["detectors"] = list(batch.detectors)
    parts = [batch.topic, json.dumps(header).encode()]
    for name, dtype in _layout(batch.topic, columns):
        parts.append(np.ascontiguousarray(batch.arrays[name], dtype=dtype).tobytes())
    return parts


def decode(parts: list[bytes], max_positions: int | None = None, max_frame_pixels: int | None = None) -> Batch:
    """The batch of a multipart message, checked whole before anything of it is used.

    :param max_positions: the most scan positions (rows x cols) a reader will hold an image of
        (``[limits] max_scan_positions``); None: MAX_SIDE a side.
    :param max_frame_pixels: the most pixels of a frame (the configured detector's); None: MAX_SIDE a side.
    :raises ValueError: a message of an unknown topic or version, a header that is not what
        live/SPEC.md says (among it more than MAX_COLUMNS columns or MAX_DETECTORS detectors, a
        detector that is not a column, or a name that is not one), shapes beyond MAX_SIDE or whose product is beyond the maxima, arrays that
        do not fit each other, positions outside the scan, events outside the frame, or offsets that
        do not cut the events in order.
    """
    if len(parts) < 2 or parts[0] not in _ARRAYS:
        raise ValueError(f"not a live message (topic {parts[0][:16]!r})" if parts else "empty message")
    topic = parts[0]
    try:
        header = json.loads(parts[1])
        version = header.get("v")
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise ValueError("live message header is not a JSON object") from None
    if version != VERSION:
        raise ValueError(f"live message version {version!r}, this reader knows {VERSION}")
    columns = _columns(header.get("columns", [])) if topic == IMAGES else ()
    detectors = _detectors(header.get("detectors", []), columns) if topic == IMAGES else ()
    names = _layout(topic, columns)
    if len(parts) != 2 + len(names):
        raise ValueError(f"live {topic.decode()} message of {len(parts)} parts, expected {2 + len(names)}")
    try:
        uid, scan, end, seq = str(header["uid"]), int(header["scan"]), bool(header["end"]), int(header.get("seq", 0))
        scan_shape = _shape(header["scan_shape"])
        frame_shape = _shape(header["frame_shape"])
        arrays = {name: np.frombuffer(part, dtype=dtype) for (name, dtype), part in zip(names, parts[2:])}
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"live {topic.decode()} message header: {error}") from None
    positions, pixels = scan_shape[0] * scan_shape[1], frame_shape[0] * frame_shape[1]
    if max_positions is not None and positions > max_positions:
        raise ValueError(f"live {topic.decode()} message: scan of {scan_shape[0]} x {scan_shape[1]} positions, "
                         f"beyond the {max_positions} of [limits] max_scan_positions")
    if max_frame_pixels is not None and pixels > max_frame_pixels:
        raise ValueError(f"live {topic.decode()} message: frame of {frame_shape[0]} x {frame_shape[1]} pixels, "
                         f"beyond the {max_frame_pixels} of the configured detector")
    frames = len(arrays["position"])
    per_frame = [n for n, _ in names if n not in ("events", "offsets")]  # position, the columns
    if any(len(arrays[n]) != frames for n in per_frame) or len(arrays["offsets"]) != frames + 1:
        raise ValueError(f"live {topic.decode()} message: arrays of different lengths")
    if frames and int(arrays["position"].max()) >= scan_shape[0] * scan_shape[1]:
        raise ValueError(f"live {topic.decode()} message: a position outside the {scan_shape} scan")
    events = arrays["events"]
    if len(events) and int(events.max()) >= frame_shape[0] * frame_shape[1]:
        raise ValueError(f"live {topic.decode()} message: an event outside the {frame_shape} frame")
    offsets = arrays["offsets"]
    if offsets[0] != 0 or offsets[-1] != len(events) or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise ValueError(f"live {topic.decode()} message: offsets do not cut the events in order")
    return Batch(topic=topic, uid=uid, scan=scan, scan_shape=scan_shape, frame_shape=frame_shape, end=end,
                 arrays=arrays, seq=seq, columns=columns, detectors=detectors)


def _names(value: object, what: str, most: int) -> list[object]:
    """A header's list of at most ``most`` distinct entries (names, checked by the caller)."""
    if not isinstance(value, list) or len(value) > most:
        shown = f"{len(value)} of them" if isinstance(value, list) else type(value).__name__
        raise ValueError(f"live images message: {what} must be a list of at most {most} names, got {shown}")
    if len(set(map(str, value))) != len(value):
        raise ValueError(f"live images message: a {what[:-1]} is named twice")
    return value


def _columns(value: object) -> tuple[str, ...]:
    """The kernel columns of an images header: at most MAX_COLUMNS distinct names, each an image's
    (letters, digits, _) and none of the layout's own arrays."""
    for name in _names(value, "columns", MAX_COLUMNS):
        if not isinstance(name, str) or not IMAGE_NAME.fullmatch(name) or name in _LAYOUT_NAMES:
            raise ValueError(f"live images message: column name {str(name)[:40]!r} is not an image's")
    return tuple(value)  # type: ignore[arg-type]


def _detectors(value: object, columns: tuple[str, ...]) -> tuple[str, ...]:
    """The detector names of an images header: at most MAX_DETECTORS distinct names, each one a
    configuration could give (a reader makes an image per name) and one of the message's columns."""
    for name in _names(value, "detectors", MAX_DETECTORS):
        if not isinstance(name, str) or not IMAGE_NAME.fullmatch(name) or name in RESERVED_IMAGE_NAMES:
            raise ValueError(f"live images message: detector name {str(name)[:40]!r} is not one a configuration gives")
        if name not in columns:
            raise ValueError(f"live images message: detector {name!r} is not one of its columns")
    return tuple(value)  # type: ignore[arg-type]


def _shape(value: object) -> tuple[int, int]:
    rows, cols = (int(v) for v in value)  # type: ignore[union-attr]
    if not (0 < rows <= MAX_SIDE and 0 < cols <= MAX_SIDE):
        raise ValueError(f"shape {rows} x {cols} is outside 1 to {MAX_SIDE} a side")
    return rows, cols
