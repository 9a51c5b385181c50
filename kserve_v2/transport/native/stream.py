"""Bidirectional-streaming calls on the native transport.

They implement :class:`~kserve_v2.interfaces.SyncStreamCall` and
:class:`~kserve_v2.interfaces.AsyncStreamCall`, which :mod:`kserve_v2.grpc.stream` runs
``ModelStreamInfer`` on; the channels of :mod:`kserve_v2.transport.native.channel` make them
with ``open_stream``, handing over the channel's :class:`ChannelSettings` (and, for asyncio,
how to get the shared connection).

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
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc.framing import CallResponse, status_error
from kserve_v2.grpc.status import retry_pushback
from kserve_v2.h2.connection import Event, StreamReset, WindowUpdated
from kserve_v2.h2.frames import ErrorCode
from kserve_v2.interfaces import CLOSED_FOR_SENDING, StreamMessage
from kserve_v2.transport.native.connection import (
    AsyncConnection,
    CallNotStarted,
    ChannelSettings,
    ConnectionClosed,
    SyncConnection,
    feed_response,
    queue_data,
    reset_error,
)
from kserve_v2.transport.sockets import deadline_after

__all__ = ["AsyncNativeStreamCall", "NativeStreamCall"]

# How long cancel() tries to take the lock to send RST_STREAM before it just shuts the
# socket down (a sender may be stuck in the kernel, waiting for the server to read).
_CANCEL_LOCK_WAIT: Final = 0.2
# How long a best-effort RST_STREAM may take to write.
_GOODBYE_WAIT: Final = 0.5
# Before sleeping in select, the reader polls the socket for this long: decoupled models send
# responses a few hundred µs apart, and on virtual machines a thread that sleeps between them
# lets its core idle, and waking it costs about as much again. Measured here with Triton's
# Python backend: about 2,500 responses/s without polling, 5,000 with it, at the same client
# CPU per response; an idle stream pays this once per wait. The asyncio reader yields to the
# loop for as long instead (the loop polls without sleeping while a callback is ready):
# AsyncClient.stream() went from about 6,600 to 10,000 responses/s here, its CPU per
# response up by about a third, to the sync reader's.
_POLL_BEFORE_SLEEP: Final = 100e-6

#: How an asyncio stream call gets its connection: the channel's shared one, for a deadline.
Connector = Callable[[float | None], Awaitable[AsyncConnection]]


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


class _StreamCall:
    """What the sync and async stream calls share: the request head, the response being
    read, and how the call ended (``status``, the error to raise)."""

    def __init__(
        self,
        settings: ChannelSettings,
        head: tuple[bytes, str | None],
        deadline: float | None,
        on_message: Callable[[StreamMessage], None] | None,
    ) -> None:
        self._settings = settings
        self._url = settings.url
        self._block, self._compression = head
        self._deadline = deadline
        self._messages: deque[StreamMessage] = deque()
        self._response = CallResponse(settings.receive_limit, on_message or self._messages.append)
        self._half_closed = False  # done_sending() / done_writing() was called
        self._cancelled = False
        self._finished = False
        self._error: KServeError | None = None
        self.status: str | None = None

    def _frame(self, data: BytesLike) -> list[BytesLike]:
        return self._settings.frame(data, self._compression)

    def _record(self, status: str, error: KServeError | None) -> bool:
        """Record how the call ended (a cancelled call ends quietly); False if it had."""
        if self._finished:
            return False
        self._finished = True
        if self._cancelled:
            status, error = "CANCELLED", None
        self.status = status
        self._error = error
        return True

    def _finish(self, status: str, error: KServeError | None) -> None:
        raise NotImplementedError

    def _fail(self, exc: KServeError) -> None:
        self._finish(_status_name(exc), exc)

    def _finish_with_status(self) -> None:
        """The server ended the stream: its gRPC status ends the call."""
        code, message = self._response.status()
        if code == "OK":
            self._finish(code, None)
            return
        pushback = retry_pushback(self._response.trailer_list or ())
        self._finish(code, status_error(code, message, self._url, pushback))

    def _expired(self) -> None:
        self._finish("DEADLINE_EXCEEDED", self._settings.deadline_error())

    def _check_sendable(self, over: bool) -> None:
        """Raise unless a message may be sent: the call's error, or "closed"."""
        if over or self._finished:
            if self._error is not None and not self._cancelled:
                raise self._error
            raise TransportError(CLOSED_FOR_SENDING, url=self._url)
        if self._half_closed:
            raise TransportError(CLOSED_FOR_SENDING, url=self._url)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._url} {self.status or 'running'}>"


