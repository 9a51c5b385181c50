"""kserve_v2.h2.connection: the client HTTP/2 state machine, driven by hand-built server frames.

No server and no socket: the tests build what a server would send (frame headers, HPACK
blocks from the Encoder or written out by hand), feed it to :meth:`H2Connection.receive`
in one piece, byte by byte or split at random points, and check the events and the frames
the connection queues in answer.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.h2 import connection as h2c
from kserve_v2.h2.connection import (
    CONNECTION_RECEIVE_WINDOW,
    CONTINUATION_BACKLOG,
    RECEIVE_MAX_FRAME_SIZE,
    RECEIVE_WINDOW,
    STREAM_TRANSITIONS,
    DataReceived,
    Event,
    GoAwayReceived,
    H2Connection,
    H2ConnectionError,
    H2StateError,
    HeadersReceived,
    PingAcknowledged,
    StreamInput,
    StreamReset,
    StreamState,
    WindowUpdated,
    encode_settings,
)
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    FLAG_PRIORITY,
    GOAWAY,
    HEADERS,
    MAX_FRAME_SIZE_LIMIT,
    MAX_WINDOW,
    PING,
    PREFACE,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    Setting,
    frame_header,
    parse_frame_header,
)
from kserve_v2.h2.hpack import Encoder

# Property tests run on a small shared machine: no deadline, sizes kept small.
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

Headers = list[tuple[str, str]]

RESPONSE: Headers = [(":status", "200"), ("content-type", "application/grpc")]
TRAILERS: Headers = [("grpc-status", "0"), ("grpc-message", "")]
REQUEST_BLOCK = Encoder().encode(
    [(":method", "POST"), (":scheme", "http"), (":path", "/s/M"), (":authority", "h")]
)


# ------------------------------------------------------------------------- frame builders


def frame(kind: int, flags: int = 0, stream_id: int = 0, payload: bytes = b"") -> bytes:
    return frame_header(len(payload), kind, flags, stream_id) + bytes(payload)


def block(headers: Sequence[tuple[str, str]]) -> bytes:
    return Encoder().encode(headers)


def padded(payload: bytes, pad: int | None) -> tuple[bytes, int]:
    """``payload`` with a pad length octet and ``pad`` zero octets, and the PADDED flag."""
    if pad is None:
        return payload, 0
    return bytes((pad,)) + payload + bytes(pad), FLAG_PADDED


def headers_frame(
    stream_id: int,
    headers: Sequence[tuple[str, str]] | bytes,
    *,
    end_stream: bool = False,
    end_headers: bool = True,
    pad: int | None = None,
    priority: bool = False,
) -> bytes:
    payload = headers if isinstance(headers, bytes) else block(headers)
    flags = (FLAG_END_STREAM if end_stream else 0) | (FLAG_END_HEADERS if end_headers else 0)
    if priority:
        payload = struct.pack(">LB", 0x80000000, 15) + payload  # exclusive on stream 0
        flags |= FLAG_PRIORITY
    payload, pad_flag = padded(payload, pad)
    return frame(HEADERS, flags | pad_flag, stream_id, payload)


def data_frame(
    stream_id: int, data: bytes, *, end_stream: bool = False, pad: int | None = None
) -> bytes:
    payload, pad_flag = padded(data, pad)
    return frame(DATA, (FLAG_END_STREAM if end_stream else 0) | pad_flag, stream_id, payload)


def window_update(stream_id: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream_id, struct.pack(">L", increment))


def rst_stream(stream_id: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream_id, struct.pack(">L", code))


def goaway(last_stream_id: int, code: int = ErrorCode.NO_ERROR, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, struct.pack(">LL", last_stream_id, code) + debug)


def settings_frame(*pairs: tuple[int, int]) -> bytes:
    return encode_settings(pairs)


def literal_indexed(name: str, value: str) -> bytes:
    """An HPACK literal with incremental indexing and a literal name (RFC 7541 6.2.1)."""
    raw_name, raw_value = name.encode(), value.encode()
    return b"\x40" + bytes((len(raw_name),)) + raw_name + bytes((len(raw_value),)) + raw_value


# ------------------------------------------------------------------------ reading output


Frame = tuple[int, int, int, bytes]


def parse_frames(raw: bytes) -> list[Frame]:
    """``(type, flags, stream_id, payload)`` of each frame in ``raw`` (which must be whole)."""
    frames = []
    pos = 0
    while pos < len(raw):
        length, kind, flags, stream_id = parse_frame_header(raw, pos)
        assert pos + 9 + length <= len(raw), "a queued frame is cut short"
        frames.append((kind, flags, stream_id, raw[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return frames


def sent(conn: H2Connection) -> bytes:
    return b"".join(bytes(part) for part in conn.data_to_send())


def sent_frames(conn: H2Connection) -> list[Frame]:
    return parse_frames(sent(conn))


def connected(*, streams: int = 0, **kwargs: Any) -> H2Connection:
    """A connection past the SETTINGS exchange (the server sent empty SETTINGS), with
    ``streams`` streams open (ids 1, 3, ...) and nothing queued."""
    conn = H2Connection(**kwargs)
    conn.initiate()
    conn.data_to_send()
    assert conn.receive(settings_frame()) == []
    assert sent_frames(conn) == [(SETTINGS, FLAG_ACK, 0, b"")]
    for _ in range(streams):
        conn.open_stream(REQUEST_BLOCK)
    conn.data_to_send()
    return conn


def describe(event: Event) -> tuple[Any, ...]:
    """A comparable form of an event (copies the data view, which dies on the next receive)."""
    if isinstance(event, HeadersReceived):
        return ("headers", event.stream_id, tuple(event.headers), event.end_stream)
    if isinstance(event, DataReceived):
        assert isinstance(event.data, memoryview)
        return ("data", event.stream_id, bytes(event.data), event.end_stream)
    if isinstance(event, StreamReset):
        return ("reset", event.stream_id, event.error_code, event.refused)
    if isinstance(event, WindowUpdated):
        return ("window", event.stream_id)
    if isinstance(event, GoAwayReceived):
        return ("goaway", event.last_stream_id, event.error_code, event.debug_data)
    if isinstance(event, PingAcknowledged):
        return ("pong", event.payload)
    raise AssertionError(f"unknown event {event!r}")


def merge_data(described: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Consecutive DATA events of one stream joined: how a payload is cut into events
    depends on how the bytes arrived, what they add up to must not."""
    out: list[tuple[Any, ...]] = []
    for item in described:
        if item[0] == "data" and out and out[-1][0] == "data" and out[-1][1] == item[1]:
            _, stream_id, data, end = out[-1]
            assert not end, "DATA after the stream's end_stream event"
            out[-1] = ("data", stream_id, data + item[2], item[3])
        else:
            out.append(item)
    return out


def feed(conn: H2Connection, chunks: Iterable[bytes]) -> list[tuple[Any, ...]]:
    """Deliver ``chunks`` the way the native transport does (each copied into one reused
    receive buffer, passed as a view of it) and return the merged, described events."""
    size = 1 << 16
    buffer = bytearray(size)
    view = memoryview(buffer)
    out = []
    for chunk in chunks:
        if len(chunk) > size:
            size = len(chunk)
            buffer = bytearray(size)
            view = memoryview(buffer)
        buffer[: len(chunk)] = chunk
        out += [describe(event) for event in conn.receive(view[: len(chunk)])]
        buffer[: len(chunk)] = b"\xee" * len(chunk)  # views into it are dead now
    return merge_data(out)


