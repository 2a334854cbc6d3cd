"""The live stream's messages (live/SPEC.md): how a NodeGroup's publisher packs a batch of
counted frames and how a subscriber reads it back. One implementation for both sides."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

#: Topics: the first frame of every message; a subscriber subscribes to one.
IMAGES = b"images"
FRAMES = b"frames"
#: What a subscriber sends to a publisher's socket to start and to stop receiving.
SUBSCRIBE = b"subscribe"
UNSUBSCRIBE = b"unsubscribe"
#: Version of the header, refused by a reader that does not know it.
VERSION = 1

# The arrays after the header, per topic, in order, with their dtypes (little-endian).
_ARRAYS = {
    IMAGES: (("position", "<u8"), ("bright_field", "<u4"), ("dark_field", "<u4"), ("com_x", "<f4"),
             ("com_y", "<f4"), ("events", "<u4")),
    FRAMES: (("position", "<u8"), ("offsets", "<u8"), ("events", "<u4")),
}


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

    @property
    def frames(self) -> int:
        return len(self.arrays["position"])


def encode(batch: Batch) -> list[bytes]:
    """The multipart message of ``batch``."""
    header = {"v": VERSION, "uid": batch.uid, "scan": batch.scan, "scan_shape": list(batch.scan_shape),
              "frame_shape": list(batch.frame_shape), "end": batch.end}
    parts = [batch.topic, json.dumps(header).encode()]
    for name, dtype in _ARRAYS[batch.topic]:
        parts.append(np.ascontiguousarray(batch.arrays[name], dtype=dtype).tobytes())
    return parts


def decode(parts: list[bytes]) -> Batch:
    """The batch of a multipart message.

    :raises ValueError: a message of an unknown topic or version, or whose arrays do not fit.
    """
    if len(parts) < 2 or parts[0] not in _ARRAYS:
        raise ValueError(f"not a live message (topic {parts[0][:16]!r})" if parts else "empty message")
    topic = parts[0]
    header = json.loads(parts[1])
    if header.get("v") != VERSION:
        raise ValueError(f"live message version {header.get('v')!r}, this reader knows {VERSION}")
    names = _ARRAYS[topic]
    if len(parts) != 2 + len(names):
        raise ValueError(f"live {topic.decode()} message of {len(parts)} parts, expected {2 + len(names)}")
    arrays = {name: np.frombuffer(part, dtype=dtype) for (name, dtype), part in zip(names, parts[2:])}
    frames = len(arrays["position"])
    per_frame = [n for n, _ in names if n not in ("events", "offsets")]
    if any(len(arrays[n]) != frames for n in per_frame) or (topic == FRAMES and len(arrays["offsets"]) != frames + 1):
        raise ValueError(f"live {topic.decode()} message: arrays of different lengths")
    return Batch(topic=topic, uid=str(header["uid"]), scan=int(header["scan"]),
                 scan_shape=(int(header["scan_shape"][0]), int(header["scan_shape"][1])),
                 frame_shape=(int(header["frame_shape"][0]), int(header["frame_shape"][1])),
                 end=bool(header["end"]), arrays=arrays)
