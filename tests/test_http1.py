"""The sans-IO HTTP/1.1 pieces: request heads, the response parser, Content-Encoding."""

from __future__ import annotations

import gzip
import itertools
import tracemalloc
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError, TransportError
from kserve_v2.http1 import (
    DEFAULT_MAX_DECODED_PIECE,
    FIRST_BODY_BUFFER,
    NoResponse,
    ResponseParser,
    StreamDecoder,
    StreamedBody,
    body_length,
    byte_views,
    decode_body,
    serialize_head,
)

# -- helpers -----------------------------------------------------------------------------------


def feed(
    parser: ResponseParser,
    pieces: Sequence[bytes],
    *,
    eof: bool = False,
    head_request: bool = False,
    stream: bool = False,
) -> bytes:
    """Feed ``pieces`` through the buffered interface, as a socket would.

    Stops at the end of the response; returns the bytes that were not consumed (the caller
    decides whether that is an error). ``eof``: report the end of the stream afterwards.
    """
    parser.start(head_request=head_request, stream=stream)
    data = b"".join(pieces)
    cuts = []
    pos = 0
    for piece in pieces:
        pos += len(piece)
        cuts.append(pos)
    offset = 0
    for cut in cuts:
        while offset < cut:
            buf = parser.get_buffer()
            assert len(buf) > 0, "get_buffer() must never be empty"
            n = min(len(buf), cut - offset)
            buf[:n] = data[offset : offset + n]
            offset += n
            if parser.buffer_updated(n):
                return data[offset:]
    if eof:
        parser.eof_received()
    return b""


def split(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)] or [b""]


@dataclass
class Expected:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


# -- serialize_head ----------------------------------------------------------------------------


def test_head_basic_post() -> None:
    head = serialize_head("POST", "/v2/models/m/infer", "h:8000", [("Content-Type", "x/y")], 12)
    assert head == (
        b"POST /v2/models/m/infer HTTP/1.1\r\nContent-Type: x/y\r\nHost: h:8000\r\n"
        b"Content-Length: 12\r\n\r\n"
    )


def test_head_get_has_no_content_length_post_has_zero() -> None:
    assert b"Content-Length" not in serialize_head("GET", "/", "h", (), 0)
    assert b"Content-Length: 0\r\n" in serialize_head("POST", "/", "h", (), 0)


def test_head_caller_host_wins_and_content_length_is_computed() -> None:
    head = serialize_head("POST", "/", "h", [("Host", "other"), ("content-length", "999")], 3)
    assert b"Host: other\r\n" in head
    assert b"Host: h" not in head
    assert head.count(b"ontent-") == 1
    assert b"Content-Length: 3\r\n" in head


@pytest.mark.parametrize(
    ("method", "target", "headers"),
    [
        ("GET", "/a\r\nX: y", ()),
        ("GET", "/a b", ()),
        ("GET", "/", [("X", "a\r\nInjected: 1")]),
        ("GET", "/", [("X", "a\nb")]),
        ("GET", "/", [("X\r\nY", "a")]),
        ("GET", "/", [("X:Y", "a")]),
        ("GET", "/", [("", "a")]),
        ("GET", "/", [("Transfer-Encoding", "chunked")]),
        ("GET", "/", [("X", "\u20ac")]),
        ("G\rET", "/", ()),
    ],
)
def test_head_rejects_what_would_break_framing(
    method: str, target: str, headers: list[tuple[str, str]]
) -> None:
    with pytest.raises(InvalidInputError):
        serialize_head(method, target, "h", headers, 0)


def test_body_length_counts_bytes_not_items() -> None:
    import numpy as np

    arr = np.zeros((3, 4), dtype=np.float32)
    assert body_length([b"ab", bytearray(3), memoryview(arr)]) == 2 + 3 + 48


# -- the parser: examples ----------------------------------------------------------------------