def split_at(raw: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({0, len(raw), *(cut % (len(raw) + 1) for cut in cuts)})
    return [raw[a:b] for a, b in itertools.pairwise(points)]


def assert_failed(conn: H2Connection, exc: pytest.ExceptionInfo[H2ConnectionError], code: int):
    """The connection failed with ``code``: a GOAWAY naming it is queued, it stays closed."""
    assert exc.value.code == code
    assert ErrorCode.name_of(code) in str(exc.value)
    frames = sent_frames(conn)
    assert frames, "no GOAWAY queued"
    kind, _, stream_id, payload = frames[-1]
    assert (kind, stream_id) == (GOAWAY, 0)
    assert struct.unpack_from(">LL", payload) == (0, code)
    assert conn.closed
    assert not conn.can_open_stream()
    with pytest.raises(H2StateError):  # feeding a closed connection is the caller's mistake
        conn.receive(frame(PING, 0, 0, bytes(8)))
    assert sent(conn) == b"", "a closed connection answered"


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail instead of hanging (SIGALRM: the tests run in the main thread on Linux)."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"took more than {seconds} s: a hang?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -------------------------------------------------------------------------------- initiate


def test_initiate_queues_preface_settings_and_connection_window() -> None:
    conn = H2Connection(max_header_list_size=12345)
    assert not conn.has_data_to_send
    conn.initiate()
    assert conn.has_data_to_send
    raw = sent(conn)
    assert not conn.has_data_to_send
    assert raw.startswith(PREFACE)
    frames = parse_frames(raw[len(PREFACE) :])
    assert [(kind, flags, sid) for kind, flags, sid, _ in frames] == [
        (SETTINGS, 0, 0),
        (WINDOW_UPDATE, 0, 0),
    ]
    payload = frames[0][3]
    assert len(payload) % 6 == 0
    announced = dict(struct.iter_unpack(">HL", payload))
    assert announced == {
        Setting.ENABLE_PUSH: 0,
        Setting.INITIAL_WINDOW_SIZE: RECEIVE_WINDOW,
        Setting.MAX_FRAME_SIZE: RECEIVE_MAX_FRAME_SIZE,
        Setting.MAX_HEADER_LIST_SIZE: 12345,
    }
    assert DEFAULT_MAX_FRAME_SIZE <= RECEIVE_MAX_FRAME_SIZE <= MAX_FRAME_SIZE_LIMIT
    assert DEFAULT_WINDOW < RECEIVE_WINDOW <= MAX_WINDOW
    # The connection window starts at 65535; the update brings it to the largest allowed.
    (increment,) = struct.unpack(">L", frames[1][3])
    assert increment == CONNECTION_RECEIVE_WINDOW - DEFAULT_WINDOW == MAX_WINDOW - DEFAULT_WINDOW
    assert sent(conn) == b""


def test_connection_error_is_a_protocol_error() -> None:
    assert issubclass(H2ConnectionError, ProtocolError)
    assert H2ConnectionError("x").code == ErrorCode.PROTOCOL_ERROR
    assert H2ConnectionError("x", ErrorCode.CANCEL).code == ErrorCode.CANCEL


def test_server_settings_are_acknowledged_and_applied() -> None:
    conn = H2Connection()
    conn.initiate()
    conn.data_to_send()
    events = conn.receive(
        settings_frame(
            (Setting.HEADER_TABLE_SIZE, 0),
            (Setting.ENABLE_PUSH, 0),
            (Setting.MAX_CONCURRENT_STREAMS, 100),
            (Setting.MAX_FRAME_SIZE, 65536),
            (Setting.MAX_HEADER_LIST_SIZE, 8192),
            (0x99, 7),  # unknown: ignored
        )
    )
    assert events == []
    assert sent_frames(conn) == [(SETTINGS, FLAG_ACK, 0, b"")]
    assert conn.peer_max_concurrent_streams == 100
    assert conn.peer_max_frame_size == 65536
    assert conn.peer_initial_window == DEFAULT_WINDOW
    # The server acknowledging our SETTINGS needs no answer.
    assert conn.receive(frame(SETTINGS, FLAG_ACK)) == []
    assert sent(conn) == b""


# --------------------------------------------------------------------------------- sending


def test_open_stream_queues_headers_with_odd_increasing_ids() -> None:
    conn = connected()
    assert conn.can_open_stream()
    assert conn.open_stream(REQUEST_BLOCK) == 1
    assert conn.open_stream(REQUEST_BLOCK, end_stream=True) == 3
    assert conn.open_streams == 2
    assert sent_frames(conn) == [
        (HEADERS, FLAG_END_HEADERS, 1, REQUEST_BLOCK),
        (HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 3, REQUEST_BLOCK),
    ]
    conn.send_trailers(1, block(TRAILERS))
    assert sent_frames(conn) == [(HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 1, block(TRAILERS))]


@pytest.mark.parametrize("end_stream", [False, True])
def test_large_header_block_is_split_into_continuation_frames(end_stream: bool) -> None:
    conn = connected()
    big = block([("x-big", "v" * 40_000)])
    stream_id = conn.open_stream(big, end_stream=end_stream)
    frames = sent_frames(conn)
    assert [(kind, flags, sid) for kind, flags, sid, _ in frames] == [
        (HEADERS, FLAG_END_STREAM if end_stream else 0, stream_id),
        (CONTINUATION, 0, stream_id),
        (CONTINUATION, FLAG_END_HEADERS, stream_id),
    ]
    assert all(len(payload) <= DEFAULT_MAX_FRAME_SIZE for *_, payload in frames)
    assert b"".join(payload for *_, payload in frames) == big
    # A block exactly the frame size still fits one frame.
    exact = b"\x88" * DEFAULT_MAX_FRAME_SIZE
    conn.open_stream(exact)
    assert sent_frames(conn) == [(HEADERS, FLAG_END_HEADERS, 3, exact)]


def test_max_concurrent_streams_and_stream_id_exhaustion() -> None:
    conn = connected()
    conn.receive(settings_frame((Setting.MAX_CONCURRENT_STREAMS, 2)))
    first = conn.open_stream(REQUEST_BLOCK)
    conn.open_stream(REQUEST_BLOCK)
    assert not conn.can_open_stream()
    with pytest.raises(H2StateError, match="MAX_CONCURRENT_STREAMS"):
        conn.open_stream(REQUEST_BLOCK)
    conn.end_stream(first)
    assert conn.open_streams == 1
    assert conn.can_open_stream()
    assert conn.open_stream(REQUEST_BLOCK) == 5

    conn = connected()
    conn.receive(settings_frame((Setting.MAX_CONCURRENT_STREAMS, 0)))
    assert not conn.can_open_stream()

    conn = connected()
    conn._next_stream_id = MAX_WINDOW  # the last client stream id
    assert conn.open_stream(REQUEST_BLOCK) == MAX_WINDOW
    assert not conn.can_open_stream()


def _request_twins(setup: Iterable[bytes], spent: int) -> tuple[H2Connection, H2Connection]:
    """Two connections alike: the server's ``setup`` frames received, ``spent`` bytes of the
    connection window used by a stream of their own (id 1)."""
    twins = []
    for _ in range(2):
        conn = connected(streams=1)
        for raw in setup:
            conn.receive(raw)
        if spent:
            assert conn.send_data(1, bytes(spent)) == spent
        conn.data_to_send()
        twins.append(conn)
    return twins[0], twins[1]


@pytest.mark.parametrize(
    ("body_size", "header_size", "setup", "spent", "fused"),
    [
        (0, 60, (), 0, True),
        (180, 60, (), 0, True),
        (DEFAULT_MAX_FRAME_SIZE, 60, (), 0, True),  # exactly one frame
        (DEFAULT_MAX_FRAME_SIZE + 1, 60, (), 0, False),  # two frames: not fused
        (180, 40_000, (), 0, True),  # headers in CONTINUATION frames, then the DATA
        (180, 60, (settings_frame((Setting.INITIAL_WINDOW_SIZE, 100)),), 0, False),
        (180, 60, (settings_frame((Setting.INITIAL_WINDOW_SIZE, 180)),), 0, True),
        (180, 60, (), DEFAULT_WINDOW - 179, False),  # the connection window is short
        (180, 60, (), DEFAULT_WINDOW - 180, True),
        (30_000, 60, (settings_frame((Setting.MAX_FRAME_SIZE, 40_000)),), 0, True),
    ],
)
def test_open_request_is_open_stream_then_send_data(
    body_size: int, header_size: int, setup: tuple[bytes, ...], spent: int, fused: bool
) -> None:
    """open_request queues what open_stream and send_data(end_stream=True) would, when the
    body fits one DATA frame within both windows; otherwise only the headers."""
    header_block = block([("x-h", "v" * header_size)])
    body = bytes(range(256)) * (body_size // 256) + bytes(body_size % 256)
    fast, reference = _request_twins(setup, spent)
    stream_id, queued = fast.open_request(header_block, body)
    assert stream_id == reference.open_stream(header_block) == 3
    assert queued is fused
    if fused:
        assert reference.send_data(stream_id, body, end_stream=True) == body_size
        assert fast.stream_state(stream_id) is StreamState.HALF_CLOSED_LOCAL
    else:
        assert fast.stream_state(stream_id) is StreamState.OPEN
    assert sent_frames(fast) == sent_frames(reference)
    assert fast.send_window(stream_id) == reference.send_window(stream_id)
    assert fast.send_window(1) == reference.send_window(1)  # the connection's is shared
    assert fast.stream_state(stream_id) is reference.stream_state(stream_id)


def test_open_request_refuses_what_open_stream_refuses() -> None:
    conn = connected()
    conn.receive(settings_frame((Setting.MAX_CONCURRENT_STREAMS, 0)))
    conn.data_to_send()
    with pytest.raises(H2StateError, match="MAX_CONCURRENT_STREAMS"):
        conn.open_request(REQUEST_BLOCK, b"body")
    with pytest.raises(H2StateError, match="MAX_CONCURRENT_STREAMS"):
        conn.open_request(REQUEST_BLOCK, bytes(DEFAULT_WINDOW + 1))  # the unfused path too
    assert sent(conn) == b""


def test_send_data_is_limited_by_the_default_window_and_frame_size() -> None:
    conn = connected(streams=1)
    payload = bytearray(range(256)) * 400  # 102400 bytes
    assert conn.send_window(1) == DEFAULT_WINDOW
    assert conn.send_data(1, payload, end_stream=True) == DEFAULT_WINDOW
    assert conn.send_window(1) == 0
    frames = sent_frames(conn)
    assert [len(p) for *_, p in frames] == [16384, 16384, 16384, 16383]
    assert all(kind == DATA and flags == 0 and sid == 1 for kind, flags, sid, _ in frames)
    assert b"".join(p for *_, p in frames) == payload[:DEFAULT_WINDOW]
    # Nothing more fits until the peer opens the windows.
    assert conn.send_data(1, memoryview(payload)[DEFAULT_WINDOW:], end_stream=True) == 0
    assert sent(conn) == b""

    # The connection window alone is not enough...
    events = conn.receive(window_update(0, 50_000))
    assert [describe(e) for e in events] == [("window", 0)]
    assert conn.send_window(1) == 0
    # ...the stream's is needed too.
    events = conn.receive(window_update(1, 40_000))
    assert [describe(e) for e in events] == [("window", 1)]
    assert conn.send_window(1) == 40_000
    rest = memoryview(payload)[DEFAULT_WINDOW:]
    assert conn.send_data(1, rest, end_stream=True) == 36_865
    frames = sent_frames(conn)
    assert [(len(p), flags) for _, flags, _, p in frames] == [
        (16384, 0),
        (16384, 0),
        (4097, FLAG_END_STREAM),
    ]
    assert b"".join(p for *_, p in frames) == bytes(rest)
    assert conn.send_window(1) == 40_000 - 36_865


def test_send_data_frames_follow_peer_max_frame_size() -> None:
    conn = connected(streams=1)
    conn.receive(settings_frame((Setting.MAX_FRAME_SIZE, 20_000)))
    conn.data_to_send()
    assert conn.send_data(1, bytes(50_000)) == 50_000
    assert [len(p) for *_, p in sent_frames(conn)] == [20_000, 20_000, 10_000]
    conn.receive(settings_frame((Setting.MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT)))
    conn.receive(window_update(0, 1 << 20))
    conn.receive(window_update(1, 1 << 20))
    conn.data_to_send()
    assert conn.send_data(1, bytes(100_000), end_stream=True) == 100_000
    assert [(len(p), f) for _, f, _, p in sent_frames(conn)] == [(100_000, FLAG_END_STREAM)]


def test_windows_events_and_connection_window_shared_by_streams() -> None:
    conn = connected(streams=2)
    assert conn.send_data(1, bytes(60_000)) == 60_000
    # Stream 3 has its own 65535 but the connection has 5535 left.
    assert conn.send_window(3) == 5_535
    assert conn.send_data(3, bytes(10_000)) == 5_535
    assert conn.send_window(3) == 0
    assert conn.send_window(99) == 0  # not a stream
    events = conn.receive(window_update(0, 1000))
    assert [describe(e) for e in events] == [("window", 0)]
    assert conn.send_window(3) == 1000
    assert conn.send_window(1) == 1000  # stream 1 has 5535 of its own


def test_send_data_zero_length_with_end_stream_even_without_window() -> None:
    conn = connected(streams=1)
    assert conn.send_data(1, bytes(DEFAULT_WINDOW)) == DEFAULT_WINDOW
    conn.data_to_send()
    assert conn.send_window(1) == 0
    assert conn.send_data(1, b"", end_stream=True) == 0
    assert sent_frames(conn) == [(DATA, FLAG_END_STREAM, 1, b"")]


def test_end_stream_only_when_everything_was_queued() -> None:
    conn = connected(streams=1)
    assert conn.send_data(1, bytes(70_000), end_stream=True) == DEFAULT_WINDOW
    assert all(flags == 0 for _, flags, _, _ in sent_frames(conn))
    conn = connected(streams=1)
    assert conn.send_data(1, bytes(DEFAULT_WINDOW), end_stream=True) == DEFAULT_WINDOW
    flags = [flags for _, flags, _, _ in sent_frames(conn)]
    assert flags == [0, 0, 0, FLAG_END_STREAM]


def test_send_data_on_unknown_stream_raises() -> None:
    conn = connected()
    with pytest.raises(H2StateError, match="stream 1: it is not opened") as exc:
        conn.send_data(1, b"x")
    assert (exc.value.stream_id, exc.value.state) == (1, None)
    conn.open_stream(REQUEST_BLOCK)
    conn.reset_stream(1)
    with pytest.raises(H2StateError, match="stream 1: it is CLOSED") as exc:
        conn.send_data(1, b"x")
    assert exc.value.state is StreamState.CLOSED
    assert not isinstance(exc.value, ProtocolError)  # our mistake, not the peer's


@pytest.mark.parametrize("kind", ["bytearray", "numpy", "memoryview", "bytes"])
def test_send_data_does_not_copy(kind: str) -> None:
    conn = connected(streams=1)
    conn.receive(window_update(0, 1 << 20))
    conn.receive(window_update(1, 1 << 20))
    raw = np.arange(25_000, dtype=np.float32)  # 100000 bytes: seven frames
    owner: object
    if kind == "numpy":
        owner = data = raw
    elif kind == "bytearray":
        owner = data = bytearray(raw.tobytes())
    elif kind == "memoryview":
        owner = bytearray(raw.tobytes())
        data = memoryview(owner)[10:]
    else:
        owner = data = raw.tobytes()
    total = memoryview(data).nbytes
    conn.data_to_send()
    assert conn.send_data(1, data, end_stream=True) == total
    parts = conn.data_to_send()
    headers, payloads = parts[0::2], parts[1::2]
    assert len(payloads) == -(-total // DEFAULT_MAX_FRAME_SIZE)
    for payload in payloads:
        assert isinstance(payload, memoryview)
        assert payload.obj is owner, "a DATA payload was copied"
    assert all(isinstance(h, bytes) and len(h) == 9 for h in headers)
    assert b"".join(bytes(p) for p in payloads) == memoryview(data).cast("B").tobytes()


def test_initial_window_size_changes_adjust_open_streams() -> None:
    conn = connected(streams=1)
    assert conn.send_data(1, bytes(1000)) == 1000
    # Shrinking below what is in flight makes the stream's window negative.
    events = conn.receive(settings_frame((Setting.INITIAL_WINDOW_SIZE, 500)))
    assert events == []
    assert conn.peer_initial_window == 500
    assert conn.send_window(1) == 0
    assert conn.send_data(1, b"abc") == 0
    conn.data_to_send()
    conn.receive(window_update(1, 600))  # -500 + 600
    assert conn.send_window(1) == 100
    # Growing it reports a window update for every stream (stream 0 meaning all).
    events = conn.receive(settings_frame((Setting.INITIAL_WINDOW_SIZE, 10_500)))
    assert [describe(e) for e in events] == [("window", 0)]
    assert conn.send_window(1) == 10_100
    # New streams start at the new size.
    stream_id = conn.open_stream(REQUEST_BLOCK)
    assert conn.send_window(stream_id) == 10_500
    # Several values in one frame: the last wins, deltas add up.
    conn.receive(
        settings_frame((Setting.INITIAL_WINDOW_SIZE, 0), (Setting.INITIAL_WINDOW_SIZE, 20_500))
    )
    assert conn.send_window(1) == 20_100
    assert conn.send_window(stream_id) == 20_500


def test_initial_window_size_over_the_limit_is_a_flow_control_error() -> None:
    conn = connected(streams=1)
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(settings_frame((Setting.INITIAL_WINDOW_SIZE, MAX_WINDOW + 1)))
    assert_failed(conn, exc, ErrorCode.FLOW_CONTROL_ERROR)


def test_initial_window_size_growing_a_stream_window_past_the_limit() -> None:
    conn = connected(streams=1)
    conn.receive(window_update(1, MAX_WINDOW - DEFAULT_WINDOW))
    assert conn.send_window(1) == DEFAULT_WINDOW  # the connection window limits it
    conn.receive(settings_frame((Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)))  # no change
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(settings_frame((Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW + 1)))
    assert_failed(conn, exc, ErrorCode.FLOW_CONTROL_ERROR)


def test_connection_window_overflow_is_a_flow_control_error() -> None:
    conn = connected()
    conn.receive(window_update(0, MAX_WINDOW - DEFAULT_WINDOW))  # exactly the limit
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(window_update(0, 1))
    assert_failed(conn, exc, ErrorCode.FLOW_CONTROL_ERROR)


def test_stream_window_overflow_and_zero_increment_reset_the_stream() -> None:
    conn = connected(streams=2)
    events = conn.receive(window_update(1, MAX_WINDOW - DEFAULT_WINDOW + 1))
    assert [describe(e) for e in events] == [("reset", 1, ErrorCode.FLOW_CONTROL_ERROR, False)]
    assert sent_frames(conn) == [
        (RST_STREAM, 0, 1, struct.pack(">L", ErrorCode.FLOW_CONTROL_ERROR))
    ]
    events = conn.receive(window_update(3, 0))
    assert [describe(e) for e in events] == [("reset", 3, ErrorCode.PROTOCOL_ERROR, False)]
    assert sent_frames(conn) == [(RST_STREAM, 0, 3, struct.pack(">L", ErrorCode.PROTOCOL_ERROR))]
    assert conn.open_streams == 0
    assert not conn.closed
    # Late updates for streams that are gone are ignored; the reserved bit is dropped.
    assert conn.receive(window_update(1, 5)) == []
    events = conn.receive(window_update(0, 0x80000000 | 7))
    assert [describe(e) for e in events] == [("window", 0)]


# ------------------------------------------------------------------------------- receiving


def test_unary_exchange() -> None:
    conn = H2Connection()
    conn.initiate()
    conn.data_to_send()
    stream_id = conn.open_stream(REQUEST_BLOCK)
    assert conn.send_data(stream_id, b"\0\0\0\0\x03abc", end_stream=True) == 8
    frames = sent_frames(conn)
    assert frames == [
        (HEADERS, FLAG_END_HEADERS, 1, REQUEST_BLOCK),
        (DATA, FLAG_END_STREAM, 1, b"\0\0\0\0\x03abc"),
    ]
    server = b"".join(
        [
            settings_frame((Setting.MAX_CONCURRENT_STREAMS, 100)),
            frame(SETTINGS, FLAG_ACK),
            headers_frame(1, RESPONSE),
            data_frame(1, b"\0\0\0\0\x02hi"),
            headers_frame(1, TRAILERS, end_stream=True),
        ]
    )
    events = conn.receive(server)
    assert [type(e) for e in events] == [HeadersReceived, DataReceived, HeadersReceived]
    assert [describe(e) for e in events] == [
        ("headers", 1, tuple(RESPONSE), False),
        ("data", 1, b"\0\0\0\0\x02hi", False),
        ("headers", 1, tuple(TRAILERS), True),
    ]
    assert sent_frames(conn) == [(SETTINGS, FLAG_ACK, 0, b"")]
    # The data is a view of the buffer given to receive, not a copy.
    data_event = events[1]
    assert isinstance(data_event, DataReceived)
    assert data_event.data.obj is server
    conn.end_stream(1)
    assert conn.open_streams == 0
    assert "DataReceived(1, 7 bytes" in repr(data_event)
    assert "end_stream=True" in repr(events[2])


def test_trailers_only_response() -> None:
    conn = connected(streams=1)
    headers = [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "12")]
    events = conn.receive(headers_frame(1, headers, end_stream=True))
    assert [describe(e) for e in events] == [("headers", 1, tuple(headers), True)]


def test_data_with_end_stream_and_empty_final_data() -> None:
    conn = connected(streams=2)
    events = conn.receive(
        headers_frame(1, RESPONSE)
        + data_frame(1, b"abc", end_stream=True)
        + headers_frame(3, RESPONSE)
        + data_frame(3, b"xyz")
        + data_frame(3, b"", end_stream=True)
    )
    assert [describe(e) for e in events] == [
        ("headers", 1, tuple(RESPONSE), False),
        ("data", 1, b"abc", True),
        ("headers", 3, tuple(RESPONSE), False),
        ("data", 3, b"xyz", False),
        ("data", 3, b"", True),
    ]


@pytest.mark.parametrize("pad", [0, 1, 7, 255])
def test_padded_data(pad: int) -> None:
    conn = connected(streams=1)
    raw = headers_frame(1, RESPONSE) + data_frame(1, b"payload", pad=pad, end_stream=True)
    expected = [("headers", 1, tuple(RESPONSE), False), ("data", 1, b"payload", True)]
    assert feed(conn, [raw]) == expected
    conn = connected(streams=1)
    assert feed(conn, [raw[i : i + 1] for i in range(len(raw))]) == expected
    # Only padding, no payload: nothing to report (an empty DATA frame matters only when it
    # ends the stream).
    conn = connected(streams=1)
    events = conn.receive(headers_frame(1, RESPONSE) + data_frame(1, b"", pad=pad))
    assert [describe(e) for e in events][1:] == []
    events = conn.receive(data_frame(1, b"", pad=pad, end_stream=True))
    assert [describe(e) for e in events] == [("data", 1, b"", True)]


def test_a_flood_of_empty_data_frames_is_no_flood_of_events() -> None:
    conn = connected(streams=1)
    conn.receive(headers_frame(1, RESPONSE))
    assert conn.receive(data_frame(1, b"") * 10_000) == []


def test_answers_to_a_ping_flood_share_one_buffer() -> None:
    """17 bytes an answer, not a bytes object each (a flood of 256 KiB of PINGs)."""
    conn = connected()
    conn.receive(frame(PING, 0, 0, b"12345678") * 15_000)
    (queued,) = conn.data_to_send()
    assert len(queued) == 17 * 15_000
    assert parse_frames(bytes(queued))[-1] == (PING, FLAG_ACK, 0, b"12345678")


def test_replies_queued_counts_what_the_peer_makes_us_send() -> None:
    """Acknowledgements, window updates and resets count; HEADERS, DATA and our own PINGs
    do not (a transport bounds the first kind while the peer does not read)."""
    conn = connected()
    start = conn.replies_queued
    stream_id = conn.open_stream(REQUEST_BLOCK)
    conn.send_data(stream_id, bytes(1000))
    conn.ping(b"abcdefgh")
    assert conn.replies_queued == start
    conn.receive(frame(PING, 0, 0, b"12345678") * 3 + settings_frame())
    assert conn.replies_queued == start + 3 * 17 + 9
    conn.reset_stream(stream_id)
    assert conn.replies_queued == start + 3 * 17 + 9 + 13


@pytest.mark.parametrize(("pad", "priority"), [(None, True), (0, False), (9, False), (3, True)])
def test_padded_and_priority_headers(pad: int | None, priority: bool) -> None:
    conn = connected(streams=1)
    raw = headers_frame(1, RESPONSE, pad=pad, priority=priority)
    expected = [("headers", 1, tuple(RESPONSE), False)]
    assert feed(conn, [raw]) == expected
    conn = connected(streams=1)
    assert feed(conn, [raw[i : i + 1] for i in range(len(raw))]) == expected


def test_continuation_frames() -> None:
    conn = connected(streams=1)
    headers = [*RESPONSE, ("x-meta", "m" * 100)]
    encoded = block(headers)
    raw = (
        headers_frame(1, encoded[:3], end_headers=False, end_stream=True, pad=4, priority=True)
        + frame(CONTINUATION, 0, 1, encoded[3:50])
        + frame(CONTINUATION, 0, 1, b"")
        + frame(CONTINUATION, FLAG_END_HEADERS, 1, encoded[50:])
    )
    assert feed(conn, [raw]) == [("headers", 1, tuple(headers), True)]
    conn = connected(streams=1)
    assert feed(conn, [raw[i : i + 1] for i in range(len(raw))]) == [
        ("headers", 1, tuple(headers), True)
    ]


def test_unknown_frames_and_priority_frames_are_ignored() -> None:
    conn = connected(streams=1)
    raw = (
        frame(0xFA, 0xFF, 0, b"whatever")
        + frame(0x0A, 0, 1, b"")
        + frame(PRIORITY, 0, 1, struct.pack(">LB", 0, 200))
        + frame(PRIORITY, 0, 7, struct.pack(">LB", 3, 1))  # idle streams may be prioritized
        + headers_frame(1, RESPONSE)
    )
    assert feed(conn, [raw]) == [("headers", 1, tuple(RESPONSE), False)]
    assert sent(conn) == b""


def test_largest_allowed_frame_is_accepted_across_chunks() -> None:
    conn = connected(streams=1)
    raw = frame(0xFB, 0, 0, bytes(RECEIVE_MAX_FRAME_SIZE)) + headers_frame(1, RESPONSE)
    assert feed(conn, split_at(raw, [5, 9, 1000, RECEIVE_MAX_FRAME_SIZE])) == [
        ("headers", 1, tuple(RESPONSE), False)
    ]
    conn = connected(streams=1)
    data = bytes(range(256)) * (RECEIVE_MAX_FRAME_SIZE // 256)
    raw = headers_frame(1, RESPONSE) + data_frame(1, data, end_stream=True)
    events = feed(conn, split_at(raw, [3, 30, 70_000]))
    assert events == [("headers", 1, tuple(RESPONSE), False), ("data", 1, data, True)]


@pytest.mark.parametrize("kind", [DATA, HEADERS, PING, 0xFC])
def test_oversized_frame_fails_on_its_header_alone(kind: int) -> None:
    conn = connected(streams=1)
    header = frame_header(RECEIVE_MAX_FRAME_SIZE + 1, kind, 0, 1)
    conn.receive(header[:4])
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(header[4:])  # no payload needed to decide
    assert_failed(conn, exc, ErrorCode.FRAME_SIZE_ERROR)
    conn = connected(streams=1)
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(frame_header(MAX_FRAME_SIZE_LIMIT, kind, 0, 1) + bytes(100))
    assert_failed(conn, exc, ErrorCode.FRAME_SIZE_ERROR)


def test_ping_is_answered_and_ping_ack_reported() -> None:
    conn = connected()
    assert conn.receive(frame(PING, 0, 0, b"12345678")) == []
    assert sent_frames(conn) == [(PING, FLAG_ACK, 0, b"12345678")]
    conn.ping(b"abcdefgh")
    assert sent_frames(conn) == [(PING, 0, 0, b"abcdefgh")]
    events = conn.receive(frame(PING, FLAG_ACK, 0, b"abcdefgh"))
    assert [describe(e) for e in events] == [("pong", b"abcdefgh")]
    assert sent(conn) == b""
    conn.ping()
    assert sent_frames(conn) == [(PING, 0, 0, bytes(8))]
    with pytest.raises(ValueError, match="8 bytes"):
        conn.ping(b"short")


def test_goaway_refuses_streams_above_last_stream_id() -> None:
    conn = connected(streams=3)
    events = conn.receive(goaway(1, ErrorCode.NO_ERROR, b"bye"))
    assert [describe(e) for e in events] == [
        ("goaway", 1, ErrorCode.NO_ERROR, b"bye"),
        ("reset", 3, ErrorCode.REFUSED_STREAM, True),
        ("reset", 5, ErrorCode.REFUSED_STREAM, True),
    ]
    assert conn.goaway is not None
    assert conn.goaway.last_stream_id == 1
    assert "bye" in repr(conn.goaway)
    assert not conn.can_open_stream()
    with pytest.raises(H2StateError, match="GOAWAY"):
        conn.open_stream(REQUEST_BLOCK)
    assert conn.open_streams == 1
    assert not conn.closed
    # Stream 1 still completes; late frames on the refused streams are dropped.
    events = conn.receive(
        headers_frame(3, RESPONSE)
        + data_frame(3, b"late", end_stream=True)
        + headers_frame(1, RESPONSE)
        + data_frame(1, b"ok", end_stream=True)
    )
    assert [describe(e) for e in events] == [
        ("headers", 1, tuple(RESPONSE), False),
        ("data", 1, b"ok", True),
    ]
    # A second GOAWAY (the reserved bit of last_stream_id dropped) refuses nothing more.
    events = conn.receive(goaway(0x80000001, ErrorCode.ENHANCE_YOUR_CALM))
    assert [describe(e) for e in events] == [("goaway", 1, ErrorCode.ENHANCE_YOUR_CALM, b"")]
    assert conn.open_streams == 1


def test_rst_stream_is_reported_and_later_frames_dropped() -> None:
    conn = connected(streams=2)
    events = conn.receive(rst_stream(1, ErrorCode.CANCEL))
    assert [describe(e) for e in events] == [("reset", 1, ErrorCode.CANCEL, False)]
    assert "CANCEL" in repr(events[0])
    assert conn.open_streams == 1
    events = conn.receive(
        rst_stream(1, ErrorCode.INTERNAL_ERROR)  # already gone: ignored
        + headers_frame(1, RESPONSE)
        + data_frame(1, b"dropped", end_stream=True)
        + rst_stream(3, 0xABCDEF)
    )
    assert [describe(e) for e in events] == [("reset", 3, 0xABCDEF, False)]
    assert "0xabcdef" in repr(events[0])
    assert sent(conn) == b""


def test_reset_stream_queues_rst_and_drops_the_stream() -> None:
    conn = connected(streams=1)
    conn.reset_stream(1)
    assert sent_frames(conn) == [(RST_STREAM, 0, 1, struct.pack(">L", ErrorCode.CANCEL))]
    conn.reset_stream(1)  # twice: nothing more
    conn.reset_stream(77)
    assert sent(conn) == b""
    assert conn.open_streams == 0
    assert conn.send_window(1) == 0
    assert feed(conn, [headers_frame(1, RESPONSE) + data_frame(1, b"x" * 10, pad=3)]) == []


@pytest.mark.parametrize("forget", ["reset_stream", "end_stream"])
def test_rest_of_a_data_frame_is_dropped_after_the_stream_is(forget: str) -> None:
    conn = connected(streams=2)
    raw = data_frame(1, b"0123456789", pad=5) + headers_frame(3, RESPONSE)
    events = conn.receive(headers_frame(1, RESPONSE) + raw[:14])
    assert [describe(e) for e in events][1:] == [("data", 1, b"0123", False)]
    getattr(conn, forget)(1)
    assert [describe(e) for e in conn.receive(raw[14:])] == [("headers", 3, tuple(RESPONSE), False)]


def test_dropped_stream_header_blocks_still_update_the_hpack_table() -> None:
    conn = connected(streams=2)
    conn.reset_stream(1)
    conn.data_to_send()
    inserting = block([(":status", "200")]) + literal_indexed("x-custom", "first")
    events = conn.receive(
        headers_frame(1, inserting[:1], end_headers=False)
        + frame(CONTINUATION, FLAG_END_HEADERS, 1, inserting[1:])
    )
    assert events == []
    # Stream 3's block refers to the entry stream 1's block added (dynamic index 62).
    events = conn.receive(
        headers_frame(3, b"\x88\xbe") + headers_frame(3, b"\xbe", end_stream=True)
    )
    assert [describe(e) for e in events] == [
        ("headers", 3, ((":status", "200"), ("x-custom", "first")), False),
        ("headers", 3, (("x-custom", "first"),), True),
    ]
    # After the stream ended on our side too.
    conn.end_stream(3)
    assert conn.receive(headers_frame(3, literal_indexed("x-second", "2"))) == []
    conn.open_stream(REQUEST_BLOCK)  # stream 5
    events = conn.receive(headers_frame(5, b"\x88\xbe\xbf"))
    assert [describe(e) for e in events] == [
        ("headers", 5, ((":status", "200"), ("x-second", "2"), ("x-custom", "first")), False)
    ]


# ------------------------------------------------------------- the server's preface (3.4)


@pytest.mark.parametrize(
    "first",
    [
        frame(PING, 0, 0, bytes(8)),
        frame(SETTINGS, FLAG_ACK, 0),
        window_update(0, 1000),
        headers_frame(1, RESPONSE),
        data_frame(1, b"x"),
        frame(0xFA, 0, 0, b"unknown"),
    ],
    ids=["PING", "SETTINGS ACK", "WINDOW_UPDATE", "HEADERS", "DATA", "unknown type"],
)
def test_first_frame_of_the_server_must_be_settings(first: bytes) -> None:
    conn = H2Connection()
    conn.initiate()
    conn.open_stream(REQUEST_BLOCK)
    conn.data_to_send()
    with pytest.raises(H2ConnectionError, match="first frame") as exc:
        conn.receive(first + settings_frame())
    assert_failed(conn, exc, ErrorCode.PROTOCOL_ERROR)


@pytest.mark.parametrize(
    ("first", "hint"),
    [
        # Python's http.server answers the preface with an HTTP/0.9 page (no status line).
        (b"<!DOCTYPE HTML>\n<html lang='en'>", "does not speak HTTP/2 — did you mean http://h:1?"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "does not speak HTTP/2 — did you mean http://h:1?"),
        (b"\x15\x03\x03\x00\x02\x02\x46", "speaks TLS — did you mean grpcs://?"),  # an alert
        (b"HTTP/1.0 400 Bad Request\r\n\r\n", "speaks HTTP/1.1 — did you mean http://h:1?"),
    ],
    ids=["html", "banner", "tls-alert", "http1"],
)
def test_first_bytes_that_are_not_http2_say_what_came(first: bytes, hint: str) -> None:
    # Not judged as a frame header (a "frame" of megabytes): the error says what the port
    # speaks, and shows its first bytes.
    conn = H2Connection(http_url="http://h:1")
    conn.initiate()
    conn.data_to_send()
    with pytest.raises(H2ConnectionError, match=hint) as exc:
        conn.receive(first)
    assert repr(first[:8])[2:-1] in str(exc.value)
    assert conn.closed


def test_settings_first_then_anything() -> None:
    conn = H2Connection()
    conn.initiate()
    conn.open_stream(REQUEST_BLOCK)
    conn.data_to_send()
    raw = settings_frame() + frame(PING, 0, 0, bytes(8)) + headers_frame(1, RESPONSE)
    assert feed(conn, [raw[:5], raw[5:]]) == [("headers", 1, tuple(RESPONSE), False)]


# ------------------------------------------------- malformed responses (8.1.1, 8.2, 8.3)


def literal(name: str, value: str) -> bytes:
    """An HPACK literal without indexing and with a literal name: any bytes, unchecked."""
    raw_name, raw_value = name.encode("latin-1"), value.encode("latin-1")
    return b"\x00" + bytes((len(raw_name),)) + raw_name + bytes((len(raw_value),)) + raw_value


STATUS_200 = b"\x88"  # the static table's :status 200
CONTENT_TYPE = literal("content-type", "application/grpc")

# (name, response header block, trailer block or None: the response headers are the fault)
MALFORMED_RESPONSES: list[tuple[str, bytes, bytes | None]] = [
    ("non-numeric :status", literal(":status", "abc") + CONTENT_TYPE, None),
    (":status of four digits", literal(":status", "2000"), None),
    (":status of two digits", literal(":status", "20"), None),
    (":status of superscript digits", literal(":status", "\xb2\xb2\xb2"), None),  # isdigit()
    ("no :status", CONTENT_TYPE, None),
    ("two :status", STATUS_200 + STATUS_200, None),
    ("request pseudo-header", STATUS_200 + literal(":path", "/"), None),
    ("unknown pseudo-header", STATUS_200 + literal(":grpc", "x"), None),
    ("pseudo-header after a regular one", CONTENT_TYPE + STATUS_200, None),
    ("uppercase name", STATUS_200 + literal("Content-Type", "application/grpc"), None),
    ("empty name", STATUS_200 + literal("", "x"), None),
    ("space in name", STATUS_200 + literal("x y", "z"), None),
    ("colon inside name", STATUS_200 + literal("x:y", "z"), None),
    ("connection header", STATUS_200 + literal("connection", "close"), None),
    ("transfer-encoding", STATUS_200 + literal("transfer-encoding", "chunked"), None),
    ("te other than trailers", STATUS_200 + literal("te", "gzip"), None),
    ("CR LF in a value", STATUS_200 + literal("x-a", "b\r\nx-c: d"), None),
    ("NUL in a value", STATUS_200 + literal("x-a", "b\0"), None),
    ("pseudo-header in trailers", STATUS_200, STATUS_200 + literal("grpc-status", "0")),
    ("uppercase name in trailers", STATUS_200, literal("Grpc-Status", "0")),
    ("informational response ending the stream", literal(":status", "103"), b""),
]


@pytest.mark.parametrize(
    ("head", "trailers"),
    [pytest.param(head, trailers, id=name) for name, head, trailers in MALFORMED_RESPONSES],
)
def test_malformed_response_is_a_stream_error(head: bytes, trailers: bytes | None) -> None:
    """The stream is reset with PROTOCOL_ERROR and reported with the problem; the
    connection, whose HPACK state is intact, goes on (RFC 9113 section 8.1.1)."""
    conn = connected(streams=2)
    if trailers is None:
        events = conn.receive(headers_frame(1, head))
    elif head.startswith(b"\x00\x07:status\x03103"):
        events = conn.receive(headers_frame(1, head, end_stream=True))
    else:
        (response,) = conn.receive(headers_frame(1, head))
        assert isinstance(response, HeadersReceived)
        events = conn.receive(headers_frame(1, trailers, end_stream=True))
    (event,) = events
    assert describe(event) == ("reset", 1, ErrorCode.PROTOCOL_ERROR, False)
    assert isinstance(event, StreamReset)
    assert isinstance(event.error, ProtocolError)
    assert "malformed response on stream 1" in str(event.error)
    assert sent_frames(conn) == [(RST_STREAM, 0, 1, struct.pack(">L", ErrorCode.PROTOCOL_ERROR))]
    assert not conn.closed
    # The rest of the stream's frames are dropped; the other stream is answered.
    raw = data_frame(1, b"late") + headers_frame(3, RESPONSE + TRAILERS, end_stream=True)
    assert feed(conn, [raw]) == [("headers", 3, tuple(RESPONSE + TRAILERS), True)]


def test_well_formed_headers_pass() -> None:
    conn = connected(streams=1)
    head = STATUS_200 + CONTENT_TYPE + literal("x-empty", "") + literal("te", "trailers")
    head += literal("x-inner", "a b\tc") + literal("x-latin", "caf\xe9") + literal("0-_.~!", "x")
    trailers = headers_frame(1, block(TRAILERS), end_stream=True)
    events = feed(conn, [headers_frame(1, head), trailers])
    assert [event[0] for event in events] == ["headers", "headers"]
    assert ("x-inner", "a b\tc") in events[0][2]


def test_informational_responses_are_skipped() -> None:
    conn = connected(streams=1)
    raw = headers_frame(1, literal(":status", "100")) + headers_frame(1, literal(":status", "103"))
    raw += headers_frame(1, RESPONSE) + headers_frame(1, TRAILERS, end_stream=True)
    assert feed(conn, [raw]) == [
        ("headers", 1, tuple(RESPONSE), False),
        ("headers", 1, tuple(TRAILERS), True),
    ]


def test_trailers_must_end_the_stream() -> None:
    conn = connected(streams=1)
    conn.receive(headers_frame(1, RESPONSE))
    (event,) = conn.receive(headers_frame(1, TRAILERS))
    assert isinstance(event, StreamReset)
    assert event.error is not None
    assert "does not end the stream" in str(event.error)


# ----------------------------------------------------------------- the stream state table

# Inputs this side makes, and how a test makes them.
LOCAL_INPUTS = {
    StreamInput.SEND_DATA: lambda conn, sid: conn.send_data(sid, b"x"),
    StreamInput.SEND_END_STREAM: lambda conn, sid: conn.send_data(sid, b"", end_stream=True),
}


def stream_in(state: StreamState) -> tuple[H2Connection, int]:
    """A connection with stream 1 in ``state``."""
    conn = connected()
    sid = conn.open_stream(REQUEST_BLOCK, end_stream=state is StreamState.HALF_CLOSED_LOCAL)
    if state is StreamState.HALF_CLOSED_REMOTE:
        conn.receive(headers_frame(1, RESPONSE + TRAILERS, end_stream=True))
    elif state is StreamState.CLOSED:
        conn.reset_stream(sid)
    conn.data_to_send()
    assert conn.stream_state(sid) is state
    return conn, sid


@pytest.mark.parametrize("state", list(StreamState), ids=lambda s: s.name)
@pytest.mark.parametrize("event", list(LOCAL_INPUTS), ids=lambda e: e.name)
def test_local_inputs_follow_the_state_table(state: StreamState, event: StreamInput) -> None:
    """Every (state, input of ours) pair does what STREAM_TRANSITIONS says: moves to its next
    state, or raises H2StateError naming the state, queueing nothing."""
    conn, sid = stream_in(state)
    following = STREAM_TRANSITIONS.get((state, event))
    if following is None:
        with pytest.raises(H2StateError, match=state.name) as exc:
            LOCAL_INPUTS[event](conn, sid)
        assert (exc.value.stream_id, exc.value.state) == (sid, state)
        assert sent(conn) == b""
        assert not conn.closed
    else:
        LOCAL_INPUTS[event](conn, sid)
        assert conn.stream_state(sid) is following
        assert sent_frames(conn)[0][0] == DATA


def test_sending_after_our_end_stream_names_the_state() -> None:
    conn = connected(streams=1)
    conn.send_data(1, b"last", end_stream=True)
    with pytest.raises(H2StateError, match="HALF_CLOSED_LOCAL"):
        conn.send_data(1, b"more")
    with pytest.raises(H2StateError, match="HALF_CLOSED_LOCAL"):
        conn.send_trailers(1, block(TRAILERS))
    # The server ends its side: the stream is closed.
    conn.receive(headers_frame(1, RESPONSE + TRAILERS, end_stream=True))
    assert conn.stream_state(1) is StreamState.CLOSED


def test_end_stream_only_counts_when_all_data_was_queued() -> None:
    conn = connected(streams=1)
    assert conn.send_data(1, bytes(DEFAULT_WINDOW + 10), end_stream=True) == DEFAULT_WINDOW
    assert conn.stream_state(1) is StreamState.OPEN
    conn.receive(window_update(0, 10) + window_update(1, 10))
    assert conn.send_data(1, bytes(10), end_stream=True) == 10
    assert conn.stream_state(1) is StreamState.HALF_CLOSED_LOCAL


def test_state_table_covers_every_pair_it_allows() -> None:
    """The table is total where it matters: reset is allowed from every live state, a
    closed stream allows nothing, and every state but CLOSED can be left."""
    for state in StreamState:
        allowed = {event for (s, event) in STREAM_TRANSITIONS if s is state}
        if state is StreamState.CLOSED:
            assert not allowed
        else:
            assert StreamInput.RESET in allowed
            assert any(STREAM_TRANSITIONS[state, e] is not state for e in allowed)


def test_huffman_coded_response_headers() -> None:
    conn = connected(streams=1)
    # RFC 7541 C.6.1: ":status: 302", indexed name and a Huffman-coded value.
    huffman_block = bytes.fromhex("48826402")
    events = conn.receive(headers_frame(1, huffman_block))
    assert [describe(e) for e in events] == [("headers", 1, ((":status", "302"),), False)]


# ------------------------------------------------------------------- receive flow control


def test_receive_window_is_refilled_when_half_used() -> None:
    """With the real constants: 1 MiB DATA frames, a stream top-up once half of its 16 MiB
    window is consumed (on receipt, by default), the connection's after 1 GiB."""
    conn = connected(streams=1)
    chunk = data_frame(1, bytes(RECEIVE_MAX_FRAME_SIZE))
    half = RECEIVE_WINDOW // 2 // RECEIVE_MAX_FRAME_SIZE
    for _ in range(half - 1):
        (event,) = conn.receive(chunk)
        assert isinstance(event, DataReceived)
        assert len(event.data) == RECEIVE_MAX_FRAME_SIZE
    assert sent(conn) == b""
    conn.receive(chunk)
    increment = struct.pack(">L", half * RECEIVE_MAX_FRAME_SIZE)
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 1, increment)]
    # The connection window: once half of 2**31 - 1 is consumed.
    frames_to_refill = -(-(CONNECTION_RECEIVE_WINDOW // 2) // RECEIVE_MAX_FRAME_SIZE)
    for _ in range(frames_to_refill - half - 1):
        conn.receive(chunk)
    assert all(f[2] == 1 for f in sent_frames(conn))  # stream updates only
    conn.receive(chunk)
    assert sent_frames(conn)[0] == (
        WINDOW_UPDATE,
        0,
        0,
        struct.pack(">L", frames_to_refill * RECEIVE_MAX_FRAME_SIZE),
    )


def test_receive_window_refill_counts_padding_and_dropped_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(h2c, "_CONNECTION_REFILL", 1000)
    conn = connected(streams=3, receive_window=2000)
    conn.reset_stream(5)
    conn.data_to_send()
    # 600 + (1 + 300 + 98): padding and the pad length octet count too.
    conn.receive(data_frame(1, bytes(600)) + data_frame(3, bytes(300), pad=98))
    assert sent(conn) == b""
    conn.receive(data_frame(5, bytes(1)))  # a dropped stream still uses the connection window
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 0, struct.pack(">L", 1000))]
    conn.receive(data_frame(1, bytes(400)))
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 1, struct.pack(">L", 1000))]
    # Split delivery counts the frame when its header arrives.
    raw = data_frame(3, bytes(700))
    conn.receive(raw[:10])
    assert sent_frames(conn) == [
        (WINDOW_UPDATE, 0, 0, struct.pack(">L", 1100)),
        (WINDOW_UPDATE, 0, 3, struct.pack(">L", 1099)),
    ]
    conn.receive(raw[10:])
    assert sent(conn) == b""


