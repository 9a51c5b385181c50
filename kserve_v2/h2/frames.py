"""HTTP/2 frame layout (RFC 9113 section 4 and 6): type codes, flags, settings, error codes
and the 9-byte frame header.

Only what a client needs to build frames is here; parsing lives in
:mod:`kserve_v2.h2.connection`, which reads the header fields in place.

Example::

    from kserve_v2.h2.frames import PING, frame_header

    frame = frame_header(8, PING, 0, 0) + bytes(8)      # a PING frame on stream 0
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

__all__ = [
    "CONTINUATION",
    "DATA",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_WINDOW",
    "FLAG_ACK",
    "FLAG_END_HEADERS",
    "FLAG_END_STREAM",
    "FLAG_PADDED",
    "FLAG_PRIORITY",
    "GOAWAY",
    "HEADERS",
    "MAX_FRAME_SIZE_LIMIT",
    "MAX_WINDOW",
    "PING",
    "PREFACE",
    "PRIORITY",
    "PUSH_PROMISE",
    "RST_STREAM",
    "SETTINGS",
    "WINDOW_UPDATE",
    "ErrorCode",
    "Setting",
    "frame_header",
    "parse_frame_header",
]

#: What a client sends first on every connection, before its SETTINGS frame.
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA: Final = 0x0
HEADERS: Final = 0x1
PRIORITY: Final = 0x2
RST_STREAM: Final = 0x3
SETTINGS: Final = 0x4
PUSH_PROMISE: Final = 0x5
PING: Final = 0x6
GOAWAY: Final = 0x7
WINDOW_UPDATE: Final = 0x8
CONTINUATION: Final = 0x9

FLAG_END_STREAM: Final = 0x1
FLAG_ACK: Final = 0x1
FLAG_END_HEADERS: Final = 0x4
FLAG_PADDED: Final = 0x8
FLAG_PRIORITY: Final = 0x20

#: Both windows start here until SETTINGS / WINDOW_UPDATE say otherwise.
DEFAULT_WINDOW: Final = 65_535
#: A flow-control window may never exceed 2**31 - 1.
MAX_WINDOW: Final = (1 << 31) - 1
#: The frame size every peer must accept, and the largest any peer may allow.
DEFAULT_MAX_FRAME_SIZE: Final = 16_384
MAX_FRAME_SIZE_LIMIT: Final = (1 << 24) - 1


class Setting(IntEnum):
    """SETTINGS parameter identifiers."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


class ErrorCode(IntEnum):
    """RST_STREAM and GOAWAY error codes."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD

    @classmethod
    def name_of(cls, code: int) -> str:
        """The code's name, or its number for codes this enum does not know."""
        try:
            return cls(code).name
        except ValueError:
            return f"0x{code:x}"


# 24-bit length as a 16-bit high part and an 8-bit low part, then type, flags, stream id.
_HEADER: Final = struct.Struct(">HBBBL")


def frame_header(length: int, frame_type: int, flags: int, stream_id: int) -> bytes:
    """The 9-byte header of a frame whose payload is ``length`` bytes."""
    return _HEADER.pack(length >> 8, length & 0xFF, frame_type, flags, stream_id)


def parse_frame_header(
    data: bytes | bytearray | memoryview, offset: int = 0
) -> tuple[int, int, int, int]:
    """``(length, type, flags, stream_id)`` of the frame header at ``offset`` (the reserved
    bit of the stream id is dropped, as receivers must)."""
    high, low, frame_type, flags, stream_id = _HEADER.unpack_from(data, offset)
    return (high << 8) | low, frame_type, flags, stream_id & 0x7FFFFFFF