def parse(raw: bytes, **kw: bool) -> ResponseParser:
    parser = ResponseParser()
    rest = feed(parser, [raw], **kw)
    assert rest == b""
    return parser


def test_content_length_response() -> None:
    p = parse(b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-A: 1\r\nx-a: 2\r\n\r\nabc")
    assert p.done
    assert (p.status, p.reason, bytes(p.body)) == (201, "Created", b"abc")
    assert p.headers == {"content-length": "3", "x-a": "1, 2"}
    assert p.keep_alive
    assert isinstance(p.body, bytearray)


def test_status_line_without_reason() -> None:
    p = parse(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n")
    assert (p.status, p.reason) == (200, "")


def test_chunked_with_extensions_and_trailers() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n1 \r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    p = parse(raw)
    assert bytes(p.body) == b"hello world!"
    assert p.keep_alive


def test_interim_responses_are_skipped() -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    )
    p = parse(raw)
    assert (p.status, bytes(p.body)) == (200, b"ok")
    assert "link" not in p.headers


def test_body_until_eof() -> None:
    parser = ResponseParser()
    feed(parser, [b"HTTP/1.1 200 OK\r\n\r\nsome", b" data"], eof=True)
    assert parser.done
    assert bytes(parser.body) == b"some data"
    assert not parser.keep_alive


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses(status: int) -> None:
    p = parse(b"HTTP/1.1 %d X\r\nContent-Length: 10\r\n\r\n" % status)
    assert p.done
    assert p.body == b""


def test_head_request_has_no_body() -> None:
    p = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", head_request=True)
    assert p.done
    assert p.body == b""
    assert p.keep_alive


@pytest.mark.parametrize(
    ("raw", "keep_alive"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 499 Whatever\r\nContent-Length: 0\r\n\r\n", True),
        # Server errors: the server may close the connection next without saying so.
        (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.1 503 Unavailable\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", False),
    ],
)
def test_keep_alive_rules(raw: bytes, keep_alive: bool) -> None:
    assert parse(raw).keep_alive is keep_alive


def test_chunked_and_content_length_means_chunked_and_no_reuse() -> None:
    p = parse(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n"
    )
    assert bytes(p.body) == b"ok"
    assert not p.keep_alive


def test_repeated_equal_content_lengths_are_fine() -> None:
    assert bytes(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok").body) == b"ok"


def test_trailing_bytes_after_response_forbid_reuse() -> None:
    parser = ResponseParser()
    rest = feed(parser, [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokGARBAGE"])
    assert parser.done
    assert rest == b""  # all delivered in one buffer: the parser saw the garbage itself
    assert not parser.keep_alive
    assert parser.has_unread_data


def test_parser_is_reused_for_the_next_response() -> None:
    parser = ResponseParser()
    first = feed(parser, [b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"])
    body1 = parser.body
    second = feed(parser, [b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nbc"])
    assert first == second == b""
    assert (parser.status, bytes(parser.body), bytes(body1)) == (404, b"bc", b"a")


def test_large_body_is_received_in_place() -> None:
    parser = ResponseParser()
    parser.start()
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
    buf = parser.get_buffer()
    buf[: len(head) + 10] = head + b"x" * 10
    assert not parser.buffer_updated(len(head) + 10)
    target = parser.get_buffer()
    # The next bytes go straight into the final body, after the 10 already there.
    assert target.obj is parser.body
    assert len(target) == 1000000 - 10
    target[:] = b"y" * len(target)
    assert parser.buffer_updated(len(target))
    assert parser.body[:10] == b"x" * 10
    assert parser.body[10:] == b"y" * (1000000 - 10)


def test_an_announced_length_allocates_only_what_arrives() -> None:
    # A server announcing 1 GiB and sending 40 bytes: 1 MiB of body buffer, not 1 GiB.
    parser = ResponseParser()
    tracemalloc.start()
    try:
        rest = feed(
            parser, [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 30), b"x" * 40]
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rest == b""
    assert not parser.done
    assert len(parser.body) == FIRST_BODY_BUFFER
    assert peak < FIRST_BODY_BUFFER + (512 << 10)
    with pytest.raises(ProtocolError, match=f"{(1 << 30) - 40} of {1 << 30} bytes still missing"):
        parser.eof_received()


@pytest.mark.parametrize("size", [FIRST_BODY_BUFFER + 1, 5 * FIRST_BODY_BUFFER + 12345])
def test_a_large_body_grows_in_place_to_exactly_its_length(size: int) -> None:
    parser = ResponseParser()
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + body
    parser.start()
    offset = 0
    first = None
    sizes = []
    while not parser.done:
        buf = parser.get_buffer()
        if first is None and parser.body:
            first = parser.body
        sizes.append(len(parser.body))
        n = min(len(buf), 300_000, len(raw) - offset)
        buf[:n] = raw[offset : offset + n]
        offset += n
        del buf  # an event loop lets go of the buffer after buffer_updated
        parser.buffer_updated(n)
    assert parser.body == body
    assert len(parser.body) == size
    assert parser.body is first  # grown in place: one bytearray, no copy into a new one
    # Doubling from FIRST_BODY_BUFFER, capped by the announced length.
    grown = sorted({s for s in sizes if s})
    assert grown[0] == FIRST_BODY_BUFFER
    assert grown[-1] == size
    assert all(b <= 2 * a for a, b in itertools.pairwise(grown))


def test_a_body_buffer_still_held_by_the_caller_is_grown_by_copy() -> None:
    # An event loop that keeps the last buffer while asking for the next: still correct.
    size = 3 * FIRST_BODY_BUFFER
    parser = ResponseParser()
    parser.start()
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"q" * size
    held = []
    offset = 0
    while not parser.done:
        buf = parser.get_buffer()
        held.append(buf)
        n = min(len(buf), len(raw) - offset)
        buf[:n] = raw[offset : offset + n]
        offset += n
        parser.buffer_updated(n)
    assert parser.body == b"q" * size


def test_stream_mode_hands_out_pieces() -> None:
    parser = ResponseParser()
    parser.start(stream=True)
    for chunk in (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"3\r\nabc\r\n",
        b"2\r\nde\r\n0\r\n\r\n",
    ):
        buf = parser.get_buffer()
        buf[: len(chunk)] = chunk
        parser.buffer_updated(len(chunk))
        assert parser.head_done
    assert parser.take_pieces() == [b"abc", b"de"]
    assert parser.done
    assert parser.body == b""


def test_streamed_body_finishes_only_when_every_piece_is_out() -> None:
    # An event loop may parse the rest of a body, its end included, while the caller still
    # holds earlier pieces: those pieces come next time, then the body is finished.
    parser = ResponseParser()
    feed(
        parser,
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"],
        stream=True,
    )
    body = StreamedBody(parser)
    taken = body.take()
    assert next(taken) == b"first"
    data = b"6\r\nsecond\r\n0\r\n\r\n"  # arrives before the caller asks again
    parser.get_buffer()[: len(data)] = data
    assert parser.buffer_updated(len(data))
    assert list(taken) == []
    assert not body.finished
    assert list(body.take()) == [b"second"]
    assert body.finished


def test_streamed_body_decodes_and_flushes() -> None:
    data = gzip.compress(b"hello world")
    parser = ResponseParser()
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
    feed(parser, [head % len(data), data[:7]], stream=True)
    body = StreamedBody(parser)
    first = b"".join(body.take())
    assert not body.finished
    rest = data[7:]
    parser.get_buffer()[: len(rest)] = rest
    parser.buffer_updated(len(rest))
    assert first + b"".join(body.take()) == b"hello world"
    assert body.finished


def test_byte_views_count_bytes() -> None:
    floats = memoryview(bytes(12)).cast("f")
    matrix = memoryview(bytes(6)).cast("B", (2, 3))
    views = byte_views([b"ab", bytearray(b"c"), floats, matrix])
    assert [len(v) for v in views] == [2, 1, 12, 6]
    with pytest.raises(InvalidInputError, match="contiguous"):
        byte_views([memoryview(bytes(8))[::2]])


@pytest.mark.parametrize(
    ("reused", "retry_safe", "sent", "retried"),
    [
        (True, True, True, True),  # a GET on a stale keep-alive connection
        (True, False, False, True),  # a POST whose writing failed: the server has not all of it
        (True, False, True, False),  # a POST that was written: it may have run
        (False, True, True, False),  # a new connection that closes at once: a failure
        (False, False, False, False),
    ],
)
def test_no_response_is_sent_again_only_when_it_can_do_no_harm(
    reused: bool, retry_safe: bool, sent: bool, retried: bool
) -> None:
    cause = ConnectionResetError("reset")
    try:
        raise NoResponse(sent=sent) from cause
    except NoResponse as exc:
        if retried:
            exc.check_retry(reused, retry_safe, "http://h")
            return
        with pytest.raises(TransportError, match="without sending a response") as info:
            exc.check_retry(reused, retry_safe, "http://h")
    assert info.value.__cause__ is cause
    assert ("may have been processed" in str(info.value)) == sent


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200OK\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
        b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n",
        b"FOO\r\n\r\n",
        b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nName : v\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1 1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x10\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 40 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
    ],
)
def test_malformed_responses_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        feed(ResponseParser(), [raw], eof=True)


def test_oversize_head_is_refused() -> None:
    parser = ResponseParser(max_header_size=1024)
    raw = b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * 2000 + b"\r\n\r\n"
    with pytest.raises(ProtocolError, match="larger than 1024"):
        feed(parser, [raw[i : i + 100] for i in range(0, len(raw), 100)])


@pytest.mark.parametrize(
    "first_bytes",
    [
        b"\x00\x00\x06\x04\x00\x00\x00\x00\x00",  # an HTTP/2 server's SETTINGS frame
        b"\x15\x03\x03\x00\x02\x02\x46",  # a TLS alert
        b"H",  # a good start...
        b"HTTX",  # ...gone wrong
        b"ICY 200 OK\r\n",
    ],
)
def test_a_peer_that_is_no_http1_server_is_refused_at_its_first_bytes(first_bytes: bytes) -> None:
    # Without waiting for a blank line that never comes (the call's deadline).
    parser = ResponseParser()
    if first_bytes == b"H":
        assert feed(parser, [first_bytes]) == b""
        assert not parser.head_done
        return
    # An HTTP/2 server's first frame is named as such (see test_scheme_mismatch.py).
    expected = (
        "speaks HTTP/2" if first_bytes.startswith(b"\x00") else "does not start with an HTTP/1"
    )
    with pytest.raises(ProtocolError, match=expected):
        feed(parser, [first_bytes])


def test_endless_trailers_are_refused() -> None:
    parser = ResponseParser(max_header_size=1024)
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: 1234567\r\n" * 200
    with pytest.raises(ProtocolError, match="trailer"):
        feed(parser, [raw])


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"", "without sending a response"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "middle of the response head"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "7 of 10 bytes still missing"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nabc", "truncated"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "truncated chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "truncated chunked"),
    ],
)
def test_early_eof_is_a_protocol_error(raw: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        feed(ResponseParser(), [raw], eof=True)


def test_unexpected_bytes_before_a_request_are_an_error() -> None:
    parser = ResponseParser()
    feed(parser, [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
    buf = parser.get_buffer()
    buf[:4] = b"junk"
    parser.buffer_updated(4)  # arrives while idle
    assert not parser.keep_alive
    with pytest.raises(ProtocolError, match="unexpected data"):
        parser.start()


# -- the parser: properties --------------------------------------------------------------------

_token = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1
)
_value = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=30,
).map(lambda v: v.strip(" \t"))
_FRAMING = {"content-length", "transfer-encoding", "connection"}


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, Expected]:
    status = draw(st.sampled_from([200, 201, 400, 404, 500]) | st.integers(200, 599))
    assume(status not in (204, 304))
    reason = draw(st.text(alphabet="abcdefghij XYZ", max_size=12))
    names = draw(st.lists(_token, max_size=5, unique_by=str.lower))
    names = [n for n in names if n.lower() not in _FRAMING]
    headers = [(n, draw(_value)) for n in names]
    body = draw(st.binary(max_size=2000))
    framing = draw(st.sampled_from(["length", "chunked", "eof"]))
    close = framing == "eof" or draw(st.booleans())
    lines = [f"HTTP/1.1 {status} {reason}".rstrip(" ") if reason else f"HTTP/1.1 {status}"]
    lines += [f"{n}: {v}" for n, v in headers]
    expected_headers = {n.lower(): v for n, v in headers}
    if close:
        lines.append("Connection: close")
        expected_headers["connection"] = "close"
    if framing == "length":
        lines.append(f"Content-Length: {len(body)}")
        expected_headers["content-length"] = str(len(body))
        payload = body
    elif framing == "chunked":
        lines.append("Transfer-Encoding: chunked")
        expected_headers["transfer-encoding"] = "chunked"
        cuts = draw(st.lists(st.integers(0, len(body)), max_size=6))
        payload = b""
        for piece in split(body, cuts):
            if piece:
                ext = draw(st.sampled_from(["", ";a=b", " ;x"]))
                payload += b"%x%s\r\n%s\r\n" % (len(piece), ext.encode(), piece)
        payload += b"0\r\n"
        if draw(st.booleans()):
            payload += b"Trailer-A: x\r\n"
        payload += b"\r\n"
    else:
        payload = body
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if draw(st.booleans()):
        head = b"HTTP/1.1 100 Continue\r\n\r\n" + head
    raw = head + payload
    reason_out = reason.rstrip(" ") if reason else ""
    # A server error is never followed on its connection (see the parser).
    expected = Expected(status, reason_out, expected_headers, body, not close and status < 500)
    return raw, expected


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.lists(st.integers(0, 5000), max_size=12), st.sampled_from([64, 256, 65536]))
def test_any_split_parses_identically(
    response: tuple[bytes, Expected], cuts: list[int], max_header: int
) -> None:
    raw, expected = response
    parser = ResponseParser(max_header_size=max(max_header, 64))
    if max_header < 65536:
        # A head (or framing line) longer than a tiny limit may be refused, nothing else.
        try:
            rest = feed(parser, split(raw, cuts), eof=not expected.keep_alive)
        except ProtocolError as exc:
            assert "larger than" in str(exc) or "too long" in str(exc) or "too large" in str(exc)  # noqa: PT017
            return
    else:
        rest = feed(parser, split(raw, cuts), eof=not expected.keep_alive)
    assert rest == b""
    assert parser.done
    assert parser.status == expected.status
    assert parser.reason == expected.reason
    assert parser.headers == expected.headers
    assert bytes(parser.body) == expected.body
    assert parser.keep_alive == expected.keep_alive

    # Streaming the same bytes yields the same body.
    streamer = ResponseParser()
    feed(streamer, split(raw, cuts), eof=not expected.keep_alive, stream=True)
    assert b"".join(streamer.take_pieces()) == expected.body


def _outcome(parser: ResponseParser, raw: bytes, eof: bool, head_request: bool = False) -> object:
    """Everything a transport reads from the parser after one response, or the error."""
    try:
        rest = feed(parser, [raw], eof=eof, head_request=head_request)
    except ProtocolError as exc:
        return ("error", str(exc))
    return (
        rest,
        parser.done,
        parser.status,
        parser.reason,
        dict(parser.headers),
        bytes(parser.body),
        parser.keep_alive,
    )


# Heads that differ from a good one in a byte or two: the reused parse must not leak into them.
_NEAR_MISSES = st.sampled_from(
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok!",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 201 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 2O0 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        # The body framing is reused too: chunked, both framings, and the errors.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            responses().map(lambda r: (r[0], not r[1].keep_alive)),
            _NEAR_MISSES.map(lambda raw: (raw, False)),
        ),
        min_size=1,
        max_size=4,
    ),
    st.data(),
)
def test_a_reused_parser_parses_every_head_as_a_fresh_one_does(
    pool: list[tuple[bytes, bool]], data: st.DataObject
) -> None:
    # The parser keeps the last head's parse to reuse for an identical head: a sequence with
    # repeats, near misses and errors must read exactly as with a new parser each time.
    # Some of them answer HEAD requests: no body whatever the head says, framing errors or not.
    sequence = data.draw(
        st.lists(st.tuples(st.sampled_from(pool), st.booleans()), min_size=1, max_size=10)
    )
    reused = ResponseParser()
    for (raw, eof), head_request in sequence:
        expected = _outcome(ResponseParser(), raw, eof, head_request)
        assert _outcome(reused, raw, eof, head_request) == expected
        if reused.has_unread_data or not reused.done:
            reused = ResponseParser()  # a transport drops such a connection
        else:
            reused.headers["x-changed-by-the-caller"] = "1"  # the caller's own dict


_garbage_prefixes = st.sampled_from(
    [
        b"",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
    ]
)


@settings(max_examples=400)
@given(
    _garbage_prefixes,
    st.binary(max_size=600)
    | st.lists(
        st.sampled_from([b"\r\n", b"\r", b"\n", b":", b" ", b"0", b"a", b";", b"HTTP/1.1 "])
    ).map(b"".join),
    st.lists(st.integers(0, 700), max_size=8),
    st.booleans(),
    st.booleans(),
)
def test_garbage_parses_or_raises_protocol_error(
    prefix: bytes, garbage: bytes, cuts: list[int], eof: bool, stream: bool
) -> None:
    raw = prefix + garbage
    parser = ResponseParser(max_header_size=128)
    try:
        feed(parser, split(raw, cuts), eof=eof, stream=stream)
    except ProtocolError:
        return
    if eof:
        assert parser.done


# -- Content-Encoding --------------------------------------------------------------------------


def raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


PAYLOAD = b'{"outputs": [1, 2, 3]}' * 50


@pytest.mark.parametrize(
    ("encoding", "encoded"),
    [
        ("gzip", gzip.compress(PAYLOAD)),
        ("x-gzip", gzip.compress(PAYLOAD)),
        ("GZIP", gzip.compress(PAYLOAD)),
        ("gzip", gzip.compress(PAYLOAD[:100]) + gzip.compress(PAYLOAD[100:])),
        ("deflate", zlib.compress(PAYLOAD)),
        ("deflate", raw_deflate(PAYLOAD)),
        ("identity", PAYLOAD),
        ("deflate, gzip", gzip.compress(zlib.compress(PAYLOAD))),
    ],
)
def test_decode_body(encoding: str, encoded: bytes) -> None:
    out = decode_body(bytearray(encoded), encoding)
    assert out == PAYLOAD
    assert isinstance(out, bytearray)
    # The streaming decoder agrees, whatever the piece size.
    for size in (1, 7, 1000):
        dec = StreamDecoder(encoding)
        pieces = [dec.decode(encoded[i : i + size]) for i in range(0, len(encoded), size)]
        assert b"".join(pieces) + dec.flush() == PAYLOAD


def test_unknown_encoding_passes_through() -> None:
    body = bytearray(b"\x00brotli?")
    assert decode_body(body, "br") is body
    assert decode_body(body, "gzip, br") is body
    assert not StreamDecoder("br").active


@pytest.mark.parametrize(
    ("encoding", "encoded", "message"),
    [
        ("gzip", b"not gzip at all", "cannot decode gzip response body: .*header"),
        ("gzip", gzip.compress(PAYLOAD)[:-10], "^truncated gzip response body$"),
        ("x-gzip", gzip.compress(PAYLOAD)[:-10], "^truncated gzip response body$"),
        # Not whole as zlib data, so read again as raw deflate, which it is not either.
        ("deflate", zlib.compress(PAYLOAD)[:20], "cannot decode deflate response body"),
        ("deflate", b"\xff\xff\xff\xff", "cannot decode deflate response body"),
        ("deflate", raw_deflate(PAYLOAD)[:-10], "^truncated deflate response body$"),
    ],
)
def test_corrupt_or_truncated_compressed_body(encoding: str, encoded: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_body(bytearray(encoded), encoding)
    assert type(info.value) is ProtocolError  # no private subclass in the user's traceback
    dec = StreamDecoder(encoding)

    def decode_all() -> bytes:
        return dec.decode(encoded) + dec.flush()

    with pytest.raises(ProtocolError):
        decode_all()


@given(st.binary(max_size=3000), st.lists(st.integers(0, 4000), max_size=10), st.booleans())
def test_stream_decoder_any_split(data: bytes, cuts: list[int], use_gzip: bool) -> None:
    encoded = gzip.compress(data) if use_gzip else raw_deflate(data)
    dec = StreamDecoder("gzip" if use_gzip else "deflate")
    out = b"".join(dec.decode(piece) for piece in split(encoded, cuts)) + dec.flush()
    assert out == data


# -- max_response_size -------------------------------------------------------------------------


def _framed(body: bytes, framing: str) -> tuple[bytes, bool]:
    """A response carrying ``body`` with the given framing; whether it needs EOF to end."""
    if framing == "length":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body, False
    if framing == "chunked":
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7])
            for i in range(0, len(body), 7)
        )
        return (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n",
            False,
        )
    return b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body, True


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(0, 3000),
    limit=st.integers(1, 3000),
    framing=st.sampled_from(["length", "chunked", "eof"]),
    cuts=st.lists(st.integers(0, 3100), max_size=6),
)
def test_body_limit_accepts_exactly_the_bodies_that_fit(
    size: int, limit: int, framing: str, cuts: list[int]
) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    raw, eof = _framed(body, framing)
    parser = ResponseParser(max_body_size=limit)
    if size <= limit:
        feed(parser, split(raw, cuts), eof=eof)
        assert parser.done
        assert bytes(parser.body) == body
    else:
        with pytest.raises(ProtocolError, match="max_response_size") as info:
            feed(parser, split(raw, cuts), eof=eof)
        assert not parser.keep_alive
        # An announced length is named in the error (and refused before any allocation).
        assert info.value.value == (size if framing == "length" else limit)