def manual_stream(window: int = 1000) -> H2Connection:
    """A connection with stream 1 open, whose caller acknowledges what it consumes."""
    conn = connected(receive_window=window)
    conn.open_stream(REQUEST_BLOCK, acknowledge_on_receipt=False)
    conn.data_to_send()
    return conn


def test_unconsumed_data_is_not_given_back() -> None:
    """A stream whose caller does not consume: its window is not refilled, the server can
    send exactly the window and no more (the next byte is its flow-control error)."""
    conn = manual_stream(1000)
    conn.receive(headers_frame(1, RESPONSE))
    for _ in range(10):
        (event,) = conn.receive(data_frame(1, bytes(100)))
        assert isinstance(event, DataReceived)
    assert sent(conn) == b""
    assert conn.unacknowledged(1) == 1000
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(data_frame(1, b"x"))
    assert_failed(conn, exc, ErrorCode.FLOW_CONTROL_ERROR)


def test_consumed_data_is_given_back_at_half_a_window() -> None:
    conn = manual_stream(1000)
    conn.receive(data_frame(1, bytes(900)))
    conn.acknowledge_received_data(1, 499)
    assert sent(conn) == b""
    conn.acknowledge_received_data(1, 1)
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 1, struct.pack(">L", 500))]
    assert conn.unacknowledged(1) == 400
    # 600 more fit now (100 left + the 500 given back), and no more.
    conn.receive(data_frame(1, bytes(600)))
    conn.acknowledge_received_data(1, 5000)  # more than it holds: what it holds
    assert conn.unacknowledged(1) == 0
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 1, struct.pack(">L", 1000))]
    conn.acknowledge_received_data(7, 10)  # an unknown stream: nothing
    assert sent(conn) == b""


