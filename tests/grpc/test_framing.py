"""kserve_v2.grpc.framing: gRPC's framing over HTTP/2, without a server.

Request header blocks are checked by decoding them with the HPACK decoder; the message
framing by splitting framed bytes at arbitrary points; responses by feeding
:class:`CallResponse` what the HTTP/2 layer would report.
"""

from __future__ import annotations

import gc
import gzip
import itertools
import math
import re
import struct
import tracemalloc
import zlib
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
)
from kserve_v2.grpc import framing
from kserve_v2.grpc.framing import (
    ACCEPT_ENCODING,
    STATUS_NAMES,
    USER_AGENT,
    CallResponse,
    MessageReader,
    RequestHeaders,
    compress_message,
    grpc_timeout,
    message_prefix,
    status_error,
)
from kserve_v2.h2.hpack import Decoder, Encoder

# Property tests run on a small shared machine: no deadline, sizes kept small.
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

PATH = "/inference.GRPCInferenceService/ModelInfer"
FIXED = [
    (":method", "POST"),
    (":scheme", "http"),
    (":path", PATH),
    (":authority", "localhost:8001"),
    ("te", "trailers"),
    ("content-type", "application/grpc"),
    ("user-agent", USER_AGENT),
    ("grpc-accept-encoding", "identity,deflate,gzip"),
]
RESPONSE = [(":status", "200"), ("content-type", "application/grpc")]


def framed(*messages: bytes, flag: int = 0) -> bytes:
    return b"".join(struct.pack(">BL", flag, len(m)) + m for m in messages)


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(raw), *(cut % (len(raw) + 1) for cut in cuts)})
    return [raw[a:b] for a, b in itertools.pairwise(points)]


def feed_views(reader: MessageReader, chunks: list[bytes]) -> None:
    """Feed chunks as views of one reused buffer, overwritten after each call (as the native
    transport's receive buffer is): the reader must copy what it keeps."""
    buffer = bytearray(max((len(c) for c in chunks), default=0))
    view = memoryview(buffer)
    for chunk in chunks:
        buffer[: len(chunk)] = chunk
        reader.feed(view[: len(chunk)])
        buffer[: len(chunk)] = b"\xa5" * len(chunk)


def collect(limit: int | None = None) -> tuple[MessageReader, list[tuple[int, bytes]]]:
    got: list[tuple[int, bytes]] = []

    def on_message(message: tuple[int, bytes | bytearray]) -> None:
        flag, data = message
        assert isinstance(data, (bytes, bytearray))
        got.append((flag, bytes(data)))

    return MessageReader(on_message, limit), got


def respond(
    response: CallResponse,
    body: bytes = b"",
    trailers: list[tuple[str, str]] | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> CallResponse:
    response.headers(RESPONSE if headers is None else headers, False)
    response.data(memoryview(body), trailers is None)
    if trailers is not None:
        response.headers(trailers, True)
    assert response.done
    return response


# ---------------------------------------------------------------------------- grpc_timeout

UNITS = {
    "H": Fraction(3600),
    "M": Fraction(60),
    "S": Fraction(1),
    "m": Fraction(1, 1000),
    "u": Fraction(1, 10**6),
    "n": Fraction(1, 10**9),
}
TIMEOUT = re.compile(r"[1-9][0-9]{0,7}[HMSmun]")


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "1n"),
        (-3.0, "1n"),
        (1e-12, "1u"),
        (1e-6, "1u"),
        (0.5, "500000u"),
        (1, "1000000u"),
        (5.0, "5000000u"),
        (99, "99000000u"),
        (100, "100000m"),
        (86_400, "86400000m"),
        (99_999, "99999000m"),
        (100_000, "100000S"),
        (1e9, "16666667M"),
        (1e10, "2777778H"),
        (1e12, "99999999H"),
        (math.inf, "99999999H"),
    ],
)
def test_grpc_timeout_examples(seconds: float, expected: str) -> None:
    assert grpc_timeout(seconds) == expected


