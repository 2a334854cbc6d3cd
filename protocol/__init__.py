"""Wire contracts shared by every sectorflow component (protocol/SPEC.md).

Data message: two ZeroMQ frames, a msgpack header array
``[version, scan_number, frame_number, sector, scan_x, scan_y, position_x, position_y, thread_id]``
and the raw sector payload. Info message: one frame, a msgpack map with the scan's routing list
and UID -> expected message count. Raw fallback files: the 4D Camera's version-5 format that
stempy reads, ``data_scan{scan:010d}_module{sector}_{thread}.data``, records of a 16-byte
little-endian header (uint32 scan_number, uint32 frame_number, uint16 scan_size x, y, uint16
scan_pos x, y) and the sector's pixels. The codecs are the C++ ones; this package re-exports them.

Every receiving thread checks a data message with ``decode_data`` (geometry, ``[limits]``
max_scan_positions, the sector its port carries, payload size) and counts a refusal under one of
``REFUSAL_KINDS`` (SPEC.md, "Refusals").
"""

from sectorflow._core.protocol import (
    DATA_HEADER_VERSION,
    INFO_VERSION,
    MAX_INFO_BYTES,
    MAX_ROUTING_LENGTH,
    MAX_SCAN_SIDE,
    RAW_HEADER_BYTES,
    REFUSAL_KINDS,
    DataHeader,
    Geometry,
    InfoMessage,
    ProtocolError,
    RawFileError,
    RawFileName,
    RawFileReader,
    RawFileWriter,
    check_payload,
    check_scan_shape,
    decode_data,
    decode_header,
    decode_info,
    encode_header,
    encode_info,
    find_raw_files,
    max_frame_bytes,
    parse_raw_file_name,
    peek_frame,
    raw_file_name,
)

from .refusals import refusal_fields

__all__ = [
    "DATA_HEADER_VERSION",
    "INFO_VERSION",
    "MAX_INFO_BYTES",
    "MAX_ROUTING_LENGTH",
    "MAX_SCAN_SIDE",
    "RAW_HEADER_BYTES",
    "REFUSAL_KINDS",
    "DataHeader",
    "Geometry",
    "InfoMessage",
    "ProtocolError",
    "RawFileError",
    "RawFileName",
    "RawFileReader",
    "RawFileWriter",
    "check_payload",
    "check_scan_shape",
    "decode_data",
    "decode_header",
    "decode_info",
    "encode_header",
    "encode_info",
    "find_raw_files",
    "max_frame_bytes",
    "parse_raw_file_name",
    "peek_frame",
    "raw_file_name",
    "refusal_fields",
]