def test_padding_of_a_manual_stream_goes_back_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(h2c, "_CONNECTION_REFILL", 100)
    conn = manual_stream(1000)
    conn.receive(data_frame(1, bytes(10), pad=99))  # 1 + 99 octets of padding
    assert conn.unacknowledged(1) == 10
    assert sent_frames(conn) == [(WINDOW_UPDATE, 0, 0, struct.pack(">L", 100))]


def test_a_dropped_stream_gives_its_unconsumed_data_back_to_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Or the connection window would shrink by what every cancelled stream held."""
    monkeypatch.setattr(h2c, "_CONNECTION_REFILL", 500)
    for forget in ("reset", "end", "rst_stream", "goaway"):
        conn = manual_stream(1000)
        conn.receive(data_frame(1, bytes(600)))
        assert sent(conn) == b""
        if forget == "reset":
            conn.reset_stream(1)
        elif forget == "end":
            conn.end_stream(1)
        elif forget == "rst_stream":
            conn.receive(rst_stream(1, ErrorCode.CANCEL))
        else:
            conn.open_stream(REQUEST_BLOCK)
            conn.receive(goaway(0))
        updates = [f for f in sent_frames(conn) if f[0] == WINDOW_UPDATE]
        assert updates == [(WINDOW_UPDATE, 0, 0, struct.pack(">L", 600))], forget
        assert conn.unacknowledged(1) == 0


def test_receive_window_must_be_a_window() -> None:
    for bad in (0, -1, MAX_WINDOW + 1):
        with pytest.raises(InvalidInputError):
            H2Connection(receive_window=bad)


# ------------------------------------------------------------------------------- violations

# (name, streams opened first, server bytes, error code)
VIOLATIONS: list[tuple[str, int, bytes, int]] = [
    ("DATA on stream 0", 1, data_frame(0, b"x"), ErrorCode.PROTOCOL_ERROR),
    ("DATA on unopened stream", 1, data_frame(3, b"x"), ErrorCode.PROTOCOL_ERROR),
    ("DATA on even stream", 2, data_frame(2, b"x"), ErrorCode.PROTOCOL_ERROR),
    (
        "DATA after END_STREAM",
        1,
        headers_frame(1, RESPONSE) + data_frame(1, b"a", end_stream=True) + data_frame(1, b"b"),
        ErrorCode.STREAM_CLOSED,
    ),
    (
        "DATA after trailers",
        1,
        headers_frame(1, RESPONSE + TRAILERS, end_stream=True) + data_frame(1, b""),
        ErrorCode.STREAM_CLOSED,
    ),
    (
        "HEADERS after END_STREAM",
        1,
        headers_frame(1, RESPONSE, end_stream=True) + headers_frame(1, TRAILERS),
        ErrorCode.STREAM_CLOSED,
    ),
    ("padded DATA, no pad length", 1, frame(DATA, FLAG_PADDED, 1), ErrorCode.FRAME_SIZE_ERROR),
    ("DATA pad too long", 1, frame(DATA, FLAG_PADDED, 1, b"\x03ab"), ErrorCode.PROTOCOL_ERROR),
    ("HEADERS on stream 0", 1, headers_frame(0, RESPONSE), ErrorCode.PROTOCOL_ERROR),
    ("HEADERS on even stream", 2, headers_frame(2, RESPONSE), ErrorCode.PROTOCOL_ERROR),
    ("HEADERS on unopened stream", 1, headers_frame(3, RESPONSE), ErrorCode.PROTOCOL_ERROR),
    (
        "HEADERS pad too long",
        1,
        frame(HEADERS, FLAG_PADDED | FLAG_END_HEADERS, 1, b"\x02\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "HEADERS padded, empty",
        1,
        frame(HEADERS, FLAG_PADDED | FLAG_END_HEADERS, 1),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "HEADERS too short for priority",
        1,
        frame(HEADERS, FLAG_PRIORITY | FLAG_END_HEADERS, 1, b"\0\0\0\0"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    (
        "HEADERS priority eaten by padding",
        1,
        frame(HEADERS, FLAG_PRIORITY | FLAG_PADDED | FLAG_END_HEADERS, 1, b"\x02\0\0\0\0\x10\0"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    (
        "CONTINUATION without HEADERS",
        1,
        frame(CONTINUATION, FLAG_END_HEADERS, 1, b"\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "CONTINUATION on another stream",
        2,
        headers_frame(1, RESPONSE, end_headers=False)
        + frame(CONTINUATION, FLAG_END_HEADERS, 3, b""),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "CONTINUATION after END_HEADERS",
        1,
        headers_frame(1, RESPONSE) + frame(CONTINUATION, FLAG_END_HEADERS, 1, b""),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "PING inside a header block",
        1,
        headers_frame(1, RESPONSE, end_headers=False) + frame(PING, 0, 0, bytes(8)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "DATA inside a header block",
        1,
        headers_frame(1, RESPONSE, end_headers=False) + data_frame(1, b"x"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "unknown frame inside a header block",
        1,
        headers_frame(1, RESPONSE, end_headers=False) + frame(0xFA, 0, 0, b""),
        ErrorCode.PROTOCOL_ERROR,
    ),
    ("undecodable HPACK", 1, headers_frame(1, b"\xff\xff\xff"), ErrorCode.COMPRESSION_ERROR),
    ("HPACK index 0", 1, headers_frame(1, b"\x80"), ErrorCode.COMPRESSION_ERROR),
    (
        "HPACK truncated in CONTINUATION",
        1,
        headers_frame(1, b"\x40\x05ab", end_headers=False)
        + frame(CONTINUATION, FLAG_END_HEADERS, 1, b"c"),
        ErrorCode.COMPRESSION_ERROR,
    ),
    (
        "HPACK table size above ours",
        1,
        headers_frame(1, b"\x3f\xe2\x1f"),  # size update to 4097
        ErrorCode.COMPRESSION_ERROR,
    ),
    (
        "SETTINGS length not a multiple of 6",
        0,
        frame(SETTINGS, 0, 0, bytes(5)),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    ("SETTINGS on a stream", 1, frame(SETTINGS, 0, 1), ErrorCode.PROTOCOL_ERROR),
    (
        "SETTINGS ACK with payload",
        0,
        frame(SETTINGS, FLAG_ACK, 0, bytes(6)),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    (
        "SETTINGS_MAX_FRAME_SIZE too small",
        0,
        settings_frame((Setting.MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE - 1)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "SETTINGS_MAX_FRAME_SIZE too large",
        0,
        settings_frame((Setting.MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT + 1)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "SETTINGS_ENABLE_PUSH 2",
        0,
        settings_frame((Setting.ENABLE_PUSH, 2)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (  # RFC 9113 section 6.5.2: only a client may enable push
        "SETTINGS_ENABLE_PUSH 1 from a server",
        0,
        settings_frame((Setting.ENABLE_PUSH, 1)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    ("WINDOW_UPDATE 0 on connection", 0, window_update(0, 0), ErrorCode.PROTOCOL_ERROR),
    (
        "WINDOW_UPDATE 0 on connection (reserved bit set)",
        0,
        window_update(0, 0x80000000),
        ErrorCode.PROTOCOL_ERROR,
    ),
    (
        "WINDOW_UPDATE of 3 bytes",
        1,
        frame(WINDOW_UPDATE, 0, 1, b"\0\0\1"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    (
        "WINDOW_UPDATE of 5 bytes",
        0,
        frame(WINDOW_UPDATE, 0, 0, b"\0\0\0\1\0"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    (
        "PUSH_PROMISE",
        1,
        frame(PUSH_PROMISE, FLAG_END_HEADERS, 1, b"\0\0\0\2\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    ("PING of 7 bytes", 0, frame(PING, 0, 0, bytes(7)), ErrorCode.FRAME_SIZE_ERROR),
    ("PING ACK of 9 bytes", 0, frame(PING, FLAG_ACK, 0, bytes(9)), ErrorCode.FRAME_SIZE_ERROR),
    ("PING on a stream", 1, frame(PING, 0, 1, bytes(8)), ErrorCode.PROTOCOL_ERROR),
    ("RST_STREAM on stream 0", 0, frame(RST_STREAM, 0, 0, bytes(4)), ErrorCode.PROTOCOL_ERROR),
    ("RST_STREAM of 5 bytes", 1, frame(RST_STREAM, 0, 1, bytes(5)), ErrorCode.FRAME_SIZE_ERROR),
    ("GOAWAY on a stream", 1, frame(GOAWAY, 0, 1, bytes(8)), ErrorCode.PROTOCOL_ERROR),
    ("GOAWAY of 7 bytes", 0, frame(GOAWAY, 0, 0, bytes(7)), ErrorCode.FRAME_SIZE_ERROR),
    ("PRIORITY on stream 0", 0, frame(PRIORITY, 0, 0, bytes(5)), ErrorCode.PROTOCOL_ERROR),
    ("PRIORITY of 4 bytes", 1, frame(PRIORITY, 0, 1, bytes(4)), ErrorCode.FRAME_SIZE_ERROR),
]


@pytest.mark.parametrize(
    ("streams", "raw", "code"),
    [pytest.param(streams, raw, code, id=name) for name, streams, raw, code in VIOLATIONS],
)
@pytest.mark.parametrize("delivery", ["whole", "bytewise"])
def test_violations_fail_the_connection(streams: int, raw: bytes, code: int, delivery: str) -> None:
    conn = connected(streams=streams)
    with pytest.raises(H2ConnectionError) as exc:  # noqa: PT012
        if delivery == "whole":
            conn.receive(raw)
        else:
            for i in range(len(raw)):
                conn.receive(raw[i : i + 1])
    assert_failed(conn, exc, code)


def test_header_block_too_large_is_refused_before_decoding() -> None:
    conn = connected(streams=1, max_header_list_size=100)
    raw = headers_frame(1, b"\x88", end_headers=False)
    with pytest.raises(H2ConnectionError) as exc:  # noqa: PT012
        conn.receive(raw)
        for _ in range(10):  # 10 CONTINUATIONs of 200 KiB: over 100 + 1 MiB
            conn.receive(frame(CONTINUATION, 0, 1, bytes(200 << 10)))
    assert_failed(conn, exc, ErrorCode.ENHANCE_YOUR_CALM)


def test_header_block_in_a_headers_frame_too_large_is_refused() -> None:
    conn = connected(streams=1, max_header_list_size=100)
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(headers_frame(1, bytes(101), end_headers=False))
    assert_failed(conn, exc, ErrorCode.ENHANCE_YOUR_CALM)


def test_continuation_frames_up_to_the_backlog_are_accepted() -> None:
    conn = connected(streams=1)
    raw = headers_frame(1, b"", end_headers=False)
    raw += frame(CONTINUATION, 0, 1, b"") * (CONTINUATION_BACKLOG - 1)
    raw += frame(CONTINUATION, FLAG_END_HEADERS, 1, block(RESPONSE))
    assert feed(conn, [raw]) == [("headers", 1, tuple(RESPONSE), False)]


@pytest.mark.parametrize("delivery", ["whole", "frame by frame"])
def test_continuation_flood_is_refused(delivery: str) -> None:
    """Empty CONTINUATION frames cost the peer 9 bytes each and used to be kept without
    limit: the block stops at CONTINUATION_BACKLOG frames."""
    conn = connected(streams=1)
    frames = [headers_frame(1, b"", end_headers=False)]
    frames += [frame(CONTINUATION, 0, 1, b"")] * (CONTINUATION_BACKLOG + 1)
    with pytest.raises(H2ConnectionError) as exc:  # noqa: PT012
        if delivery == "whole":
            conn.receive(b"".join(frames))
        else:
            for raw in frames:
                conn.receive(raw)
    assert_failed(conn, exc, ErrorCode.ENHANCE_YOUR_CALM)
    assert "CONTINUATION" in str(exc.value)


def test_header_list_over_our_limit_is_a_compression_error() -> None:
    conn = connected(streams=1, max_header_list_size=100)
    conn.receive(headers_frame(1, [(":status", "200"), ("a", "b" * 20)]))  # 32+7 + 32+21
    with pytest.raises(H2ConnectionError) as exc:
        conn.receive(headers_frame(1, [("a", "b" * 100)], end_stream=True))
    assert_failed(conn, exc, ErrorCode.COMPRESSION_ERROR)


def test_close_queues_goaway_once() -> None:
    conn = connected(streams=1)
    conn.close(ErrorCode.NO_ERROR, b"done")
    assert sent_frames(conn) == [(GOAWAY, 0, 0, struct.pack(">LL", 0, 0) + b"done")]
    conn.close(ErrorCode.INTERNAL_ERROR)
    assert sent(conn) == b""
    assert conn.closed
    assert not conn.can_open_stream()
    with pytest.raises(H2StateError, match="closed"):
        conn.receive(b"")


def test_peer_goaway_with_error_is_reported_not_raised() -> None:
    conn = connected(streams=1)
    events = conn.receive(goaway(1, ErrorCode.INTERNAL_ERROR, b"oops"))
    assert [describe(e) for e in events] == [("goaway", 1, ErrorCode.INTERNAL_ERROR, b"oops")]
    assert "INTERNAL_ERROR" in repr(events[0])


# ---------------------------------------------------------------- split delivery (property)

CONTROL_FRAMES = [
    frame(PING, 0, 0, b"pingpong"),
    frame(PING, FLAG_ACK, 0, b"\1" * 8),
    frame(PRIORITY, 0, 3, struct.pack(">LB", 1, 16)),
    frame(0xFA, 0x3, 5, b"extension"),
    frame(0x0B, 0, 0, b""),
    window_update(0, 1000),
    window_update(1, 17),
    frame(SETTINGS, FLAG_ACK),
    settings_frame((Setting.MAX_CONCURRENT_STREAMS, 50)),
    settings_frame((Setting.INITIAL_WINDOW_SIZE, 70_000)),
]

# Header values as RFC 9113 section 8.2.1 allows them: no NUL, CR, LF, no surrounding spaces.
metadata_values = st.text(
    st.characters(codec="latin-1", exclude_characters="\r\n\0"), max_size=40
).map(lambda value: value.strip(" \t"))
metadata = st.lists(
    st.tuples(st.sampled_from(["x-a", "x-bin-ish", "server", "date"]), metadata_values),
    max_size=3,
)
pads = st.none() | st.integers(0, 20) | st.just(255)


@st.composite
def header_unit(draw: st.DrawFn, stream_id: int, headers: Headers, end_stream: bool) -> bytes:
    """One header block as HEADERS plus CONTINUATIONs, with random padding and priority."""
    encoded = block(headers)
    cuts = draw(st.lists(st.integers(0, len(encoded)), max_size=3))
    pieces = split_at(encoded, cuts) or [b""]
    if len(pieces) == 1 and draw(st.booleans()):
        pieces.append(b"")  # an empty CONTINUATION
    out = headers_frame(
        stream_id,
        pieces[0],
        end_stream=end_stream,
        end_headers=len(pieces) == 1,
        pad=draw(pads),
        priority=draw(st.booleans()),
    )
    for index, piece in enumerate(pieces[1:], 2):
        out += frame(
            CONTINUATION, FLAG_END_HEADERS if index == len(pieces) else 0, stream_id, piece
        )
    return out


@st.composite
def server_script(draw: st.DrawFn) -> tuple[int, bytes, dict[int, list[tuple[Any, ...]]]]:
    """``(streams, bytes, expected)``: a server's frames answering ``streams`` streams,
    interleaved with control frames, and each stream's expected (merged) events."""
    streams = draw(st.integers(1, 3))
    units: dict[int, list[bytes]] = {}
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for stream_id in range(1, 2 * streams, 2):
        head = RESPONSE + draw(metadata)
        if draw(st.booleans()):  # trailers-only
            units[stream_id] = [draw(header_unit(stream_id, head + TRAILERS, True))]
            expected[stream_id] = [("headers", stream_id, tuple(head + TRAILERS), True)]
            continue
        body = draw(st.binary(max_size=300))
        pieces = split_at(body, draw(st.lists(st.integers(0, 300), max_size=3))) or [b""]
        end_on_data = draw(st.booleans())
        units[stream_id] = [draw(header_unit(stream_id, head, False))]
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            units[stream_id].append(
                data_frame(stream_id, piece, end_stream=last and end_on_data, pad=draw(pads))
            )
        expected[stream_id] = [("headers", stream_id, tuple(head), False)]
        if body or end_on_data:  # empty DATA that does not end the stream is no event
            expected[stream_id].append(("data", stream_id, body, end_on_data))
        if not end_on_data:
            units[stream_id].append(draw(header_unit(stream_id, TRAILERS, True)))
            expected[stream_id].append(("headers", stream_id, tuple(TRAILERS), True))
    out = []
    while units:
        stream_id = draw(st.sampled_from(sorted(units)))
        out.append(units[stream_id].pop(0))
        if not units[stream_id]:
            del units[stream_id]
        control = draw(st.none() | st.sampled_from(CONTROL_FRAMES))
        if control is not None:
            out.append(control)
    return streams, b"".join(out), expected


