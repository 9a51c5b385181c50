"""The native gRPC transport: gRPC over the library's own HTTP/2 client, no grpcio.

grpcio's Python call path costs more client CPU than everything else in a small infer
(about 240 µs per call on the benchmark machine, where tritonclient's whole request costs
about 320 µs). These channels speak gRPC over HTTP/2 directly on sockets, with the sans-IO
pieces doing the work: :mod:`kserve_v2.h2.connection` (HTTP/2), :mod:`kserve_v2.h2.hpack`
and :mod:`kserve_v2.grpc.framing` (the gRPC framing). They move bytes exactly like
:class:`~kserve_v2.transport.grpcio.GRPCChannel` (``call_unary``), so the protocol layer and
the codecs do not know which transport runs them.

* :class:`NativeGRPCChannel` (sync) keeps a pool of connections and runs one call at a time
  on each (no reader thread: the calling thread reads its own answer). Threads calling
  at once get connections of their own.
* :class:`AsyncNativeGRPCChannel` (asyncio) multiplexes concurrent calls as HTTP/2 streams
  over one connection per event loop, opening another only when the server's
  ``MAX_CONCURRENT_STREAMS`` is reached.

Both send large requests as frames that point into the caller's buffer (no copy), receive
into one buffer per message, honour the server's flow-control windows, answer PINGs and
SETTINGS, follow GOAWAY (calls the server refused are retried once on a new connection, as
is a call whose pooled connection turned out closed before any answer), and map statuses to
the same errors as the grpcio channel. A client-side deadline is also sent as
``grpc-timeout``; when it expires the stream is reset (``RST_STREAM CANCEL``).

TLS uses the standard ``ssl`` module with ALPN ``h2`` (gRPC servers require it).
Bidirectional streams (``open_stream``) are in :mod:`kserve_v2.transport.native_stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Final

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    TransportError,
)
from kserve_v2.grpc.config import ChannelConfig, Metadata, check_compression
from kserve_v2.grpc.framing import (
    CallResponse,
    RequestHeaders,
    compress_message,
    message_prefix,
    status_error,
)
from kserve_v2.h2.connection import (
    DataReceived,
    Event,
    GoAwayReceived,
    H2Connection,
    H2ConnectionError,
    HeadersReceived,
    StreamReset,
)
from kserve_v2.h2.frames import ErrorCode
from kserve_v2.transport.sockets import HAS_SENDMSG, IOV_MAX, deadline_after, sendmsg_rest

if TYPE_CHECKING:
    from kserve_v2.transport.native_stream import AsyncNativeStreamCall, NativeStreamCall

__all__ = ["AsyncNativeGRPCChannel", "NativeGRPCChannel", "native_ssl_context"]

_RECV_SIZE: Final = 256 * 1024
# Requests up to this size are joined with their 5-byte prefix into one DATA frame.
_JOIN_LIMIT: Final = 64 * 1024
# Idle connections kept per channel (more are closed when returned).
_POOL_MAX: Final = 16

_LOST = (
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class _Retry(Exception):
    """The call never reached the server (stale connection, or refused by GOAWAY)."""


def native_ssl_context(config: ChannelConfig) -> ssl.SSLContext:
    """The TLS context of a ``grpcs://`` channel: verification on, ALPN ``h2``."""
    try:
        ctx = ssl.create_default_context(cafile=config.ca_file)
        if config.cert_file is not None:
            ctx.load_cert_chain(config.cert_file, config.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInputError(f"cannot set up TLS: {exc}") from exc
    ctx.set_alpn_protocols(["h2"])
    return ctx


def _limit(config: ChannelConfig, name: str) -> int | None:
    for key, value in config.options:
        if key == name and isinstance(value, int) and value >= 0:
            return value
    return None


def _nbytes(part: BytesLike) -> int:
    # len() of a memoryview counts items of its first dimension, not bytes.
    return len(part) if type(part) is bytes else memoryview(part).nbytes


def frame_message(
    message: BytesLike | tuple[BytesLike, ...], compression: str | None, limit: int | None
) -> list[BytesLike]:
    """A request message as the buffers of its gRPC framing: the 5-byte prefix, then the
    message. ``message`` may be the buffers whose concatenation it is (the infer codec's
    output): large ones are sent from where they are (no copy of a tensor), small ones are
    joined so that a small message is one DATA frame."""
    parts = message if isinstance(message, tuple) else (message,)
    if compression is not None:
        parts = (compress_message(b"".join(parts), compression),)
    size = sum(_nbytes(part) for part in parts)
    if limit is not None and size > limit:
        raise InvalidInputError(
            f"request message of {size} bytes is over the {limit}-byte send limit"
        )
    prefix = message_prefix(size, compression is not None)
    if size <= _JOIN_LIMIT:
        return [b"".join((prefix, *parts))]
    out: list[BytesLike] = []
    small: list[BytesLike] = [prefix]
    for part in parts:
        if _nbytes(part) <= _JOIN_LIMIT:
            small.append(part)
            continue
        if small:
            out.append(b"".join(small))
            small = []
        out.append(part)
    if small:
        out.append(b"".join(small))
    return out


class _Prepared:
    """What both channels build before sending a unary call."""

    __slots__ = ("block", "parts")

    def __init__(
        self,
        headers: RequestHeaders,
        method: str,
        request: BytesLike | tuple[BytesLike, ...],
        timeout: float | None,
        metadata: Metadata,
        compression: str | None,
        send_limit: int | None,
    ) -> None:
        self.parts = frame_message(request, compression, send_limit)
        self.block = headers.block(method, timeout=timeout, encoding=compression, metadata=metadata)


def _finish(response: CallResponse, url: str) -> bytes | bytearray:
    code, message = response.status()
    if code != "OK":
        raise status_error(code, message, url)
    if len(response.messages) != 1:
        raise ProtocolError(
            f"a unary call answered with {len(response.messages)} messages instead of one"
        )
    return response.messages[0]


# ---------------------------------------------------------------------------------- sync


class _SyncConnection:
    """A socket and its HTTP/2 state; used by one call at a time."""

    __slots__ = ("_buffer", "_view", "h2", "reused", "sock", "tls")

    def __init__(self, sock: socket.socket, tls: bool) -> None:
        self.sock = sock
        self.tls = tls
        self.h2 = H2Connection()
        self.reused = False
        self._buffer = bytearray(_RECV_SIZE)
        self._view = memoryview(self._buffer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def say_goodbye(self) -> None:
        """Send the GOAWAY a protocol error queued (best effort), then close."""
        with contextlib.suppress(OSError, KServeError, ValueError):
            self.flush(time.monotonic() + 1.0)
            # Read what is still coming for a moment first: closing a socket with unread
            # data makes the kernel reset the connection, and the server may lose the GOAWAY.
            until = time.monotonic() + 0.2
            self.sock.settimeout(0.05)
            while time.monotonic() < until and self.sock.recv_into(self._buffer):
                pass
        self.close()

    def usable(self) -> bool:
        """Still fit for a call: no GOAWAY, open, and nothing but frames pending."""
        h2 = self.h2
        if h2.closed or not h2.can_open_stream():
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
            while readable:
                self.sock.setblocking(False)
                try:
                    n = self.sock.recv_into(self._buffer)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                finally:
                    self.sock.setblocking(True)
                if not n:
                    return False
                h2.receive(self._view[:n])  # PINGs, SETTINGS, GOAWAY sent while idle
                self.flush(None)
                if not isinstance(self.sock, ssl.SSLSocket) or not self.sock.pending():
                    break
        except (OSError, KServeError):
            return False
        return h2.can_open_stream()

    def _arm(self, deadline: float | None) -> None:
        if deadline is None:
            self.sock.settimeout(None)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceededError("gRPC deadline exceeded (client side)")
        self.sock.settimeout(left)

    def flush(self, deadline: float | None) -> None:
        """Send everything the HTTP/2 state has queued."""
        buffers = self.h2.data_to_send()
        if not buffers:
            return
        self._arm(deadline)
        sock = self.sock
        try:
            if self.tls or not HAS_SENDMSG:
                total = sum(len(b) for b in buffers)
                if total <= _JOIN_LIMIT:
                    sock.sendall(b"".join(buffers))
                else:
                    for part in buffers:
                        sock.sendall(part)
                return
            sent = sock.sendmsg(buffers) if len(buffers) < IOV_MAX else 0
            if sent != sum(len(b) for b in buffers):
                sendmsg_rest(sock.sendmsg, buffers, sent, lambda: self._arm(deadline))
        except TimeoutError as exc:
            raise DeadlineExceededError("gRPC deadline exceeded while sending") from exc

    def read_events(self, deadline: float | None) -> list[Event]:
        self._arm(deadline)
        try:
            n = self.sock.recv_into(self._buffer)
        except TimeoutError as exc:
            raise DeadlineExceededError("gRPC deadline exceeded (client side)") from exc
        if not n:
            raise ConnectionResetError("the server closed the connection")
        return self.h2.receive(self._view[:n])

    def unary(self, prepared: _Prepared, deadline: float | None, limit: int | None) -> CallResponse:
        h2 = self.h2
        response = CallResponse(limit)
        stream_id = h2.open_stream(prepared.block)
        parts = list(prepared.parts)
        got_bytes = False
        try:
            while parts:
                part = parts[0]
                n = h2.send_data(stream_id, part, end_stream=len(parts) == 1)
                if n == _nbytes(part):
                    parts.pop(0)
                    continue
                parts[0] = memoryview(part).cast("B")[n:]
                # The window is full: send what is queued, read until it opens (or the
                # server answers early, e.g. with an error status).
                self.flush(deadline)
                while not response.done and not h2.send_window(stream_id):
                    got_bytes = True
                    self._dispatch(self.read_events(deadline), stream_id, response)
                    self.flush(deadline)  # PING and SETTINGS ACKs must not wait for the window
                if response.done:
                    parts.clear()
            self.flush(deadline)
            while not response.done:
                events = self.read_events(deadline)
                got_bytes = True
                self._dispatch(events, stream_id, response)
                if h2.has_data_to_send:
                    self.flush(deadline)
        except _LOST as exc:
            if self.reused and not got_bytes:
                raise _Retry from exc
            raise
        finally:
            if response.done:
                h2.end_stream(stream_id)
        return response

    def _dispatch(self, events: list[Event], stream_id: int, response: CallResponse) -> None:
        for event in events:
            kind = type(event)
            if kind is DataReceived:
                if event.stream_id == stream_id:  # type: ignore[attr-defined]
                    response.data(event.data, event.end_stream)  # type: ignore[attr-defined]
            elif kind is HeadersReceived:
                if event.stream_id == stream_id:  # type: ignore[attr-defined]
                    response.headers(event.headers, event.end_stream)  # type: ignore[attr-defined]
            elif kind is StreamReset:
                assert isinstance(event, StreamReset)
                # A reset after the response ended (NO_ERROR: "stop sending") is no error.
                if event.stream_id == stream_id and not response.done:
                    if event.refused and not response.http_status:
                        raise _Retry
                    raise TransportError(
                        f"the server reset the call's stream "
                        f"({ErrorCode.name_of(event.error_code)})"
                    )
            elif kind is GoAwayReceived:
                pass  # can_open_stream() is now false: the connection is not pooled again


class _NativeChannelBase:
    """What the sync and async native channels share: the settings taken from the config."""

    def __init__(self, config: ChannelConfig, connect_timeout: float | None) -> None:
        self.config = config
        host, _, port = config.target.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidInputError(f"gRPC target {config.target!r} has no host:port")
        self._host = host.strip("[]")
        self._port = int(port)
        self._connect_timeout = connect_timeout
        self._ssl = native_ssl_context(config) if config.secure else None
        self._server_hostname = config.server_hostname or self._host
        self._headers = RequestHeaders(
            scheme="https" if config.secure else "http", authority=config.target
        )
        self._send_limit = _limit(config, "grpc.max_send_message_length")
        self._receive_limit = _limit(config, "grpc.max_receive_message_length")


class NativeGRPCChannel(_NativeChannelBase):
    """A synchronous gRPC channel on the library's own HTTP/2 client; thread-safe.

    Drop-in for :class:`~kserve_v2.transport.grpcio.GRPCChannel`'s unary calls::

        channel = NativeGRPCChannel(channel_config(parse_url("grpc://localhost:8001")))
        reply, _ = channel.call_unary("/inference.GRPCInferenceService/ServerLive", b"")
    """

    def __init__(self, config: ChannelConfig, *, connect_timeout: float | None = 10.0) -> None:
        super().__init__(config, connect_timeout)
        self._idle: deque[_SyncConnection] = deque()
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _connect(self, deadline: float | None) -> _SyncConnection:
        timeout = self._connect_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceededError("gRPC deadline exceeded before connecting")
            timeout = left if timeout is None else min(timeout, left)
        try:
            sock = socket.create_connection((self._host, self._port), timeout=timeout)
        except TimeoutError as exc:
            raise DeadlineExceededError(
                f"gRPC connect to {self.config.target} timed out", url=self.config.url
            ) from exc
        except OSError as exc:
            raise TransportError(
                f"gRPC UNAVAILABLE: failed to connect to {self.config.target}: {exc}",
                url=self.config.url,
            ) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None:
                try:
                    sock = self._ssl.wrap_socket(sock, server_hostname=self._server_hostname)
                except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
                    raise TransportError(
                        f"gRPC UNAVAILABLE: TLS handshake with {self.config.target} failed: {exc}",
                        url=self.config.url,
                    ) from exc
                if sock.selected_alpn_protocol() != "h2":
                    raise TransportError(
                        f"gRPC UNAVAILABLE: {self.config.target} did not agree to HTTP/2 (ALPN h2)",
                        url=self.config.url,
                    )
            conn = _SyncConnection(sock, self._ssl is not None)
            conn.h2.initiate()
            conn.flush(deadline)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise
        return conn

    def _checkout(self, deadline: float | None) -> _SyncConnection:
        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._connect(deadline)
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()

    def _checkin(self, conn: _SyncConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _POOL_MAX and conn.h2.can_open_stream():
                self._idle.append(conn)
                return
        conn.close()

    def call_unary(
        self,
        method: str,
        request: BytesLike | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes | bytearray, Metadata]:
        """Run one unary call; returns the response bytes and (if asked) response metadata."""
        compression = check_compression(compression) or self.config.compression
        deadline = deadline_after(timeout, time.monotonic())
        prepared = _Prepared(
            self._headers, method, request, timeout, metadata, compression, self._send_limit
        )
        for attempt in (0, 1):
            conn = self._checkout(deadline)
            try:
                response = conn.unary(prepared, deadline, self._receive_limit)
            except _Retry:
                conn.close()
                if attempt:
                    raise TransportError(
                        "gRPC UNAVAILABLE: the server closed the connection before the call "
                        "started",
                        url=self.config.url,
                    ) from None
                continue
            except H2ConnectionError:
                conn.say_goodbye()
                raise
            except KServeError:
                conn.close()
                raise
            except (OSError, ssl.SSLError) as exc:
                conn.close()
                raise TransportError(
                    f"gRPC UNAVAILABLE: connection to {self.config.target} lost: {exc}",
                    url=self.config.url,
                ) from exc
            except BaseException:
                conn.close()
                raise
            self._checkin(conn)
            result = _finish(response, self.config.url)
            return result, (response.metadata() if want_metadata else ())
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every pooled connection; calls in flight finish on theirs. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        for conn in idle:
            conn.close()

    def __repr__(self) -> str:
        return f"NativeGRPCChannel({self.config.url!r}{', closed' if self._closed else ''})"

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> NativeStreamCall:
        """Start a bidirectional-streaming call on a connection of its own (opened on first
        use, closed at the end); see :class:`~kserve_v2.interfaces.SyncStreamCall`."""
        from kserve_v2.transport.native_stream import NativeStreamCall

        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)
        return NativeStreamCall(
            self, method, timeout=timeout, metadata=metadata, compression=compression
        )


# --------------------------------------------------------------------------------- async


class _AsyncConnection(asyncio.Protocol):
    """One HTTP/2 connection shared by many concurrent calls (streams) of one event loop."""

    def __init__(self, channel: AsyncNativeGRPCChannel) -> None:
        self.h2 = H2Connection()
        self.transport: asyncio.Transport | None = None
        self._channel = channel
        self._calls: dict[int, tuple[CallResponse, asyncio.Future[None]]] = {}
        self._window = asyncio.Event()
        self.lost: BaseException | None = None
        self.retired = False
        # Calls answered on this connection; calls started once it had answered one, i.e.
        # on a connection that had proved itself (see connection_lost).
        self.answered = 0
        self.reused_calls: set[int] = set()
        # Resolved by connection_lost: aclose waits for it (TLS shutdown takes a round trip).
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.h2.initiate()
        self.flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive(data)
            for event in events:
                kind = type(event)
                if kind is DataReceived or kind is HeadersReceived:
                    entry = self._calls.get(event.stream_id)  # type: ignore[attr-defined]
                    if entry is None:
                        continue
                    response, future = entry
                    try:
                        if kind is DataReceived:
                            response.data(event.data, event.end_stream)  # type: ignore[attr-defined]
                        else:
                            response.headers(event.headers, event.end_stream)  # type: ignore[attr-defined]
                    except KServeError as exc:
                        self._fail_call(event.stream_id, exc)  # type: ignore[attr-defined]
                        continue
                    if response.done:
                        del self._calls[event.stream_id]  # type: ignore[attr-defined]
                        self.h2.end_stream(event.stream_id)  # type: ignore[attr-defined]
                        self.answered += 1
                        if not future.done():
                            future.set_result(None)
                        if self.retired and not self._calls and self.transport is not None:
                            self.transport.close()  # the last call of a retired connection
                elif kind is StreamReset:
                    assert isinstance(event, StreamReset)
                    error: BaseException = (
                        _Retry()
                        if event.refused
                        else TransportError(
                            "the server reset the call's stream "
                            f"({ErrorCode.name_of(event.error_code)})"
                        )
                    )
                    entry = self._calls.pop(event.stream_id, None)
                    if entry is not None and not entry[0].done and not entry[1].done():
                        entry[1].set_exception(error)
                elif kind is GoAwayReceived:
                    self._channel._retire(self)
            # Wake senders waiting for window: the window may have opened, or their call
            # may have ended (answered early, reset) while they waited.
            self._window.set()
            self.flush()
        except KServeError as exc:
            self.flush()
            self._abort(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.gone.done():
            self.gone.set_result(None)
        error = TransportError(
            f"gRPC UNAVAILABLE: connection to {self._channel.config.target} lost"
            + (f": {exc}" if exc else "")
        )
        if self.lost is None:  # a protocol error that closed it stays the reason
            self.lost = error
        self._channel._retire(self)
        for stream_id, (response, future) in self._calls.items():
            if not future.done():
                # Retried only when this connection had proved itself before the call
                # started (a stale connection) and the call got no answer at all.
                retry = stream_id in self.reused_calls and not response.http_status
                future.set_exception(_Retry() if retry else error)
        self._calls.clear()
        self._window.set()

    # -- helpers

    def _fail_call(self, stream_id: int, exc: BaseException) -> None:
        entry = self._calls.pop(stream_id, None)
        self.h2.reset_stream(stream_id, ErrorCode.PROTOCOL_ERROR)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(exc)

    def _abort(self, exc: BaseException) -> None:
        if self.lost is None:
            self.lost = exc  # also the answer to calls that come after (see call)
        self._channel._retire(self)
        for _response, future in self._calls.values():
            if not future.done():
                future.set_exception(exc)
        self._calls.clear()
        self._window.set()  # senders waiting for window see their call failed
        if self.transport is not None:
            self.transport.close()

    def flush(self) -> None:
        buffers = self.h2.data_to_send()
        if buffers and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(buffers)

    @property
    def usable(self) -> bool:
        return self.lost is None and self.h2.can_open_stream() and self.transport is not None

    async def call(
        self, prepared: _Prepared, limit: int | None, deadline: float | None
    ) -> CallResponse:
        if self.lost is not None:  # e.g. the server's first bytes already broke the protocol
            raise self.lost
        h2 = self.h2
        loop = asyncio.get_running_loop()
        response = CallResponse(limit)
        future: asyncio.Future[None] = loop.create_future()
        stream_id = h2.open_stream(prepared.block)
        self._calls[stream_id] = (response, future)
        if self.answered:
            self.reused_calls.add(stream_id)
        # A timer, not asyncio.wait_for: no extra task per call.
        timer = loop.call_at(deadline, self._expire, stream_id) if deadline is not None else None
        try:
            parts = list(prepared.parts)
            while parts and not future.done():
                part = parts[0]
                n = h2.send_data(stream_id, part, end_stream=len(parts) == 1)
                if n == _nbytes(part):
                    parts.pop(0)
                    continue
                parts[0] = memoryview(part).cast("B")[n:]
                self.flush()
                while not future.done() and not h2.send_window(stream_id):
                    if self.lost is not None:
                        raise self.lost
                    self._window.clear()
                    await self._window.wait()
            self.flush()
            await future
        except BaseException:
            # Cancelled or failed: the stream goes, the connection stays.
            if stream_id in self._calls:
                del self._calls[stream_id]
                h2.reset_stream(stream_id, ErrorCode.CANCEL)
                self.flush()
            raise
        finally:
            self.reused_calls.discard(stream_id)
            if timer is not None:
                timer.cancel()
        return response

    def _expire(self, stream_id: int) -> None:
        """A call's deadline passed: reset its stream, fail it, wake a sender waiting."""
        entry = self._calls.pop(stream_id, None)
        if entry is None:
            return
        self.h2.reset_stream(stream_id, ErrorCode.CANCEL)
        self.flush()
        if not entry[1].done():
            entry[1].set_exception(
                DeadlineExceededError(
                    "gRPC deadline exceeded (client side)", url=self._channel.config.url
                )
            )
        self._window.set()


class AsyncNativeGRPCChannel(_NativeChannelBase):
    """The asyncio twin of :class:`NativeGRPCChannel`: concurrent calls share a connection.

    Bound to the event loop that first uses it (like the grpc.aio channel).
    """

    def __init__(self, config: ChannelConfig, *, connect_timeout: float | None = 10.0) -> None:
        super().__init__(config, connect_timeout)
        self._connections: list[_AsyncConnection] = []  # open for new calls
        self._all: set[_AsyncConnection] = set()  # not yet closed
        self._connecting: asyncio.Future[_AsyncConnection] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _retire(self, conn: _AsyncConnection) -> None:
        """No new calls on ``conn``; it closes when its last call ends."""
        conn.retired = True
        if conn in self._connections:
            self._connections.remove(conn)
        if not conn._calls and conn.transport is not None:
            conn.transport.close()

    async def _open(self, deadline: float | None) -> _AsyncConnection:
        loop = asyncio.get_running_loop()
        timeout = self._connect_timeout
        if deadline is not None:
            left = deadline - loop.time()
            if left <= 0:
                raise DeadlineExceededError("gRPC deadline exceeded before connecting")
            timeout = left if timeout is None else min(timeout, left)
        try:
            _transport, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _AsyncConnection(self),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname if self._ssl is not None else None,
                ),
                timeout,
            )
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise DeadlineExceededError(
                f"gRPC connect to {self.config.target} timed out", url=self.config.url
            ) from exc
        except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
            raise TransportError(
                f"gRPC UNAVAILABLE: failed to connect to {self.config.target}: {exc}",
                url=self.config.url,
            ) from exc
        if self._ssl is not None:
            sslobj = _transport.get_extra_info("ssl_object")
            if sslobj is None or sslobj.selected_alpn_protocol() != "h2":
                _transport.close()
                raise TransportError(
                    f"gRPC UNAVAILABLE: {self.config.target} did not agree to HTTP/2 (ALPN h2)",
                    url=self.config.url,
                )
        return conn

    async def _connection(self, deadline: float | None) -> _AsyncConnection:
        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise TransportError(
                "this AsyncClient's gRPC channel belongs to another event loop; "
                "make one client per loop",
                url=self.config.url,
            )
        for conn in self._connections:
            if conn.usable:
                return conn
        # One connect at a time: concurrent callers wait for the same new connection.
        if self._connecting is None:
            self._connecting = loop.create_future()
            try:
                conn = await self._open(deadline)
            except BaseException as exc:
                connecting, self._connecting = self._connecting, None
                connecting.set_exception(exc)
                connecting.exception()  # retrieved: waiters re-raise their own copy
                raise
            self._connections.append(conn)
            self._all.add(conn)
            connecting, self._connecting = self._connecting, None
            connecting.set_result(conn)
            return conn
        return await asyncio.shield(self._connecting)

    async def call_unary(
        self,
        method: str,
        request: BytesLike | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes | bytearray, Metadata]:
        """Run one unary call (see :meth:`NativeGRPCChannel.call_unary`)."""
        compression = check_compression(compression) or self.config.compression
        loop = asyncio.get_running_loop()
        deadline = deadline_after(timeout, loop.time())
        prepared = _Prepared(
            self._headers, method, request, timeout, metadata, compression, self._send_limit
        )
        for attempt in (0, 1):
            try:
                conn = await self._connection(deadline)
                response = await conn.call(prepared, self._receive_limit, deadline)
            except _Retry:
                if attempt:
                    raise TransportError(
                        "gRPC UNAVAILABLE: the server closed the connection before the call "
                        "started",
                        url=self.config.url,
                    ) from None
                continue
            result = _finish(response, self.config.url)
            return result, (response.metadata() if want_metadata else ())
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close the connections (calls in flight fail with TransportError). Idempotent."""
        self._closed = True
        self._connections = []
        connections, self._all = self._all, set()
        for conn in connections:
            if conn.transport is not None and not conn.gone.done():
                conn.h2.close()
                conn.flush()
                conn.transport.close()
        pending = [conn.gone for conn in connections if not conn.gone.done()]
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        for conn in connections:
            if not conn.gone.done() and conn.transport is not None:
                conn.transport.abort()  # TLS shutdown did not finish: drop the socket

    def __repr__(self) -> str:
        return f"AsyncNativeGRPCChannel({self.config.url!r}{', closed' if self._closed else ''})"

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> AsyncNativeStreamCall:
        """Start a bidirectional-streaming call, a stream on the shared connection (call from
        the event loop); see :class:`~kserve_v2.interfaces.AsyncStreamCall`."""
        from kserve_v2.transport.native_stream import AsyncNativeStreamCall

        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)
        return AsyncNativeStreamCall(
            self, method, timeout=timeout, metadata=metadata, compression=compression
        )
