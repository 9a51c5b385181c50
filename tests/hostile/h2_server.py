"""The hostile-server kit, HTTP/2 and gRPC half: a scripted HTTP/2 server on loopback.

Triton answers correctly; the transport tests need a server that misbehaves on cue.
:class:`ScriptedServer` is a real TCP server in a thread: each connection it accepts runs the
test's handler with a :class:`Peer`, which reads and writes raw HTTP/2 frames (header blocks
through the library's own HPACK Encoder and Decoder). :class:`Runner` drives one client of
it, sync :class:`~kserve_v2.Client` or :class:`~kserve_v2.AsyncClient` (on an event loop of
its own, so one test body drives both). No socket read on either side can wait for ever: the
server's sockets time out after ``IO_TIMEOUT``, every call has a deadline, async calls a guard.

Used by ``tests/transport/test_native*.py`` (one fault at a time, what the client sent) and
``tests/hostile/test_h2_attacks.py`` (the table of attacks, with the invariants every one
must keep).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kserve_v2 import AsyncClient, Client
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    GOAWAY,
    HEADERS,
    PING,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    frame_header,
    parse_frame_header,
)
from kserve_v2.h2.hpack import Decoder, Encoder
from tests.hostile.threaded_server import IO_TIMEOUT, ThreadedServer, serving
from tests.loops import loop_of, new_event_loop

LIVE = "/inference.GRPCInferenceService/ServerLive"
#: A ServerLiveResponse with live=True.
LIVE_REPLY = b"\x08\x01"
#: The clients' default call deadline (the server's sockets time out after IO_TIMEOUT: a
#: test can fail, but never hang).
CALL_TIMEOUT = 5.0
#: Async calls are abandoned after this long even when the client's own deadline fails.
GUARD = 10.0
#: A flooding server gives up after this long (a client that never stops it fails its test).
FLOOD_LIMIT = 20.0
GRPC_OK_HEADERS: Sequence[tuple[str, str]] = (
    (":status", "200"),
    ("content-type", "application/grpc"),
)
U32 = struct.Struct(">L")
GOAWAY_PAYLOAD = struct.Struct(">LL")
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


# ------------------------------------------------------------------------ frame building


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame."""
    return frame_header(len(payload), kind, flags, stream_id) + payload


def data_frame(
    stream_id: int, data: bytes, *, end_stream: bool = False, pad: int | None = None
) -> bytes:
    """A DATA frame, padded with ``pad`` bytes when ``pad`` is given."""
    flags = FLAG_END_STREAM if end_stream else 0
    if pad is None:
        return frame(DATA, flags, stream_id, data)
    return frame(DATA, flags | FLAG_PADDED, stream_id, bytes([pad]) + data + bytes(pad))


def grpc_message(data: bytes, *, compressed: bool = False) -> bytes:
    """A length-prefixed gRPC message."""
    return struct.pack(">BL", int(compressed), len(data)) + data


def parse_grpc_timeout(value: str) -> float:
    """Seconds of a ``grpc-timeout`` value (asserting its format: 1-8 digits and a unit)."""
    assert re.fullmatch(r"\d{1,8}[HMSmun]", value), value
    return int(value[:-1]) * _TIMEOUT_UNITS[value[-1]]


# -------------------------------------------------------------------------- the server


class PeerClosed(Exception):
    """The client closed (or reset) the connection."""


@dataclass
class Frame:
    kind: int
    flags: int
    stream_id: int
    payload: bytes


@dataclass
class Request:
    stream_id: int
    headers: list[tuple[str, str]]
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name``."""
        return next((value for key, value in self.headers if key == name), None)

    @property
    def message(self) -> bytes:
        """The body's one gRPC message (asserting the framing)."""
        assert len(self.body) >= 5, bytes(self.body)
        flag, length = struct.unpack_from(">BL", self.body)
        assert flag == 0
        assert len(self.body) == 5 + length
        return bytes(self.body[5:])


