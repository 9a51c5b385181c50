"""What the transports share, so that each only writes its own I/O loop.

For every transport: origins (:func:`parse_origin`), TLS contexts (:class:`TLSConfig`),
deadlines (:func:`deadline_after`, :func:`connect_timeout`), the errors of a failed connect
(:func:`connect_error`) or a lost peer (:data:`CONNECTION_LOST`), scatter-gather sends
(:func:`sendmsg_rest`), and closing on leaving a ``with`` block (:class:`ClosesOnExit`,
:class:`AsyncClosesOnExit`).

For the two HTTP/1.1 transports (:mod:`.stdlib`, :mod:`.aio`), the part of them that does no
I/O: their arguments, a connection pool per origin and the routing of a request to it
(:class:`PooledTransport`, :class:`OriginPool`), the request head and the finished response,
and the head and body of a streamed response (:class:`PooledStreamingResponse`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import select
import socket
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union
from urllib.parse import urlsplit

from kserve_v2.arguments import check_max_response_size
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    TransportError,
)
from kserve_v2.http1 import (
    DEFAULT_MAX_HEADER_SIZE,
    RETRY_SAFE_METHODS,
    OutgoingRequest,
    ResponseParser,
    StreamedBody,
    body_length,
    decode_body,
    serialize_head,
)
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.pem import load_ca, load_cert_chain

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

__all__ = [
    "CONNECTION_LOST",
    "HAS_SENDMSG",
    "IOV_MAX",
    "AsyncClosesOnExit",
    "ClosesOnExit",
    "Origin",
    "OriginPool",
    "PooledStreamingResponse",
    "PooledTransport",
    "StrPath",
    "TLSConfig",
    "base_origin",
    "connect_error",
    "connect_timeout",
    "deadline_after",
    "parse_origin",
    "pool_timeout_error",
    "readable_check",
    "sendmsg_rest",
]


# -- deadlines ---------------------------------------------------------------------------------


def deadline_after(timeout: float | None, now: float) -> float | None:
    """The deadline ``timeout`` seconds after ``now`` (monotonic or event-loop time), as every
    transport computes it. None for no timeout, and for an infinite one: sockets, select and
    timers cannot wait ``math.inf`` seconds."""
    return None if timeout is None or timeout == math.inf else now + timeout


def connect_timeout(
    limit: float | None,
    deadline: float | None,
    now: float,
    *,
    expired: str = "request timed out",
    url: str | None = None,
) -> float | None:
    """How long a connect (TCP and TLS handshake) may take: ``limit`` (the connect timeout),
    cut to the time left before ``deadline``. Raises :class:`DeadlineExceededError` (message
    ``expired``) when no time is left.

    >>> connect_timeout(10.0, 103.0, 100.0), connect_timeout(None, None, 100.0)
    (3.0, None)
    """
    if deadline is None:
        return limit
    remaining = deadline - now
    if remaining <= 0:
        raise DeadlineExceededError(expired, url=url)
    return remaining if limit is None else min(limit, remaining)


def pool_timeout_error(limit: int, url: str) -> DeadlineExceededError:
    """The error for a request that found all ``limit`` connections of a pool busy until its
    deadline."""
    return DeadlineExceededError(
        f"timed out waiting for one of the {limit} pooled connections", url=url
    )


# -- sockets -----------------------------------------------------------------------------------

StrPath = Union[str, "os.PathLike[str]"]

#: A peer that went away. On a reused connection before any response byte, this is the stale
#: keep-alive case (sent once more only when that can do no harm: ``NoResponse.check_retry``);
#: otherwise a :class:`TransportError`.
CONNECTION_LOST = (
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


def readable_check(fd: int) -> Callable[[], bool]:
    """A check of whether the socket ``fd`` has something to read right now, without waiting.

    For a pooled connection between requests, anything to read is fatal: the server closed it
    (EOF), reset it, or sent bytes nobody asked for (e.g. a 408). The pools ask before every
    reuse, as httpcore does, so that a request is not written to a connection that is known to
    be gone: one ``poll`` system call, on an object made once per connection.
    """
    if hasattr(select, "poll"):
        poller = select.poll()
        # POLLERR, POLLHUP and POLLNVAL (a closed descriptor) are reported whatever is asked.
        poller.register(fd, select.POLLIN)
        poll = poller.poll
        return lambda: bool(poll(0))

    def check() -> bool:  # pragma: no cover - platforms without poll (Windows)
        try:
            return bool(select.select([fd], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    return check


# Linux refuses more than IOV_MAX (1024) buffers in one sendmsg call.
try:
    IOV_MAX = max(16, min(os.sysconf("SCIOV_MAX"), 1024))
except (AttributeError, ValueError, OSError):  # pragma: no cover - platform dependent
    IOV_MAX = 1024


#: Whether sockets have ``sendmsg`` (not on Windows): the native gRPC transport asks too.
HAS_SENDMSG = hasattr(socket.socket, "sendmsg")


def sendmsg_rest(
    sendmsg: Callable[[list[memoryview]], int],
    buffers: Sequence[BytesLike],
    sent: int,
    arm: Callable[[], None],
) -> None:
    """Finish a partial ``sendmsg`` of ``buffers`` of which ``sent`` bytes went out: skip
    those, resend the rest in IOV_MAX batches, calling ``arm`` (the socket's timeout for the
    deadline) before each call. Shared by the sync HTTP/1.1 transport and the native gRPC one."""
    views = [memoryview(b).cast("B") for b in buffers]
    index = 0
    while True:
        # Drop the fully sent buffers, trim the partly sent one.
        while index < len(views) and sent >= views[index].nbytes:
            sent -= views[index].nbytes
            index += 1
        if index == len(views):
            return
        if sent:
            views[index] = views[index][sent:]
        arm()
        sent = sendmsg(views[index : index + IOV_MAX])


# -- origins -----------------------------------------------------------------------------------


class Origin:
    """Where requests go: scheme, host and port, plus the ``Host`` header derived from them."""

    __slots__ = ("host", "host_header", "port", "tls")

    def __init__(self, tls: bool, host: str, port: int) -> None:
        self.tls = tls
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.host_header = shown if port == (443 if tls else 80) else f"{shown}:{port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host_header}"

    @property
    def grpc_url(self) -> str:
        """The gRPC URL of the same host and port: what to suggest when the port turns out to
        speak HTTP/2."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'grpcs' if self.tls else 'grpc'}://{shown}:{self.port}"

    def key(self) -> tuple[bool, str, int]:
        return (self.tls, self.host, self.port)


