"""Streaming calls of the native transport (:mod:`kserve_v2.transport.native.stream`) against the
scripted HTTP/2 server of ``test_native``: flow control, resets, deadlines, cancelling, a lost
connection, a trailers-only error. Each test drives the channel's ``open_stream`` call in both
modes: sync (a reader thread iterates while the test sends) and asyncio."""

from __future__ import annotations

import asyncio
import os
import select
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from kserve_v2 import (
    DeadlineExceededError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.endpoint import parse_url
from kserve_v2.grpc.config import channel_config
from kserve_v2.h2 import connection as h2c
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    FLAG_ACK,
    FLAG_END_STREAM,
    HEADERS,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    Setting,
)
from kserve_v2.transport.native import AsyncNativeGRPCChannel, NativeGRPCChannel
from kserve_v2.transport.native import connection as native_connection
from kserve_v2.transport.native import stream as native_stream
from tests.hostile.h2_server import (
    GRPC_OK_HEADERS,
    GUARD,
    U32,
    Handler,
    Peer,
    ScriptedServer,
    data_frame,
    frame,
    grpc_message,
    parse_grpc_timeout,
    scripted_servers,
)
from tests.loops import MODES, loop_of
from tests.loops import run as run_on

METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    with scripted_servers() as start:
        yield start


#: Every test runs with the sync channel and with the asyncio one.
pytestmark = pytest.mark.parametrize("mode", MODES)


@dataclass
class Outcome:
    """What the client saw of one streaming call."""

    messages: list[bytes] = field(default_factory=list)
    error: KServeError | None = None
    send_error: KServeError | None = None
    status: str | None = None


def exchange(
    mode: str,
    url: str,
    requests: list[bytes] = [],  # noqa: B006 (never mutated)
    *,
    timeout: float | None = None,
    half_close: bool = True,
    cancel_after: int | None = None,
) -> Outcome:
    """Run one streaming call: send ``requests`` (then half-close) while reading every
    response; the reader cancels the call after ``cancel_after`` messages."""
    config = channel_config(parse_url(url))
    out = Outcome()
    if mode == "sync":
        channel = NativeGRPCChannel(config)
        call = channel.open_stream(METHOD, timeout=timeout)

        def read() -> None:
            try:
                for message in call:
                    out.messages.append(bytes(message))
                    if len(out.messages) == cancel_after:
                        call.cancel()
            except KServeError as exc:
                out.error = exc

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for request in requests:
                call.send(request)
            if half_close:
                call.done_sending()
        except KServeError as exc:
            out.send_error = exc
        reader.join(GUARD)
        assert not reader.is_alive(), "the stream's reader hangs"
        out.status = call.status
        channel.close()
        return out

    async def run() -> None:
        channel = AsyncNativeGRPCChannel(config)
        call = channel.open_stream(METHOD, timeout=timeout)

        async def read() -> None:
            try:
                while (message := await call.read()) is not None:
                    out.messages.append(bytes(message))
                    if len(out.messages) == cancel_after:
                        call.cancel()
            except KServeError as exc:
                out.error = exc

        reader = asyncio.ensure_future(read())
        try:
            for request in requests:
                await call.write(request)
            if half_close:
                await call.done_writing()
        except KServeError as exc:
            out.send_error = exc
        await asyncio.wait_for(reader, GUARD)
        out.status = call.status
        await channel.aclose()

    run_on(run(), loop_of(mode))
    return out


def split_messages(body: bytes | bytearray) -> list[bytes]:
    """The gRPC messages of a request body."""
    messages = []
    pos = 0
    while pos < len(body):
        flag, length = struct.unpack_from(">BL", body, pos)
        assert flag == 0
        messages.append(bytes(body[pos + 5 : pos + 5 + length]))
        pos += 5 + length
    assert pos == len(body)
    return messages


# ------------------------------------------------------------------------------ flow control