# ---------------------------------------------------------------------------------- sync


class NativeStreamCall(_StreamCall):
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
        self, settings: ChannelSettings, head: tuple[bytes, str | None], timeout: float | None
    ) -> None:
        super().__init__(settings, head, deadline_after(timeout, time.monotonic()), None)
        # _lock guards the state below and every use of the socket; _changed (same lock)
        # announces window updates, the connection being ready, and the end.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._send_lock = threading.Lock()  # one message at a time, its frames together
        self._conn: SyncConnection | None = None
        self._stream_id = 0
        self._connecting = False
        self._sending = False  # a send() is between its first and last frame
        self._end_sent = False
        self._iterating = False
        self._reader = 0  # the iterating thread's id

    # -- opening -----------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        """Connect and start the HTTP/2 stream, once (whoever comes first; others wait)."""
        with self._lock:
            while self._connecting:
                self._changed.wait()
            if self._conn is not None or self._finished:
                return
            self._connecting = True
        conn: SyncConnection | None = None
        error: KServeError | None = None
        try:
            # Outside the lock: cancel() may come meanwhile.
            conn = SyncConnection.open(self._settings, self._deadline)
        except KServeError as exc:
            error = exc
        finally:
            with self._lock:
                self._connecting = False
                self._changed.notify_all()
                if error is not None:
                    self._fail(error)
                elif conn is not None:
                    self._start(conn)

    def _start(self, conn: SyncConnection) -> None:
        if self._finished:  # cancelled while connecting
            conn.close()
            return
        self._conn = conn
        try:
            self._stream_id = conn.h2.open_stream(self._block, end_stream=self._half_closed)
            conn.starting_call()
            self._end_sent = self._half_closed
            self._flush()
        except KServeError as exc:
            self._fail(exc)

    # -- sending -----------------------------------------------------------------------------

    def _flush(self) -> None:
        """Write what HTTP/2 queued, with the stream's deadline (lock held)."""
        conn = self._conn
        assert conn is not None
        try:
            conn.flush(self._deadline)
        except KServeError as exc:
            self._fail(exc)
            raise
        except OSError as exc:
            error = self._settings.lost_error(exc)
            self._finish("UNAVAILABLE", error)
            raise error from exc

    def send(self, data: bytes | bytearray | memoryview) -> None:
        """Send one request message; waits while the server's flow-control window is full."""
        parts = self._frame(data)
        self._ensure_open()
        with self._send_lock, self._lock:
            self._check_sendable(False)
            conn = self._conn
            assert conn is not None
            h2 = conn.h2
            stream_id = self._stream_id
            self._sending = True
            conn.sending()
            try:
                while queue_data(h2, stream_id, parts, False):
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
                        self._check_sendable(True)
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
        # The deadline first, on every round: a server that never stops sending (empty
        # DATA frames, say) must not keep the call alive past it.
        left = None
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                with self._lock:
                    self._expire_locked()
                return
        with self._lock:
            if self._finished or self._receive(conn):
                return
            wake = conn.keepalive_wake()
            if wake is not None:  # keepalive: a PING due (or its answer overdue)?
                try:
                    conn.keepalive(self._deadline)
                except KServeError as exc:
                    self._fail(exc)
                    return
                except OSError as exc:
                    self._finish("UNAVAILABLE", self._settings.lost_error(exc))
                    return
                wake = conn.keepalive_wake()
                if wake is not None:
                    until_wake = max(0.0, wake - time.monotonic())
                    left = until_wake if left is None else min(left, until_wake)
        try:
            sock = [conn.sock]
            until = time.perf_counter() + _POLL_BEFORE_SLEEP
            while not select.select(sock, [], [], 0)[0]:
                if time.perf_counter() >= until:
                    select.select(sock, [], [], left)
                    break
        except (OSError, ValueError):  # shut down by cancel(): the next round sees it finished
            return

    def _receive(self, conn: SyncConnection) -> bool:
        """One non-blocking read and its events (lock held); False if nothing was there."""
        try:
            events = conn.poll_events()
            if events is None:
                return False
            self._dispatch(events)
            if not self._finished and conn.h2.has_data_to_send:
                self._flush()  # WINDOW_UPDATE, PING and SETTINGS acknowledgements
        except ConnectionClosed as exc:
            self._finish(
                "UNAVAILABLE",
                TransportError(
                    "gRPC UNAVAILABLE: the server closed the connection during the stream",
                    url=self._url,
                )
                if conn.h2.got_bytes
                else self._settings.lost_error(exc, False),
            )
        except OSError as exc:
            self._finish("UNAVAILABLE", self._settings.lost_error(exc, conn.h2.got_bytes))
        except KServeError as exc:
            if not self._finished:
                self._reset(ErrorCode.PROTOCOL_ERROR)
                self._fail(exc)
        return True

    def _dispatch(self, events: list[Event]) -> None:
        stream_id = self._stream_id
        response = self._response
        others = feed_response(events, stream_id, response)
        for event in others or ():
            if isinstance(event, WindowUpdated):
                self._changed.notify_all()
            elif (
                isinstance(event, StreamReset)
                and event.stream_id == stream_id
                and not response.done
            ):
                # After the trailers a reset is only the server's clean-up (NO_ERROR).
                if event.error is not None:  # a malformed response: we reset the stream
                    self._fail(event.error)
                else:
                    self._finish(*reset_error(event.error_code, self._url))
                return
            # GoAwayReceived: this stream goes on unless it was refused (a StreamReset).
        if response.done:
            self._finish_with_status()

    # -- ending ------------------------------------------------------------------------------

    def _reset(self, code: int) -> None:
        """Best-effort RST_STREAM (lock held); the connection is closed right after."""
        conn = self._conn
        if conn is None or self._finished:
            return
        conn.h2.reset_stream(self._stream_id, code)
        with contextlib.suppress(KServeError, OSError):
            conn.flush(time.monotonic() + _GOODBYE_WAIT)

    def _expire_locked(self) -> None:
        if not self._finished:
            self._reset(ErrorCode.CANCEL)
            self._expired()

    def _finish(self, status: str, error: KServeError | None) -> None:
        """The call is over (lock held): record why, wake everyone, drop the connection."""
        if not self._record(status, error):
            return
        self._changed.notify_all()
        conn = self._conn
        if conn is not None:
            # Shutting down wakes a reader in select() and a sender stuck in the kernel.
            # Closing could pull the descriptor from under the reader's select(): only the
            # reader itself (or anyone while nobody iterates) closes.
            conn.shutdown()
            if not self._iterating or threading.get_ident() == self._reader:
                conn.close()

    def cancel(self) -> None:
        """Reset the stream and drop its connection; iteration then ends quietly."""
        self._cancelled = True  # whoever holds the lock now ends the call quietly
        if not self._lock.acquire(timeout=_CANCEL_LOCK_WAIT):
            # A sender is stuck in the kernel: shutting the socket down frees it.
            conn = self._conn
            if conn is not None:
                conn.shutdown()
            self._lock.acquire()
        try:
            self._reset(ErrorCode.CANCEL)
            self._finish("CANCELLED", None)
        finally:
            self._lock.release()


