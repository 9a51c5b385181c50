"""kserve_v2.h2.frames: the constants against RFC 9113 and the 9-byte frame header."""

from __future__ import annotations

import enum
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kserve_v2.h2 import frames
from kserve_v2.h2.frames import ErrorCode, FrameType, Setting, frame_header, parse_frame_header
from tests.enum_docs import undocumented_members


def test_frame_type_codes_match_rfc_9113() -> None:
    codes = (
        frames.DATA,
        frames.HEADERS,
        frames.PRIORITY,
        frames.RST_STREAM,
        frames.SETTINGS,
        frames.PUSH_PROMISE,
        frames.PING,
        frames.GOAWAY,
        frames.WINDOW_UPDATE,
        frames.CONTINUATION,
    )
    assert codes == tuple(range(10))
    assert [int(kind) for kind in FrameType] == list(range(10))
    # The module constants are the enum's members, so frame types print by name.
    for kind in FrameType:
        assert getattr(frames, kind.name) is kind
    assert repr(frames.GOAWAY) == "<FrameType.GOAWAY: 7>"


@pytest.mark.parametrize("wire_enum", [FrameType, Setting, ErrorCode])
def test_wire_enums_are_unique_and_documented(wire_enum: type[enum.IntEnum]) -> None:
    enum.unique(wire_enum)  # raises on an alias
    assert undocumented_members(wire_enum) == []


def test_flags_and_limits_match_rfc_9113() -> None:
    assert frames.FLAG_END_STREAM == frames.FLAG_ACK == 0x1
    assert frames.FLAG_END_HEADERS == 0x4
    assert frames.FLAG_PADDED == 0x8
    assert frames.FLAG_PRIORITY == 0x20
    assert frames.DEFAULT_WINDOW == 65_535
    assert frames.MAX_WINDOW == 2**31 - 1
    assert frames.DEFAULT_MAX_FRAME_SIZE == 2**14
    assert frames.MAX_FRAME_SIZE_LIMIT == 2**24 - 1
    assert frames.PREFACE == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    assert len(frames.PREFACE) == 24


def test_settings_and_error_codes_match_rfc_9113() -> None:
    assert [int(s) for s in Setting] == [1, 2, 3, 4, 5, 6]
    assert Setting.INITIAL_WINDOW_SIZE == 4
    assert Setting.MAX_FRAME_SIZE == 5
    assert [int(code) for code in ErrorCode] == list(range(14))
    assert ErrorCode.FLOW_CONTROL_ERROR == 3
    assert ErrorCode.COMPRESSION_ERROR == 9
    assert ErrorCode.HTTP_1_1_REQUIRED == 0xD


def test_error_code_name_of() -> None:
    assert ErrorCode.name_of(0) == "NO_ERROR"
    assert ErrorCode.name_of(ErrorCode.ENHANCE_YOUR_CALM) == "ENHANCE_YOUR_CALM"
    assert ErrorCode.name_of(0xE) == "0xe"
    assert ErrorCode.name_of(0xDEADBEEF) == "0xdeadbeef"


def test_frame_header_layout() -> None:
    # 24-bit length, type, flags, 31-bit stream id: all big-endian.
    assert frame_header(8, frames.PING, frames.FLAG_ACK, 0) == bytes.fromhex("000008060100000000")
    assert frame_header(0x123456, frames.DATA, 0x29, 0x7FFFFFFF) == bytes.fromhex(
        "12345600297fffffff"
    )
    assert len(frame_header(0, 0, 0, 0)) == 9


def test_frame_header_rejects_values_out_of_range() -> None:
    with pytest.raises(struct.error):
        frame_header(1 << 24, frames.DATA, 0, 1)
    with pytest.raises(struct.error):
        frame_header(0, 256, 0, 1)
    with pytest.raises(struct.error):
        frame_header(-1, 0, 0, 1)


def test_parse_frame_header_drops_the_reserved_bit_and_reads_at_offset() -> None:
    raw = b"junk" + bytes.fromhex("004000010580000003") + b"tail"
    assert parse_frame_header(raw, 4) == (0x4000, frames.HEADERS, 0x05, 3)
    assert parse_frame_header(memoryview(raw), 4) == (0x4000, frames.HEADERS, 0x05, 3)
    assert parse_frame_header(bytearray(raw[4:13])) == (0x4000, frames.HEADERS, 0x05, 3)
    with pytest.raises(struct.error):
        parse_frame_header(raw[:8])


@given(
    length=st.integers(0, frames.MAX_FRAME_SIZE_LIMIT),
    frame_type=st.integers(0, 255),
    flags=st.integers(0, 255),
    stream_id=st.integers(0, 2**32 - 1),
    offset=st.integers(0, 5),
)
def test_frame_header_round_trip(
    length: int, frame_type: int, flags: int, stream_id: int, offset: int
) -> None:
    header = frame_header(length, frame_type, flags, stream_id)
    assert len(header) == 9
    assert int.from_bytes(header[:3], "big") == length
    assert parse_frame_header(bytes(offset) + header, offset) == (
        length,
        frame_type,
        flags,
        stream_id & 0x7FFFFFFF,
    )