@given(st.floats(min_value=1e-12, max_value=3.5e11, allow_nan=False))
def test_grpc_timeout_is_short_and_never_shorter_than_asked(seconds: float) -> None:
    text = grpc_timeout(seconds)
    assert TIMEOUT.fullmatch(text), text
    value, unit = Fraction(int(text[:-1])), UNITS[text[-1]]
    exact = Fraction(seconds)
    # Rounded up, to within float rounding of the product (far below a nanosecond)...
    assert value * unit >= exact * (1 - Fraction(1, 10**12))
    # ...and by less than one unit; the unit is the finest whose 8 digits suffice.
    assert value * unit < exact + unit
    finer = [u for u in UNITS.values() if u < unit and u >= UNITS["u"]]
    for small in finer:
        assert math.ceil(exact / small) >= 99_999_999  # (>, but for float rounding)


# ---------------------------------------------------------------------------- RequestHeaders


def test_request_block_without_options() -> None:
    headers = RequestHeaders(scheme="http", authority="localhost:8001")
    block = headers.block(PATH)
    assert Decoder().decode(block) == FIXED
    assert headers.block(PATH) is block  # cached
    assert ACCEPT_ENCODING == "identity,deflate,gzip"


def test_request_block_with_timeout_encoding_metadata_and_extra() -> None:
    headers = RequestHeaders(scheme="https", authority="triton:443", user_agent="me/1")
    block = headers.block(
        PATH,
        timeout=2.5,
        encoding="gzip",
        metadata=[("authorization", "Bearer secret"), ("x-request-id", "42")],
        extra=[("triton_grpc_error", "true")],
    )
    decoder = Decoder()
    expected = [
        (":method", "POST"),
        (":scheme", "https"),
        (":path", PATH),
        (":authority", "triton:443"),
        ("te", "trailers"),
        ("content-type", "application/grpc"),
        ("user-agent", "me/1"),
        ("grpc-accept-encoding", "identity,deflate,gzip"),
        ("grpc-timeout", "2500000u"),
        ("triton_grpc_error", "true"),
        ("grpc-encoding", "gzip"),
        ("authorization", "Bearer secret"),
        ("x-request-id", "42"),
    ]
    assert decoder.decode(block) == expected
    # Credentials go out as "never indexed" literals.
    never_indexed = Encoder().encode(
        [("authorization", "Bearer secret")], sensitive={"authorization"}
    )
    assert never_indexed[0] & 0xF0 == 0x10
    assert never_indexed in block
    # The encoder never touches the dynamic table: blocks decode in any order.
    assert decoder.dynamic_table == ()
    assert decoder.decode(headers.block(PATH, timeout=2.5)) == expected[:9]


@pytest.mark.parametrize(
    ("options", "tail"),
    [
        ({"timeout": 0.001}, [("grpc-timeout", "1000u")]),
        ({"timeout": 0}, [("grpc-timeout", "1n")]),
        ({"encoding": "deflate"}, [("grpc-encoding", "deflate")]),
        ({"metadata": [("x-a", "1"), ("x-a", "2")]}, [("x-a", "1"), ("x-a", "2")]),
        ({"extra": [("x-e", "")]}, [("x-e", "")]),
        ({"metadata": [("x-latin", "caf\xe9")]}, [("x-latin", "caf\xe9")]),
    ],
)
def test_request_block_options(options: dict[str, Any], tail: list[tuple[str, str]]) -> None:
    headers = RequestHeaders(scheme="http", authority="localhost:8001")
    assert Decoder().decode(headers.block(PATH, **options)) == FIXED + tail


def test_request_block_timeout_cache_is_bounded_and_stays_right() -> None:
    headers = RequestHeaders(scheme="http", authority="localhost:8001")
    decoder = Decoder()
    for millis in range(1, 700):
        block = headers.block(PATH, timeout=millis / 1000)
        assert decoder.decode(block)[-1] == ("grpc-timeout", grpc_timeout(millis / 1000))
    assert len(headers._timeouts) <= 257


def test_request_block_per_path_and_bad_metadata() -> None:
    headers = RequestHeaders(scheme="http", authority="localhost:8001")
    other = "/inference.GRPCInferenceService/ServerLive"
    assert Decoder().decode(headers.block(other))[2] == (":path", other)
    assert Decoder().decode(headers.block(PATH))[2] == (":path", PATH)
    with pytest.raises(InvalidInputError):
        headers.block(PATH, metadata=[("x-snowman", "\u2603")])