# --------------------------------------------------------------------------------- async


class AsyncNativeStreamCall(_StreamCall):
    """A bidirectional-streaming call on the shared connection of an
    :class:`~kserve_v2.transport.native.AsyncNativeGRPCChannel` (made by its ``open_stream``,
    inside the running loop); see :class:`~kserve_v2.interfaces.AsyncStreamCall`.

    The stream opens on the first :meth:`read` or :meth:`write`; ``connection`` gives the
    connection to open it on.

    Example::

        call = channel.open_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        await call.write(request_bytes)
        await call.done_writing()
        while (message := await call.read()) is not None:
            ...
    """

    def __init__(
        self,
        settings: ChannelSettings,
        connection: Connector,
        head: tuple[bytes, str | None],
        timeout: float | None,
    ) -> None:
        self._loop = loop = asyncio.get_running_loop()
        super().__init__(settings, head, deadline_after(timeout, loop.time()), self._on_message)
        self._connection = connection
        # The connection resolves this future when the stream ends (like a unary call's).
        self._end: asyncio.Future[None] = loop.create_future()
        self._end.add_done_callback(self._ended)
        self._waiter: asyncio.Future[None] | None = None  # the reader waiting for messages
        self._backlog = 0  # bytes of the messages waiting for the reader
        self._conn: AsyncConnection | None = None
        self._opening: asyncio.Future[None] | None = None
        self._stream_id = 0
        self._write_lock = asyncio.Lock()
        self._timer = None if self._deadline is None else loop.call_at(self._deadline, self._expire)

    # -- the connection's side

    def _on_message(self, data: StreamMessage) -> None:
        self._messages.append(data)
        self._backlog += len(data)
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
            self._finish_with_status()
        elif isinstance(exc, CallNotStarted):
            self._finish("UNAVAILABLE", self._settings.not_started_error("stream"))
        elif isinstance(exc, KServeError):
            self._fail(exc)
        else:
            error = TransportError(f"gRPC stream failed: {exc!r}", url=self._url)
            error.__cause__ = exc
            self._finish("UNKNOWN", error)

    def _finish(self, status: str, error: KServeError | None) -> None:
        if not self._record(status, error):
            return
        if self._timer is not None:
            self._timer.cancel()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._conn is not None:
            self._conn.wake()  # a writer waiting for flow control re-checks

    def _drop(self, code: int) -> None:
        """Reset the stream if the connection still has it."""
        if self._conn is not None:
            self._conn.drop(self._stream_id, code)

    def _expire(self) -> None:
        self._timer = None
        if not self._finished:
            self._drop(ErrorCode.CANCEL)
            self._expired()
            if self._conn is not None:
                self._conn.check_alive()  # is the server still answering at all?

    # -- opening

    async def _open(self) -> None:
        if self._opening is not None:
            await asyncio.shield(self._opening)
            return
        self._opening = opening = self._loop.create_future()
        try:
            conn = await self._connection(self._deadline)
        except KServeError as exc:
            self._fail(exc)
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
        # No await since the connector said the connection may open a stream.
        self._conn = conn
        try:
            self._stream_id = conn.open_call(
                self._block,
                self._response,
                self._end,
                end_stream=self._half_closed,
                backlog=self._backlog_size,
            )
        except KServeError as exc:
            self._fail(exc)
            return
        conn.flush()

    def _backlog_size(self) -> int:
        return self._backlog

    # -- the caller's side

    async def read(self) -> StreamMessage | None:
        """The next response message; None at the end (OK status, or cancelled)."""
        if self._conn is None and not self._finished:
            await self._open()
        messages = self._messages
        polling_until: float | None = None
        while True:
            if messages and not self._cancelled:
                message = messages.popleft()
                self._backlog -= len(message)
                if self._conn is not None:
                    self._conn.release(self._stream_id)  # the server may send more now
                return message
            if self._finished:
                if self._error is not None and not self._cancelled:
                    raise self._error
                return None
            # Before sleeping, yield for a while: the loop polls the socket without sleeping
            # while a callback is ready (see _POLL_BEFORE_SLEEP).
            now = time.perf_counter()
            if polling_until is None:
                polling_until = now + _POLL_BEFORE_SLEEP
            if now < polling_until:
                await asyncio.sleep(0)
                continue
            self._waiter = waiter = self._loop.create_future()
            await waiter
            polling_until = None

    def _over(self) -> bool:
        return self._finished or self._end.done()

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Send one request message; waits while the server's flow-control window is full."""
        parts = self._frame(data)
        if self._conn is None and not self._finished:
            await self._open()
        async with self._write_lock:
            self._check_sendable(self._end.done())
            conn = self._conn
            assert conn is not None
            stream_id = self._stream_id
            try:
                if (
                    conn.write_paused or queue_data(conn.h2, stream_id, parts, False)
                ) and not await conn.send_rest(stream_id, parts, False, self._over):
                    if conn.lost is not None:
                        raise conn.lost
                    self._check_sendable(True)
            except asyncio.CancelledError:
                # Part of the message went out: the stream cannot carry another one.
                self._drop(ErrorCode.CANCEL)
                self._finish(
                    "CANCELLED",
                    TransportError("a request was interrupted halfway; the stream is over"),
                )
                raise
            conn.pings_without_data = 0
            conn.flush()

    async def done_writing(self) -> None:
        """Half-close (after a write in progress). A no-op once the call is over."""
        async with self._write_lock:
            if self._half_closed or self._over():
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
