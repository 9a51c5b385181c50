"""The default asyncio transport: keep-alive HTTP/1.1 on a lean :class:`asyncio.BufferedProtocol`.

Why a protocol and not asyncio streams: the sans-IO :class:`._http11.ResponseParser` already has
the buffered-protocol interface, so the event loop receives straight into the parser's buffers
(and into the final body ``bytearray`` of large responses), the response is parsed inside the
read callback, and a request costs one future and one timer instead of the several awaits of
``StreamReader.readuntil`` / ``readexactly``, each with its own buffer copy. Everything that is
not I/O (parsing, framing, decompression, URLs, TLS setup) is shared with the sync transport.
"""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType

from kserve_v2.arguments import check_max_response_size
from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    ProtocolError,
    TransportError,
)
from kserve_v2.http1 import (
    DEFAULT_MAX_HEADER_SIZE,
    ResponseParser,
    StreamDecoder,
    body_length,
    decode_body,
    serialize_head,
)
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.transport.sockets import (
    Origin,
    StrPath,
    deadline_after,
    make_ssl_context,
    parse_origin,
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


class _NoResponse(Exception):
    """The connection closed before a single response byte arrived (maybe a stale keep-alive)."""


def _byte_views(body: Sequence[BytesLike]) -> list[BytesLike]:
    """Return ``body`` with every multi-byte or multi-dimensional memoryview cast to bytes.

    asyncio transports measure and slice what they are given with ``len()`` and ``[n:]``, which
    count elements, not bytes, for e.g. a float32 memoryview.
    """
    out: list[BytesLike] = []
    for part in body:
        if type(part) is bytes or type(part) is bytearray:
            out.append(part)
        else:
            view = memoryview(part)
            if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
                try:
                    view = view.cast("B")
                except TypeError as exc:
                    raise InvalidInputError(
                        f"request body parts must be contiguous bytes-like objects: {exc}"
                    ) from exc
            out.append(view)
    return out


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; the event loop feeds the parser directly."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, max_head: int, max_body: int | None
    ) -> None:
        self.loop = loop
        self.lost: asyncio.Future[None] = loop.create_future()
        self.parser = ResponseParser(max_head, max_body)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        self.broken = False  # closed, reset or otherwise not reusable
        self.reused = False
        self.tls = False
        self.write_paused = False
        self.read_paused = False
        # Lazy timer: one TimerHandle per connection, re-armed only when it fires early or a
        # shorter deadline comes. Scheduling and cancelling a timer for every request costs
        # more than a quarter of a small request's CPU time.
        self.deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_when = 0.0

    # -- protocol callbacks (run by the event loop) -------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

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
        self._closed(None)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        self._closed(exc)
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

    def _closed(self, exc: Exception | None) -> None:
        if self.broken and self.parser.idle:
            return
        self.broken = True
        parser = self.parser
        if parser.idle:
            return  # an idle keep-alive connection closed by the server: simply not reused
        if not parser.got_bytes:
            error: BaseException = _NoResponse()
            error.__cause__ = exc
            self._fail(error)
            return
        if exc is not None and not parser.done:
            error = TransportError(f"connection lost while receiving the response: {exc}")
            error.__cause__ = exc
            self._fail(error)
            return
        try:
            parser.eof_received()
        except ProtocolError as perr:
            self._fail(perr)
            return
        self._wake()

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


class _Pool:
    """Connections to one origin, at most ``limit`` open at once (no locks: one event loop)."""

    __slots__ = (
        "aborted",
        "closed",
        "count",
        "idle",
        "limit",
        "origin",
        "server_hostname",
        "ssl_context",
        "waiters",
    )

    def __init__(
        self,
        origin: Origin,
        limit: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
    ) -> None:
        self.origin = origin
        self.limit = limit
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname
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
            if not conn.broken:
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
                if not conn.broken:
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
                timer = loop.call_at(deadline, _expire, waiter, self.limit)
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

    def checkin(self, conn: _Connection) -> None:
        if self.closed or conn.broken:
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


def _expire(waiter: asyncio.Future[None], limit: int) -> None:
    if not waiter.done():
        waiter.set_exception(
            DeadlineExceededError(f"timed out waiting for one of the {limit} pooled connections")
        )