# ------------------------------------------------------------------- prefix and compression


def test_message_prefix() -> None:
    assert message_prefix(0) == b"\0\0\0\0\0"
    assert message_prefix(5) == b"\0\0\0\0\x05"
    assert message_prefix(0x01020304, compressed=True) == b"\x01\x01\x02\x03\x04"
    assert message_prefix(2**32 - 1) == b"\0\xff\xff\xff\xff"
    with pytest.raises(struct.error):
        message_prefix(2**32)


@given(data=st.binary(max_size=2000), encoding=st.sampled_from(["gzip", "deflate"]))
def test_compress_message_round_trip(data: bytes, encoding: str) -> None:
    for source in (data, bytearray(data), memoryview(data)):
        compressed = compress_message(source, encoding)
        if encoding == "gzip":
            assert gzip.decompress(compressed) == data
            assert compressed[:2] == b"\x1f\x8b"
        else:
            assert zlib.decompress(compressed) == data  # zlib format, as gRPC's "deflate"
        assert compress_message(source, encoding) == compressed  # deterministic (mtime 0)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compress_message_of_a_typed_buffer(encoding: str) -> None:
    array = np.arange(1000, dtype=np.float32)  # memoryview with itemsize 4: bytes, not items
    compressed = compress_message(memoryview(array), encoding)
    response = respond(
        CallResponse(),
        framed(compressed, flag=1),
        [("grpc-status", "0")],
        headers=[*RESPONSE, ("grpc-encoding", encoding)],
    )
    assert response.messages == [array.tobytes()]


# ----------------------------------------------------------------------------- MessageReader

messages_strategy = st.lists(
    st.tuples(st.integers(0, 1), st.binary(max_size=200) | st.sampled_from([b"", b"x"])),
    max_size=8,
)


@FAST
@given(messages=messages_strategy, cuts=st.lists(st.integers(0, 3000), max_size=40))
def test_message_reader_reassembles_any_split(
    messages: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    raw = b"".join(framed(m, flag=flag) for flag, m in messages)
    reader, got = collect()
    assert reader.idle
    feed_views(reader, split_at(raw, cuts))
    assert got == messages
    assert reader.idle


@FAST
@given(messages=messages_strategy.filter(bool), cut=st.integers(1, 3000))
def test_message_reader_is_not_idle_inside_a_message(
    messages: list[tuple[int, bytes]], cut: int
) -> None:
    raw = b"".join(framed(m, flag=flag) for flag, m in messages)
    cut %= len(raw)
    reader, _ = collect()
    feed_views(reader, [raw[:cut]])
    boundaries = {0}
    for _, m in messages:
        boundaries.add(max(boundaries) + 5 + len(m))
    assert reader.idle == (cut in boundaries)


def test_message_reader_byte_at_a_time_and_one_chunk() -> None:
    messages = [(0, b"hello"), (1, b""), (0, bytes(range(256)) * 3)]
    raw = b"".join(framed(m, flag=flag) for flag, m in messages)
    reader, got = collect()
    feed_views(reader, [raw[i : i + 1] for i in range(len(raw))])
    assert got == messages
    reader, got = collect()
    reader.feed(memoryview(raw))
    assert got == messages


def test_message_reader_grows_messages_above_the_first_allocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing, "_FIRST_ALLOCATION", 10)
    messages = [(0, bytes(range(50))), (0, b"short"), (1, b"y" * 11)]
    raw = b"".join(framed(m, flag=flag) for flag, m in messages)
    for cuts in ([], [3, 7, 20, 30], list(range(len(raw)))):
        reader, got = collect()
        feed_views(reader, split_at(raw, cuts))
        assert got == messages


