"""The native gRPC transport's fault paths, against the scripted HTTP/2 server of the
hostile-server kit (:mod:`tests.hostile.h2_server`) on loopback.

Every test runs with both clients: the sync :class:`~kserve_v2.Client` and the
:class:`~kserve_v2.AsyncClient` (on an event loop of its own, so one test body drives both),
and checks what the client raised and what it sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import gzip
import math
import random
import socket
import threading
import time
import tracemalloc
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kserve_v2 import (
    AsyncClient,
    DeadlineExceededError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.endpoint import parse_url
from kserve_v2.grpc.config import channel_config
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    GOAWAY,
    HEADERS,
    PING,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    ErrorCode,
    Setting,
    frame_header,
)
from kserve_v2.options import GRPCKeepAlive
from kserve_v2.transport.native import AsyncNativeGRPCChannel
from tests.hostile.h2_server import (
    CALL_TIMEOUT,
    GOAWAY_PAYLOAD,
    GRPC_OK_HEADERS,
    GUARD,
    IO_TIMEOUT,
    LIVE,
    LIVE_REPLY,
    U32,
    Frame,
    Handler,
    Peer,
    PeerClosed,
    Request,
    Runner,
    ScriptedServer,
    data_frame,
    each_request,
    frame,
    grpc_message,
    on_first,
    parse_grpc_timeout,
    scripted_servers,
    serve_requests,
)
from tests.loops import LOOP_PARAMS, MODES, run


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    with scripted_servers() as start:
        yield start


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def connect(
    mode: str, serve: Callable[[Handler], ScriptedServer]
) -> Iterator[Callable[..., Runner]]:
    """Makes clients (of the test's mode); closed before the servers are."""
    runners: list[Runner] = []

    def make(server: ScriptedServer, **options: Any) -> Runner:
        runner = Runner(mode, server.url, **options)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()


Serve = Callable[[Handler], ScriptedServer]
Connect = Callable[..., Runner]


# ------------------------------------------------------------------ 1. the normal answer


def test_normal_answer_and_request_headers(serve: Serve, connect: Connect) -> None:
    """A well-formed answer works; the request carries gRPC's headers, the deadline as
    grpc-timeout, and the client's metadata."""
    server = serve(each_request())
    client = connect(server, timeout=7.0, headers={"x-a": "b"})
    assert client.live() is True
    (request,) = server.peers[0].requests
    names = [name for name, _ in request.headers]
    first_regular = next(i for i, name in enumerate(names) if not name.startswith(":"))
    assert all(not name.startswith(":") for name in names[first_regular:]), names
    assert request.header(":method") == "POST"
    assert request.header(":scheme") == "http"
    assert request.header(":path") == LIVE
    assert request.header(":authority") == f"127.0.0.1:{server.port}"
    assert request.header("te") == "trailers"
    assert request.header("content-type") == "application/grpc"
    timeout = request.header("grpc-timeout")
    assert timeout is not None
    assert parse_grpc_timeout(timeout) == pytest.approx(7.0, abs=1e-6)
    assert request.header("x-a") == "b"
    assert request.message == b""


def test_response_metadata_and_continuation_frames(serve: Serve, connect: Connect) -> None:
    """Headers and trailers split across CONTINUATION frames are reassembled; their
    metadata comes back without pseudo-headers."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, [*GRPC_OK_HEADERS, ("x-h", "1" * 50)], pieces=3)
        peer.send_data(request.stream_id, grpc_message(b"reply"))
        peer.send_trailers(request.stream_id, extra=[("x-t", "2" * 50)], pieces=4)

    server = serve(each_request(respond))
    client = connect(server)
    reply, metadata = client.unary(b"hello", want_metadata=True)
    assert reply == b"reply"
    assert ("x-h", "1" * 50) in metadata
    assert ("x-t", "2" * 50) in metadata
    assert ("grpc-status", "0") in metadata
    assert not [name for name, _ in metadata if name.startswith(":")]
    assert server.peers[0].requests[0].message == b"hello"


def test_sequential_calls_share_one_connection(serve: Serve, connect: Connect) -> None:
    """Calls one after another reuse the pooled connection (the baseline for the tests that
    expect a new one)."""
    server = serve(each_request())
    client = connect(server)
    for _ in range(3):
        assert client.live() is True
    assert server.accepted == 1
    assert [r.stream_id for r in server.peers[0].requests] == [1, 3, 5]


@pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
def test_aclose_after_the_loop_ended_ends_the_connection(serve: Serve, loop_kind: str) -> None:
    """A loop that ended before aclose() (asyncio.run() over) can close nothing: aclose()
    does not fail, and the server sees the connection end (its socket shut down by aclose()
    on asyncio's loop; uvloop closes its transports as its loop closes)."""
    ended = threading.Event()

    def handler(peer: Peer) -> None:
        # each_request's returns when the client's side of the connection ends; a clean
        # end (GOAWAY, FIN) or the shutdown's, whichever the client could give.
        with contextlib.suppress(PeerClosed):
            each_request()(peer)
        ended.set()

    server = serve(handler)
    client = AsyncClient(server.url, timeout=CALL_TIMEOUT)
    with warnings.catch_warnings():
        # Both loops warn of the transport left open: asyncio's as it is collected, uvloop
        # as its loop closes.
        warnings.simplefilter("ignore", ResourceWarning)
        assert run(client.is_server_live(), loop_kind) is True
        run(client.aclose(), loop_kind)
        assert ended.wait(IO_TIMEOUT)
        run(client.aclose(), loop_kind)  # again: nothing left to do
        del client
        gc.collect()


# ---------------------------------------------------------------------------- 2. GOAWAY


def goaway_and_close(peer: Peer, request: Request, _n: int = 0) -> None:
    """Refuse the call: GOAWAY naming no processed stream, then close."""
    peer.send_goaway(0)
    peer.close_gracefully()


def test_goaway_refused_call_is_retried(serve: Serve, connect: Connect) -> None:
    """A call refused by GOAWAY(last_stream_id=0) is retried once on a new connection."""
    server = serve(on_first(goaway_and_close))
    client = connect(server)
    assert client.live() is True
    assert server.accepted == 2
    assert len(server.peers[1].requests) == 1


def test_goaway_twice_is_transport_error(serve: Serve, connect: Connect) -> None:
    """A call refused on the retry's connection as well fails with TransportError."""
    server = serve(each_request(goaway_and_close))
    client = connect(server)
    with pytest.raises(TransportError, match="closed the connection before the call started"):
        client.live()
    assert server.accepted == 2


def test_graceful_goaway_lets_the_call_finish(serve: Serve, connect: Connect) -> None:
    """GOAWAY(NO_ERROR) naming the call's stream: the call completes, and the next call
    goes to a new connection."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_goaway(request.stream_id)
        peer.send_response(request.stream_id)
        peer.read_until_closed()  # the client closes it: no new stream may start here

    server = serve(on_first(respond))
    client = connect(server)
    assert client.live() is True
    assert client.live() is True
    assert server.accepted == 2
    assert [len(peer.requests) for peer in server.peers] == [1, 1]


# ----------------------------------------------------------- 3. stale pooled connections


#: How a server retires a connection it answered on: GOAWAY, or closing it (FIN).
RETIRE_IDLE: dict[str, Callable[[Peer, Request], None]] = {
    "goaway": lambda peer, request: peer.send_goaway(request.stream_id),
    "closed": lambda peer, request: peer.send_fin(),
}


@pytest.mark.parametrize("retire", RETIRE_IDLE.values(), ids=RETIRE_IDLE.keys())
def test_connection_retired_while_idle(
    serve: Serve, connect: Connect, retire: Callable[[Peer, Request], None]
) -> None:
    """A pooled connection the server retired (GOAWAY) or closed while it sat idle is
    noticed: the next call opens a new connection and succeeds."""
    retired = threading.Event()

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_response(request.stream_id)
        retire(peer, request)
        retired.set()
        peer.read_until_closed()

    server = serve(on_first(respond))
    client = connect(server)
    assert client.live() is True
    assert retired.wait(IO_TIMEOUT)
    client.pause(0.1)
    assert client.live() is True
    assert server.accepted == 2
    assert [len(peer.requests) for peer in server.peers] == [1, 1]


def test_reused_connection_closed_after_the_request_is_not_retried(
    serve: Serve, connect: Connect
) -> None:
    """A pooled connection closed after the server read the request, before any answer:
    the server may have run it, so the call is not sent again (the model would run twice);
    it fails with TransportError, and the next call works on a new connection."""

    def respond(peer: Peer, request: Request, n: int) -> None:
        if n == 0:
            peer.send_response(request.stream_id)
        else:
            peer.close_gracefully()

    server = serve(each_request(respond))
    client = connect(server)
    assert client.live() is True
    with pytest.raises(TransportError, match="UNAVAILABLE"):
        client.live()
    assert sum(len(peer.requests) for peer in server.peers) == 2  # received once, not twice
    assert client.live() is True
    assert server.accepted == 2


def test_fresh_connection_closed_mid_call_is_transport_error(
    serve: Serve, connect: Connect
) -> None:
    """A new connection closed after the request arrived is not retried: TransportError;
    the client stays usable."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.close_gracefully()

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(TransportError, match="UNAVAILABLE"):
        client.live()
    assert client.live() is True
    assert server.accepted == 2


# ------------------------------------------------------------------------ 4. RST_STREAM


def test_rst_stream_internal_error(serve: Serve, connect: Connect, mode: str) -> None:
    """RST_STREAM(INTERNAL_ERROR) fails the call with TransportError naming the code; the
    client stays usable (async: on the same connection)."""

    def reset(peer: Peer, request: Request, _n: int) -> None:
        peer.send_rst_stream(request.stream_id, ErrorCode.INTERNAL_ERROR)

    server = serve(on_first(reset))
    client = connect(server)
    with pytest.raises(TransportError, match="INTERNAL_ERROR"):
        client.live()
    assert client.live() is True
    assert server.accepted == (2 if mode == "sync" else 1)


def test_rst_stream_refused_is_retried(serve: Serve, connect: Connect) -> None:
    """A stream the server refused with RST_STREAM(REFUSED_STREAM) is retried (gRPC's
    transparent retry; grpcio does it)."""

    def refuse(peer: Peer, request: Request, _n: int) -> None:
        peer.send_rst_stream(request.stream_id, ErrorCode.REFUSED_STREAM)

    server = serve(on_first(refuse))
    client = connect(server)
    assert client.live() is True


def test_rst_stream_refused_again_is_unprocessed(serve: Serve, connect: Connect) -> None:
    """Refused on the retry too: the error says the server did not process the call, so a
    RetryPolicy may send even an infer again."""

    def refuse(peer: Peer, request: Request, _n: int) -> None:
        peer.send_rst_stream(request.stream_id, ErrorCode.REFUSED_STREAM)

    server = serve(each_request(refuse))
    client = connect(server)
    with pytest.raises(TransportError) as caught:
        client.live()
    assert caught.value.unprocessed


# ---------------------------------------------------------- 5-6. error statuses


@pytest.mark.parametrize(
    ("status", "code"),
    [(404, "UNIMPLEMENTED"), (503, "UNAVAILABLE"), (401, "UNAUTHENTICATED"), (500, "UNKNOWN")],
)
@pytest.mark.parametrize("with_body", [False, True], ids=["trailers-only", "body"])
def test_http_error_status(
    serve: Serve, connect: Connect, status: int, code: str, with_body: bool
) -> None:
    """A non-gRPC HTTP error (text/plain, no grpc-status) maps to gRPC's code for the HTTP
    status, whether it ends in its headers or carries a body; the client stays usable."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        headers = [(":status", str(status)), ("content-type", "text/plain")]
        peer.send_headers(request.stream_id, headers, end_stream=not with_body)
        if with_body:
            peer.send_data(request.stream_id, b"not here\n", end_stream=True)

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(ServerError) as caught:
        client.server_metadata()
    assert caught.value.grpc_code == code
    assert str(status) in caught.value.message
    assert client.live() is True


def test_trailers_only_error_status(serve: Serve, connect: Connect) -> None:
    """A trailers-only answer with grpc-status 5 is NOT_FOUND, its percent-encoded
    grpc-message decoded."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        headers = [
            *GRPC_OK_HEADERS,
            ("grpc-status", "5"),
            ("grpc-message", "no%20such%20model%3A%20x"),
        ]
        peer.send_headers(request.stream_id, headers, end_stream=True)

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(ServerError) as caught:
        client.server_metadata()
    assert caught.value.grpc_code == "NOT_FOUND"
    assert caught.value.message == "no such model: x"
    assert client.live() is True


@pytest.mark.parametrize(
    ("pushback", "retry_after"),
    [("1500", 1.5), ("0", 0.0), ("-1", math.inf), ("soon", math.inf)],
)
@pytest.mark.parametrize("transport", ["native", "grpcio"])
def test_retry_pushback_is_read(
    serve: Serve, connect: Connect, transport: str, pushback: str, retry_after: float
) -> None:
    """grpc-retry-pushback-ms in the trailers becomes ServerError.retry_after, in seconds;
    a negative or unreadable one is infinite (gRFC A6: do not retry)."""
    if transport == "grpcio":
        pytest.importorskip("grpc")

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        extra = [("grpc-retry-pushback-ms", pushback)]
        peer.send_trailers(request.stream_id, 14, "busy", extra=extra)

    client = connect(serve(each_request(respond)), grpc_transport=transport)
    with pytest.raises(ServerError) as caught:
        client.server_metadata()
    assert caught.value.retry_after == retry_after
    if transport == "grpcio" and pushback == "soon":
        # grpc-core refuses the unreadable trailer itself and fails the call: INTERNAL
        # (UNKNOWN before grpcio 1.70 or so).
        assert caught.value.grpc_code in ("INTERNAL", "UNKNOWN")
    else:
        assert (caught.value.grpc_code, caught.value.message) == ("UNAVAILABLE", "busy")


def test_deadline_exceeded_status(serve: Serve, connect: Connect) -> None:
    """grpc-status 4 from the server is DeadlineExceededError."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_trailers(request.stream_id, 4, "too%20slow")

    server = serve(each_request(respond))
    client = connect(server)
    with pytest.raises(DeadlineExceededError, match="too slow"):
        client.unary(b"")


# ----------------------------------------------------------- 7. protocol violations


@dataclass(frozen=True)
class Violation:
    send: Callable[[Peer, int], None]
    goaway_code: int


VIOLATIONS = {
    "window-update-0-on-connection": Violation(
        lambda peer, sid: peer.send_window_update(0, 0), ErrorCode.PROTOCOL_ERROR
    ),
    "data-on-stream-0": Violation(
        lambda peer, sid: peer.send(data_frame(0, b"x")), ErrorCode.PROTOCOL_ERROR
    ),
    "frame-over-max-frame-size": Violation(
        lambda peer, sid: peer.send(frame_header((1 << 20) + 1, DATA, 0, sid)),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    "undecodable-hpack": Violation(
        lambda peer, sid: peer.send(frame(HEADERS, FLAG_END_HEADERS, sid, b"\x80")),
        ErrorCode.COMPRESSION_ERROR,
    ),
    "hpack-unknown-index": Violation(
        lambda peer, sid: peer.send(frame(HEADERS, FLAG_END_HEADERS, sid, b"\xff\x10")),
        ErrorCode.COMPRESSION_ERROR,
    ),
    "headers-on-even-stream": Violation(
        lambda peer, sid: peer.send(frame(HEADERS, FLAG_END_HEADERS, 2, b"\x88")),
        ErrorCode.PROTOCOL_ERROR,
    ),
    "data-padding-too-long": Violation(
        lambda peer, sid: peer.send(frame(DATA, FLAG_PADDED, sid, b"\x05abc")),
        ErrorCode.PROTOCOL_ERROR,
    ),
    "settings-bad-length": Violation(
        lambda peer, sid: peer.send_frame(SETTINGS, 0, 0, b"\x00\x01\x00"),
        ErrorCode.FRAME_SIZE_ERROR,
    ),
    "push-promise": Violation(
        lambda peer, sid: peer.send_frame(PUSH_PROMISE, FLAG_END_HEADERS, sid, U32.pack(2)),
        ErrorCode.PROTOCOL_ERROR,
    ),
    "continuation-without-headers": Violation(
        lambda peer, sid: peer.send_frame(CONTINUATION, FLAG_END_HEADERS, sid, b"\x88"),
        ErrorCode.PROTOCOL_ERROR,
    ),
    "headers-interrupted": Violation(
        lambda peer, sid: peer.send(frame(HEADERS, 0, sid, b"\x88") + frame(PING, 0, 0, bytes(8))),
        ErrorCode.PROTOCOL_ERROR,
    ),
    "ping-wrong-length": Violation(
        lambda peer, sid: peer.send_frame(PING, 0, 0, b"1234"), ErrorCode.FRAME_SIZE_ERROR
    ),
    "settings-enable-push-1": Violation(  # RFC 9113 section 6.5.2
        lambda peer, sid: peer.send_settings([(Setting.ENABLE_PUSH, 1)]),
        ErrorCode.PROTOCOL_ERROR,
    ),
}


@pytest.mark.parametrize("name", VIOLATIONS)
def test_protocol_violation(serve: Serve, connect: Connect, name: str) -> None:
    """An HTTP/2 violation fails the call with ProtocolError (no other type), the client sends
    GOAWAY with the matching error code, and the next call works on a new connection."""
    violation = VIOLATIONS[name]
    goaways: list[Frame] = []

    def respond(peer: Peer, request: Request, _n: int) -> None:
        violation.send(peer, request.stream_id)
        goaways.extend(f for f in peer.read_until_closed() if f.kind == GOAWAY)

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(ProtocolError):
        client.live()
    assert client.live() is True
    assert server.accepted == 2
    assert server.finished(0)  # its handler collects the GOAWAY after the client closed
    assert len(goaways) == 1
    assert GOAWAY_PAYLOAD.unpack_from(goaways[0].payload)[1] == violation.goaway_code


def _data_before_headers(peer: Peer, sid: int) -> None:
    peer.send_data(sid, grpc_message(b"x"))


def _second_header_block_not_ending(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, GRPC_OK_HEADERS)
    peer.send_headers(sid, [("x-more", "1")])


def _compressed_flag_2(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, GRPC_OK_HEADERS)
    peer.send_data(sid, b"\x02\x00\x00\x00\x01x")


def _headers_without_status(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, [("content-type", "application/grpc")])


def _status_not_numeric(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, [(":status", "OK"), ("content-type", "application/grpc")])
    peer.send_data(sid, grpc_message(LIVE_REPLY))
    peer.send_trailers(sid)


def _uppercase_header_name(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, [*GRPC_OK_HEADERS, ("X-Upper", "1")])


def _pseudo_header_in_trailers(peer: Peer, sid: int) -> None:
    peer.send_headers(sid, GRPC_OK_HEADERS)
    peer.send_headers(sid, [(":status", "200"), ("grpc-status", "0")], end_stream=True)


GRPC_VIOLATIONS: dict[str, Callable[[Peer, int], None]] = {
    "status-not-numeric": _status_not_numeric,
    "uppercase-header-name": _uppercase_header_name,
    "pseudo-header-in-trailers": _pseudo_header_in_trailers,
    "data-before-headers": _data_before_headers,
    "second-header-block-not-ending": _second_header_block_not_ending,
    "compressed-flag-2": _compressed_flag_2,
    "headers-without-status": _headers_without_status,
}


@pytest.mark.parametrize("name", GRPC_VIOLATIONS)
def test_grpc_violation(serve: Serve, connect: Connect, name: str) -> None:
    """A response that is valid HTTP/2 but not valid gRPC fails with ProtocolError; the
    client stays usable."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        GRPC_VIOLATIONS[name](peer, request.stream_id)

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(ProtocolError):
        client.live()
    assert client.live() is True


def test_non_numeric_status_is_a_protocol_error(serve: Serve, connect: Connect) -> None:
    """Not "answered with 0 messages": the response is malformed, the stream is reset with
    PROTOCOL_ERROR (a stream error, RFC 9113 section 8.1.1)."""
    resets: list[Frame] = []

    def respond(peer: Peer, request: Request, n: int) -> None:
        if peer.index or n:
            peer.send_response(request.stream_id)
            return
        _status_not_numeric(peer, request.stream_id)
        got = peer.wait_for(RST_STREAM, IO_TIMEOUT)
        if got is not None:
            resets.append(got)

    server = serve(each_request(respond))
    client = connect(server)
    with pytest.raises(ProtocolError, match=":status 'OK' is not a three-digit code"):
        client.live()
    assert client.live() is True
    assert server.accepted == 1  # a stream error: the connection serves on
    assert [(f.stream_id, U32.unpack(f.payload)[0]) for f in resets] == [
        (1, ErrorCode.PROTOCOL_ERROR)
    ]


def test_server_preface_must_be_settings(serve: Serve, connect: Connect) -> None:
    """RFC 9113 section 3.4: a server whose first frame is not SETTINGS is not an HTTP/2
    server; the client says GOAWAY PROTOCOL_ERROR."""
    goaways: list[Frame] = []

    def handler(peer: Peer) -> None:
        if peer.index:
            peer.handshake()
            serve_requests(peer)
            return
        peer.read_preface()
        peer.send_ping(b"12345678")
        peer.send_settings()
        goaways.extend(f for f in peer.read_until_closed() if f.kind == GOAWAY)

    server = serve(handler)
    client = connect(server)
    with pytest.raises(ProtocolError, match="first frame is PING, not SETTINGS"):
        client.live()
    assert client.live() is True
    assert server.finished(0)
    assert [GOAWAY_PAYLOAD.unpack_from(f.payload)[1] for f in goaways] == [ErrorCode.PROTOCOL_ERROR]


# -------------------------------------------------------------------------- 8. HTTP/1.x


def test_http1_answer(serve: Serve, connect: Connect) -> None:
    """An HTTP/1.1 server's answer is a ProtocolError that says so; the client stays usable."""

    def handler(peer: Peer) -> None:
        if peer.index:
            each_request()(peer)
            return
        peer.read_preface()
        peer.send(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
            b"Connection: close\r\n\r\nBad Request"
        )
        peer.close_gracefully()

    server = serve(handler)
    client = connect(server)
    with pytest.raises(ProtocolError, match=r"this port speaks HTTP/1\.1 — did you mean http://"):
        client.live()
    assert client.live() is True


# -------------------------------------------------------------------------- 9. deadlines

BIG_REQUEST = 300_000


@dataclass
class FlowRecord:
    before_update: int = 0
    during_wait: int = 0
    largest_frame: int = 0
    ping_ack: bytes | None = None


def read_window(peer: Peer, request: Request, record: FlowRecord) -> None:
    """Read DATA until the client's initial 65,535-byte window is used up."""
    while record.before_update < DEFAULT_WINDOW and not request.ended:
        got = peer.next_request_frame()
        assert got.kind == DATA, got
        assert got.stream_id == request.stream_id, got
        request.body += got.payload
        request.ended = bool(got.flags & FLAG_END_STREAM)
        record.before_update += len(got.payload)
        record.largest_frame = max(record.largest_frame, len(got.payload))


def open_window_and_answer(peer: Peer, request: Request) -> None:
    """Open both windows wide, read the rest of ``request``, answer "ok", then read until
    the client closes the connection."""
    peer.send_window_update(0, 1 << 20)
    peer.send_window_update(request.stream_id, 1 << 20)
    peer.read_body(request)
    peer.send_response(request.stream_id, b"ok")
    peer.read_until_closed()


def test_deadline_when_server_never_answers(serve: Serve, connect: Connect, mode: str) -> None:
    """No answer: DeadlineExceededError after about the timeout, then the client works
    again. Sync: on a new connection. Async: the call's stream is reset with CANCEL and the
    connection PINGed (is the server answering at all?); the next call does not wait."""
    seen: dict[str, Frame | None] = {}
    checked = threading.Event()

    def first(peer: Peer, request: Request, _n: int) -> None:
        if mode != "sync":
            seen["reset"] = peer.wait_for(RST_STREAM, GUARD)
            seen["ping"] = ping = peer.wait_for(PING, GUARD)
            if ping is not None:
                peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
            checked.set()

    server = serve(on_first(first))
    client = connect(server)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.live(timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 0.5 + 2.0
    assert client.live() is True
    if mode == "sync":
        assert server.accepted == 2
        return
    assert checked.wait(GUARD)
    reset, ping = seen["reset"], seen["ping"]
    assert reset is not None
    assert (reset.stream_id, U32.unpack(reset.payload)[0]) == (1, ErrorCode.CANCEL)
    assert ping is not None


def test_deadline_while_headers_arrived(serve: Serve, connect: Connect) -> None:
    """Headers but no message or trailers: the deadline still ends the call."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_data(request.stream_id, grpc_message(b"abc")[:6])

    server = serve(on_first(respond))
    client = connect(server)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.unary(b"", timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert client.live() is True


def test_deadline_while_request_blocked_by_flow_control(serve: Serve, connect: Connect) -> None:
    """A request the server's window never lets through ends at its deadline."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        if peer.index == 0:
            request = peer.read_headers()
            assert request is not None
            read_window(peer, request, FlowRecord())
            # Credit the connection (not the stream): the next call can go out here.
            peer.send_window_update(0, DEFAULT_WINDOW)
        serve_requests(peer)

    server = serve(handler)
    client = connect(server)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.unary(b"a" * 200_000, timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert client.live() is True


# ------------------------------------------------- 10-11. response framing and count


BIG = random.Random(1234).randbytes(1 << 20)


def _split_response(stream_id: int, message: bytes) -> bytes:
    """``message`` as many small DATA frames, every third padded, the 5-byte prefix split
    across the first two."""
    body = grpc_message(message)
    frames = [data_frame(stream_id, body[:2], pad=3), data_frame(stream_id, body[2:1000])]
    sizes = [1, 7, 4096, 16384, 333, 9000, 2]
    pos, i = 1000, 0
    while pos < len(body):
        size = sizes[i % len(sizes)]
        pad = (i * 37) % 256 if i % 3 == 0 else None
        frames.append(data_frame(stream_id, body[pos : pos + size], pad=pad))
        pos += size
        i += 1
    return b"".join(frames)


def test_large_response_in_small_padded_frames(serve: Serve, connect: Connect) -> None:
    """A 1 MiB message in hundreds of small DATA frames, some padded, its prefix split, the
    first bytes trickled a few at a time (frame headers split across reads), arrives intact."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        data = _split_response(request.stream_id, BIG)
        trickle = 301
        for pos in range(0, trickle, 7):
            peer.send(data[pos : min(pos + 7, trickle)])
            time.sleep(0.001)
        peer.send(data[trickle:])
        peer.send_trailers(request.stream_id)

    server = serve(each_request(respond))
    client = connect(server)
    reply, _ = client.unary(b"", timeout=10.0)
    assert len(reply) == len(BIG)
    assert reply == BIG


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_response(serve: Serve, connect: Connect, encoding: str) -> None:
    """A message with the compressed flag is decompressed per grpc-encoding."""
    payload = b"tensor bytes " * 5000
    compressed = gzip.compress(payload) if encoding == "gzip" else zlib.compress(payload)

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, [*GRPC_OK_HEADERS, ("grpc-encoding", encoding)])
        peer.send_data(request.stream_id, grpc_message(compressed, compressed=True))
        peer.send_trailers(request.stream_id)

    server = serve(each_request(respond))
    client = connect(server)
    reply, _ = client.unary(b"")
    assert reply == payload
    assert type(reply) is bytearray  # arrays viewing it are writeable, as for the others
    assert server.peers[0].requests[0].header("grpc-accept-encoding") == "identity,deflate,gzip"


@dataclass(frozen=True)
class BadResponse:
    """A response a unary call must refuse: what the server sends after its headers (a
    body, then trailers unless the body ends the stream), and what the call raises."""

    body: bytes
    error: type[Exception]
    match: str
    grpc_code: str | None = None
    encoding: str | None = None  # the response's grpc-encoding
    trailers: bool = True


#: Malformed, undecodable or miscounted responses; the client stays usable after each.
BAD_RESPONSES = {
    # A compressed message in an encoding the client cannot decode names it.
    "unknown encoding": BadResponse(
        grpc_message(b"\x01\x02\x03", compressed=True),
        ServerError,
        "snappy",
        "INTERNAL",
        encoding="snappy",
    ),
    "corrupt gzip": BadResponse(
        grpc_message(b"not gzip at all", compressed=True), ProtocolError, "gzip", encoding="gzip"
    ),
    "two messages": BadResponse(
        grpc_message(b"one") + grpc_message(b"two"), ProtocolError, "2 messages"
    ),
    "no message": BadResponse(b"", ProtocolError, "0 messages"),
    # Trailers while a message is incomplete.
    "ending inside a message": BadResponse(
        grpc_message(b"0123456789")[:8], ServerError, "inside a message", "INTERNAL"
    ),
    # DATA that ends the stream without trailers: no status.
    "missing trailers": BadResponse(
        grpc_message(LIVE_REPLY), ServerError, "grpc-status", "INTERNAL", trailers=False
    ),
}


@pytest.mark.parametrize("case", BAD_RESPONSES.values(), ids=BAD_RESPONSES.keys())
def test_bad_response(serve: Serve, connect: Connect, case: BadResponse) -> None:
    """Each bad response fails its call with the error the table names; the next call on
    the client succeeds."""

    def respond(peer: Peer, request: Request, _n: int) -> None:
        encoding = [] if case.encoding is None else [("grpc-encoding", case.encoding)]
        peer.send_headers(request.stream_id, [*GRPC_OK_HEADERS, *encoding])
        if case.body or not case.trailers:
            peer.send_data(request.stream_id, case.body, end_stream=not case.trailers)
        if case.trailers:
            peer.send_trailers(request.stream_id)

    server = serve(on_first(respond))
    client = connect(server)
    with pytest.raises(case.error, match=case.match) as caught:
        client.unary(b"")
    if case.grpc_code is not None:
        assert isinstance(caught.value, ServerError)
        assert caught.value.grpc_code == case.grpc_code
    assert client.live() is True


# -------------------------------------------------------------------------- 12. PING


def test_ping_during_call_is_acknowledged(serve: Serve, connect: Connect) -> None:
    """A PING from the server mid-call is answered (same payload) before the call ends."""
    acks: list[bytes | None] = []

    def respond(peer: Peer, request: Request, _n: int) -> None:
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_ping(b"pingpong")
        ack = peer.wait_for(PING, 2.0, FLAG_ACK)
        acks.append(ack.payload if ack is not None else None)
        peer.send_data(request.stream_id, grpc_message(LIVE_REPLY))
        peer.send_trailers(request.stream_id)

    server = serve(each_request(respond))
    client = connect(server)
    assert client.live() is True
    assert acks == [b"pingpong"]


def test_ping_while_idle_is_acknowledged(serve: Serve, connect: Connect) -> None:
    """A PING that reaches a pooled connection between calls is answered (sync: when the
    next call takes the connection, before its request), and the connection stays in use."""
    acks: list[bytes | None] = []

    def respond(peer: Peer, request: Request, n: int) -> None:
        peer.send_response(request.stream_id)
        if n == 0:
            peer.send_ping(b"idle-png")
            ack = peer.wait_for(PING, 2.0, FLAG_ACK)
            acks.append(ack.payload if ack is not None else None)

    server = serve(each_request(respond))
    client = connect(server)
    assert client.live() is True
    client.pause(0.1)
    assert client.live() is True
    assert acks == [b"idle-png"]
    assert server.accepted == 1


# ------------------------------------------------------------ 13. request flow control


def test_large_request_waits_for_the_window(serve: Serve, connect: Connect) -> None:
    """A 300 KB request stops at the initial 65,535-byte window, in frames no larger than
    16,384 bytes, until the server opens the window; then the whole body arrives intact."""
    record = FlowRecord()

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        read_window(peer, request, record)
        extra = [f for f in peer.frames_for(0.3) if f.kind == DATA]
        for got in extra:
            request.body += got.payload
            record.during_wait += len(got.payload)
        open_window_and_answer(peer, request)

    server = serve(handler)
    client = connect(server)
    reply, _ = client.unary(b"a" * BIG_REQUEST)
    assert reply == b"ok"
    assert record.before_update == DEFAULT_WINDOW
    assert record.during_wait == 0
    assert record.largest_frame <= 16_384
    assert server.peers[0].requests[0].body == grpc_message(b"a" * BIG_REQUEST)


@pytest.mark.parametrize(
    "mode",
    [
        "sync",
        "async",
    ],
)
def test_ping_while_request_blocked_by_flow_control(serve: Serve, connect: Connect) -> None:
    """A PING sent while the client waits for send window is answered at once (RFC 9113
    6.7), not only after the window opens."""
    record = FlowRecord()

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        read_window(peer, request, record)
        peer.send_ping(b"blocked!")
        ack = peer.wait_for(PING, 1.0, FLAG_ACK)
        record.ping_ack = ack.payload if ack is not None else None
        open_window_and_answer(peer, request)

    server = serve(handler)
    client = connect(server)
    reply, _ = client.unary(b"a" * BIG_REQUEST)
    assert reply == b"ok"
    assert record.ping_ack == b"blocked!"


@pytest.mark.parametrize(
    "mode",
    [
        "sync",
        "async",
    ],
)
@pytest.mark.parametrize("answer_with", ["trailers-only", "rst-stream"])
def test_early_answer_while_request_blocked(
    serve: Serve, connect: Connect, answer_with: str
) -> None:
    """The server rejects a large request after reading part of it, without opening the
    window: the call ends at once with that answer (it does not wait for the window)."""

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        read_window(peer, request, FlowRecord())
        if answer_with == "trailers-only":
            headers = [*GRPC_OK_HEADERS, ("grpc-status", "8"), ("grpc-message", "too%20big")]
            peer.send_headers(request.stream_id, headers, end_stream=True)
        else:
            peer.send_rst_stream(request.stream_id, ErrorCode.ENHANCE_YOUR_CALM)
        peer.read_until_closed()

    server = serve(handler)
    client = connect(server)
    started = time.monotonic()
    expected = ServerError if answer_with == "trailers-only" else TransportError
    with pytest.raises(expected) as caught:
        client.unary(b"a" * BIG_REQUEST, timeout=30.0, guard=3.0)
    assert time.monotonic() - started < 2.0
    if answer_with == "trailers-only":
        assert isinstance(caught.value, ServerError)
        assert caught.value.grpc_code == "RESOURCE_EXHAUSTED"
    else:
        assert "ENHANCE_YOUR_CALM" in str(caught.value)


# ------------------------------------------------------------------- receive limits


@pytest.mark.parametrize(
    ("case", "expected"),
    [("at-limit", None), ("over-limit", ServerError), ("decompresses-over-limit", ServerError)],
)
def test_receive_limit(
    serve: Serve, connect: Connect, case: str, expected: type[Exception] | None
) -> None:
    """grpc.max_receive_message_length: a message at the limit passes; a larger one, or a
    compressed one that inflates past it, is RESOURCE_EXHAUSTED (as gRPC reports both)."""
    limit = 100

    def respond(peer: Peer, request: Request, _n: int) -> None:
        if case == "decompresses-over-limit":
            peer.send_headers(request.stream_id, [*GRPC_OK_HEADERS, ("grpc-encoding", "gzip")])
            message = grpc_message(gzip.compress(bytes(10_000)), compressed=True)
        else:
            peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
            message = grpc_message(bytes(limit if case == "at-limit" else limit + 1))
        peer.send_data(request.stream_id, message)
        peer.send_trailers(request.stream_id)

    server = serve(on_first(respond))
    client = connect(server, grpc_options={"grpc.max_receive_message_length": limit})
    if expected is None:
        assert client.unary(b"")[0] == bytes(limit)
        return
    with pytest.raises(expected) as caught:
        client.unary(b"")
    if expected is ServerError:
        assert isinstance(caught.value, ServerError)
        assert caught.value.grpc_code == "RESOURCE_EXHAUSTED"
    assert client.live() is True


# -------------------------------------------------- async only: calls sharing a connection


async def test_async_goaway_retries_only_unprocessed_streams(serve: Serve) -> None:
    """GOAWAY naming stream 1 while streams 1 and 3 are in flight on one connection: stream
    1 still completes there, stream 3 is retried on a new connection."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        if peer.index:
            serve_requests(peer, lambda peer, request, n: peer.send_response(request.stream_id))
            return
        first, second = peer.read_request(), peer.read_request()
        assert first is not None
        assert second is not None
        peer.send_goaway(first.stream_id)
        peer.send_response(first.stream_id, b"processed")
        peer.read_until_closed()

    server = serve(handler)
    async with AsyncClient(server.url, timeout=CALL_TIMEOUT) as client:
        channel: Any = client._io
        calls = [channel.call_unary("/x.Y/Z", b"1"), channel.call_unary("/x.Y/Z", b"2")]
        replies = await asyncio.wait_for(asyncio.gather(*calls), GUARD)
    assert sorted(reply for reply, _ in replies) == [LIVE_REPLY, b"processed"]
    assert server.accepted == 2
    assert [len(peer.requests) for peer in server.peers] == [2, 1]


async def test_async_max_concurrent_streams_opens_another_connection(serve: Serve) -> None:
    """With the server's SETTINGS_MAX_CONCURRENT_STREAMS at 1, a second concurrent call
    opens a second connection instead of exceeding the limit."""
    most = [0]

    def handler(peer: Peer) -> None:
        peer.handshake([(Setting.MAX_CONCURRENT_STREAMS, 1)])
        open_streams: set[int] = set()
        while (request := peer.read_request()) is not None:
            open_streams.add(request.stream_id)
            most[0] = max(most[0], len(open_streams))
            time.sleep(0.05)  # the calls overlap
            peer.send_response(request.stream_id)
            open_streams.discard(request.stream_id)

    server = serve(handler)
    async with AsyncClient(server.url, timeout=CALL_TIMEOUT) as client:
        assert await client.is_server_live()  # the client learns the limit
        results = await asyncio.wait_for(
            asyncio.gather(client.is_server_live(), client.is_server_live()), GUARD
        )
    assert list(results) == [True, True]
    assert server.accepted == 2
    assert most[0] == 1


# A burst of PINGs, each answered with a 17-byte PING ACK that the server never reads.
PING_BURST = frame(PING, 0, 0, b"12345678") * 512


@contextlib.contextmanager
def traced_growth() -> Iterator[list[int]]:
    """Peak Python memory growth (bytes) over the block, in the list it yields."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    growth: list[int] = []
    try:
        yield growth
    finally:
        growth.append(tracemalloc.get_traced_memory()[1] - base)
        tracemalloc.stop()


def small_send_buffer(conn: Any) -> None:
    """Shrink the kernel's send buffer of an asyncio connection's socket (its autotuning
    would otherwise take megabytes of acknowledgements before asyncio's buffer grows,
    which makes the flood tests slow, not different)."""
    sock = conn.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)


def answer_then_flood(stopped: list[bool], *, during_call: bool) -> Handler:
    """Answer the first call, then flood PINGs without reading: during the second call
    (``during_call``) or at once, with no call in flight. Connections after the first are
    served as usual."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        if peer.index:
            serve_requests(peer)
            return
        request = peer.read_request()
        assert request is not None
        peer.send_response(request.stream_id)
        if during_call:
            assert peer.read_headers() is not None
        stopped.append(peer.flood(PING_BURST))

    return handler


async def test_async_server_that_stops_reading_loses_the_connection(serve: Serve) -> None:
    """A server that never reads while it floods PINGs: the acknowledgements would pile up
    without end (+550 MiB in 30 s). The client bounds what it leaves unsent and drops the
    connection; the call fails with TransportError well before its deadline."""
    stopped: list[bool] = []
    server = serve(answer_then_flood(stopped, during_call=True))
    async with AsyncClient(server.url, timeout=GUARD * 2) as client:
        assert await client.is_server_live() is True
        channel: Any = client._io
        (conn,) = channel._all
        small_send_buffer(conn)
        with (
            traced_growth() as growth,
            pytest.raises(TransportError, match="stopped reading") as exc,
        ):
            await asyncio.wait_for(client.is_server_live(), GUARD)
        assert not isinstance(exc.value, DeadlineExceededError)
        assert growth[0] < 32 << 20
        # In a thread: the connection closes on the event loop, which must keep running.
        assert await asyncio.to_thread(server.finished, 0, GUARD)
        assert stopped == [True]
        assert await client.is_server_live() is True


async def test_async_idle_connection_whose_server_stops_reading_is_dropped(serve: Serve) -> None:
    """The same with no call in flight: the idle connection is closed, the next call opens
    another."""
    stopped: list[bool] = []
    server = serve(answer_then_flood(stopped, during_call=False))
    async with AsyncClient(server.url, timeout=CALL_TIMEOUT) as client:
        assert await client.is_server_live() is True
        channel: Any = client._io
        (conn,) = channel._all
        small_send_buffer(conn)
        with traced_growth() as growth:
            await asyncio.wait_for(asyncio.shield(conn.gone), GUARD)
        assert growth[0] < 32 << 20
        assert "stopped reading" in str(conn.lost)
        assert await client.is_server_live() is True
        assert await asyncio.to_thread(server.finished, 0, GUARD)
    assert stopped == [True]
    assert server.accepted == 2


async def test_async_large_request_is_not_taken_for_a_server_that_stopped_reading(
    serve: Serve,
) -> None:
    """A stream request far larger than the bound on unread acknowledgements, which the
    flow-control windows let go out at once, with PINGs from the server meanwhile: the
    request DATA waiting in the buffer does not count (counting it dropped large stream
    requests to a busy Triton)."""
    size = 8 << 20
    received: list[int] = []

    def handler(peer: Peer) -> None:
        peer.handshake([(Setting.INITIAL_WINDOW_SIZE, 2**31 - 1)])
        peer.send_window_update(0, 2**31 - 1 - DEFAULT_WINDOW)
        request = peer.read_headers()
        assert request is not None
        for _ in range(64):  # answered behind the DATA, in the same buffer
            peer.send_ping(b"pingpong")
        total, ended = 0, False
        while not ended:
            got = peer.next_request_frame()
            assert got.kind == DATA, got
            total += len(got.payload)
            ended = bool(got.flags & FLAG_END_STREAM)
        received.append(total)
        peer.send_response(request.stream_id, b"done")
        serve_requests(peer)

    server = serve(handler)
    async with AsyncClient(server.url, timeout=GUARD) as client:
        channel: Any = client._io
        call = channel.open_stream("/x.Y/S", timeout=GUARD)
        await call.write(bytes(size))
        await call.done_writing()
        assert await asyncio.wait_for(call.read(), GUARD) == b"done"
        assert await call.read() is None
    assert received == [size + 5]


# ---------------------------------------------- async only: connections that stop answering


def black_hole(peer: Peer) -> None:
    """Read whatever comes and answer nothing, not even PINGs, until the client hangs up."""
    peer.sock.settimeout(GUARD)
    with contextlib.suppress(OSError):
        while peer.sock.recv(65536):
            pass


async def test_async_black_holed_connection_is_not_used_again(serve: Serve) -> None:
    """A connection that stops answering fails the call whose deadline passes; the next
    call goes to a new connection at once (it used to take every later call down too), and
    the silent one is dropped when its PING goes unanswered."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        if peer.index:
            serve_requests(peer)
            return
        request = peer.read_request()
        assert request is not None
        peer.send_response(request.stream_id)
        black_hole(peer)

    server = serve(handler)
    config = channel_config(parse_url(server.url), keepalive=GRPCKeepAlive(timeout_ms=1000))
    channel = AsyncNativeGRPCChannel(config)
    try:
        assert (await channel.call_unary(LIVE, b"", timeout=GUARD))[0] == LIVE_REPLY
        (first,) = channel._all
        with pytest.raises(DeadlineExceededError):
            await channel.call_unary(LIVE, b"", timeout=1.0)
        reply, _ = await asyncio.wait_for(channel.call_unary(LIVE, b"", timeout=GUARD), GUARD)
        assert reply == LIVE_REPLY
        assert server.accepted == 2
        await asyncio.wait_for(asyncio.shield(first.gone), GUARD)  # its PING went unanswered
        assert "did not answer a PING" in str(first.lost)
    finally:
        await channel.aclose()


async def test_async_goaway_connection_closes_when_its_calls_time_out(serve: Serve) -> None:
    """GOAWAY naming the calls' streams, which are then never answered: when the last one
    times out the connection closes (it used to stay open until aclose, one per GOAWAY)."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        if peer.index:
            serve_requests(peer)
            return
        first, second = peer.read_request(), peer.read_request()
        assert first is not None
        assert second is not None
        peer.send_goaway(second.stream_id)  # both will be processed... in time, maybe
        black_hole(peer)

    server = serve(handler)
    channel = AsyncNativeGRPCChannel(channel_config(parse_url(server.url)))
    try:
        calls = [channel.call_unary(LIVE, b"", timeout=1.0) for _ in range(2)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(result, DeadlineExceededError) for result in results)
        (conn,) = channel._all
        await asyncio.wait_for(asyncio.shield(conn.gone), GUARD)
        assert (await channel.call_unary(LIVE, b"", timeout=GUARD))[0] == LIVE_REPLY
    finally:
        await channel.aclose()


async def test_async_keepalive_pings_while_waiting(serve: Serve) -> None:
    """With keepalive on (grpc.keepalive_time_ms), a call waiting on a silent server PINGs
    it; a server that answers keeps the connection, one that does not loses it (the call
    fails with TransportError before its own deadline)."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        request = peer.read_request()
        assert request is not None
        if peer.index == 0:  # answers the keepalive PING, then the call
            ping = peer.wait_for(PING, GUARD)
            assert ping is not None
            peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
            peer.send_response(request.stream_id)
            serve_requests(peer)
        else:
            black_hole(peer)

    server = serve(handler)
    keepalive = GRPCKeepAlive(time_ms=300, timeout_ms=1000)
    channel = AsyncNativeGRPCChannel(channel_config(parse_url(server.url), keepalive=keepalive))
    try:
        reply, _ = await channel.call_unary(LIVE, b"", timeout=GUARD)
        assert reply == LIVE_REPLY
        await channel.aclose()
        channel = AsyncNativeGRPCChannel(channel_config(parse_url(server.url), keepalive=keepalive))
        with pytest.raises(TransportError, match="did not answer a PING") as exc:
            await channel.call_unary(LIVE, b"", timeout=GUARD * 2)
        assert not isinstance(exc.value, DeadlineExceededError)
    finally:
        await channel.aclose()


async def test_async_client_keepalive_pings_a_silent_server(serve: Serve) -> None:
    """GRPCKeepAlive given to the AsyncClient reaches its native connections: a call
    waiting on a server that says nothing PINGs it; the answer keeps the call going."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        request = peer.read_request()
        assert request is not None
        ping = peer.wait_for(PING, GUARD)
        assert ping is not None  # without it the call below times out
        peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
        peer.send_response(request.stream_id)
        serve_requests(peer)

    server = serve(handler)
    keepalive = GRPCKeepAlive(time_ms=200, timeout_ms=int(GUARD * 1000))
    async with AsyncClient(server.url, timeout=GUARD * 2, grpc_keepalive=keepalive) as client:
        assert await asyncio.wait_for(client.is_server_live(), GUARD * 3) is True


async def test_async_keepalive_stops_at_max_pings_without_data(serve: Serve) -> None:
    """With keepalive on an idle connection (permit_without_calls), PINGs stop after
    http2_max_pings_without_data of them, as grpcio's do (servers count PINGs without data
    as strikes and say GOAWAY too_many_pings); a call that sends resumes them."""
    two_pings, third_ping = threading.Event(), threading.Event()

    def pings(peer: Peer) -> int:
        return sum(1 for got in peer.received if got.kind == PING and not got.flags & FLAG_ACK)

    def handler(peer: Peer) -> None:
        peer.handshake()
        request = peer.read_request()  # answers (and records) a PING that comes meanwhile
        assert request is not None
        peer.send_response(request.stream_id)
        while pings(peer) < 2:
            ping = peer.wait_for(PING, GUARD)
            assert ping is not None
            peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
        two_pings.set()
        request = peer.read_request()
        assert request is not None
        peer.send_response(request.stream_id)
        ping = peer.wait_for(PING, GUARD)
        assert ping is not None
        peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
        third_ping.set()
        peer.read_until_closed()

    server = serve(handler)
    keepalive = GRPCKeepAlive(time_ms=100, permit_without_calls=True)
    async with AsyncClient(server.url, timeout=GUARD, grpc_keepalive=keepalive) as client:
        assert await client.is_server_live() is True
        channel: Any = client._io
        (conn,) = channel._all
        assert await asyncio.to_thread(two_pings.wait, GUARD)
        # Count keepalive intervals from here (the timer looks the method up each time).
        ticks: list[int] = []
        passed = asyncio.Event()
        tick = conn._keepalive_tick

        def counted() -> None:
            tick()
            ticks.append(1)
            if len(ticks) >= 4:
                passed.set()

        conn._keepalive_tick = counted
        await asyncio.wait_for(passed.wait(), GUARD)
        assert conn._pings_sent == 2
        assert await client.is_server_live() is True
        assert await asyncio.to_thread(third_ping.wait, GUARD)
        assert conn._pings_sent == 3


# ---------------------------------------------------- keepalive, both clients (sync too)


def answer_after_a_ping(peer: Peer) -> None:
    """Answer each call only after acknowledging a keepalive PING (a stream call once its
    requests ended)."""
    peer.handshake()
    while (request := peer.read_request()) is not None:
        ping = peer.wait_for(PING, GUARD)
        assert ping is not None  # without it the call times out, failing the test
        peer.send_frame(PING, FLAG_ACK, 0, ping.payload)
        peer.send_response(request.stream_id)


def never_answer(peer: Peer) -> None:
    peer.handshake()
    black_hole(peer)


def test_keepalive_pings_while_a_call_waits(serve: Serve, connect: Connect) -> None:
    """GRPCKeepAlive on either client: a unary call and a stream call waiting on a silent
    server PING it, and go on when it answers; a server that does not answer loses the
    connection, the call failing with TransportError well before its deadline."""
    keepalive = GRPCKeepAlive(time_ms=200, timeout_ms=1000)
    client = connect(serve(answer_after_a_ping), timeout=GUARD * 2, grpc_keepalive=keepalive)
    assert client.live(guard=GUARD * 3) is True
    assert client.stream([b"x"], guard=GUARD * 3) == [LIVE_REPLY]
    assert client.live(guard=GUARD * 3) is True  # a pooled connection, pinged again
    silent = connect(serve(never_answer), timeout=GUARD * 2, grpc_keepalive=keepalive)
    with pytest.raises(TransportError, match="did not answer a PING") as exc:
        silent.live(guard=GUARD * 3)
    assert not isinstance(exc.value, DeadlineExceededError)
    with pytest.raises(TransportError, match="did not answer a PING") as exc:
        silent.stream([b"x"], guard=GUARD * 3)
    assert not isinstance(exc.value, DeadlineExceededError)