class Peer:
    """The server side of one connection; the test's handler drives it frame by frame."""

    def __init__(self, sock: socket.socket, index: int) -> None:
        self.sock = sock
        #: 0 for the first connection the server accepted, 1 for the next, ...
        self.index = index
        #: Every frame the client sent, in order.
        self.received: list[Frame] = []
        #: Every request read by read_request / read_headers.
        self.requests: list[Request] = []
        self._buffer = bytearray()
        self._stashed: deque[Frame] = deque()  # request frames wait_for read past
        self._decoder = Decoder()
        self._encoder = Encoder()

    # -- reading

    def _fill(self, size: int) -> None:
        """Buffer ``size`` bytes (a timeout consumes nothing: frames are never torn)."""
        while len(self._buffer) < size:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise PeerClosed(f"connection {self.index} closed by the client")
            self._buffer += chunk

    def read_preface(self) -> None:
        self._fill(len(PREFACE))
        assert bytes(self._buffer[: len(PREFACE)]) == PREFACE
        del self._buffer[: len(PREFACE)]

    def read_frame(self) -> Frame:
        if self._stashed:
            return self._stashed.popleft()
        self._fill(9)
        length, kind, flags, stream_id = parse_frame_header(self._buffer)
        self._fill(9 + length)
        got = Frame(kind, flags, stream_id, bytes(self._buffer[9 : 9 + length]))
        del self._buffer[: 9 + length]
        self.received.append(got)
        return got

    def frames_for(self, seconds: float) -> list[Frame]:
        """The frames that arrive within ``seconds`` (SETTINGS acknowledged)."""
        frames = []
        deadline = time.monotonic() + seconds
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                got = self.read_frame()
                self.answer_control(got)
                frames.append(got)
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(IO_TIMEOUT)
        return frames

    def wait_for(self, kind: int, seconds: float, flags: int = 0) -> Frame | None:
        """The first frame of ``kind`` (with ``flags`` set) within ``seconds``, or None;
        request frames read past on the way are kept for the request readers."""
        deadline = time.monotonic() + seconds
        passed: list[Frame] = []
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.sock.settimeout(left)
                got = self.read_frame()
                if got.kind == kind and got.flags & flags == flags:
                    return got
                if not self.answer_control(got):
                    passed.append(got)
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(IO_TIMEOUT)
            self._stashed.extendleft(reversed(passed))
        return None

    def read_until_closed(self) -> list[Frame]:
        """Read frames until the client closes the connection; returns them."""
        start = len(self.received)
        with contextlib.suppress(PeerClosed):
            while True:
                self.read_frame()
        return self.received[start:]

    def answer_control(self, got: Frame) -> bool:
        """Acknowledge SETTINGS and PING; True for a frame a request reader skips."""
        if got.kind == SETTINGS and not got.flags & FLAG_ACK:
            self.send_frame(SETTINGS, FLAG_ACK, 0)
        elif got.kind == PING and not got.flags & FLAG_ACK:
            self.send_frame(PING, FLAG_ACK, 0, got.payload)
        return got.kind not in (HEADERS, CONTINUATION, DATA)

    def next_request_frame(self) -> Frame:
        """The next HEADERS, CONTINUATION or DATA frame (control frames answered, skipped)."""
        while True:
            got = self.read_frame()
            if not self.answer_control(got):
                return got

    def read_headers(self) -> Request | None:
        """The next request's header block; None when the client closed the connection."""
        try:
            got = self.next_request_frame()
        except PeerClosed:
            if self._buffer:
                raise
            return None
        assert got.kind == HEADERS, got
        assert not got.flags & FLAG_PADDED
        block = got.payload
        first = got
        while not got.flags & FLAG_END_HEADERS:
            got = self.next_request_frame()
            assert got.kind == CONTINUATION, got
            assert got.stream_id == first.stream_id, got
            block += got.payload
        request = Request(first.stream_id, self._decoder.decode(block))
        request.ended = bool(first.flags & FLAG_END_STREAM)
        self.requests.append(request)
        return request

    def request_of(self, got: Frame) -> Request:
        """The request a HEADERS frame (a whole header block) starts, for handlers that
        read frame by frame (calls interleaved on the connection)."""
        assert got.kind == HEADERS, got
        assert got.flags & FLAG_END_HEADERS, got
        assert not got.flags & FLAG_PADDED
        request = Request(got.stream_id, self._decoder.decode(got.payload))
        request.ended = bool(got.flags & FLAG_END_STREAM)
        self.requests.append(request)
        return request

    def read_body(self, request: Request) -> None:
        """Read ``request``'s DATA up to END_STREAM."""
        while not request.ended:
            got = self.next_request_frame()
            assert got.kind == DATA, got
            assert got.stream_id == request.stream_id, got
            request.body += got.payload
            request.ended = bool(got.flags & FLAG_END_STREAM)

    def accept_request(self) -> Request:
        """Handshake, then the first request's header block (which must come)."""
        self.handshake()
        request = self.read_headers()
        assert request is not None
        return request

    def read_request(self) -> Request | None:
        """The next whole request; None when the client closed the connection."""
        request = self.read_headers()
        if request is not None:
            self.read_body(request)
        return request

    # -- writing

    def send(self, data: bytes) -> None:
        """Send bytes; a client that already closed the connection is not an error here (the
        tests judge the client by what it raised)."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.sock.sendall(data)

    def send_frame(self, kind: int, flags: int, stream_id: int, payload: bytes = b"") -> None:
        self.send(frame(kind, flags, stream_id, payload))

    def send_settings(self, settings: Sequence[tuple[int, int]] = ()) -> None:
        self.send_frame(SETTINGS, 0, 0, b"".join(struct.pack(">HL", k, v) for k, v in settings))

    def handshake(self, settings: Sequence[tuple[int, int]] = ()) -> None:
        """Read the client's preface and send our SETTINGS (the client's are acked later)."""
        self.read_preface()
        self.send_settings(settings)

    def send_headers(
        self,
        stream_id: int,
        headers: Sequence[tuple[str, str]],
        *,
        end_stream: bool = False,
        pieces: int = 1,
    ) -> None:
        """A header block, split into HEADERS and ``pieces - 1`` CONTINUATION frames."""
        block = self._encoder.encode(headers)
        size = max(1, -(-len(block) // pieces))
        parts = [block[i : i + size] for i in range(0, len(block), size)] or [b""]
        out = b""
        for i, part in enumerate(parts):
            flags = FLAG_END_STREAM if end_stream and i == 0 else 0
            if i == len(parts) - 1:
                flags |= FLAG_END_HEADERS
            out += frame(HEADERS if i == 0 else CONTINUATION, flags, stream_id, part)
        self.send(out)

    def send_data(
        self, stream_id: int, data: bytes, *, end_stream: bool = False, pad: int | None = None
    ) -> None:
        self.send(data_frame(stream_id, data, end_stream=end_stream, pad=pad))

    def send_trailers(
        self,
        stream_id: int,
        status: int = 0,
        message: str | None = None,
        extra: Sequence[tuple[str, str]] = (),
        *,
        pieces: int = 1,
    ) -> None:
        trailers = [("grpc-status", str(status)), *extra]
        if message is not None:
            trailers.append(("grpc-message", message))
        self.send_headers(stream_id, trailers, end_stream=True, pieces=pieces)

    def send_response(self, stream_id: int, message: bytes = LIVE_REPLY) -> None:
        """A normal answer: headers, one message, trailers with grpc-status 0."""
        self.send_headers(stream_id, GRPC_OK_HEADERS)
        self.send_data(stream_id, grpc_message(message))
        self.send_trailers(stream_id)

    def send_rst_stream(self, stream_id: int, code: int) -> None:
        self.send_frame(RST_STREAM, 0, stream_id, U32.pack(code))

    def send_goaway(self, last_stream_id: int, code: int = ErrorCode.NO_ERROR) -> None:
        self.send_frame(GOAWAY, 0, 0, GOAWAY_PAYLOAD.pack(last_stream_id, code) + b"scripted")

    def send_ping(self, payload: bytes) -> None:
        self.send_frame(PING, 0, 0, payload)

    def send_window_update(self, stream_id: int, increment: int) -> None:
        self.send_frame(WINDOW_UPDATE, 0, stream_id, U32.pack(increment))

    def flood(self, data: bytes, seconds: float = FLOOD_LIMIT) -> bool:
        """Send ``data`` again and again, without reading, until the client closes the
        connection (True) or ``seconds`` pass (False: the client put up with it)."""
        until = time.monotonic() + seconds
        self.sock.settimeout(0.5)
        try:
            while time.monotonic() < until:
                with contextlib.suppress(TimeoutError):
                    self.sock.sendall(data)
        except OSError:
            return True
        finally:
            self.sock.settimeout(IO_TIMEOUT)
        return False

    def send_fin(self) -> None:
        """Close our side of the connection (the client reads its end)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close_gracefully(self) -> list[Frame]:
        """Send FIN, then read until the client closes too (no RST can eat our last bytes)."""
        self.send_fin()
        return self.read_until_closed()