def test_message_reader_memory_follows_bytes_received() -> None:
    """A prefix announcing 64 MiB allocated (and zero-filled) 64 MiB before any of it came:
    eight such calls cost 512 MiB for 112 bytes on the wire. The buffer now starts at the
    first allocation and then at most doubles what has arrived."""
    first = framing._FIRST_ALLOCATION
    readers = [collect()[0] for _ in range(8)]
    chunks = [memoryview(bytes(size)) for size in (first, 3 * first, 5 * first)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for reader in readers:
            reader.feed(memoryview(message_prefix(64 << 20) + b"x" * 9))
        assert tracemalloc.get_traced_memory()[0] - base < 8 * first + (1 << 16)
        received = 9
        for chunk in chunks:
            readers[0].feed(chunk)
            received += len(chunk)
            grown = tracemalloc.get_traced_memory()[0] - base - 7 * first
            assert received <= grown < 2 * received + (1 << 16)
    finally:
        tracemalloc.stop()
    assert not readers[0].idle


def test_message_reader_large_message_arrives_whole_and_uncopied() -> None:
    """Growing in steps still hands out one buffer holding exactly the message."""
    message = bytes(range(256)) * (12 << 10)  # 3 MiB: three growth steps past 1 MiB
    raw = framed(message)
    got: list[bytes | bytearray] = []
    reader = MessageReader(lambda message: got.append(message[1]))
    view = memoryview(raw)
    for start in range(0, len(raw), 256 << 10):
        reader.feed(view[start : start + (256 << 10)])
    (data,) = got
    assert isinstance(data, bytearray)
    assert len(data) == len(message)
    assert data == message


@pytest.mark.parametrize("split", [False, True])
def test_message_reader_rejects_compressed_flag_above_one(split: bool) -> None:
    raw = framed(b"abc", flag=2)
    reader, got = collect()
    with pytest.raises(ProtocolError, match="compressed flag 2"):
        feed_views(reader, [raw[:3], raw[3:]] if split else [raw])
    assert got == []


@pytest.mark.parametrize("split", [False, True])
def test_message_reader_enforces_the_limit(split: bool) -> None:
    reader, got = collect(limit=4)
    raw = framed(b"abcd") + framed(b"")
    feed_views(reader, split_at(raw, [2, 7] if split else []))
    assert got == [(0, b"abcd"), (0, b"")]
    with pytest.raises(ServerError) as exc:
        feed_views(reader, split_at(framed(b"abcde"), [3] if split else []))
    assert exc.value.grpc_code == "RESOURCE_EXHAUSTED"
    # Refused on the prefix alone, before the message arrives.
    reader, got = collect(limit=10)
    with pytest.raises(ServerError):
        reader.feed(memoryview(struct.pack(">BL", 0, 2**32 - 1)))


def test_message_reader_limit_zero_allows_only_empty_messages() -> None:
    reader, got = collect(limit=0)
    reader.feed(memoryview(framed(b"")))
    assert got == [(0, b"")]
    with pytest.raises(ServerError):
        reader.feed(memoryview(framed(b"x")))


# ------------------------------------------------------------------------------ CallResponse


def test_ok_response() -> None:
    response = CallResponse()
    response.headers([*RESPONSE, ("x-server", "t")], False)
    assert not response.done
    assert response.http_status == 200
    response.data(memoryview(framed(b"reply")[:3]), False)
    response.data(memoryview(framed(b"reply")[3:]), False)
    response.data(memoryview(b""), False)
    response.headers([("grpc-status", "0"), ("x-trailer", "1")], True)
    assert response.done
    assert response.status() == ("OK", "")
    assert response.messages == [b"reply"]
    assert response.metadata() == (
        ("content-type", "application/grpc"),
        ("x-server", "t"),
        ("grpc-status", "0"),
        ("x-trailer", "1"),
    )


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("a%20b%25", "a b%"),
        ("caf%C3%A9", "caf\xe9"),
        ("100%", "100%"),  # a stray % stays
        ("bad %FF byte", "bad \ufffd byte"),
        ("plain+text", "plain+text"),  # not form encoding: + is a plus
        ("", ""),
    ],
)
def test_error_response_with_percent_encoded_message(raw: str, decoded: str) -> None:
    response = respond(CallResponse(), trailers=[("grpc-status", "3"), ("grpc-message", raw)])
    assert response.status() == ("INVALID_ARGUMENT", decoded)