def test_requests_wait_for_window_updates(serve: Callable[..., ScriptedServer], mode: str) -> None:
    """Messages far over the 64 KiB windows go out as the server grants more, never beyond."""
    requests = [os.urandom(150_000), os.urandom(10), os.urandom(200_000)]

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        body = bytearray()
        unacked = 0  # the stream and the connection window both start at DEFAULT_WINDOW
        while True:
            got = peer.read_frame()
            if got.kind != DATA:
                peer.answer_control(got)
                continue
            body += got.payload
            unacked += len(got.payload)
            assert unacked <= DEFAULT_WINDOW, "the client overran the flow-control window"
            if got.flags & FLAG_END_STREAM:
                break
            if unacked == DEFAULT_WINDOW:  # exhausted: the client waits for this
                peer.send_window_update(request.stream_id, unacked)
                peer.send_window_update(0, unacked)
                unacked = 0
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        for message in split_messages(body):  # echo each request
            peer.send_data(request.stream_id, grpc_message(message))
        peer.send_trailers(request.stream_id)
        peer.read_until_closed()

    server = serve(handler)
    out = exchange(mode, server.url, requests)
    assert (out.error, out.send_error, out.status) == (None, None, "OK")
    assert out.messages == requests


# ---------------------------------------------------------------------------- how calls end


def test_server_reset_mid_stream(serve: Callable[..., ScriptedServer], mode: str) -> None:
    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_data(request.stream_id, grpc_message(b"one"))
        peer.send_rst_stream(request.stream_id, ErrorCode.INTERNAL_ERROR)
        peer.read_until_closed()

    out = exchange(mode, serve(handler).url, half_close=False)
    assert out.messages == [b"one"]
    assert isinstance(out.error, TransportError)
    assert "INTERNAL_ERROR" in str(out.error)
    # gRPC's mapping of the reset code; the shared async connection reports a reset without
    # its code, as a lost stream.
    assert out.status == ("INTERNAL" if mode == "sync" else "UNAVAILABLE")


def test_deadline_resets_the_stream(serve: Callable[..., ScriptedServer], mode: str) -> None:
    seen: dict[str, object] = {}

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        seen["timeout"] = parse_grpc_timeout(request.header("grpc-timeout") or "")
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        reset = peer.wait_for(RST_STREAM, GUARD)
        seen["reset"] = None if reset is None else struct.unpack(">L", reset.payload)[0]
        done.set()
        peer.read_until_closed()

    done = threading.Event()
    out = exchange(mode, serve(handler).url, timeout=0.3, half_close=False)
    assert done.wait(GUARD)
    assert isinstance(out.error, DeadlineExceededError)
    assert out.status == "DEADLINE_EXCEEDED"
    assert 0.2 < float(seen["timeout"]) <= 0.3  # type: ignore[arg-type]
    assert seen["reset"] == ErrorCode.CANCEL


@pytest.mark.parametrize(
    ("flood", "error"),
    [
        (data_frame(1, b"") * 64, DeadlineExceededError),
        (data_frame(1, grpc_message(b"")) * 64, DeadlineExceededError),
        (frame(CONTINUATION, 0, 1, b"") * 64, ProtocolError),  # after HEADERS, see below
    ],
    ids=["empty DATA", "empty messages", "CONTINUATION"],
)
def test_deadline_holds_while_bytes_keep_arriving(
    serve: Callable[..., ScriptedServer], mode: str, flood: bytes, error: type[KServeError]
) -> None:
    """The deadline is checked on every read, not only when a read finds nothing: a server
    that never stops sending cannot keep a stream (timeout=1) alive. (A header block that
    never ends is refused sooner, at its 65th CONTINUATION frame.)"""
    stopped: list[bool] = []

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        if error is ProtocolError:
            peer.send(frame(HEADERS, 0, request.stream_id, b""))
        else:
            peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        stopped.append(peer.flood(flood))

    server = serve(handler)
    out = exchange(mode, server.url, timeout=1.0, half_close=False)
    assert isinstance(out.error, error)
    assert server.finished(0, GUARD)
    assert stopped == [True], "the client never closed the connection"