Handler = Callable[[Peer], None]


class ScriptedServer(ThreadedServer[Peer]):
    """A loopback HTTP/2 server running ``handler`` on each connection, in a thread per
    connection; handler exceptions are collected and reported when the test ends."""

    scheme = "grpc"
    name = "scripted-h2"

    def peer(self, sock: socket.socket, index: int) -> Peer:
        return Peer(sock, index)


class Runner:
    """One client of the scripted server, called synchronously: a :class:`Client`, or an
    :class:`AsyncClient` on an event loop of its own (each call runs the loop until done)."""

    def __init__(self, mode: str, url: str, **options: Any) -> None:
        options.setdefault("timeout", CALL_TIMEOUT)
        options.setdefault("connect_timeout", IO_TIMEOUT)
        self.mode = mode
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any
        if mode == "sync":
            self._client = Client(url, **options)
        else:
            self._loop = new_event_loop(loop_of(mode))  # "async" or "async-uvloop"

            async def make() -> AsyncClient:
                return AsyncClient(url, **options)

            self._client = self._loop.run_until_complete(make())

    def _run(self, result: Any, guard: float) -> Any:
        if self._loop is None:
            return result
        return self._loop.run_until_complete(asyncio.wait_for(result, guard))

    def live(self, *, guard: float = GUARD, **kw: Any) -> bool:
        """``is_server_live()``."""
        result: bool = self._run(self._client.is_server_live(**kw), guard)
        return result

    def server_metadata(self, *, guard: float = GUARD, **kw: Any) -> Any:
        return self._run(self._client.server_metadata(**kw), guard)

    def unary(
        self,
        body: bytes,
        method: str = "/x.Y/Z",
        *,
        timeout: float = CALL_TIMEOUT,
        want_metadata: bool = False,
        guard: float = GUARD,
    ) -> tuple[bytes, Sequence[tuple[str, str]]]:
        """The channel's ``call_unary`` (a transport-level call, any method)."""
        call = self._client._io.call_unary(
            method, body, timeout=timeout, want_metadata=want_metadata
        )
        result: tuple[bytes, Sequence[tuple[str, str]]] = self._run(call, guard)
        return result

    def stream(
        self,
        requests: Sequence[bytes] = (b"x",),
        method: str = "/x.Y/S",
        *,
        timeout: float = CALL_TIMEOUT,
        guard: float = GUARD,
    ) -> list[bytes]:
        """One bidirectional-streaming call of the channel: send ``requests``, half-close,
        read every response (the call's error, if it ends with one, is raised)."""
        channel = self._client._io
        if self._loop is None:
            call = channel.open_stream(method, timeout=timeout)
            for request in requests:
                call.send(request)
            call.done_sending()
            return [bytes(message) for message in call]

        async def run() -> list[bytes]:
            call = channel.open_stream(method, timeout=timeout)
            for request in requests:
                await call.write(request)
            await call.done_writing()
            out = []
            while (message := await call.read()) is not None:
                out.append(bytes(message))
            return out

        result: list[bytes] = self._run(run(), guard)
        return result

    def pause(self, seconds: float) -> None:
        """Let time pass (the async client's event loop runs meanwhile)."""
        if self._loop is None:
            time.sleep(seconds)
        else:
            self._loop.run_until_complete(asyncio.sleep(seconds))

    def close(self) -> None:
        if self._loop is None:
            self._client.close()
            return
        try:
            self._loop.run_until_complete(self._client.aclose())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()