def test_trailers_only_response() -> None:
    response = CallResponse()
    block = [*RESPONSE, ("grpc-status", "5"), ("grpc-message", "no%20such%20model")]
    response.headers(block, True)
    assert response.done
    assert response.trailer_list is response.header_list
    assert response.status() == ("NOT_FOUND", "no such model")
    assert response.messages == []
    # The one block is not reported twice.
    assert response.metadata() == (
        ("content-type", "application/grpc"),
        ("grpc-status", "5"),
        ("grpc-message", "no%20such%20model"),
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("400", "INTERNAL"),
        ("401", "UNAUTHENTICATED"),
        ("403", "PERMISSION_DENIED"),
        ("404", "UNIMPLEMENTED"),
        ("429", "UNAVAILABLE"),
        ("500", "UNKNOWN"),
        ("502", "UNAVAILABLE"),
        ("503", "UNAVAILABLE"),
        ("504", "UNAVAILABLE"),
        ("302", "UNKNOWN"),
    ],
)
@pytest.mark.parametrize("trailers_only", [False, True])
def test_non_200_http_status_is_mapped(status: str, code: str, trailers_only: bool) -> None:
    response = CallResponse()
    headers = [(":status", status), ("content-type", "text/html")]
    if trailers_only:
        response.headers(headers, True)
    else:
        respond(response, b"<html>nope</html>", headers=headers)
    assert response.status() == (
        code,
        f"HTTP status {status} from a server that did not answer in gRPC",
    )


def test_non_200_with_a_grpc_status_uses_the_grpc_status() -> None:
    response = CallResponse()
    response.headers([(":status", "503"), *RESPONSE[1:], ("grpc-status", "8")], True)
    assert response.status() == ("RESOURCE_EXHAUSTED", "")


def test_non_grpc_content_type() -> None:
    response = respond(
        CallResponse(), b"hello", headers=[(":status", "200"), ("content-type", "text/plain")]
    )
    assert response.status() == ("UNKNOWN", "response content-type 'text/plain' is not gRPC")
    response = respond(CallResponse(), headers=[(":status", "200")])
    assert response.status()[0] == "UNKNOWN"
    # application/grpc+proto and the like are gRPC.
    response = respond(
        CallResponse(),
        framed(b"x"),
        [("grpc-status", "0")],
        headers=[(":status", "200"), ("content-type", "application/grpc+proto")],
    )
    assert response.status() == ("OK", "")


def test_body_of_a_non_grpc_response_is_not_parsed() -> None:
    # An error page whose first octet would be an invalid compressed flag, or whose "length
    # prefix" would be enormous, does not hide the HTTP status.
    for page in (b"<html>Not Found</html>", b"\x00\xff\xff\xff\xff"):
        response = respond(
            CallResponse(limit=10),
            page,
            headers=[(":status", "404"), ("content-type", "text/html")],
        )
        assert response.messages == []
        assert response.status()[0] == "UNIMPLEMENTED"
    # A server that leaves out content-type but speaks gRPC is still read.
    response = respond(
        CallResponse(), framed(b"x"), [("grpc-status", "0")], headers=[(":status", "200")]
    )
    assert response.messages == [b"x"]
    assert response.status() == ("OK", "")


def test_missing_grpc_status_is_internal() -> None:
    response = respond(CallResponse(), framed(b"x"), [("x-other", "1")])
    assert response.status() == ("INTERNAL", "the server ended the call without a grpc-status")
    # Ended by DATA, no trailers at all.
    response = respond(CallResponse(), framed(b"x"))
    assert response.trailer_list is None
    assert response.status()[0] == "INTERNAL"


@pytest.mark.parametrize(
    "value",
    [
        "17",
        "99",
        "-1",
        "abc",
        "",
        "1.0",
        " 0",
        "+1",
        "1_0",
        "0" * 10,
        pytest.param("0" * 5000, id="5000-digits"),
    ],
)
def test_unknown_grpc_status(value: str) -> None:
    response = respond(CallResponse(), trailers=[("grpc-status", value), ("grpc-message", "m")])
    assert response.status() == ("UNKNOWN", f"unknown grpc-status {value!r}: m")


