"""HTTP/2 frame layout (RFC 9113 sections 4 and 6): frame types, flags, settings, error codes
and the 9-byte frame header.

Only what a client needs to build frames is here; parsing lives in
:mod:`kserve_v2.h2.connection`, which reads the header fields in place.

The wire constants are ``@enum.unique`` integer enums (:class:`FrameType`, :class:`Setting`,
:class:`ErrorCode`), so a frame type or error code prints by name and compares equal to the
number on the wire. Each frame type is also a module constant (``DATA is FrameType.DATA``):
the connection compares every frame's type against them, and a module global is read several
times faster than an enum class attribute. Flags stay plain integers: their meaning depends on
the frame type (``END_STREAM`` and ``ACK`` are both ``0x1``), so they do not form one enum.

Example::

    from kserve_v2.h2.frames import FLAG_ACK, FrameType, frame_header

    frame = frame_header(8, FrameType.PING, FLAG_ACK, 0) + bytes(8)  # a PING ack on stream 0
"""

from __future__ import annotations

import enum
import struct
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
    "FrameType",
    "Setting",
    "frame_header",
    "parse_frame_header",
]

#: What a client sends first on every connection, before its SETTINGS frame.
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@enum.unique
class FrameType(enum.IntEnum):
    """Frame type codes (RFC 9113 section 6). Receivers ignore types they do not know."""

    #: A stream's body bytes, counted against both flow-control windows (6.1).
    DATA = 0x0
    #: Opens a stream or carries trailers: a header block, maybe continued (6.2).
    HEADERS = 0x1
    #: Stream priority; deprecated by RFC 9113 and ignored here, only checked (6.3).
    PRIORITY = 0x2
    #: Ends one stream at once, with an :class:`ErrorCode` (6.4).
    RST_STREAM = 0x3
    #: Connection parameters (:class:`Setting`), or the acknowledgement of the peer's (6.5).
    SETTINGS = 0x4
    #: A server-initiated stream; a client that disables push must never receive one (6.6).
    PUSH_PROMISE = 0x5
    #: Liveness check and round-trip measurement: 8 opaque bytes, echoed with ACK (6.7).
    PING = 0x6
    #: The connection is shutting down: the last stream the sender processed, a code (6.8).
    GOAWAY = 0x7
    #: Grows a stream's or the connection's send window (6.9).
    WINDOW_UPDATE = 0x8
    #: The rest of a header block too large for one HEADERS frame (6.10).
    CONTINUATION = 0x9

    @classmethod
    def name_of(cls, code: int) -> str:
        """The type's name, or its number for types this enum does not know."""
        try:
            return cls(code).name
        except ValueError:
            return f"0x{code:x}"


# The frame types as module constants (see the module docstring: for the receive loop).
DATA: Final = FrameType.DATA
HEADERS: Final = FrameType.HEADERS
PRIORITY: Final = FrameType.PRIORITY
RST_STREAM: Final = FrameType.RST_STREAM
SETTINGS: Final = FrameType.SETTINGS
PUSH_PROMISE: Final = FrameType.PUSH_PROMISE
PING: Final = FrameType.PING
GOAWAY: Final = FrameType.GOAWAY
WINDOW_UPDATE: Final = FrameType.WINDOW_UPDATE
CONTINUATION: Final = FrameType.CONTINUATION

#: DATA, HEADERS: the sender's last frame on this stream.
FLAG_END_STREAM: Final = 0x1
#: SETTINGS, PING: this frame acknowledges the peer's.
FLAG_ACK: Final = 0x1
#: HEADERS, CONTINUATION: the header block ends with this frame.
FLAG_END_HEADERS: Final = 0x4
#: DATA, HEADERS: a pad length byte leads the payload, padding trails it.
FLAG_PADDED: Final = 0x8
#: HEADERS: priority fields (5 bytes) lead the header block.
FLAG_PRIORITY: Final = 0x20

#: Both windows start here until SETTINGS / WINDOW_UPDATE say otherwise.
DEFAULT_WINDOW: Final = 65_535
#: A flow-control window may never exceed 2**31 - 1.
MAX_WINDOW: Final = (1 << 31) - 1
#: The frame size every peer must accept, and the largest any peer may allow.
DEFAULT_MAX_FRAME_SIZE: Final = 16_384
MAX_FRAME_SIZE_LIMIT: Final = (1 << 24) - 1


@enum.unique
class Setting(enum.IntEnum):
    """SETTINGS parameter identifiers (RFC 9113 section 6.5.2). Unknown ones are ignored."""

    #: Largest HPACK dynamic table the sender's decoder allows (default 4096).
    HEADER_TABLE_SIZE = 0x1
    #: 0 forbids PUSH_PROMISE (a client sends 0); the default is 1.
    ENABLE_PUSH = 0x2
    #: How many streams the receiver may open towards the sender (default unlimited).
    MAX_CONCURRENT_STREAMS = 0x3
    #: Every stream's initial send window, 0 to 2**31 - 1 (default 65535).
    INITIAL_WINDOW_SIZE = 0x4
    #: Largest frame payload the sender accepts, 2**14 to 2**24 - 1 (default 2**14).
    MAX_FRAME_SIZE = 0x5
    #: Advisory bound on the decoded size of a header list the sender accepts.
    MAX_HEADER_LIST_SIZE = 0x6


@enum.unique
class ErrorCode(enum.IntEnum):
    """RST_STREAM and GOAWAY error codes (RFC 9113 section 7)."""

    #: Not an error: a graceful GOAWAY, or a stream no longer needed.
    NO_ERROR = 0x0
    #: A protocol violation with no more specific code.
    PROTOCOL_ERROR = 0x1
    #: The sender failed internally.
    INTERNAL_ERROR = 0x2
    #: The peer broke flow control (sent beyond a window, or grew one past 2**31 - 1).
    FLOW_CONTROL_ERROR = 0x3
    #: A SETTINGS frame went unacknowledged too long.
    SETTINGS_TIMEOUT = 0x4
    #: A frame arrived on a stream that was already half-closed.
    STREAM_CLOSED = 0x5
    #: A frame had an invalid size.
    FRAME_SIZE_ERROR = 0x6
    #: The stream was refused before any processing: safe to retry.
    REFUSED_STREAM = 0x7
    #: The stream is no longer needed (a cancelled call).
    CANCEL = 0x8
    #: The HPACK state could not be kept (an undecodable header block).
    COMPRESSION_ERROR = 0x9
    #: A CONNECT request's connection was reset or closed.
    CONNECT_ERROR = 0xA
    #: The peer behaves in a way that might generate excessive load.
    ENHANCE_YOUR_CALM = 0xB
    #: The transport's security (TLS version, cipher) is not good enough.
    INADEQUATE_SECURITY = 0xC
    #: The endpoint requires HTTP/1.1 instead of HTTP/2.
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