class AsyncHTTPTransport:
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

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        max_connections: int = 16,
        verify: bool = True,
        ca_file: StrPath | None = None,
        ca_dir: StrPath | None = None,
        cert_file: StrPath | None = None,
        key_file: StrPath | None = None,
        key_password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_response_size: int | None = None,
    ) -> None:
        if max_connections < 1:
            raise InvalidInputError("max_connections must be at least 1", value=max_connections)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._max_header_size = max_header_size
        self._max_response_size = check_max_response_size(max_response_size)
        self._server_hostname = server_hostname
        self._ssl_context = ssl_context
        # Built on first https use, so that plain-http users never load a trust store.
        self._make_ssl_context: Callable[[], ssl.SSLContext] = lambda: make_ssl_context(
            verify=verify,
            ca_file=ca_file,
            ca_dir=ca_dir,
            cert_file=cert_file,
            key_file=key_file,
            key_password=key_password,
        )
        self._pools: dict[tuple[bool, str, int], _Pool] = {}
        self._pool: _Pool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        if url is not None:
            origin, path = parse_origin(url)
            if path != "/":
                raise InvalidInputError(
                    f"the transport URL must not have a path or query ({url!r}); "
                    "put base paths in the request target",
                    value=url,
                )
            self._pool = self._get_pool(origin)

    # -- public API --------------------------------------------------------------------------

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        """Send ``request`` and return the complete (decompressed) response."""
        loop = self._check_loop()
        timeout = self._timeout if request.timeout is None else request.timeout
        deadline = deadline_after(timeout, loop.time())
        target = request.target
        pool = self._pool
        if pool is None or target[:1] != "/":
            pool, target = self._route(target)
        body = request.body
        length = body_length(body) if body else 0
        head = serialize_head(
            request.method, target, pool.origin.host_header, request.headers, length
        )
        conn = await self._exchange(
            loop, pool, head, body, length, request.method == "HEAD", deadline, False
        )
        parser = conn.parser
        status = parser.status
        headers = parser.headers
        reason = parser.reason
        data = parser.body
        # A pooled connection must not keep the last (maybe huge) body alive until reused.
        parser.body = bytearray()
        self._release(pool, conn)
        encoding = headers.get("content-encoding")
        if encoding is not None:
            data = decode_body(data, encoding, self._max_response_size)
        return HTTPResponse(status, headers, data, reason)

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
        timeout = self._timeout if request.timeout is None else request.timeout
        deadline = deadline_after(timeout, loop.time())
        pool, target = self._route(request.target)
        body = request.body
        length = body_length(body) if body else 0
        head = serialize_head(
            request.method, target, pool.origin.host_header, request.headers, length
        )
        conn = await self._exchange(
            loop, pool, head, body, length, request.method == "HEAD", deadline, True
        )
        response = _AsyncStreamingResponse(self, pool, conn, timeout)
        try:
            yield response
        finally:
            response._release()

    async def aclose(self) -> None:
        """Close all pooled connections. Connections in use are closed when they come back."""
        self._closed = True
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

    async def __aenter__(self) -> AsyncHTTPTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        where = self._pool.origin.url if self._pool is not None else "no default origin"
        return f"<AsyncHTTPTransport {where}>"

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

    def _get_pool(self, origin: Origin) -> _Pool:
        if self._closed:
            raise TransportError("the transport is closed", url=origin.url)
        key = origin.key()
        pool = self._pools.get(key)
        if pool is None:
            ctx = None
            if origin.tls:
                ctx = self._ssl_context
                if ctx is None:
                    ctx = self._ssl_context = self._make_ssl_context()
            pool = _Pool(origin, self._max_connections, ctx, self._server_hostname)
            self._pools[key] = pool
        return pool

    def _route(self, target: str) -> tuple[_Pool, str]:
        if target[:1] == "/":
            pool = self._pool
            if pool is None:
                raise InvalidInputError(
                    "this transport has no URL: request targets must be absolute URLs",
                    value=target,
                )
            return pool, target
        origin, path = parse_origin(target)
        return self._get_pool(origin), path

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, pool: _Pool, deadline: float | None
    ) -> _Connection:
        origin = pool.origin
        timeout = self._connect_timeout
        if deadline is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise DeadlineExceededError("request timed out", url=origin.url)
            timeout = remaining if timeout is None else min(timeout, remaining)
        ctx = pool.ssl_context
        max_head, max_body = self._max_header_size, self._max_response_size
        try:
            connecting = loop.create_connection(
                lambda: _Connection(loop, max_head, max_body),
                origin.host,
                origin.port,
                ssl=ctx,
                server_hostname=(pool.server_hostname or origin.host) if ctx else None,
                ssl_handshake_timeout=timeout if ctx else None,
            )
            _, conn = await asyncio.wait_for(connecting, timeout)
            conn.tls = ctx is not None
        except (asyncio.TimeoutError, TimeoutError) as exc:
            raise DeadlineExceededError(f"timed out connecting to {origin.url}") from exc
        except ssl.SSLCertVerificationError as exc:
            raise TransportError(
                f"TLS certificate verification failed: {exc.verify_message or exc}",
                url=origin.url,
            ) from exc
        except ssl.SSLError as exc:
            raise TransportError(f"TLS handshake failed: {exc}", url=origin.url) from exc
        except OSError as exc:
            raise TransportError(f"cannot connect: {exc.strerror or exc}", url=origin.url) from exc
        return conn

    async def _exchange(
        self,
        loop: asyncio.AbstractEventLoop,
        pool: _Pool,
        head: bytes,
        body: Sequence[BytesLike],
        length: int,
        head_request: bool,
        deadline: float | None,
        stream: bool,
    ) -> _Connection:
        """Send the request, receive the response (or its head); see the sync twin."""
        conn = pool.take_idle()
        if conn is None:
            conn = await pool.checkout(loop, deadline)
        try:
            if conn is None:
                conn = await self._connect(loop, pool, deadline)
            try:
                await self._roundtrip(
                    loop, conn, head, body, length, head_request, deadline, stream
                )
            except _NoResponse as exc:
                if not conn.reused:
                    raise TransportError(
                        "the server closed the connection without sending a response",
                        url=pool.origin.url,
                    ) from exc.__cause__
                # A keep-alive connection the server had already closed: one fresh try.
                conn.abort()
                conn = None
                conn = await self._connect(loop, pool, deadline)
                try:
                    await self._roundtrip(
                        loop, conn, head, body, length, head_request, deadline, stream
                    )
                except _NoResponse as exc2:
                    raise TransportError(
                        "the server closed the connection without sending a response",
                        url=pool.origin.url,
                    ) from exc2.__cause__
            return conn
        except BaseException:
            pool.discard(conn)
            raise

    async def _roundtrip(
        self,
        loop: asyncio.AbstractEventLoop,
        conn: _Connection,
        head: bytes,
        body: Sequence[BytesLike],
        length: int,
        head_request: bool,
        deadline: float | None,
        stream: bool,
    ) -> None:
        parser = conn.parser
        parser.start(head_request=head_request, stream=stream)
        conn.error = None
        if deadline is not None and deadline <= loop.time():
            raise DeadlineExceededError("request timed out")
        conn.arm(deadline)
        try:
            transport = conn.transport
            assert transport is not None
            if conn.broken:
                raise _NoResponse
            if not body:
                transport.write(head)
            elif (
                length <= _JOIN_LIMIT
                or _ZERO_COPY_WRITELINES
                or (_TLS_ZERO_COPY_WRITELINES and conn.tls)
            ):
                transport.writelines([head, *_byte_views(body)])
            else:
                transport.write(head)
                for part in _byte_views(body):
                    for offset in range(0, len(part), _WRITE_SLICE):
                        # Slices keep the copy into the transport's buffer (3.10/3.11) bounded.
                        transport.write(part[offset : offset + _WRITE_SLICE])
                        if conn.write_paused and not await conn.drain():
                            break  # connection lost; the response wait below says why
            while not (parser.done or (stream and parser.head_done)):
                await conn.wait()
        finally:
            conn.deadline = None

    @staticmethod
    def _release(pool: _Pool, conn: _Connection) -> None:
        transport = conn.transport
        if (
            conn.parser.keep_alive
            and not conn.broken
            and transport is not None
            # An early answer while the body was still being sent: the rest would be garbage.
            and not transport.get_write_buffer_size()
        ):
            pool.checkin(conn)
        else:
            pool.discard(conn)


