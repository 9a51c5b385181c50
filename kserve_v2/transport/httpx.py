"""Optional transports on top of `httpx <https://www.python-httpx.org>`_ (extra ``httpx``).

Use them to reuse an ``httpx.Client`` / ``httpx.AsyncClient`` the application already
configures (proxies, auth, event hooks, HTTP/2, mocked transports in tests). The default
transports (:mod:`.stdlib`, :mod:`.aio`) cost much less CPU per request.

httpx is imported when one of these classes is instantiated, never at module import.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from time import monotonic
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from kserve_v2.arguments import check_max_response_size
from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ProtocolError,
    TransportError,
)
from kserve_v2.http1 import (
    body_length,
    body_too_large,
    byte_views,
    decode_body,
    speaks_http2_error,
)
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.transport.sockets import (
    AsyncClosesOnExit,
    ClosesOnExit,
    StrPath,
    TLSConfig,
    base_origin,
    deadline_after,
    parse_origin,
)

if TYPE_CHECKING:
    import httpx as _httpx

__all__ = ["AsyncHTTPXTransport", "HTTPXTransport"]


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise MissingDependencyError("HTTPX transport", "httpx", "httpx") from exc
    return httpx


def _translate(exc: Exception, url: str | None) -> KServeError:
    """Map an httpx exception, or an OSError httpcore does not wrap (e.g. a TLS alert on anyio
    TLS streams), onto the kserve-v2 error tree (the caller chains ``from exc``)."""
    import httpx

    message = str(exc) or type(exc).__name__
    if not isinstance(exc, httpx.HTTPError):
        return TransportError(f"{type(exc).__name__}: {exc}", url=url)
    # A failed connect sent nothing: the request is unprocessed.
    if isinstance(exc, httpx.TimeoutException):
        return DeadlineExceededError(
            f"request timed out ({type(exc).__name__})",
            url=url,
            unprocessed=isinstance(exc, httpx.ConnectTimeout),
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        if "without sending a response" in message:  # "Server disconnected without ..."
            return TransportError(message, url=url)
        if message == "illegal request line" and url is not None:
            # h11's words for an answer whose first byte is a control character, which is
            # how an HTTP/2 server's first frame (a gRPC port's SETTINGS) starts; h11 does
            # not hand over the bytes to look closer.
            return speaks_http2_error(parse_origin(url)[0].grpc_url)
        return ProtocolError(message)
    if isinstance(exc, httpx.DecodingError):
        return ProtocolError(f"cannot decode the response body: {message}")
    if isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return InvalidInputError(message)
    return TransportError(message, url=url, unprocessed=isinstance(exc, httpx.ConnectError))


@contextmanager
def _translated(url: str | None) -> Iterator[None]:
    """Raise an httpx error, or an OSError httpcore does not wrap, that ends the ``with`` block
    as its kserve-v2 error (:func:`_translate`)."""
    try:
        yield
    except Exception as exc:
        # The package's own errors pass (DeadlineExceededError is also a TimeoutError).
        if not isinstance(exc, KServeError) and isinstance(
            exc, (OSError, _import_httpx().HTTPError)
        ):
            raise _translate(exc, url) from exc
        raise


def _finite(timeout: float | None) -> float | None:
    # httpx waits "None" seconds for ever; math.inf overflows its socket calls.
    return None if timeout == math.inf else timeout


class _BoundedBody:
    """A body read piece by piece as received (undecoded) and refused once it exceeds
    ``limit`` bytes; one announced as larger (Content-Length) is refused before any of it is
    read. :meth:`decoded` then undoes its Content-Encoding within the same limit: httpx would
    inflate each received piece whole, about a thousandfold for a "decompression bomb"."""

    __slots__ = ("_encoding", "_limit", "data")

    def __init__(self, response: Any, limit: int) -> None:
        announced = response.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > limit:
            raise body_too_large(limit, int(announced))
        self._limit = limit
        self._encoding = response.headers.get("content-encoding")
        self.data = bytearray()

    def add(self, piece: bytes) -> None:
        self.data += piece
        if len(self.data) > self._limit:
            raise body_too_large(self._limit)

    def decoded(self) -> bytearray:
        if self._encoding is None:
            return self.data
        return decode_body(self.data, self._encoding, self._limit)


def _check_deadline(deadline: float | None, url: str) -> None:
    """httpx's timeouts bound each read, not the exchange: a server that trickles the body
    a byte at a time is stopped here, between pieces."""
    if deadline is not None and monotonic() > deadline:
        raise DeadlineExceededError("request timed out while receiving the body", url=url)


_Client = TypeVar("_Client")


class _HTTPXBase(Generic[_Client]):
    """What the sync and async httpx transports share: arguments, the client they own or
    were given, request options and responses."""

    #: The httpx class of the client the transport creates.
    _client_class: ClassVar[str]
    #: Whether requests past max_connections wait for a slot in the transport (see _slots).
    _queue_requests: ClassVar[bool] = False

    def __init__(
        self,
        url: str | None = None,
        *,
        client: _Client | None = None,
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
        max_response_size: int | None = None,
    ) -> None:
        httpx = self._httpx = _import_httpx()
        self._max_response_size = check_max_response_size(max_response_size)
        self._base = base_origin(url).url if url is not None else None
        self._extensions = {"sni_hostname": server_hostname} if server_hostname else None
        self._owns_client = client is None
        # httpcore 1.0.x's sync pool can close a connection it has already handed to a request
        # queued for one (encode/httpcore#1110: "Bad file descriptor" when more threads than
        # connections share the client): the sync transport makes requests past
        # max_connections wait here instead.
        self._slots = (
            threading.BoundedSemaphore(max_connections)
            if client is None and self._queue_requests
            else None
        )
        if client is not None:
            self._client: _Client = client
            return
        if ssl_context is None and (
            not verify or ca_file or ca_dir or cert_file or (url or "").startswith("https")
        ):
            tls = TLSConfig(verify, ca_file, ca_dir, cert_file, key_file, key_password)
            ssl_context = tls.context()
        self._client = getattr(httpx, self._client_class)(
            timeout=httpx.Timeout(_finite(timeout), connect=_finite(connect_timeout)),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            verify=ssl_context if ssl_context is not None else True,
            # httpx asks for gzip/deflate/br by default; the server should compress only when
            # the caller asks for it (the client's accept_compression sets this per request).
            headers={"Accept-Encoding": "identity"},
        )

    @property
    def client(self) -> _Client:
        """The underlying ``httpx.Client`` / ``httpx.AsyncClient``."""
        return self._client

    @property
    def origin(self) -> str | None:
        """Where origin-form targets go: ``url``, else the httpx client's ``base_url`` (which
        may have a path), else ``None``."""
        if self._base is not None:
            return self._base
        client: Any = self._client
        base = str(client.base_url).rstrip("/")
        return base or None

    def _prepare(self, request: HTTPRequest) -> tuple[str, dict[str, Any]]:
        """The URL and the keyword arguments (headers, content, timeout, extensions) for
        ``client.request`` / ``client.stream``."""
        client: Any = self._client
        if client.is_closed:  # httpx would raise a bare RuntimeError
            raise TransportError("the transport is closed", url=self._base)
        target = request.target
        # Otherwise absolute, or relative to the client's own base_url.
        url = self._base + target if target[:1] == "/" and self._base is not None else target
        headers = [(k, v) for k, v in request.headers if k.lower() != "content-length"]
        body = request.body
        content: Any = None
        if body:
            headers.append(("Content-Length", str(body_length(body))))
            # httpx/h11 count the body with len(): it must be bytes, not typed elements.
            single = len(body) == 1 and type(body[0]) is bytes
            content = body[0] if single else byte_views(body)
        elif request.method in ("POST", "PUT", "PATCH"):
            content = b""
        options = {
            "headers": headers,
            "content": content,
            "timeout": self._timeout(request.timeout),
            "extensions": self._extensions,
        }
        return url, options

    def _timeout(self, timed: float | None) -> Any:
        if timed is None:
            return self._httpx.USE_CLIENT_DEFAULT
        # A bare number would replace every phase's timeout, the connect timeout included:
        # keep the client's (shorter) connect timeout, as the default transports do.
        client: Any = self._client
        connect = client.timeout.connect
        if timed == math.inf:
            return self._httpx.Timeout(None, connect=connect)
        if connect is None or connect > timed:
            connect = timed
        return self._httpx.Timeout(timed, connect=connect)

    def _total_timeout(self, request: HTTPRequest) -> float | None:
        """The whole call's timeout in seconds (None: none)."""
        if request.timeout is not None:
            return None if request.timeout == math.inf else request.timeout
        client: Any = self._client
        read = client.timeout.read
        return read if read is None or read != math.inf else None

    @staticmethod
    def _response(response: _httpx.Response, body: BytesLike) -> HTTPResponse:
        return HTTPResponse(
            response.status_code, dict(response.headers.items()), body, response.reason_phrase
        )


