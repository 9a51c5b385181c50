"""The default synchronous transport: keep-alive HTTP/1.1 on plain sockets and ``ssl``.

Why not ``http.client`` or urllib3: both build the body with extra copies, parse headers through
``email``, and cost several times the CPU per small request. This transport keeps the hot path
to one ``sendmsg`` (head and body buffers as one iovec, nothing joined) and usually one
``recv_into``, with the response parsed by the shared sans-IO :mod:`kserve_v2.http1` parser.
Everything that is not I/O (arguments, pools per origin, request heads, responses, errors) is
shared with the asyncio transport (:mod:`.sockets`).
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from time import monotonic

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    TransportError,
)
from kserve_v2.http1 import NoResponse, OutgoingRequest, ResponseParser
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.transport.sockets import (
    CONNECTION_LOST,
    HAS_SENDMSG,
    IOV_MAX,
    ClosesOnExit,
    Origin,
    OriginPool,
    PooledStreamingResponse,
    PooledTransport,
    connect_error,
    connect_timeout,
    deadline_after,
    pool_timeout_error,
    readable_check,
    sendmsg_rest,
)

__all__ = ["HTTPTransport"]


# TLS: bodies up to this size are joined with the head into one TLS record write; larger
# buffers are sent one by one, in slices so that the request deadline is checked between them.
_TLS_COALESCE = 16 * 1024
_TLS_SLICE = 1024 * 1024
# A socket timeout is only re-armed when it drifted this far from the time actually left:
# settimeout() is a syscall, and re-arming it before every send/recv would double their number.
_TIMEOUT_SLACK = 0.002
_KERNEL_TIMEOUTS = sys.platform.startswith("linux") and hasattr(socket, "SO_RCVTIMEO")
_NO_TIMEVAL = struct.pack("ll", 0, 0)


class _Connection:
    __slots__ = (
        "kernel_timeouts",
        "parser",
        "rcv_timeout",
        "readable",
        "reused",
        "snd_timeout",
        "sock",
        "tls",
    )

    def __init__(
        self,
        sock: socket.socket,
        tls: bool,
        timeout: float | None,
        max_head: int,
        max_body: int | None,
        grpc_url: str | None = None,
    ):
        self.sock = sock
        self.tls = tls
        self.parser = ResponseParser(max_head, max_body, grpc_url=grpc_url)
        self.reused = False
        self.readable = readable_check(sock.fileno())
        # Plain sockets on Linux stay in blocking mode with SO_RCVTIMEO/SO_SNDTIMEO bounding
        # each call: Python's own timeout mode polls before every send and recv, which doubles
        # the syscalls of a small request. TLS sockets need Python's mode (a blocking SSL read
        # retries forever on EAGAIN).
        self.kernel_timeouts = _KERNEL_TIMEOUTS and not tls
        if self.kernel_timeouts:
            sock.settimeout(None)
            timeout = None  # the kernel timeouts start unset
        # The timeouts last given to the socket (None: none).
        self.rcv_timeout = self.snd_timeout = timeout

    def arm(self, deadline: float | None, sending: bool) -> None:
        """Bound the next send/recv call by the time left before ``deadline``.

        The socket is only re-armed when its timeout drifted more than a little from the time
        left: every re-arm is a syscall.
        """
        current = self.snd_timeout if sending else self.rcv_timeout
        if deadline is None:
            if current is None:
                return
            remaining = None
        else:
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise DeadlineExceededError("request timed out")
            if current is not None and -_TIMEOUT_SLACK <= current - remaining <= _TIMEOUT_SLACK:
                return
        if self.kernel_timeouts:
            if remaining is None:
                value = _NO_TIMEVAL
            else:
                sec = int(remaining)
                value = struct.pack("ll", sec, max(1, int((remaining - sec) * 1e6)))
            if sending:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
                self.snd_timeout = remaining
            else:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
                self.rcv_timeout = remaining
        else:
            self.sock.settimeout(remaining)
            self.rcv_timeout = self.snd_timeout = remaining

    def close(self) -> None:
        # Closing an already broken socket can only fail in ways nobody can act on.
        with suppress(OSError):
            self.sock.close()

    def looks_dead(self) -> bool:
        """Whether an idle connection was closed (or written to) by the server."""
        sock = self.sock
        if self.tls and isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        return self.readable()

    # -- one exchange ------------------------------------------------------------------------

    def roundtrip(self, outgoing: OutgoingRequest, deadline: float | None, stream: bool) -> None:
        """Send the request and receive its response (its head only when ``stream``)."""
        head, body, length, head_request, _ = outgoing
        parser = self.parser
        parser.start(head_request=head_request, stream=stream)
        try:
            self._send(head, body, length, deadline)
        except CONNECTION_LOST as exc:
            # The server may have answered early (e.g. 413) and closed: read what it sent.
            try:
                self.receive(deadline, stream)
            except NoResponse:
                if self.reused:
                    # The server cannot have had the whole request: it may be sent again.
                    raise NoResponse(sent=False) from exc
                raise TransportError(f"connection lost while sending the request: {exc}") from exc
            # Errors after some response bytes propagate as they are: never retried.
            parser.keep_alive = False  # the request was not sent whole
            return
        self.receive(deadline, stream)

    def _send(
        self,
        head: bytes,
        body: Sequence[BytesLike],
        length: int,
        deadline: float | None,
    ) -> None:
        self.arm(deadline, True)
        sock = self.sock
        try:
            if not body:
                sock.sendall(head)
            elif self.tls or not HAS_SENDMSG:
                if length <= _TLS_COALESCE:
                    # One TLS record instead of one per buffer; only small bodies are joined.
                    sock.sendall(head + b"".join(body))
                else:
                    sock.sendall(head)
                    for part in body:
                        self._send_sliced(part, deadline)
            else:
                total = len(head) + length
                sent = sock.sendmsg([head, *body]) if len(body) < IOV_MAX else 0
                if sent != total:
                    sendmsg_rest(
                        sock.sendmsg, [head, *body], sent, lambda: self.arm(deadline, True)
                    )
        except (TimeoutError, BlockingIOError) as exc:  # BlockingIOError: SO_SNDTIMEO expired
            raise DeadlineExceededError("request timed out while sending") from exc
        except (TypeError, BufferError) as exc:
            raise InvalidInputError(
                f"request body parts must be contiguous bytes-like objects: {exc}"
            ) from exc
        except CONNECTION_LOST:
            raise
        except (OSError, ssl.SSLError) as exc:
            raise TransportError(f"cannot send the request: {exc}") from exc

    def _send_sliced(self, part: BytesLike, deadline: float | None) -> None:
        with memoryview(part) as view, view.cast("B") as data:
            for offset in range(0, len(data), _TLS_SLICE):
                self.arm(deadline, True)
                self.sock.sendall(data[offset : offset + _TLS_SLICE])

    def receive(self, deadline: float | None, head_only: bool) -> None:
        """Receive until the response is complete (``head_only``: until its head is parsed)."""
        parser = self.parser
        recv_into = self.sock.recv_into
        arm = self.arm
        clean = True  # an end of data is a proper one (see the SSLEOFError case)
        while True:
            arm(deadline, False)
            try:
                n = recv_into(parser.get_buffer())
            except (TimeoutError, BlockingIOError) as exc:  # BlockingIOError: SO_RCVTIMEO
                raise DeadlineExceededError("request timed out waiting for the response") from exc
            except ssl.SSLEOFError:
                # TLS ended without close_notify (the socket does not hide it, see _connect):
                # the end of data, an improper one.
                n, clean = 0, False
            except CONNECTION_LOST as exc:
                if not parser.got_bytes:
                    raise NoResponse from exc
                raise TransportError(f"connection lost while receiving: {exc}") from exc
            except (OSError, ssl.SSLError) as exc:
                raise TransportError(f"cannot receive the response: {exc}") from exc
            if n:
                if parser.buffer_updated(n) or (head_only and parser.head_done):
                    return
            else:
                if not parser.got_bytes:
                    raise NoResponse
                parser.eof_received(clean)
                return


class _Pool(OriginPool[_Connection]):
    """Connections to one origin, at most ``limit`` open at once."""

    __slots__ = ("_closed", "_cond", "_count", "_idle", "_lock", "_waiting")

    def __init__(self, origin: Origin, limit: int) -> None:
        super().__init__(origin, limit)
        # Entered as the bare lock (the condition's own): Condition.__enter__/__exit__ are
        # Python functions, two extra calls per checkout and checkin.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle: list[_Connection] = []
        self._count = 0
        self._waiting = 0
        self._closed = False

    def checkout(self, deadline: float | None) -> _Connection | None:
        """Return an idle connection, or ``None`` when the caller may open a new one."""
        cond = self._cond
        with self._lock:
            while True:
                if self._closed:
                    raise TransportError("the transport is closed", url=self.origin.url)
                if self._idle:
                    return self._idle.pop()  # LIFO: the warmest connection
                if self._count < self.limit:
                    self._count += 1
                    return None
                if deadline is None:
                    remaining = None
                else:
                    remaining = deadline - monotonic()
                    if remaining <= 0:
                        raise pool_timeout_error(self.limit, self.origin.url)
                self._waiting += 1
                try:
                    cond.wait(remaining)
                finally:
                    self._waiting -= 1

    def release(self, conn: _Connection) -> None:
        if not conn.parser.keep_alive:
            self.discard(conn)
            return
        with self._lock:
            if self._closed:
                self._count -= 1
                conn.close()
                return
            conn.reused = True
            self._idle.append(conn)
            if self._waiting:
                self._cond.notify()

    def discard(self, conn: _Connection | None) -> None:
        if conn is not None:
            conn.close()
        with self._lock:
            self._count -= 1
            if self._waiting:
                self._cond.notify()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            conn.close()


class HTTPTransport(PooledTransport[_Pool], ClosesOnExit):
    """The default synchronous HTTP/1.1 transport: stdlib sockets, keep-alive, pooled.

    One instance is meant to be shared by all threads of a program: it keeps up to
    ``max_connections`` keep-alive connections per (host, port) and makes a request wait (within
    its timeout) for a free one when all are busy.

    Args:
        url: the server, ``http://host:port`` or ``https://host:port`` (a bare ``host:port``
            means http). Requests with an origin-form target (``/v2/...``) go there; a request
            whose target is an absolute URL goes to that URL's origin instead. Must not carry a
            path: base paths belong in the request target.
        timeout: default whole-request timeout in seconds (``None``: wait forever), used when
            ``HTTPRequest.timeout`` is ``None``. Covers waiting for a pooled connection,
            connecting, sending and receiving.
        connect_timeout: upper bound for establishing a connection (TCP + TLS handshake).
        max_connections: connections per (host, port).
        verify: verify the server certificate and host name (https). Keep it on.
        ca_file, ca_dir: trust these CAs instead of the system store.
        cert_file, key_file, key_password: client certificate for mutual TLS.
        ssl_context: a ready :class:`ssl.SSLContext`; replaces all the TLS options above.
        server_hostname: host name for SNI and certificate checks, when it differs from the
            host connected to (e.g. connecting by IP address).
        max_header_size: largest response head accepted (protects against hostile servers).
        max_response_size: largest response body accepted, in bytes, as received and after
            decompression (``None``: no limit). A larger one raises
            :class:`~kserve_v2.errors.ProtocolError`, before it is allocated when its
            ``Content-Length`` says so, and a compressed one is never inflated beyond it.
            Streamed bodies (:meth:`stream`) are not limited.

    Example::

        from kserve_v2.transport import HTTPRequest, HTTPTransport

        with HTTPTransport("http://localhost:8000", timeout=10) as transport:
            response = transport.handle_request(HTTPRequest("GET", "/v2/health/ready"))
            assert response.status == 200
    """

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        """Send ``request`` and return the complete (decompressed) response."""
        pool, outgoing, deadline, _ = self._start(request, monotonic())
        conn = self._exchange(pool, outgoing, deadline, False)
        return self._finish(pool, conn, conn.parser)

    @contextmanager
    def stream(self, request: HTTPRequest) -> Iterator[_StreamingResponse]:
        """Send ``request`` and give its response with a body to be read incrementally.

        The request timeout covers connecting, sending and receiving the response head; after
        that each read of the body waits at most that long for new bytes (a stream of
        Server-Sent Events may last longer than any sensible whole-request timeout).

        Example::

            with transport.stream(HTTPRequest("POST", "/v2/models/m/generate_stream",
                                              body=[b"{}"])) as response:
                for piece in response.iter_bytes():
                    print(piece)
        """
        pool, outgoing, deadline, timeout = self._start(request, monotonic())
        conn = self._exchange(pool, outgoing, deadline, True)
        response = _StreamingResponse(pool, conn, conn.parser, timeout)
        try:
            yield response
        finally:
            response.close()

    def close(self) -> None:
        """Close all pooled connections. Connections in use are closed when they come back."""
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
        for pool in pools:
            pool.close()

    # -- internals ---------------------------------------------------------------------------

    def _new_pool(self, origin: Origin) -> _Pool:
        return _Pool(origin, self._max_connections)

    def _connect(self, pool: _Pool, deadline: float | None) -> _Connection:
        origin = pool.origin
        timeout = connect_timeout(self._connect_timeout, deadline, monotonic(), url=origin.url)
        try:
            sock = socket.create_connection((origin.host, origin.port), timeout)
        except OSError as exc:
            raise connect_error(exc, origin) from exc
        try:
            # Small requests must not wait for Nagle's algorithm to coalesce them.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ctx = self._tls_context(origin)
            if ctx is not None:
                # Not suppress_ragged_eofs: a TLS connection that ends without close_notify
                # must be told from one that ends properly (see ResponseParser.eof_received).
                sock = ctx.wrap_socket(
                    sock,
                    server_hostname=self._server_hostname or origin.host,
                    suppress_ragged_eofs=False,
                )
        except OSError as exc:  # ssl.SSLError included
            sock.close()
            raise connect_error(exc, origin, handshake=True) from exc
        return _Connection(
            sock,
            origin.tls,
            timeout,
            self._max_header_size,
            self._max_response_size,
            origin.grpc_url,
        )

    def _exchange(
        self,
        pool: _Pool,
        outgoing: OutgoingRequest,
        deadline: float | None,
        stream: bool,
    ) -> _Connection:
        """Send the request and receive the response (or only its head when ``stream``).

        Returns the connection, for the caller to release to ``pool``. A pooled connection
        the server closed while it was idle is replaced before anything is written to it. One
        that closes without a response byte after the request went out is replaced once, for
        requests that may be sent again (:meth:`NoResponse.check_retry`).
        """
        conn = pool.checkout(deadline)
        try:
            if conn is not None and conn.looks_dead():
                conn.close()
                conn = None
            while True:
                if conn is None:
                    conn = self._connect(pool, deadline)
                try:
                    conn.roundtrip(outgoing, deadline, stream)
                    return conn
                except NoResponse as exc:
                    exc.check_retry(conn.reused, outgoing[4], pool.origin.url)
                # A keep-alive connection the server closed as the request went out: one
                # fresh try, for a request that can do no harm twice.
                conn.close()
                conn = None
        except BaseException:
            pool.discard(conn)
            raise


class _StreamingResponse(PooledStreamingResponse[_Connection]):
    """A response being received; returned by :meth:`HTTPTransport.stream`."""

    __slots__ = ()

    def iter_bytes(self) -> Iterator[bytes]:
        """Yield the (decompressed) body in pieces as they arrive."""
        body = self._body
        while True:
            self._check_open()
            yield from body.take()
            if body.finished:
                return
            self._conn.receive(deadline_after(self._timeout, monotonic()), True)

    def read(self) -> bytes:
        """Read the rest of the body."""
        return b"".join(self.iter_bytes())
