"""The native transport's channels: unary calls, and the stream calls they open.

:class:`NativeGRPCChannel` (sync) keeps a pool of :class:`SyncConnection` s and runs one call at
a time on each, on the calling thread; :class:`AsyncNativeGRPCChannel` multiplexes the calls
of one event loop over an :class:`AsyncConnection`. What a call sends is prepared once by the
channel's :class:`ChannelSettings`; a call HTTP/2 says the server did not process
(:class:`CallNotStarted`) is retried once on a new connection.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections import deque
from typing import Final, Generic, TypeVar

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import KServeError, ProtocolError
from kserve_v2.grpc.config import ChannelConfig, Metadata
from kserve_v2.h2.connection import H2ConnectionError
from kserve_v2.transport.grpc_base import GRPCChannelBase
from kserve_v2.transport.native.connection import (
    AsyncConnection,
    CallNotStarted,
    ChannelSettings,
    SyncConnection,
)
from kserve_v2.transport.native.stream import AsyncNativeStreamCall, NativeStreamCall
from kserve_v2.transport.sockets import deadline_after, end_orphaned

__all__ = ["AsyncNativeGRPCChannel", "NativeGRPCChannel"]

# Idle connections kept per channel (more are closed when returned).
_POOL_MAX: Final = 16

_Call = TypeVar("_Call", NativeStreamCall, AsyncNativeStreamCall)


class _NativeChannel(GRPCChannelBase, Generic[_Call]):
    """What the sync and async channels share: settings, request preparation, and opening
    stream calls."""

    def __init__(self, config: ChannelConfig, connect_timeout: float | None) -> None:
        super().__init__(config)
        self.settings = ChannelSettings(config, connect_timeout)

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> _Call:
        """Start a bidirectional-streaming call (see :class:`~kserve_v2.interfaces.
        SyncStreamCall` and :class:`~kserve_v2.interfaces.AsyncStreamCall`); it connects on
        first use. The sync channel gives it a connection of its own, closed at its end; the
        asyncio one a stream on the shared connection (call it from the event loop)."""
        self.check_open()
        head = self.settings.request_head(method, timeout, metadata, compression)
        return self._stream_call(head, timeout)

    def _stream_call(self, head: tuple[bytes, str | None], timeout: float | None) -> _Call:
        raise NotImplementedError


# ---------------------------------------------------------------------------------- sync


class NativeGRPCChannel(_NativeChannel[NativeStreamCall]):
    """A synchronous gRPC channel on the library's own HTTP/2 client; thread-safe.

    Drop-in for :class:`~kserve_v2.transport.grpcio.GRPCChannel`::

        channel = NativeGRPCChannel(channel_config(parse_url("grpc://localhost:8001")))
        reply, _ = channel.call_unary("/inference.GRPCInferenceService/ServerLive", b"")
    """

    def __init__(self, config: ChannelConfig, *, connect_timeout: float | None = 10.0) -> None:
        super().__init__(config, connect_timeout)
        self._idle: deque[SyncConnection] = deque()
        self._lock = threading.Lock()

    def _checkout(self, deadline: float | None) -> SyncConnection:
        self.check_open()
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return SyncConnection.open(self.settings, deadline)
            if conn.usable():  # checked before anything is written on it
                return conn
            conn.close()

    def _checkin(self, conn: SyncConnection) -> None:
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
        settings = self.settings
        block, parts = settings.unary_request(method, request, timeout, metadata, compression)
        deadline = deadline_after(timeout, time.monotonic())
        for attempt in (0, 1):
            conn = self._checkout(deadline)
            try:
                response = conn.unary(block, list(parts), deadline, settings.receive_limit)
            except CallNotStarted:
                conn.close()
                if attempt:
                    raise settings.not_started_error("call") from None
                continue
            except H2ConnectionError:
                conn.say_goodbye()
                raise
            except ProtocolError:
                # A malformed response on a sound connection: only its stream was reset.
                if conn.after_stream_error():
                    self._checkin(conn)
                else:
                    conn.close()
                raise
            except KServeError:
                conn.close()
                raise
            except (OSError, ssl.SSLError) as exc:
                conn.close()
                raise settings.lost_error(exc, conn.h2.got_bytes) from exc
            except BaseException:
                conn.close()
                raise
            self._checkin(conn)
            return settings.unary_result(response, want_metadata)
        raise AssertionError("unreachable")

    def _stream_call(
        self, head: tuple[bytes, str | None], timeout: float | None
    ) -> NativeStreamCall:
        return NativeStreamCall(self.settings, head, timeout)

    def close(self) -> None:
        """Close every pooled connection; calls in flight finish on theirs. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        for conn in idle:
            conn.close()