class _HTTPXStreamingBase:
    """The head of a streamed httpx response, and the response to read the body from."""

    def __init__(self, response: _httpx.Response, url: str) -> None:
        self._response = response
        self._url = url
        self.status: int = response.status_code
        self.headers: Mapping[str, str] = dict(response.headers.items())
        self.reason: str = response.reason_phrase


class HTTPXTransport(_HTTPXBase["_httpx.Client"], ClosesOnExit):
    """Synchronous transport over an ``httpx.Client``.

    Args:
        url: default origin (``http[s]://host:port``) for origin-form request targets. May be
            omitted when ``client`` has a ``base_url``.
        client: an ``httpx.Client`` to use; it is *not* closed by :meth:`close`. Without one,
            a client is created from the remaining arguments (same meaning as for
            :class:`~kserve_v2.transport.HTTPTransport`) and owned by the transport.
        server_hostname: TLS SNI / certificate host name (httpx ``sni_hostname`` extension).
        max_response_size: largest response body accepted, as announced and after
            decompression (``None``: no limit); a larger one raises
            :class:`~kserve_v2.errors.ProtocolError`. With a limit, the body is received
            as sent and decompressed by this package within the limit (httpx would inflate
            each received piece whole: a thousandfold for a "decompression bomb").

    Timeouts: ``HTTPRequest.timeout`` becomes httpx's per-phase timeout (connect, each read,
    each write, pool wait), and bounds the whole call as well: the asyncio transport cancels
    the exchange at the deadline; the sync one checks it between received body pieces, so a
    server that trickles the response *head* a byte at a time still holds a sync call past
    its timeout (each read gets its byte in time). httpx's own behaviours that the default
    transports do not share: a response head must fit in 16 KiB (h11's limit), garbage in
    place of a status line is only refused at the deadline, and bytes beyond a response's
    Content-Length are taken for the start of the next response on that connection (whose
    request then fails with :class:`~kserve_v2.errors.ProtocolError`).

    Example::

        import httpx
        from kserve_v2.transport.httpx import HTTPXTransport

        transport = HTTPXTransport(client=httpx.Client(base_url="http://localhost:8000"))
    """

    _client_class = "Client"
    _queue_requests = True

    @contextmanager
    def _slot(self, request: HTTPRequest, url: str) -> Iterator[None]:
        """Hold one of the ``max_connections`` request slots (owned clients only)."""
        slots = self._slots
        if slots is None:
            yield
            return
        wait = request.timeout if request.timeout is not None else self._client.timeout.pool
        if not slots.acquire(timeout=wait):
            raise DeadlineExceededError("timed out waiting for a free connection", url=url)
        try:
            yield
        finally:
            slots.release()

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        """Send ``request`` and return the complete (decompressed) response."""
        url, options = self._prepare(request)
        limit = self._max_response_size
        deadline = deadline_after(self._total_timeout(request), monotonic())
        with (
            self._slot(request, url),
            _translated(url),
            self._client.stream(request.method, url, **options) as response,
        ):
            if limit is None:
                chunks = []
                for piece in response.iter_bytes():
                    _check_deadline(deadline, url)
                    chunks.append(piece)
                return self._response(response, b"".join(chunks))
            bounded = _BoundedBody(response, limit)
            for piece in response.iter_raw():
                _check_deadline(deadline, url)
                bounded.add(piece)
            return self._response(response, bounded.decoded())

    @contextmanager
    def stream(self, request: HTTPRequest) -> Iterator[_HTTPXStreamingResponse]:
        """Send ``request``; give its response with a body to be read incrementally."""
        url, options = self._prepare(request)
        with self._slot(request, url):
            opener = self._client.stream(request.method, url, **options)
            with _translated(url):
                response = opener.__enter__()
            try:
                yield _HTTPXStreamingResponse(response, url)
            finally:
                opener.__exit__(None, None, None)

    def close(self) -> None:
        """Close the client if this transport created it."""
        if self._owns_client:
            self._client.close()