def scripted_servers() -> contextlib.AbstractContextManager[Callable[[Handler], ScriptedServer]]:
    """Starts scripted servers; at the end closes them and fails on handler errors (the
    ``serve`` fixtures of this module and of test_native_stream)."""
    return serving(ScriptedServer)


Respond = Callable[[Peer, Request, int], None]


def answer(peer: Peer, request: Request, _n: int = 0) -> None:
    """The default response: live=True."""
    peer.send_response(request.stream_id)


def serve_requests(peer: Peer, respond: Respond = answer) -> None:
    """Call ``respond(peer, request, n)`` for the n-th request of the connection until the
    client closes it."""
    n = 0
    while (request := peer.read_request()) is not None:
        respond(peer, request, n)
        n += 1


def each_request(respond: Respond = answer) -> Handler:
    """A handler that handshakes, then serves every request with ``respond``."""

    def handler(peer: Peer) -> None:
        peer.handshake()
        serve_requests(peer, respond)

    return handler


def on_first(first: Respond, then: Respond = answer) -> Handler:
    """``first`` for the first request of connection 0, ``then`` for all others."""

    def respond(peer: Peer, request: Request, n: int) -> None:
        (first if peer.index == 0 and n == 0 else then)(peer, request, n)

    return each_request(respond)