def test_body_limit_refuses_a_huge_announced_length_without_allocating() -> None:
    parser = ResponseParser(max_body_size=1 << 20)
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999999\r\n\r\n"
    with pytest.raises(
        ProtocolError, match=r"999999999999999 bytes is larger than max_response_size"
    ):
        feed(parser, [raw])


def test_body_limit_leaves_streamed_bodies_alone() -> None:
    body = b"x" * 5000
    for framing in ("length", "chunked", "eof"):
        raw, eof = _framed(body, framing)
        parser = ResponseParser(max_body_size=10)
        feed(parser, [raw], eof=eof, stream=True)
        assert b"".join(parser.take_pieces()) == body


_BOMB = b"\0" * (1 << 22)  # 4 MiB of zeros: a few KiB compressed


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate
        ("gzip", lambda data: gzip.compress(data[:1000]) + gzip.compress(data[1000:])),
        ("gzip, deflate", lambda data: zlib.compress(gzip.compress(data))),
    ],
    ids=["gzip", "zlib-deflate", "raw-deflate", "gzip-members", "stacked"],
)
def test_decompression_is_bounded_by_the_limit(
    encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    compressed = bytearray(encode(_BOMB))
    assert len(compressed) < 64 << 10
    assert decode_body(compressed, encoding, len(_BOMB)) == _BOMB  # exactly the limit fits
    with pytest.raises(ProtocolError, match="decompressed response body is larger") as info:
        decode_body(compressed, encoding, len(_BOMB) - 1)
    assert info.value.value == len(_BOMB) - 1
    assert type(info.value) is ProtocolError
    with pytest.raises(ProtocolError, match="max_response_size"):
        decode_body(compressed, encoding, 1000)


@settings(max_examples=100)
@given(data=st.binary(max_size=2000), limit=st.integers(1, 2100), use_gzip=st.booleans())
def test_decode_body_limit_property(data: bytes, limit: int, use_gzip: bool) -> None:
    encoded = bytearray(gzip.compress(data) if use_gzip else zlib.compress(data))
    encoding = "gzip" if use_gzip else "deflate"
    if len(data) <= limit:
        assert decode_body(encoded, encoding, limit) == data
    else:
        with pytest.raises(ProtocolError, match="max_response_size"):
            decode_body(encoded, encoding, limit)


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("gzip", lambda data: gzip.compress(data[:1000]) + gzip.compress(data[1000:])),
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
    ],
    ids=["gzip", "deflate", "gzip-members", "stacked"],
)
def test_a_streamed_piece_decompresses_within_the_limit(
    encoding: str, encode: Callable[[bytes], bytes]
) -> None:
    """Stacked codings multiply inflation ratios (found writing the fuzz targets): a 600-byte
    "gzip, gzip" body decoded to 256 MiB in one call (557 MiB at peak). Now each piece is
    bounded."""
    compressed = encode(_BOMB)
    assert StreamDecoder(encoding, max_piece_size=len(_BOMB)).decode(compressed) == _BOMB
    with pytest.raises(ProtocolError, match="decompresses to more than") as info:
        StreamDecoder(encoding, max_piece_size=len(_BOMB) - 1).decode(compressed)
    assert isinstance(info.value.value, int)


