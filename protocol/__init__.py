"""Wire contracts shared by every sectorflow component (DESIGN.md, "Contracts").

Data message: two ZeroMQ frames, a msgpack header array
``[version, scan_number, frame_number, sector, scan_x, scan_y, position_x, position_y, thread_id]``
and the raw sector payload. Info message: one frame, a msgpack map with the scan's routing list
and UID -> expected message count. The codec is the C++ one; this package re-exports it.
"""

from sectorflow._core.protocol import (
    DATA_HEADER_VERSION,
    INFO_VERSION,
    DataHeader,
    Geometry,
    InfoMessage,
    ProtocolError,
    check_payload,
    decode_header,
    decode_info,
    encode_header,
    encode_info,
    peek_frame,
)

__all__ = [
    "DATA_HEADER_VERSION",
    "INFO_VERSION",
    "DataHeader",
    "Geometry",
    "InfoMessage",
    "ProtocolError",
    "check_payload",
    "decode_header",
    "decode_info",
    "encode_header",
    "encode_info",
    "peek_frame",
]