@pytest.mark.parametrize(
    ("value", "code"),
    [
        *((str(number), name) for number, name in enumerate(STATUS_NAMES)),
        ("00", "OK"),
        ("016", "UNAUTHENTICATED"),
    ],
)
def test_grpc_status_by_its_number(value: str, code: str) -> None:
    """Every status by its decimal number, leading zeros too (their text is not the usual)."""
    response = respond(CallResponse(), trailers=[("grpc-status", value), ("grpc-message", "m")])
    assert response.status() == (code, "m")


def test_stream_ending_inside_a_message_is_internal() -> None:
    for cut in (1, 4, 5, 7):
        response = respond(CallResponse(), framed(b"abcdef")[:cut], [("grpc-status", "0")])
        assert response.messages == []
        assert response.status() == ("INTERNAL", "the stream ended inside a message")


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_response_messages(encoding: str) -> None:
    plain = b"tensor bytes " * 100
    response = CallResponse()
    response.headers([*RESPONSE, ("grpc-encoding", encoding)], False)
    raw = framed(compress_message(plain, encoding), flag=1) + framed(b"uncompressed")
    for chunk in split_at(raw, [3, 40, 41]):
        response.data(memoryview(chunk), False)
    response.headers([("grpc-status", "0")], True)
    assert response.status() == ("OK", "")
    assert response.messages == [plain, b"uncompressed"]


def test_compressed_message_problems() -> None:
    compressed = framed(compress_message(b"data", "gzip"), flag=1)
    response = CallResponse()
    response.headers(RESPONSE, False)  # no grpc-encoding
    with pytest.raises(ServerError) as exc:
        response.data(memoryview(compressed), False)
    assert exc.value.grpc_code == "INTERNAL"
    response = CallResponse()
    response.headers([*RESPONSE, ("grpc-encoding", "snappy")], False)
    with pytest.raises(ServerError, match="snappy"):
        response.data(memoryview(compressed), False)
    for encoding, payload in [
        ("gzip", b"not gzip at all"),
        ("deflate", b"\x78\x9c garbage"),
        ("gzip", compress_message(b"data" * 50, "gzip")[:-6]),  # truncated
        ("deflate", compress_message(b"data" * 50, "deflate")[:-2]),
    ]:
        response = CallResponse()
        response.headers([*RESPONSE, ("grpc-encoding", encoding)], False)
        with pytest.raises(ProtocolError):
            response.data(memoryview(framed(payload, flag=1)), False)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_decompressed_size_is_limited(encoding: str) -> None:
    bomb = compress_message(bytes(1 << 20), encoding)  # 1 MiB of zeros, ~1 KiB compressed
    exact = compress_message(bytes(100_000), encoding)
    for payload, limit in ((bomb, 100_000), (exact, 99_999)):
        response = CallResponse(limit=limit)
        response.headers([*RESPONSE, ("grpc-encoding", encoding)], False)
        # What gRPC itself says of a message beyond the receive limit.
        with pytest.raises(ServerError, match=f"{limit}-byte limit") as info:
            response.data(memoryview(framed(payload, flag=1)), False)
        assert info.value.grpc_code == "RESOURCE_EXHAUSTED"
    # Exactly the limit is fine.
    response = CallResponse(limit=100_000)
    respond(
        response,
        framed(exact, flag=1),
        [("grpc-status", "0")],
        headers=[*RESPONSE, ("grpc-encoding", encoding)],
    )
    assert response.messages == [bytes(100_000)]


def test_on_message_receives_messages_instead_of_the_list() -> None:
    got: list[bytes] = []
    response = CallResponse(on_message=lambda data: got.append(bytes(data)))
    respond(response, framed(b"one", b"two"), [("grpc-status", "0")])
    assert got == [b"one", b"two"]
    assert response.messages == []


def test_response_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="without :status"):
        CallResponse().headers([("content-type", "application/grpc")], False)
    with pytest.raises(ProtocolError, match="DATA before"):
        CallResponse().data(memoryview(b"x"), False)
    response = CallResponse()
    response.headers(RESPONSE, False)
    with pytest.raises(ProtocolError, match="second header block"):
        response.headers([("x", "y")], False)