def parse_origin(url: str) -> tuple[Origin, str]:
    """Split ``http[s]://host[:port][/path?query]`` into its origin and request target.

    A bare ``host:port`` means ``http://host:port``.

    >>> origin, target = parse_origin("https://example.com/v2/models?x=1")
    >>> origin.host, origin.port, origin.tls, target
    ('example.com', 443, True, '/v2/models?x=1')
    """
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInputError(f"invalid URL {url!r}: {exc}", value=url) from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"expected an http:// or https:// URL, got {url!r}", value=url)
    tls = scheme == "https"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Origin(tls, parts.hostname, port or (443 if tls else 80)), target


def base_origin(url: str) -> Origin:
    """The origin of a transport's ``url`` argument, which must not have a path or query.

    >>> base_origin("localhost:8000").url
    'http://localhost:8000'
    """
    origin, path = parse_origin(url)
    if path != "/":
        raise InvalidInputError(
            f"the transport URL must not have a path or query ({url!r}); "
            "put base paths in the request target",
            value=url,
        )
    return origin


# -- TLS and connecting ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TLSConfig:
    """The TLS arguments of the transports (all but a ready ``ssl_context``).

    Certificate and host name verification are on unless ``verify=False``. ``ca_file`` /
    ``ca_dir`` replace the system trust store; ``cert_file`` (+ ``key_file``) is the client
    certificate for mutual TLS.

    >>> TLSConfig().context().verify_mode == ssl.CERT_REQUIRED
    True
    """

    verify: bool = True
    ca_file: StrPath | None = None
    ca_dir: StrPath | None = None
    cert_file: StrPath | None = None
    key_file: StrPath | None = None
    key_password: str | None = None

    def context(self, alpn: Sequence[str] = ("http/1.1",)) -> ssl.SSLContext:
        """Build the client TLS context, offering the ``alpn`` protocols.

        A file that is not PEM raises :class:`InvalidInputError` naming it (its ``value``),
        not OpenSSL's "PEM lib".
        """
        if self.ca_file is not None or self.ca_dir is not None:
            try:
                ctx = ssl.create_default_context(cafile=self.ca_file, capath=self.ca_dir)
            except OSError as exc:  # ssl.SSLError included
                # Loaded again on its own, to say which file and why (raises).
                load_ca(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), self.ca_file, self.ca_dir)
                raise InvalidInputError(f"cannot set up TLS: {exc}") from exc
        else:
            ctx = ssl.create_default_context()
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file is not None:
            load_cert_chain(ctx, self.cert_file, self.key_file, self.key_password)
        ctx.set_alpn_protocols(list(alpn))
        return ctx