class _HTTPXStreamingResponse(_HTTPXStreamingBase):
    def iter_bytes(self) -> Iterator[bytes]:
        """Yield the (decompressed) body in pieces as they arrive."""
        with _translated(self._url):
            yield from self._response.iter_bytes()

    def read(self) -> bytes:
        """Read the rest of the body."""
        return b"".join(self.iter_bytes())


async def _aiter(parts: list[BytesLike]) -> AsyncIterator[BytesLike]:
    for part in parts:
        yield part


class AsyncHTTPXTransport(_HTTPXBase["_httpx.AsyncClient"], AsyncClosesOnExit):
    """asyncio transport over an ``httpx.AsyncClient``; arguments as :class:`HTTPXTransport`.

    Example::

        import httpx
        from kserve_v2.transport.httpx import AsyncHTTPXTransport

        transport = AsyncHTTPXTransport("http://localhost:8000")
        ...
        await transport.aclose()
    """

    _client_class = "AsyncClient"

    def _aprepare(self, request: HTTPRequest) -> tuple[str, dict[str, Any]]:
        url, options = self._prepare(request)
        if isinstance(options["content"], list):
            options["content"] = _aiter(options["content"])  # AsyncClient refuses sync iterables
        return url, options

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        """Send ``request`` and return the complete (decompressed) response."""
        url, options = self._aprepare(request)
        timeout = self._total_timeout(request)
        with _translated(url):
            if timeout is None:
                return await self._exchange(request, url, options)
            # httpx's timeouts bound each read, not the exchange (a server trickling its
            # answer a byte at a time would hold the call for ever): the whole call is bounded.
            try:
                return await asyncio.wait_for(self._exchange(request, url, options), timeout)
            except asyncio.TimeoutError:
                raise DeadlineExceededError("request timed out", url=url) from None

    async def _exchange(
        self, request: HTTPRequest, url: str, options: dict[str, Any]
    ) -> HTTPResponse:
        limit = self._max_response_size
        if limit is None:
            response = await self._client.request(request.method, url, **options)
            return self._response(response, response.content)
        async with self._client.stream(request.method, url, **options) as response:
            bounded = _BoundedBody(response, limit)
            async for piece in response.aiter_raw():
                bounded.add(piece)
            return self._response(response, bounded.decoded())

    @asynccontextmanager
    async def astream(self, request: HTTPRequest) -> AsyncIterator[_AsyncHTTPXStreamingResponse]:
        """Send ``request``; give its response with a body to be read incrementally."""
        url, options = self._aprepare(request)
        opener = self._client.stream(request.method, url, **options)
        with _translated(url):
            response = await opener.__aenter__()
        try:
            yield _AsyncHTTPXStreamingResponse(response, url)
        finally:
            await opener.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close the client if this transport created it."""
        if self._owns_client:
            await self._client.aclose()


class _AsyncHTTPXStreamingResponse(_HTTPXStreamingBase):
    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Yield the (decompressed) body in pieces as they arrive."""
        with _translated(self._url):
            async for piece in self._response.aiter_bytes():
                yield piece

    async def aread(self) -> bytes:
        """Read the rest of the body."""
        return b"".join([piece async for piece in self.aiter_bytes()])