# --------------------------------------------------------------------------------- async


class AsyncNativeGRPCChannel(_NativeChannel[AsyncNativeStreamCall]):
    """The asyncio twin of :class:`NativeGRPCChannel`: concurrent calls share a connection,
    another opens only when the server's ``MAX_CONCURRENT_STREAMS`` is reached.

    Bound to the event loop that first uses it (like the grpc.aio channel).
    """

    def __init__(self, config: ChannelConfig, *, connect_timeout: float | None = 10.0) -> None:
        super().__init__(config, connect_timeout)
        self._connections: list[AsyncConnection] = []  # open for new calls
        self._all: set[AsyncConnection] = set()  # not yet closed
        self._connecting: asyncio.Future[AsyncConnection] | None = None

    def _retired(self, conn: AsyncConnection) -> None:
        if conn in self._connections:
            self._connections.remove(conn)

    async def connection(self, deadline: float | None) -> AsyncConnection:
        """A connection that may open a stream now (no await between this returning and
        the stream opening): a shared one, or a new one (one connect at a time)."""
        self.check_open()
        loop = self.bind_loop()
        for conn in self._connections:
            if conn.usable:
                return conn
        return await self._connect(loop, deadline)

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, deadline: float | None
    ) -> AsyncConnection:
        # Concurrent callers wait for the same new connection.
        if self._connecting is None:
            self._connecting = loop.create_future()
            try:
                conn = await AsyncConnection.open(self.settings, deadline, self._retired)
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
        settings = self.settings
        block, parts = settings.unary_request(method, request, timeout, metadata, compression)
        self.check_open()
        # Asked once per call: on Python 3.11 each get_running_loop() is a getpid() call.
        loop = self.bind_loop()
        deadline = deadline_after(timeout, loop.time())
        for attempt in (0, 1):
            try:
                # A shared connection without a coroutine of its own (the usual case).
                for conn in self._connections:
                    if conn.usable:
                        break
                else:
                    self.check_open()
                    conn = await self._connect(loop, deadline)
                response = await conn.call(block, list(parts), settings.receive_limit, deadline)
            except CallNotStarted:
                if attempt:
                    raise settings.not_started_error("call") from None
                continue
            return settings.unary_result(response, want_metadata)
        raise AssertionError("unreachable")

    def _stream_call(
        self, head: tuple[bytes, str | None], timeout: float | None
    ) -> AsyncNativeStreamCall:
        return AsyncNativeStreamCall(self.settings, self.connection, head, timeout)

    async def aclose(self) -> None:
        """Close the connections (calls in flight fail with TransportError). Idempotent.

        Called after the connections' event loop has ended, it shuts their sockets down
        instead: a closed loop closes nothing (see
        :func:`~kserve_v2.transport.sockets.end_orphaned`)."""
        self._closed = True
        self._connections = []
        connections, self._all = self._all, set()
        if self._loop is not None and self._loop.is_closed():
            for conn in connections:
                end_orphaned(conn.transport)
            return
        for conn in connections:
            conn.close()
        pending = [conn.gone for conn in connections if not conn.gone.done()]
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        for conn in connections:
            conn.abort()  # TLS shutdown did not finish: drop the socket