def end_orphaned(transport: asyncio.BaseTransport | None) -> None:
    """End the TCP connection of an asyncio ``transport`` whose event loop is closed.

    asyncio closes a transport only through its loop, so once the loop has ended without the
    connection being closed, the most that can be done is to shut the socket down: the peer
    sees the connection end, and the descriptor goes with the garbage collector.
    """
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        # uvloop's socket refuses shutdown() (TypeError), but uvloop closes its transports
        # itself when its loop closes.
        with contextlib.suppress(OSError, TypeError):
            sock.shutdown(socket.SHUT_RDWR)


def connect_error(exc: Exception, origin: Origin, *, handshake: bool = False) -> KServeError:
    """The error for a failed connect to ``origin`` (the caller chains it ``from exc``).

    ``handshake``: the TCP connection stood and the TLS handshake on it failed. Timeouts
    become :class:`DeadlineExceededError`, anything else :class:`TransportError`; all are
    ``unprocessed`` (no request byte was sent).
    """
    url = origin.url
    # asyncio.TimeoutError is TimeoutError from Python 3.11 on, its own class before.
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        if handshake:
            return DeadlineExceededError(
                "timed out in the TLS handshake", url=url, unprocessed=True
            )
        return DeadlineExceededError(f"timed out connecting to {url}", unprocessed=True)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TransportError(
            f"TLS certificate verification failed: {exc.verify_message or exc}",
            url=url,
            unprocessed=True,
        )
    if handshake or isinstance(exc, ssl.SSLError):
        return TransportError(f"TLS handshake failed: {exc}", url=url, unprocessed=True)
    if isinstance(exc, socket.gaierror):
        return TransportError(
            f"cannot resolve host {origin.host!r}: {exc.strerror}", url=url, unprocessed=True
        )
    reason = exc.strerror if isinstance(exc, OSError) else None
    return TransportError(f"cannot connect: {reason or exc}", url=url, unprocessed=True)


# -- closing -----------------------------------------------------------------------------------

_Self = TypeVar("_Self")