@pytest.mark.parametrize(
    "status",
    [
        "abc",
        "20O",
        "\xb2",
        "\xb9\xb2\xb3",
        "-200",
        "",
        " 200",
        "2_00",
        pytest.param("2" * 5000, id="5000-digits"),
    ],
)
def test_malformed_http_status(status: str) -> None:
    response = CallResponse()
    response.headers([(":status", status), RESPONSE[1]], True)
    assert response.http_status == -1
    assert response.status()[0] == "UNKNOWN"


@pytest.mark.parametrize("value", ["\xb2", "\xb9\xb3", "\xbd"])
def test_grpc_status_with_non_ascii_digits(value: str) -> None:
    response = respond(CallResponse(), trailers=[("grpc-status", value)])
    assert response.status() == ("UNKNOWN", f"unknown grpc-status {value!r}: ")


latin1_text = st.text(st.characters(codec="latin-1"), max_size=12)
interesting = st.sampled_from(
    ["200", "0", "3", "16", "17", "404", "\xb2", "", "gzip", "x", "9" * 5000]
)
header_lists = st.lists(
    st.tuples(
        st.sampled_from(
            [":status", "grpc-status", "grpc-message", "content-type", "grpc-encoding", "x"]
        ),
        interesting | latin1_text,
    ),
    max_size=5,
)


@FAST
@given(
    first=header_lists,
    body=st.binary(max_size=60) | st.builds(framed, st.binary(max_size=30)),
    second=st.none() | header_lists,
    cuts=st.lists(st.integers(0, 100), max_size=4),
)
def test_call_response_is_total(
    first: list[tuple[str, str]],
    body: bytes,
    second: list[tuple[str, str]] | None,
    cuts: list[int],
) -> None:
    """Whatever the server sends, only the library's errors come out, and a finished call
    always has one of gRPC's status codes."""
    response = CallResponse(limit=1000)
    try:
        response.headers(first, second is None and not body)
        for chunk in split_at(body, cuts):
            response.data(memoryview(chunk), False)
        if second is not None:
            response.headers(second, True)
        else:
            response.data(memoryview(b""), True)
    except KServeError:
        return
    assert response.done
    code, message = response.status()
    assert code in STATUS_NAMES
    assert isinstance(message, str)


# ----------------------------------------------------------------------------- status_error


def test_status_names() -> None:
    assert len(STATUS_NAMES) == 17
    assert STATUS_NAMES[0] == "OK"
    assert STATUS_NAMES[4] == "DEADLINE_EXCEEDED"
    assert STATUS_NAMES[12] == "UNIMPLEMENTED"
    assert STATUS_NAMES[16] == "UNAUTHENTICATED"


def test_status_error() -> None:
    error = status_error("NOT_FOUND", "no model", "grpc://h:1")
    assert isinstance(error, ServerError)
    assert error.grpc_code == "NOT_FOUND"
    assert error.message == "no model"
    deadline = status_error("DEADLINE_EXCEEDED", "too slow", "grpc://h:1")
    assert isinstance(deadline, DeadlineExceededError)
    assert isinstance(deadline, TimeoutError)
    assert "too slow" in str(deadline)


def test_a_finished_call_response_needs_no_cyclic_collector() -> None:
    """A response and its (possibly huge) message are freed as soon as they are dropped:
    no reference cycle keeps them until the garbage collector runs."""
    gc.collect()
    gc.disable()
    try:
        response = CallResponse()
        response.headers([(":status", "200"), ("content-type", "application/grpc")], False)
        response.data(memoryview(message_prefix(3) + b"abc"), False)
        response.data(memoryview(message_prefix(4)[:2]), False)  # a split prefix
        response.data(memoryview(message_prefix(4)[2:] + b"defg"), False)
        response.headers([("grpc-status", "0")], True)
        assert response.messages == [b"abc", b"defg"]
        del response
        assert gc.collect() == 0
    finally:
        gc.enable()