def test_cancel_resets_the_stream_and_ends_quietly(
    serve: Callable[..., ScriptedServer], mode: str
) -> None:
    seen: dict[str, object] = {}

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        for n in range(3):
            peer.send_data(request.stream_id, grpc_message(b"m%d" % n))
        reset = peer.wait_for(RST_STREAM, GUARD)
        seen["reset"] = None if reset is None else struct.unpack(">L", reset.payload)[0]
        done.set()
        peer.read_until_closed()

    done = threading.Event()
    out = exchange(mode, serve(handler).url, half_close=False, cancel_after=1)
    assert done.wait(GUARD)
    assert out.messages == [b"m0"]  # nothing is yielded after cancel()
    assert (out.error, out.status) == (None, "CANCELLED")
    assert seen["reset"] == ErrorCode.CANCEL


def test_connection_lost_mid_stream(serve: Callable[..., ScriptedServer], mode: str) -> None:
    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_data(request.stream_id, grpc_message(b"one"))
        peer.close_gracefully()

    out = exchange(mode, serve(handler).url, half_close=False)
    assert out.messages == [b"one"]
    assert isinstance(out.error, TransportError)
    assert out.status == "UNAVAILABLE"


def test_trailers_only_error(serve: Callable[..., ScriptedServer], mode: str) -> None:
    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        peer.send_headers(
            request.stream_id,
            [*GRPC_OK_HEADERS, ("grpc-status", "3"), ("grpc-message", "bad%20request")],
            end_stream=True,
        )
        peer.read_until_closed()

    out = exchange(mode, serve(handler).url, [b"x"])
    assert isinstance(out.error, ServerError)
    assert (out.error.grpc_code, out.error.message) == ("INVALID_ARGUMENT", "bad request")
    assert out.status == "INVALID_ARGUMENT"


def test_sending_after_the_end_fails(serve: Callable[..., ScriptedServer], mode: str) -> None:
    """A finished call refuses further requests (with its error, or as closed)."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        request = peer.read_request()  # up to END_STREAM
        assert request is not None
        assert request.body == grpc_message(b"a")
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_trailers(request.stream_id)
        peer.read_until_closed()

    out = exchange(mode, serve(handler).url, [b"a"])
    assert (out.error, out.status) == (None, "OK")
    config = channel_config(parse_url(serve(handler).url))
    if mode == "sync":
        channel = NativeGRPCChannel(config)
        call = channel.open_stream(METHOD)
        call.send(b"a")
        call.done_sending()
        assert list(call) == []
        with pytest.raises(TransportError, match="closed"):
            call.send(b"b")
        call.done_sending()  # no-op
        channel.close()
        return

    async def run() -> None:
        channel = AsyncNativeGRPCChannel(config)
        call = channel.open_stream(METHOD)
        await call.write(b"a")
        await call.done_writing()
        assert await call.read() is None
        with pytest.raises(TransportError, match="closed"):
            await call.write(b"b")
        await call.done_writing()
        await channel.aclose()

    run_on(run(), loop_of(mode))


# ------------------------------------------------------------------- receive flow control


def client_stream_window(peer: Peer) -> int:
    """The SETTINGS_INITIAL_WINDOW_SIZE the client announced (its preface is read)."""
    for got in peer.received:
        if got.kind == SETTINGS and not got.flags & FLAG_ACK:
            settings = dict(struct.iter_unpack(">HL", got.payload))
            return settings.get(Setting.INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
    raise AssertionError("no SETTINGS from the client")


def test_slow_reader_slows_the_server_down(
    serve: Callable[..., ScriptedServer], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that sends as fast as flow control lets it, to a reader that takes nothing
    for a while: the client gives DATA back to the windows only as its reader takes it, so
    the server is held to the reader's backlog bound plus one stream window (the sync call
    reads the socket only for its reader anyway). When the reader resumes, everything
    arrives."""
    window, backlog, size, count = 256 << 10, 256 << 10, 16 << 10, 256  # 4 MiB in all
    monkeypatch.setattr(h2c, "RECEIVE_WINDOW", window)
    monkeypatch.setattr(native_connection, "_STREAM_BACKLOG", backlog)
    blocked = threading.Event()
    sent_when_blocked: list[int] = []
    messages = [bytes([n % 251]) * size for n in range(count)]

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        sid = request.stream_id
        credit = client_stream_window(peer)
        peer.send_headers(sid, GRPC_OK_HEADERS)
        sent = 0
        for message in messages:
            data = grpc_message(message)
            while credit < len(data):
                update = peer.wait_for(WINDOW_UPDATE, 2.0)
                if update is None:  # no credit is coming: the reader has fallen behind
                    if not blocked.is_set():
                        sent_when_blocked.append(sent)
                        blocked.set()
                    update = peer.wait_for(WINDOW_UPDATE, GUARD)
                    assert update is not None, "the window never reopened"
                if update.stream_id == sid:
                    credit += U32.unpack(update.payload)[0]
            peer.send_data(sid, data)
            credit -= len(data)
            sent += len(data)
        blocked.set()
        peer.send_trailers(sid)
        peer.read_until_closed()

    server = serve(handler)
    got = read_after(mode, server.url, blocked)
    assert got == messages
    assert sent_when_blocked, "the server was never held back"
    # What the client buffered while its reader slept: its backlog bound, one window, and
    # the message that crossed the bound, at most (sync: one socket read more).
    assert sent_when_blocked[0] <= backlog + window + 2 * (size + 5) + (256 << 10)