def run_script(streams: int, chunks: Iterable[bytes]) -> tuple[list[tuple[Any, ...]], bytes]:
    conn = connected(streams=streams)
    events = feed(conn, chunks)
    return events, sent(conn)


@FAST
@given(script=server_script(), cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_random_split_delivery_matches_one_shot(
    script: tuple[int, bytes, dict[int, list[tuple[Any, ...]]]], cuts: list[int]
) -> None:
    streams, raw, expected = script
    whole_events, whole_sent = run_script(streams, [raw])
    for stream_id, stream_events in expected.items():
        mine = merge_data(
            e for e in whole_events if e[0] in ("headers", "data") and e[1] == stream_id
        )
        assert mine == stream_events
    assert run_script(streams, split_at(raw, cuts)) == (whole_events, whole_sent)


@settings(FAST, max_examples=25)
@given(script=server_script())
def test_byte_at_a_time_delivery_matches_one_shot(
    script: tuple[int, bytes, dict[int, list[tuple[Any, ...]]]],
) -> None:
    streams, raw, _ = script
    whole = run_script(streams, [raw])
    assert run_script(streams, [raw[i : i + 1] for i in range(len(raw))]) == whole


def test_split_delivery_answers_control_frames_once() -> None:
    raw = frame(PING, 0, 0, b"pingpong") + settings_frame((Setting.MAX_CONCURRENT_STREAMS, 9))
    events, queued = run_script(0, [raw[i : i + 1] for i in range(len(raw))])
    assert events == []
    assert parse_frames(queued) == [
        (PING, FLAG_ACK, 0, b"pingpong"),
        (SETTINGS, FLAG_ACK, 0, b""),
    ]


# --------------------------------------------------------------------- totality (property)


def drive(conn: H2Connection, chunks: Iterable[bytes]) -> None:
    """Feed everything; only H2ConnectionError may come out, after which the connection is
    closed with a GOAWAY queued. Events must make sense on the way."""
    with time_limit(20):
        try:
            for chunk in chunks:
                for event in conn.receive(chunk):
                    if isinstance(event, DataReceived):
                        assert isinstance(event.data, memoryview)
                        bytes(event.data)
                    describe(event)
        except H2ConnectionError as exc:
            code = exc.code
            assert conn.closed
            queued = parse_frames(sent(conn))
            assert queued[-1][0] == GOAWAY
            assert struct.unpack_from(">LL", queued[-1][3])[1] == code
            with pytest.raises(H2StateError):
                conn.receive(b"\0")
        else:
            parse_frames(sent(conn))  # whatever it queued is well-formed


random_frames = st.lists(
    st.builds(
        frame,
        st.integers(0, 11),
        st.integers(0, 255),
        st.sampled_from([0, 1, 2, 3, 5, 7, 0x7FFFFFFF, 0x80000001]),
        st.binary(max_size=24),
    ),
    max_size=8,
).map(b"".join)


@FAST
@given(
    junk=st.binary(max_size=200) | random_frames,
    cuts=st.lists(st.integers(0, 500), max_size=6),
)
def test_arbitrary_bytes_only_raise_connection_errors(junk: bytes, cuts: list[int]) -> None:
    conn = connected(streams=2)
    conn.reset_stream(3)
    conn.data_to_send()
    drive(conn, split_at(junk, cuts))


@FAST
@given(
    script=server_script(),
    mutations=st.lists(
        st.tuples(st.integers(0, 5000), st.integers(0, 255)), min_size=1, max_size=4
    ),
    cut=st.none() | st.integers(0, 5000),
    cuts=st.lists(st.integers(0, 5000), max_size=6),
)
def test_mutated_server_streams_only_raise_connection_errors(
    script: tuple[int, bytes, dict[int, list[tuple[Any, ...]]]],
    mutations: list[tuple[int, int]],
    cut: int | None,
    cuts: list[int],
) -> None:
    streams, raw, _ = script
    mutated = bytearray(raw)
    for position, value in mutations:
        mutated[position % len(mutated)] = value
    if cut is not None:
        del mutated[cut % len(mutated) :]
    drive(connected(streams=streams), split_at(bytes(mutated), cuts))


def test_a_value_with_surrounding_whitespace_is_read_as_sent() -> None:
    """RFC 9113 forbids it, but Triton 2.51 ends grpc-message values with a space: the
    response is accepted and the value kept verbatim."""
    headers = [(":status", "200"), ("grpc-message", "bad shape. ")]
    assert h2c.check_response_headers(headers, False) is None
    assert h2c.check_response_headers([("grpc-message", " x\t")], True) is None
