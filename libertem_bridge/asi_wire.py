"""The asi_tpx3 sparse stream as the bridge speaks it (libertem_bridge/SPEC.md): 32-byte
little-endian headers and CSR array chunks, as LiberTEM-rs's ``libertem_asi_tpx3`` (headers.rs,
bincode with fixed-width integers) reads them. Encoding only: the bridge never reads this format.

Every array is unsigned 32-bit: the indptr, the column indices (flat pixel indices, up to
65,535 x 65,535 pixels) and the values (1 per event). The 1- and 4-bit value types crash the
receiver of 0.3.2, and u32 is what the package's reference encoder (``make_sim_data``) writes.
"""

from __future__ import annotations

import struct

import numpy as np

HEADER_BYTES = 32
#: Header tags (the first byte of every header).
ACQUISITION_START, SCAN_START, ARRAY_CHUNK, SCAN_END, ACQUISITION_END = range(5)
#: The version byte of the acquisition header (what ``make_sim_data`` writes; 0.3.2 checks none).
VERSION = 7
#: FormatType::CSR; DType::U32 (headers.rs: U1, U4, U8, U16, U32, U64).
FORMAT_CSR = 0
DTYPE_U32 = 4
#: The largest side of a scan or a frame: nav_shape and sig_shape are u16 pairs.
MAX_SIDE = 0xFFFF

# tag, version, format_type, nav_shape (2 x u16), indptr_dtype, sig_shape (2 x u16), indices_dtype,
# sequence u32, 15 reserved
_ACQUISITION_START = struct.Struct("<BBBHHBHHBI15x")
# tag, sequence u32, metadata_length u64, 19 reserved
_SCAN_START = struct.Struct("<BIQ19x")
# tag, value_dtype, nframes u32, length (events) u32, indices_offset u32, values_offset u32, 14 reserved
_ARRAY_CHUNK = struct.Struct("<BBIIII14x")
# tag, sequence u32, 27 reserved (scan end and acquisition end)
_END = struct.Struct("<BI27x")
assert all(s.size == HEADER_BYTES for s in (_ACQUISITION_START, _SCAN_START, _ARRAY_CHUNK, _END))


def acquisition_start(sequence: int, nav_shape: tuple[int, int], sig_shape: tuple[int, int]) -> bytes:
    """The header opening an acquisition of ``nav_shape`` positions of ``sig_shape`` pixels.

    :raises ValueError: a side beyond MAX_SIDE (the header holds u16) or not positive.
    """
    for name, shape in (("scan", nav_shape), ("frame", sig_shape)):
        if not all(0 < side <= MAX_SIDE for side in shape):
            raise ValueError(f"a {name} of {shape[0]} x {shape[1]} does not fit the asi_tpx3 header "
                             f"(1 to {MAX_SIDE} a side)")
    return _ACQUISITION_START.pack(ACQUISITION_START, VERSION, FORMAT_CSR, nav_shape[0], nav_shape[1], DTYPE_U32,
                                   sig_shape[0], sig_shape[1], DTYPE_U32, sequence & 0xFFFFFFFF)


def scan_start(sequence: int) -> bytes:
    """The header opening the acquisition's scan. No metadata: 0.3.2's receiver wants length 0."""
    return _SCAN_START.pack(SCAN_START, sequence & 0xFFFFFFFF, 0)


def scan_end(sequence: int) -> bytes:
    return _END.pack(SCAN_END, sequence & 0xFFFFFFFF)


def acquisition_end(sequence: int) -> bytes:
    return _END.pack(ACQUISITION_END, sequence & 0xFFFFFFFF)


def array_chunk(indptr: np.ndarray, indices: np.ndarray) -> list[bytes]:
    """A chunk of ``len(indptr) - 1`` consecutive frames: its header, then indptr, indices and
    values (all u32, no padding between them), as buffers to send in order.

    :param indptr: u32, starting at 0: frame i's events are ``indices[indptr[i]:indptr[i + 1]]``.
    :param indices: u32 flat pixel indices (row * frame cols + col), each event's value is 1.
    """
    nframes, length = len(indptr) - 1, len(indices)
    indptr_bytes = np.ascontiguousarray(indptr, dtype="<u4").tobytes()
    indices_offset = len(indptr_bytes)
    values_offset = indices_offset + 4 * length
    header = _ARRAY_CHUNK.pack(ARRAY_CHUNK, DTYPE_U32, nframes, length, indices_offset, values_offset)
    return [header, indptr_bytes, np.ascontiguousarray(indices, dtype="<u4").tobytes(),
            np.ones(length, dtype="<u4").tobytes()]


def chunk_bytes(frames: int, events: int) -> int:
    """Bytes of a chunk of ``frames`` frames holding ``events`` events, its header included."""
    return HEADER_BYTES + 4 * (frames + 1) + 8 * events
