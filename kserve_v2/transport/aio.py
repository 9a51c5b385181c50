"""The default asyncio transport: keep-alive HTTP/1.1 on a lean :class:`asyncio.BufferedProtocol`.

Why a protocol and not asyncio streams: the sans-IO :class:`kserve_v2.http1.ResponseParser` has
the buffered-protocol interface, so the event loop receives straight into the parser's buffers
(and into the final body ``bytearray`` of large responses), the response is parsed inside the
read callback, and a request costs one future and one timer instead of the several awaits of
``StreamReader.readuntil`` / ``readexactly``, each with its own buffer copy. Everything that is
not I/O (arguments, pools per origin, parsing, framing, decompression, URLs, TLS setup, errors)
is shared with the sync transport (:mod:`kserve_v2.http1`, :mod:`.sockets`).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import cast

from kserve_v2.errors import (
    DeadlineExceededError,
    ProtocolError,
    TransportError,
)
from kserve_v2.http1 import NoResponse, OutgoingRequest, ResponseParser, byte_views
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.transport.sockets import (
    AsyncClosesOnExit,
    Origin,
    OriginPool,
    PooledStreamingResponse,
    PooledTransport,
    connect_error,
    connect_timeout,
    end_orphaned,
    pool_timeout_error,
    readable_check,
)

__all__ = ["AsyncHTTPTransport"]

# From 3.12 the selector transport's writelines() queues memoryviews and sends them with one
# sendmsg; before, it joins everything into one bytes object. The TLS transport (3.11+) never
# joins. Small bodies are always fine to join.
_ZERO_COPY_WRITELINES = sys.version_info >= (3, 12)
_TLS_ZERO_COPY_WRITELINES = sys.version_info >= (3, 11)
_JOIN_LIMIT = 64 * 1024
_WRITE_SLICE = 1024 * 1024
# Streamed pieces waiting for a slow consumer before the socket stops being read.
_MAX_PENDING_PIECES = 256


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; the event loop feeds the parser directly."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        max_head: int,
        max_body: int | None,
        grpc_url: str | None = None,
    ) -> None:
        self.loop = loop
        self.lost: asyncio.Future[None] = loop.create_future()
        self.parser = ResponseParser(max_head, max_body, grpc_url=grpc_url)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        self.broken = False  # closed, reset or otherwise not reusable
        self.reused = False
        self.tls = False
        self.eof = False  # the transport reported the end of the peer's data
        self.write_paused = False
        self.read_paused = False
        # Whether the socket has something to read (set once connected; see looks_dead).
        self.readable: Callable[[], bool] | None = None
        # Lazy timer: one TimerHandle per connection, re-armed only when it fires early or a
        # shorter deadline comes. Scheduling and cancelling a timer for every request costs
        # more than a quarter of a small request's CPU time.
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_when = 0.0

    # -- protocol callbacks (run by the event loop) -------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not isinstance-checked: uvloop's transports do not derive from asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self.readable = readable_check(sock.fileno())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.parser.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        parser = self.parser
        if parser.idle:
            # Bytes while no request is in flight (e.g. a 408 before an idle close): the
            # connection can no longer be trusted.
            parser.buffer_updated(nbytes)
            self.abort()
            return
        try:
            done = parser.buffer_updated(nbytes)
        except ProtocolError as exc:
            self._fail(exc)
            return
        if done or (parser.stream and parser.head_done):
            if parser.stream and len(parser.pieces) >= _MAX_PENDING_PIECES and not done:
                assert self.transport is not None
                self.transport.pause_reading()
                self.read_paused = True
            self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._closed(None, clean=self._clean_end() is not False)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        # Without eof_received first, a TLS end is proper only if the SSL object saw the
        # alert: uvloop reports a TCP end without close_notify with connection_lost alone,
        # Python 3.10's asyncio a close_notify without the TCP end.
        self._closed(exc, clean=self.eof or not self.tls or self._clean_end() is True)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        drain = self.drain_waiter
        if drain is not None and not drain.done():
            drain.set_result(None)  # the writer sees self.broken

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        drain = self.drain_waiter
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- helpers ------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self.broken = True
        if self.error is None:
            self.error = exc
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        drain = self.drain_waiter
        if drain is not None and not drain.done():
            drain.set_result(None)
        self.abort()

    def _clean_end(self) -> bool | None:
        """Whether the end of data was a proper one: any end of plain TCP; for TLS, one that
        came with ``close_notify`` (see ResponseParser.eof_received). asyncio reports both
        ends of TLS with eof_received; its SSL object tells them apart: after the alert a
        read gives b"" (or SSLZeroReturnError), after a bare TCP end it wants more input.
        Nothing is left in it to read by then (the loop hands over all data first).
        None: it cannot tell (no SSL object, or one shut down in a way that says nothing)."""
        if not self.tls or self.transport is None:
            return True
        sslobj = self.transport.get_extra_info("ssl_object")
        if sslobj is None or sslobj.pending():
            return None
        try:
            sslobj.read(1)
        except ssl.SSLZeroReturnError:
            return True
        except (ssl.SSLWantReadError, ssl.SSLEOFError):
            return False
        except (ssl.SSLError, OSError, ValueError):
            return None
        return True

    def _closed(self, exc: Exception | None, clean: bool = True) -> None:
        if self.broken and self.parser.idle:
            return
        self.broken = True
        parser = self.parser
        if parser.idle:
            return  # an idle keep-alive connection closed by the server: simply not reused
        if not parser.got_bytes:
            error: BaseException = NoResponse()
            error.__cause__ = exc
            self._fail(error)
            return
        if exc is not None and not parser.done:
            error = TransportError(f"connection lost while receiving the response: {exc}")
            error.__cause__ = exc
            self._fail(error)
            return
        try:
            parser.eof_received(clean)
        except ProtocolError as perr:
            self._fail(perr)
            return
        self._wake()

    def looks_dead(self) -> bool:
        """Whether an idle connection was closed (or written to) by the server: known to the
        protocol once the event loop saw it, or still waiting in the socket (one poll)."""
        if self.broken:
            return True
        readable = self.readable
        return readable is not None and readable()

    def arm(self, deadline: float | None) -> None:
        """Fail the exchange in flight with DeadlineExceededError at ``deadline``."""
        self.deadline = deadline
        if deadline is not None:
            timer = self.timer
            if timer is None or self.timer_when > deadline:
                if timer is not None:
                    timer.cancel()
                self.timer = self.loop.call_at(deadline, self._on_timer)
                self.timer_when = deadline

    def _on_timer(self) -> None:
        self.timer = None
        deadline = self.deadline
        if deadline is None:
            return  # nothing in flight
        if deadline <= self.timer_when:
            self.deadline = None
            self._fail(DeadlineExceededError("request timed out"))
        else:
            self.timer = self.loop.call_at(deadline, self._on_timer)
            self.timer_when = deadline

    def _stop_timer(self) -> None:
        self.deadline = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def abort(self) -> None:
        """Close the connection at once.

        Never the graceful ``close()``: on TLS that sends close_notify and waits (up to 30 s)
        for the server's, keeping the socket open past the end of an event loop. An HTTP/1.1
        connection between requests has nothing left to flush.
        """
        self.broken = True
        self._stop_timer()
        if self.transport is not None:
            self.transport.abort()

    async def wait(self) -> None:
        """Wait for the next wake-up (response done, head parsed, new pieces) or failure."""
        if self.error is not None:
            raise self.error
        waiter = self.waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self.waiter = None

    async def drain(self) -> bool:
        """Wait until the transport wants more data; False if the connection broke."""
        while self.write_paused and not self.broken:
            waiter = self.drain_waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                self.drain_waiter = None
        if self.error is not None:
            raise self.error
        return not self.broken

    async def roundtrip(
        self, outgoing: OutgoingRequest, deadline: float | None, stream: bool
    ) -> None:
        """Send the request and receive its response (its head only when ``stream``)."""
        head, body, length, head_request, _ = outgoing
        parser = self.parser
        parser.start(head_request=head_request, stream=stream)
        self.error = None
        if deadline is not None and deadline <= self.loop.time():
            raise DeadlineExceededError("request timed out")
        self.arm(deadline)
        try:
            transport = self.transport
            assert transport is not None
            if self.broken:
                raise NoResponse(sent=False)
            if not body:
                transport.write(head)
            elif (
                length <= _JOIN_LIMIT
                or _ZERO_COPY_WRITELINES
                or (_TLS_ZERO_COPY_WRITELINES and self.tls)
            ):
                transport.writelines([head, *byte_views(body)])
            else:
                transport.write(head)
                for part in byte_views(body):
                    for offset in range(0, len(part), _WRITE_SLICE):
                        # Slices keep the copy into the transport's buffer (3.10/3.11) bounded.
                        transport.write(part[offset : offset + _WRITE_SLICE])
                        if self.write_paused and not await self.drain():
                            break  # connection lost; the response wait below says why
            while not (parser.done or (stream and parser.head_done)):
                await self.wait()
        finally:
            self.deadline = None


class _Pool(OriginPool[_Connection]):
    """Connections to one origin, at most ``limit`` open at once (no locks: one event loop)."""

    __slots__ = ("aborted", "closed", "count", "idle", "waiters")

    def __init__(self, origin: Origin, limit: int) -> None:
        super().__init__(origin, limit)
        self.idle: list[_Connection] = []
        self.count = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.aborted: list[_Connection] = []
        self.closed = False

    def take_idle(self) -> _Connection | None:
        """The fast path of :meth:`checkout`: a live idle connection, if there is one."""
        idle = self.idle
        if idle and not self.closed:
            conn = idle.pop()
            if not conn.looks_dead():
                return conn
            self.count -= 1
            conn.abort()
        return None

    async def checkout(
        self, loop: asyncio.AbstractEventLoop, deadline: float | None
    ) -> _Connection | None:
        """Return an idle connection, or ``None`` when the caller may open a new one."""
        while True:
            if self.closed:
                raise TransportError("the transport is closed", url=self.origin.url)
            idle = self.idle
            while idle:
                conn = idle.pop()  # LIFO: the warmest connection
                if not conn.looks_dead():
                    return conn
                self.count -= 1
                conn.abort()
            if self.count < self.limit:
                self.count += 1
                return None
            waiter: asyncio.Future[None] = loop.create_future()
            self.waiters.append(waiter)
            timer = None
            if deadline is not None:
                timer = loop.call_at(deadline, self._expire, waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self.notify()  # we were woken but cannot use it: pass the turn on
                raise
            finally:
                if timer is not None:
                    timer.cancel()

    def notify(self) -> None:
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def release(self, conn: _Connection) -> None:
        transport = conn.transport
        if (
            self.closed
            or not conn.parser.keep_alive
            or conn.broken
            or transport is None
            # An early answer while the body was still being sent: the rest would be garbage.
            or transport.get_write_buffer_size()
        ):
            self.discard(conn)
            return
        conn.reused = True
        self.idle.append(conn)
        if self.waiters:
            self.notify()

    def discard(self, conn: _Connection | None) -> None:
        if conn is not None:
            conn.abort()
            # Remembered until its socket is really closed (the loop does it a bit later), so
            # that aclose() can wait for that.
            if not conn.lost.done():
                if len(self.aborted) > 32:
                    self.aborted = [c for c in self.aborted if not c.lost.done()]
                self.aborted.append(conn)
        self.count -= 1
        if self.waiters:
            self.notify()

    def close(self) -> list[_Connection]:
        self.closed = True
        idle, self.idle = self.idle, []
        self.count -= len(idle)
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(TransportError("the transport is closed"))
        return idle

    def _expire(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(pool_timeout_error(self.limit, self.origin.url))


class AsyncHTTPTransport(PooledTransport[_Pool], AsyncClosesOnExit):
    """The default asyncio HTTP/1.1 transport: keep-alive, pooled, safe for many tasks.

    The asyncio twin of :class:`~kserve_v2.transport.HTTPTransport`, with the same arguments
    and semantics (see there): up to ``max_connections`` connections per (host, port), a
    whole-request ``timeout``, certificate verification on by default. An instance belongs to
    one event loop at a time; ``await transport.aclose()`` before that loop ends.

    Example::

        from kserve_v2.transport import AsyncHTTPTransport, HTTPRequest

        async with AsyncHTTPTransport("http://localhost:8000") as transport:
            response = await transport.handle_async_request(
                HTTPRequest("GET", "/v2/health/ready")
            )
    """

    # The event loop of the connections (see _check_loop).
    _loop: asyncio.AbstractEventLoop | None = None

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        """Send ``request`` and return the complete (decompressed) response."""
        loop = self._check_loop()
        pool, outgoing, deadline, _ = self._start(request, loop.time())
        conn = await self._exchange(loop, pool, outgoing, deadline, False)
        return self._finish(pool, conn, conn.parser)

    @asynccontextmanager
    async def astream(self, request: HTTPRequest) -> AsyncIterator[_AsyncStreamingResponse]:
        """Send ``request``; give its response with a body to be read incrementally.

        The request timeout covers connecting, sending and receiving the head; after that each
        read of the body waits at most that long for new bytes.

        Example::

            async with transport.astream(request) as response:
                async for piece in response.aiter_bytes():
                    ...
        """
        loop = self._check_loop()
        pool, outgoing, deadline, timeout = self._start(request, loop.time())
        conn = await self._exchange(loop, pool, outgoing, deadline, True)
        response = _AsyncStreamingResponse(pool, conn, conn.parser, timeout)
        try:
            yield response
        finally:
            response.close()

    async def aclose(self) -> None:
        """Close all pooled connections. Connections in use are closed when they come back.

        Called after the connections' event loop has ended (``asyncio.run()`` over, say), it
        shuts their sockets down instead: a closed loop closes nothing (see
        :func:`~kserve_v2.transport.sockets.end_orphaned`)."""
        self._closed = True
        if self._loop is not None and self._loop.is_closed():
            for pool in self._pools.values():
                for conn in [*pool.close(), *pool.aborted]:
                    end_orphaned(conn.transport)
                pool.aborted.clear()
            return
        closing = []
        for pool in list(self._pools.values()):
            for conn in pool.close():
                conn.abort()
                closing.append(conn.lost)
        # The sockets are closed by the transports' connection_lost callbacks: let them run
        # now, so that none is left open when the caller's event loop ends.
        for pool in self._pools.values():
            closing += [conn.lost for conn in pool.aborted if not conn.lost.done()]
            pool.aborted.clear()
        if closing:
            await asyncio.wait(closing, timeout=5)

    # -- internals ---------------------------------------------------------------------------

    def _check_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None and any(p.count for p in self._pools.values()):
                raise TransportError(
                    "this AsyncHTTPTransport has connections on another event loop; "
                    "use one transport per loop (and aclose() it before the loop ends)"
                )
            self._loop = loop
        return loop

    def _new_pool(self, origin: Origin) -> _Pool:
        return _Pool(origin, self._max_connections)

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, pool: _Pool, deadline: float | None
    ) -> _Connection:
        origin = pool.origin
        timeout = connect_timeout(self._connect_timeout, deadline, loop.time(), url=origin.url)
        ctx = self._tls_context(origin)
        max_head, max_body = self._max_header_size, self._max_response_size
        try:
            connecting = loop.create_connection(
                lambda: _Connection(loop, max_head, max_body, origin.grpc_url),
                origin.host,
                origin.port,
                ssl=ctx,
                server_hostname=(self._server_hostname or origin.host) if ctx else None,
                ssl_handshake_timeout=timeout if ctx else None,
            )
            _, conn = await asyncio.wait_for(connecting, timeout)
        except (asyncio.TimeoutError, OSError) as exc:  # ssl.SSLError included
            raise connect_error(exc, origin) from exc
        conn.tls = ctx is not None
        return conn

    async def _exchange(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: _Pool,
        outgoing: OutgoingRequest,
        deadline: float | None,
        stream: bool,
    ) -> _Connection:
        """Send the request, receive the response (or its head); see the sync twin."""
        conn = pool.take_idle()
        if conn is None:
            conn = await pool.checkout(loop, deadline)
        try:
            while True:
                if conn is None:
                    conn = await self._connect(loop, pool, deadline)
                try:
                    await conn.roundtrip(outgoing, deadline, stream)
                    return conn
                except NoResponse as exc:
                    exc.check_retry(conn.reused, outgoing[4], pool.origin.url)
                # A keep-alive connection the server closed as the request went out: one
                # fresh try, for a request that can do no harm twice.
                conn.abort()
                conn = None
        except BaseException:
            pool.discard(conn)
            raise


class _AsyncStreamingResponse(PooledStreamingResponse[_Connection]):
    """A response being received; returned by :meth:`AsyncHTTPTransport.astream`."""

    __slots__ = ()

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the (decompressed) body in pieces as they arrive."""
        conn = self._conn
        body = self._body
        while True:
            self._check_open()
            if conn.read_paused:
                conn.read_paused = False
                if conn.transport is not None:
                    conn.transport.resume_reading()
            for piece in body.take():
                yield piece
            if body.finished:
                return
            if conn.parser.pieces:
                continue
            if self._timeout is not None:
                conn.arm(conn.loop.time() + self._timeout)
            try:
                await conn.wait()
            finally:
                conn.deadline = None

    async def aread(self) -> bytes:
        """Read the rest of the body."""
        return b"".join([piece async for piece in self.aiter_bytes()])