class _AsyncStreamingResponse:
    """A response being received; returned by :meth:`AsyncHTTPTransport.astream`."""

    def __init__(
        self,
        transport: AsyncHTTPTransport,
        pool: _Pool,
        conn: _Connection,
        timeout: float | None,
    ) -> None:
        parser = conn.parser
        self.status: int = parser.status
        self.headers: Mapping[str, str] = parser.headers
        self.reason = parser.reason
        self._transport = transport
        self._pool: _Pool | None = pool
        self._conn = conn
        self._timeout = timeout
        self._decoder = StreamDecoder(parser.headers.get("content-encoding"))

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the (decompressed) body in pieces as they arrive."""
        conn = self._conn
        parser = conn.parser
        decoder = self._decoder
        while True:
            if self._pool is None:
                raise TransportError("the streamed response is closed")
            pieces = parser.take_pieces()
            if conn.read_paused:
                conn.read_paused = False
                if conn.transport is not None:
                    conn.transport.resume_reading()
            for piece in pieces:
                if decoder.active:
                    piece = decoder.decode(piece)
                if piece:
                    yield piece
            if parser.done:
                tail = decoder.flush()
                if tail:
                    yield tail
                return
            if parser.pieces:
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

    def _release(self) -> None:
        pool = self._pool
        if pool is None:
            return
        self._pool = None
        conn = self._conn
        if conn.parser.done:
            AsyncHTTPTransport._release(pool, conn)
        else:
            pool.discard(conn)
