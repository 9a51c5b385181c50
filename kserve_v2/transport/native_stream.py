"""Bidirectional-streaming calls on the native transport (:mod:`kserve_v2.transport.native`).

They implement :class:`~kserve_v2.interfaces.SyncStreamCall` and
:class:`~kserve_v2.interfaces.AsyncStreamCall`, which :mod:`kserve_v2.grpc.stream` runs
``ModelStreamInfer`` on; channels make them with ``open_stream``.

* :class:`NativeStreamCall` (sync) owns a connection of its own, opened on first use (sending
  or iterating) and closed when the call ends. The thread that iterates the call is its only
  reader: it waits for the socket without holding the call's lock, then reads and dispatches
  under the lock. Senders (any thread) take the same lock to queue DATA and write it, so the
  socket, and the TLS object above it, is only ever used by one thread at a time. A sender
  that finds the flow-control window exhausted waits on a condition that the reader notifies
  when a ``WINDOW_UPDATE`` arrives.
* :class:`AsyncNativeStreamCall` (asyncio) is one HTTP/2 stream on the channel's shared
  connection, registered like a unary call; the connection hands it each response message as
  it completes.

Both send the stream's deadline as ``grpc-timeout`` and enforce it locally too: once it
passes the stream is reset (``RST_STREAM CANCEL``) and :class:`DeadlineExceededError` raised.
Responses are decoded once, by the stream's consumer; here they are only framed.
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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from kserve_v2.errors import (
    DeadlineExceededError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc.config import Metadata, check_compression
from kserve_v2.grpc.framing import CallResponse, status_error
from kserve_v2.h2.connection import (
    DataReceived,
    Event,
    HeadersReceived,
    StreamReset,
    WindowUpdated,
)
from kserve_v2.h2.frames import ErrorCode
from kserve_v2.interfaces import StreamMessage
from kserve_v2.transport.native import _Retry, frame_message
from kserve_v2.transport.sockets import deadline_after

if TYPE_CHECKING:
    from kserve_v2.transport.native import (
        AsyncNativeGRPCChannel,
        NativeGRPCChannel,
        _AsyncConnection,
        _SyncConnection,
    )

__all__ = ["AsyncNativeStreamCall", "NativeStreamCall"]

_CLOSED: Final = "the stream is closed; open a new one with client.stream()"
# How long cancel() tries to take the lock to send RST_STREAM before it just shuts the
# socket down (a sender may be stuck in the kernel, waiting for the server to read).
_CANCEL_LOCK_WAIT: Final = 0.2
# How long a best-effort RST_STREAM may take to write.
_GOODBYE_WAIT: Final = 0.5
# Before sleeping in select, the reader polls the socket for this long: decoupled models send
# responses a few hundred µs apart, and on virtual machines a thread that sleeps between them
# lets its core idle, and waking it costs about as much again. Measured here with Triton's
# Python backend: about 2,500 responses/s without polling, 5,000 with it, at the same client
# CPU per response; an idle stream pays this once per wait.
_POLL_BEFORE_SLEEP: Final = 100e-6
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


def _status_name(exc: BaseException) -> str:
    """The gRPC status name a wire hook reports for an error that ended a call."""
    if isinstance(exc, ServerError) and exc.grpc_code:
        return exc.grpc_code
    if isinstance(exc, DeadlineExceededError):
        return "DEADLINE_EXCEEDED"
    if isinstance(exc, ProtocolError):
        return "INTERNAL"
    if isinstance(exc, TransportError):
        return "UNAVAILABLE"
    return "UNKNOWN"


def _reset_error(code: int, url: str) -> tuple[str, KServeError]:
    """Status name and error of a stream the server reset (gRPC's mapping of the codes)."""
    name = ErrorCode.name_of(code)
    if code == ErrorCode.CANCEL:
        status = "CANCELLED"
    elif code == ErrorCode.REFUSED_STREAM:
        status = "UNAVAILABLE"
    else:
        status = "INTERNAL"
    return status, TransportError(f"gRPC {status}: the server reset the stream ({name})", url=url)


def _shutdown(sock: socket.socket) -> None:
    """Shut the socket down for both directions without closing it (the file descriptor
    stays valid for a thread still selecting on it). Bypasses SSLSocket.shutdown, which
    would drop the TLS object another thread may be using."""
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


# ---------------------------------------------------------------------------------- sync


class NativeStreamCall:
    """A bidirectional-streaming call on a connection of its own (made by
    ``NativeGRPCChannel.open_stream``); see :class:`~kserve_v2.interfaces.SyncStreamCall`.

    Example::

        call = channel.open_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        call.send(request_bytes)
        call.done_sending()
        for message in call:       # ends at the OK status; raises on any other
            ...
    """

    def __init__(
        self,
        channel: NativeGRPCChannel,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> None:
        compression = check_compression(compression) or channel.config.compression
        self._channel = channel
        self._url = channel.config.url
        self._deadline = deadline_after(timeout, time.monotonic())
        self._block = channel._headers.block(
            method, timeout=timeout, encoding=compression, metadata=metadata
        )
        self._compression = compression
        self._send_limit = channel._send_limit
        self._messages: deque[StreamMessage] = deque()
        self._response = CallResponse(channel._receive_limit, self._messages.append)
        # _lock guards the state below and every use of the socket; _changed (same lock)
        # announces window updates, the connection being ready, and the end.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._send_lock = threading.Lock()  # one message at a time, its frames together
        self._conn: _SyncConnection | None = None
        self._stream_id = 0
        self._connecting = False
        self._sending = False  # a send() is between its first and last frame
        self._half_closed = False  # done_sending() was called
        self._end_sent = False
        self._iterating = False
        self._reader = 0  # the iterating thread's id
        self._cancelled = False
        self._finished = False
        self._error: KServeError | None = None
        # The socket is non-blocking while the reader polls it; senders give it their
        # deadline as timeout. Switching costs a system call, so only when needed.
        self._nonblocking = False
        self.status: str | None = None

    # -- opening -----------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        """Connect and start the HTTP/2 stream, once (whoever comes first; others wait)."""
        with self._lock:
            while self._connecting:
                self._changed.wait()
            if self._conn is not None or self._finished:
                return
            self._connecting = True
        conn: _SyncConnection | None = None
        error: KServeError | None = None
        try:
            conn = self._channel._connect(self._deadline)  # outside the lock: cancel() may come
        except KServeError as exc:
            error = exc
        finally:
            with self._lock:
                self._connecting = False
                self._changed.notify_all()
                if error is not None:
                    self._finish(_status_name(error), error)
                elif conn is not None:
                    self._start(conn)

    def _start(self, conn: _SyncConnection) -> None:
        if self._finished:  # cancelled while connecting
            conn.close()
            return
        self._conn = conn
        try:
            self._stream_id = conn.h2.open_stream(self._block, end_stream=self._half_closed)
            self._end_sent = self._half_closed
            self._flush()
        except KServeError as exc:
            self._finish(_status_name(exc), exc)

    # -- sending -----------------------------------------------------------------------------

    def _check_sendable(self) -> None:
        if self._finished:
            if self._error is not None and not self._cancelled:
                raise self._error
            raise TransportError(_CLOSED, url=self._url)
        if self._half_closed:
            raise TransportError(_CLOSED, url=self._url)

    def _flush(self) -> None:
        """Write what HTTP/2 queued, with the stream's deadline (lock held)."""
        conn = self._conn
        assert conn is not None
        self._nonblocking = False
        try:
            conn.flush(self._deadline)
        except KServeError as exc:
            self._finish(_status_name(exc), exc)
            raise
        except OSError as exc:
            error = TransportError(
                f"gRPC UNAVAILABLE: connection to {self._channel.config.target} lost: {exc}",
                url=self._url,
            )
            self._finish("UNAVAILABLE", error)
            raise error from exc

    def send(self, data: bytes | bytearray | memoryview) -> None:
        """Send one request message; waits while the server's flow-control window is full."""
        parts = frame_message(data, self._compression, self._send_limit)
        self._ensure_open()
        with self._send_lock, self._lock:
            self._check_sendable()
            conn = self._conn
            assert conn is not None
            h2 = conn.h2
            stream_id = self._stream_id
            self._sending = True
            try:
                for part in parts:
                    view = part
                    while True:
                        sent = h2.send_data(stream_id, view)
                        if sent == len(view):
                            break
                        view = memoryview(view).cast("B")[sent:]
                        self._flush()
                        # The reader notifies on WINDOW_UPDATE (and at the end).
                        while not self._finished and not h2.send_window(stream_id):
                            left = None
                            if self._deadline is not None:
                                left = self._deadline - time.monotonic()
                                if left <= 0:
                                    self._expire_locked()
                                    break
                            self._changed.wait(left)
                        if self._finished:
                            self._check_sendable()
                self._flush()
            finally:
                self._sending = False
                if self._half_closed and not self._end_sent and not self._finished:
                    self._send_end()

    def _send_end(self) -> None:
        self._end_sent = True
        assert self._conn is not None
        try:
            self._conn.h2.send_data(self._stream_id, b"", end_stream=True)
            self._flush()
        except (KServeError, OSError):
            pass  # the call has failed with the reason; the reader reports it

    def done_sending(self) -> None:
        """Half-close: the server sees the end of the requests. Does not wait for a send in
        progress (its message ends first)."""
        with self._lock:
            if self._half_closed or self._finished:
                return
            self._half_closed = True
            # Not connected yet: the stream will open already half-closed. Mid-message: the
            # sender ends the stream after its last frame.
            if self._conn is not None and not self._sending:
                self._send_end()

    # -- receiving ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamMessage]:
        with self._lock:
            if self._iterating:
                raise RuntimeError("a stream call is iterated by one thread only")
            self._iterating = True
            self._reader = threading.get_ident()
        try:
            self._ensure_open()
            messages = self._messages
            while True:
                while messages and not self._cancelled:
                    yield messages.popleft()
                if self._finished:
                    break
                self._pump()
            if self._error is not None and not self._cancelled:
                raise self._error
        finally:
            with self._lock:
                self._iterating = False
                if not self._finished:  # the consumer stopped early: that ends the call
                    self._cancelled = True
                    self._finish("CANCELLED", None)
                if self._conn is not None:
                    self._conn.close()

    def _pump(self) -> None:
        """Read what is there, or wait (lock released) until something comes."""
        conn = self._conn
        assert conn is not None
        with self._lock:
            if self._finished or self._receive(conn):
                return
        left = None
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                with self._lock:
                    self._expire_locked()
                return
        try:
            sock = [conn.sock]
            until = time.perf_counter() + _POLL_BEFORE_SLEEP
            while not select.select(sock, [], [], 0)[0]:
                if time.perf_counter() >= until:
                    select.select(sock, [], [], left)
                    break
        except (OSError, ValueError):  # shut down by cancel(): the next round sees it finished
            return

    def _receive(self, conn: _SyncConnection) -> bool:
        """One non-blocking read and its events (lock held); False if nothing was there."""
        sock = conn.sock
        if not self._nonblocking:
            sock.settimeout(0.0)
            self._nonblocking = True
        try:
            n = sock.recv_into(conn._buffer)
        except _WOULD_BLOCK:
            return False
        except OSError as exc:
            self._finish(
                "UNAVAILABLE",
                TransportError(
                    f"gRPC UNAVAILABLE: connection to {self._channel.config.target} lost: {exc}",
                    url=self._url,
                ),
            )
            return True
        if not n:
            self._finish(
                "UNAVAILABLE",
                TransportError(
                    "gRPC UNAVAILABLE: the server closed the connection during the stream",
                    url=self._url,
                ),
            )
            return True
        try:
            self._dispatch(conn.h2.receive(conn._view[:n]))
            if not self._finished and conn.h2.has_data_to_send:
                self._flush()  # WINDOW_UPDATE, PING and SETTINGS acknowledgements
        except KServeError as exc:
            if not self._finished:
                self._reset(ErrorCode.PROTOCOL_ERROR)
                self._finish(_status_name(exc), exc)
        return True

    def _dispatch(self, events: list[Event]) -> None:
        stream_id = self._stream_id
        response = self._response
        for event in events:
            kind = type(event)
            if kind is DataReceived:
                if event.stream_id == stream_id:  # type: ignore[attr-defined]
                    response.data(event.data, event.end_stream)  # type: ignore[attr-defined]
            elif kind is HeadersReceived:
                if event.stream_id == stream_id:  # type: ignore[attr-defined]
                    response.headers(event.headers, event.end_stream)  # type: ignore[attr-defined]
            elif kind is WindowUpdated:
                self._changed.notify_all()
            elif kind is StreamReset:
                assert isinstance(event, StreamReset)
                # After the trailers a reset is only the server's clean-up (NO_ERROR).
                if event.stream_id == stream_id and not response.done:
                    self._finish(*_reset_error(event.error_code, self._url))
                    return
            # GoAwayReceived: this stream goes on unless it was refused (a StreamReset).
        if response.done:
            code, message = response.status()
            self._finish(code, None if code == "OK" else status_error(code, message, self._url))

    # -- ending ------------------------------------------------------------------------------

    def _reset(self, code: int) -> None:
        """Best-effort RST_STREAM (lock held); the connection is closed right after."""
        conn = self._conn
        if conn is None or self._finished:
            return
        conn.h2.reset_stream(self._stream_id, code)
        self._nonblocking = False
        with contextlib.suppress(KServeError, OSError):
            conn.flush(time.monotonic() + _GOODBYE_WAIT)

    def _expire_locked(self) -> None:
        if not self._finished:
            self._reset(ErrorCode.CANCEL)
            self._finish(
                "DEADLINE_EXCEEDED",
                DeadlineExceededError("gRPC deadline exceeded (client side)", url=self._url),
            )

    def _finish(self, status: str, error: KServeError | None) -> None:
        """The call is over (lock held): record why, wake everyone, drop the connection."""
        if self._finished:
            return
        self._finished = True
        if self._cancelled:
            status, error = "CANCELLED", None
        self.status = status
        self._error = error
        self._changed.notify_all()
        conn = self._conn
        if conn is not None:
            # Shutting down wakes a reader in select() and a sender stuck in the kernel.
            # Closing could pull the descriptor from under the reader's select(): only the
            # reader itself (or anyone while nobody iterates) closes.
            _shutdown(conn.sock)
            if not self._iterating or threading.get_ident() == self._reader:
                conn.close()

    def cancel(self) -> None:
        """Reset the stream and drop its connection; iteration then ends quietly."""
        self._cancelled = True  # whoever holds the lock now ends the call quietly
        if not self._lock.acquire(timeout=_CANCEL_LOCK_WAIT):
            # A sender is stuck in the kernel: shutting the socket down frees it.
            conn = self._conn
            if conn is not None:
                _shutdown(conn.sock)
            self._lock.acquire()
        try:
            self._reset(ErrorCode.CANCEL)
            self._finish("CANCELLED", None)
        finally:
            self._lock.release()

    def __repr__(self) -> str:
        return f"<NativeStreamCall {self._url} {self.status or 'running'}>"


# --------------------------------------------------------------------------------- async


class AsyncNativeStreamCall:
    """A bidirectional-streaming call on the shared connection of an
    :class:`~kserve_v2.transport.native.AsyncNativeGRPCChannel` (made by its ``open_stream``,
    inside the running loop); see :class:`~kserve_v2.interfaces.AsyncStreamCall`.

    The stream opens on the first :meth:`read` or :meth:`write`.

    Example::

        call = channel.open_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        await call.write(request_bytes)
        await call.done_writing()
        while (message := await call.read()) is not None:
            ...
    """

    def __init__(
        self,
        channel: AsyncNativeGRPCChannel,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> None:
        compression = check_compression(compression) or channel.config.compression
        self._channel = channel
        self._url = channel.config.url
        self._loop = loop = asyncio.get_running_loop()
        self._deadline = deadline_after(timeout, loop.time())
        self._block = channel._headers.block(
            method, timeout=timeout, encoding=compression, metadata=metadata
        )
        self._compression = compression
        self._send_limit = channel._send_limit
        self._messages: deque[StreamMessage] = deque()
        self._response = CallResponse(channel._receive_limit, self._on_message)
        # The connection resolves this future when the stream ends (like a unary call's).
        self._end: asyncio.Future[None] = loop.create_future()
        self._end.add_done_callback(self._ended)
        self._waiter: asyncio.Future[None] | None = None  # the reader waiting for messages
        self._conn: _AsyncConnection | None = None
        self._opening: asyncio.Future[None] | None = None
        self._stream_id = 0
        self._write_lock = asyncio.Lock()
        self._half_closed = False
        self._cancelled = False
        self._finished = False
        self._error: KServeError | None = None
        self._timer = None if self._deadline is None else loop.call_at(self._deadline, self._expire)
        self.status: str | None = None

    # -- the connection's side

    def _on_message(self, data: StreamMessage) -> None:
        self._messages.append(data)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _ended(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():
            self._finish("CANCELLED", None)
            return
        exc = future.exception()
        if exc is None:
            code, message = self._response.status()
            self._finish(code, None if code == "OK" else status_error(code, message, self._url))
        elif isinstance(exc, _Retry):
            self._finish(
                "UNAVAILABLE",
                TransportError(
                    "gRPC UNAVAILABLE: the server closed the connection before the stream started",
                    url=self._url,
                ),
            )
        elif isinstance(exc, KServeError):
            self._finish(_status_name(exc), exc)
        else:
            error = TransportError(f"gRPC stream failed: {exc!r}", url=self._url)
            error.__cause__ = exc
            self._finish("UNKNOWN", error)

    def _finish(self, status: str, error: KServeError | None) -> None:
        if self._finished:
            return
        self._finished = True
        if self._cancelled:
            status, error = "CANCELLED", None
        self.status = status
        self._error = error
        if self._timer is not None:
            self._timer.cancel()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._conn is not None:
            self._conn._window.set()  # a writer waiting for flow control re-checks

    def _drop(self, code: int) -> None:
        """Reset the stream if the connection still has it."""
        conn = self._conn
        if conn is not None and conn._calls.pop(self._stream_id, None) is not None:
            conn.h2.reset_stream(self._stream_id, code)
            conn.flush()

    def _expire(self) -> None:
        self._timer = None
        if not self._finished:
            self._drop(ErrorCode.CANCEL)
            self._finish(
                "DEADLINE_EXCEEDED",
                DeadlineExceededError("gRPC deadline exceeded (client side)", url=self._url),
            )

    # -- opening

    async def _open(self) -> None:
        if self._opening is not None:
            await asyncio.shield(self._opening)
            return
        self._opening = opening = self._loop.create_future()
        try:
            conn = await self._channel._connection(self._deadline)
        except KServeError as exc:
            self._finish(_status_name(exc), exc)
            return
        except BaseException:  # the opening task was cancelled: nobody may wait forever
            self._finish(
                "CANCELLED", TransportError("the stream's connection was never made", url=self._url)
            )
            raise
        finally:
            opening.set_result(None)
        if self._finished:  # cancelled or expired while connecting
            return
        # No await since _connection() said the connection may open a stream.
        self._conn = conn
        try:
            self._stream_id = conn.h2.open_stream(self._block, end_stream=self._half_closed)
        except KServeError as exc:
            self._finish(_status_name(exc), exc)
            return
        conn._calls[self._stream_id] = (self._response, self._end)
        conn.flush()

    # -- the caller's side

    async def read(self) -> StreamMessage | None:
        """The next response message; None at the end (OK status, or cancelled)."""
        if self._conn is None and not self._finished:
            await self._open()
        messages = self._messages
        while True:
            if messages and not self._cancelled:
                return messages.popleft()
            if self._finished:
                if self._error is not None and not self._cancelled:
                    raise self._error
                return None
            self._waiter = waiter = self._loop.create_future()
            await waiter

    def _check_writable(self) -> None:
        if self._finished or self._end.done():
            if self._error is not None and not self._cancelled:
                raise self._error
            raise TransportError(_CLOSED, url=self._url)
        if self._half_closed:
            raise TransportError(_CLOSED, url=self._url)

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send one request message; waits while the server's flow-control window is full."""
        parts = frame_message(data, self._compression, self._send_limit)
        if self._conn is None and not self._finished:
            await self._open()
        async with self._write_lock:
            self._check_writable()
            conn = self._conn
            assert conn is not None
            h2 = conn.h2
            stream_id = self._stream_id
            try:
                for part in parts:
                    view = part
                    while True:
                        sent = h2.send_data(stream_id, view)
                        if sent == len(view):
                            break
                        view = memoryview(view).cast("B")[sent:]
                        conn.flush()
                        while not h2.send_window(stream_id):
                            if conn.lost is not None:
                                raise conn.lost
                            self._check_writable()
                            conn._window.clear()
                            await conn._window.wait()
                        self._check_writable()
            except asyncio.CancelledError:
                # Part of the message went out: the stream cannot carry another one.
                self._drop(ErrorCode.CANCEL)
                self._finish(
                    "CANCELLED",
                    TransportError("a request was interrupted halfway; the stream is over"),
                )
                raise
            conn.flush()

    async def done_writing(self) -> None:
        """Half-close (after a write in progress). A no-op once the call is over."""
        async with self._write_lock:
            if self._half_closed or self._finished or self._end.done():
                return
            self._half_closed = True
            conn = self._conn
            if conn is not None:  # else the stream opens half-closed
                with contextlib.suppress(KServeError):
                    conn.h2.send_data(self._stream_id, b"", end_stream=True)
                conn.flush()

    def cancel(self) -> None:
        """Reset the stream; :meth:`read` then returns None. Idempotent."""
        if self._finished:
            return
        self._cancelled = True
        self._drop(ErrorCode.CANCEL)
        self._finish("CANCELLED", None)

    def __repr__(self) -> str:
        return f"<AsyncNativeStreamCall {self._url} {self.status or 'running'}>"