def read_after(mode: str, url: str, go: threading.Event) -> list[bytes]:
    """Open a stream, wait (without reading) until ``go``, then read every message."""
    config = channel_config(parse_url(url))
    if mode == "sync":
        channel = NativeGRPCChannel(config)
        call = channel.open_stream(METHOD, timeout=GUARD * 3)
        call.done_sending()
        iterator = iter(call)
        first = bytes(next(iterator))  # opens the stream; then the reader sleeps
        assert go.wait(GUARD * 2)
        out = [first, *(bytes(m) for m in iterator)]
        channel.close()
        return out

    async def run() -> list[bytes]:
        channel = AsyncNativeGRPCChannel(config)
        call = channel.open_stream(METHOD, timeout=GUARD * 3)
        await call.done_writing()
        first = await call.read()
        assert first is not None
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, go.wait, GUARD * 2)
        out = [bytes(first)]
        while (message := await call.read()) is not None:
            out.append(bytes(message))
        await channel.aclose()
        return out

    return run_on(run(), loop_of(mode))


# ------------------------------------------------------------------------ polling, bounded


class _CountingPolls:
    """Stands in for the stream module's ``asyncio`` / ``select``: counts the reader's
    non-blocking polls (``asyncio.sleep(0)``, ``select.select(..., 0)``), delegates all."""

    def __init__(self, module: object) -> None:
        self._module = module
        self.polls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._module, name)

    def sleep(self, delay: float, *args: object) -> object:
        self.polls += delay == 0
        return asyncio.sleep(delay, *args)

    def select(self, *args: object) -> object:
        self.polls += args[-1] == 0
        return select.select(*args)  # type: ignore[call-overload]


def test_an_idle_reader_polls_briefly_then_sleeps(
    serve: Callable[..., ScriptedServer], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waiting for a response, the reader polls the socket (asyncio: yields to the loop) for
    a moment before it sleeps, as decoupled models send responses a few hundred µs apart;
    a quiet server then costs nothing: 300 ms without a message is a bounded number of
    polls, not a busy loop."""
    counter = _CountingPolls(select if mode == "sync" else asyncio)
    monkeypatch.setattr(native_stream, "select" if mode == "sync" else "asyncio", counter)

    def handler(peer: Peer) -> None:
        request = peer.accept_request()
        peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
        peer.send_data(request.stream_id, grpc_message(b"first"))
        time.sleep(0.3)
        peer.send_data(request.stream_id, grpc_message(b"late"))
        peer.send_trailers(request.stream_id)
        peer.read_until_closed()

    out = exchange(mode, serve(handler).url, [b"request"])
    assert (out.messages, out.error, out.status) == ([b"first", b"late"], None, "OK")
    # 100 µs of polling per wait is a few hundred polls at most; a reader that never slept
    # would poll hundreds of thousands of times in 300 ms.
    assert 1 <= counter.polls < 5_000