def test_a_streamed_stacked_bomb_is_refused_at_the_default_limit() -> None:
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    bomb = gzip.compress(b"".join([*(inner.compress(zeros) for _ in range(80)), inner.flush()]))
    assert len(bomb) < 4096  # 80 MiB twice gzipped
    with pytest.raises(ProtocolError, match=f"more than {DEFAULT_MAX_DECODED_PIECE} bytes"):
        StreamDecoder("gzip, gzip").decode(bomb)


# -- a TLS connection that ends without close_notify (RFC 9112 section 9.8) --------------------


def test_an_until_eof_body_ended_without_close_notify_is_refused() -> None:
    parser = ResponseParser()
    assert feed(parser, [b"HTTP/1.1 200 OK\r\n\r\nsome body"]) == b""
    with pytest.raises(ProtocolError, match="without close_notify"):
        parser.eof_received(clean=False)
    assert not parser.done


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
    ],
    ids=["content-length", "chunked"],
)
def test_a_framed_body_is_complete_however_tls_ends(raw: bytes) -> None:
    parser = ResponseParser()
    feed(parser, [raw])
    assert parser.done
    parser.eof_received(clean=False)  # the framing said where the body ends
    assert bytes(parser.body) == b"body"
    assert not parser.keep_alive


def test_a_truncation_is_the_same_error_whatever_the_close() -> None:
    for clean in (True, False):
        parser = ResponseParser()
        feed(parser, [b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nbody"])
        with pytest.raises(ProtocolError, match="5 of 9 bytes still missing"):
            parser.eof_received(clean=clean)