class ClosesOnExit:
    """``with transport:`` closes it at the end (``close()`` is the subclass's)."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClosesOnExit:
    """``async with transport:`` closes it at the end (``aclose()`` is the subclass's)."""

    __slots__ = ()

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# -- the I/O-free part of the HTTP/1.1 transports ----------------------------------------------

_Conn = TypeVar("_Conn")


class OriginPool(Generic[_Conn]):
    """Connections to one origin, at most ``limit`` open at once: what the sync and asyncio
    pools share; each keeps its own idle list and waiting."""

    __slots__ = ("limit", "origin")

    def __init__(self, origin: Origin, limit: int) -> None:
        self.origin = origin
        self.limit = limit

    def release(self, conn: _Conn) -> None:
        """Take back ``conn`` after a complete response: kept for the next request when it may
        carry one, else closed."""
        raise NotImplementedError

    def discard(self, conn: _Conn | None) -> None:
        """Close ``conn`` (if any) and free its place in the pool."""
        raise NotImplementedError


_Pool = TypeVar("_Pool", bound=OriginPool[Any])


class PooledTransport(Generic[_Pool]):
    """The arguments, pools and routing of the HTTP/1.1 transports, and the request head and
    complete response around their exchange; the subclasses connect, send and receive.

    The arguments are documented on :class:`~kserve_v2.transport.HTTPTransport`.
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
        # The context is built for the first https origin, so that plain-http users never load
        # a trust store.
        self._tls = TLSConfig(verify, ca_file, ca_dir, cert_file, key_file, key_password)
        self._pools: dict[tuple[bool, str, int], _Pool] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._pool: _Pool | None = None
        if url is not None:
            self._pool = self._get_pool(base_origin(url))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.origin or 'no default origin'}>"

    @property
    def origin(self) -> str | None:
        """Where origin-form targets go (``http://host:port``); ``None`` without a ``url``."""
        return self._pool.origin.url if self._pool is not None else None

    def _new_pool(self, origin: Origin) -> _Pool:
        raise NotImplementedError

    def _get_pool(self, origin: Origin) -> _Pool:
        key = origin.key()
        with self._lock:
            if self._closed:
                raise TransportError("the transport is closed", url=origin.url)
            pool = self._pools.get(key)
            if pool is None:
                self._tls_context(origin)  # a TLS misconfiguration shows before any request
                pool = self._pools[key] = self._new_pool(origin)
            return pool

    def _tls_context(self, origin: Origin) -> ssl.SSLContext | None:
        """The TLS context for connections to ``origin`` (None: plain TCP)."""
        if not origin.tls:
            return None
        ctx = self._ssl_context
        if ctx is None:
            ctx = self._ssl_context = self._tls.context()
        return ctx

    def _route(self, target: str) -> tuple[_Pool, str]:
        """The pool for a request target and the target to send (origin-form)."""
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

    def _start(
        self, request: HTTPRequest, now: float
    ) -> tuple[_Pool, OutgoingRequest, float | None, float | None]:
        """The pool, bytes to send, deadline and timeout of ``request`` (``now``: the caller's
        clock)."""
        timeout = self._timeout if request.timeout is None else request.timeout
        target = request.target
        pool = self._pool
        if pool is None or target[:1] != "/":
            pool, target = self._route(target)
        method = request.method
        body = request.body
        length = body_length(body) if body else 0
        head = serialize_head(method, target, pool.origin.host_header, request.headers, length)
        # deadline_after(), inlined: this runs for every request.
        deadline = None if timeout is None or timeout == math.inf else now + timeout
        safe = method in RETRY_SAFE_METHODS
        return pool, (head, body, length, method == "HEAD", safe), deadline, timeout

    def _finish(self, pool: _Pool, conn: Any, parser: ResponseParser) -> HTTPResponse:
        """The complete response ``parser`` holds: ``conn`` goes back to ``pool`` first, then
        the body is decompressed (within ``max_response_size``)."""
        status = parser.status
        headers = parser.headers
        reason = parser.reason
        body = parser.body
        # A pooled connection must not keep the last (maybe huge) body alive until reused.
        parser.body = bytearray()
        pool.release(conn)
        encoding = headers.get("content-encoding")
        if encoding is not None:
            body = decode_body(body, encoding, self._max_response_size)
        return HTTPResponse(status, headers, body, reason)


class PooledStreamingResponse(Generic[_Conn]):
    """A response being received on a pooled connection: its head, its body decoded as it
    comes (:class:`StreamedBody`), and the connection, handed back to its pool once."""

    __slots__ = ("_body", "_conn", "_parser", "_pool", "_timeout", "headers", "reason", "status")

    def __init__(
        self,
        pool: OriginPool[_Conn],
        conn: _Conn,
        parser: ResponseParser,
        timeout: float | None,
    ) -> None:
        self.status: int = parser.status
        self.headers: Mapping[str, str] = parser.headers
        self.reason: str = parser.reason
        self._parser = parser
        self._body = StreamedBody(parser)
        self._pool: OriginPool[_Conn] | None = pool
        self._conn = conn
        self._timeout = timeout

    def _check_open(self) -> None:
        if self._pool is None:
            raise TransportError("the streamed response is closed")

    def close(self) -> None:
        """Hand the connection back to its pool, or close it when the body was not read to the
        end. Leaving the ``stream()`` / ``astream()`` block does it; later calls do nothing."""
        pool = self._pool
        if pool is not None:
            self._pool = None
            if self._parser.done:
                pool.release(self._conn)
            else:
                pool.discard(self._conn)
