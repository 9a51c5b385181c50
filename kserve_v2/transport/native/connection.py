"""The native transport's connections, and what its unary and streaming calls share.

* :class:`ChannelSettings`: what a channel's calls need of it, fixed when the channel is
  made (where and how to connect, the header encoder, message size limits) and the errors
  that name the channel. Channels hand it to their stream calls, which need nothing else of
  the channel.
* :func:`frame_message` and :func:`queue_data`: a request message as gRPC-framed buffers,
  and those buffers queued as DATA as far as the flow-control windows allow.
* :class:`SyncConnection`: a socket and its HTTP/2 state, used by one call at a time on the
  calling thread (no reader thread); :class:`AsyncConnection`: an ``asyncio.Protocol`` that
  multiplexes the concurrent calls of one event loop.
* :class:`CallNotStarted`: the signal that HTTP/2 says the server did not process a call,
  which may then be retried on a new connection.

Nothing here knows the channels: a channel pools these connections, a stream call owns (sync)
or shares (async) one.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import select
import socket
import ssl
import struct
import time
from collections.abc import Callable, Mapping
from typing import Final, cast

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
from kserve_v2.grpc.status import retry_pushback
from kserve_v2.h2.connection import (
    DataReceived,
    Event,
    GoAwayReceived,
    H2Connection,
    H2ConnectionError,
    HeadersReceived,
    PingAcknowledged,
    StreamReset,
)
from kserve_v2.h2.frames import ErrorCode
from kserve_v2.transport.sockets import (
    HAS_SENDMSG,
    IOV_MAX,
    TLSConfig,
    sendmsg_rest,
)

__all__ = [
    "AsyncConnection",
    "CallNotStarted",
    "ChannelSettings",
    "ConnectionClosed",
    "SyncConnection",
    "feed_response",
    "frame_message",
    "native_ssl_context",
    "open_unary",
    "queue_data",
    "reset_error",
]

_RECV_SIZE: Final = 256 * 1024
# Requests up to this size are joined with their 5-byte prefix into one DATA frame.
_JOIN_LIMIT: Final = 64 * 1024
# What a non-blocking read raises when nothing is there (TLS: no whole record yet).
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
# How long a connection that hit a protocol error tries to get its GOAWAY out, and then keeps
# reading so that closing does not reset the connection under it.
_GOODBYE_SEND: Final = 1.0
_GOODBYE_DRAIN: Final = 0.2
# What an asyncio connection may owe a server that does not read: bytes of the frames it
# answers the server with (PING and SETTINGS acknowledgements, window updates, resets; see
# H2Connection.replies_queued) written since its transport's buffer last held no more than
# _DRAINED. Beyond it the server is taken to have stopped reading and the connection is
# dropped: a server that floods PINGs without reading cannot grow our buffer without end.
# Request DATA is not counted: the server's flow-control windows bound it, and a large
# request to a busy server may sit in the buffer a long time.
_UNREAD_REPLIES_LIMIT: Final = 1 << 20
# A transport buffer this small counts as drained (asyncio's default high-water mark).
_DRAINED: Final = 64 * 1024
# How far an asyncio stream call's reader may fall behind (bytes of whole messages received
# and not yet read) before its stream's DATA stops going back to the flow-control windows:
# beyond it the server may send one stream window more, then waits for the reader.
_STREAM_BACKLOG: Final = 4 << 20
# How long an answer to a PING may take (grpcio's keepalive timeout default) when the channel
# sets no grpc.keepalive_timeout_ms.
_PING_TIMEOUT: Final = 20.0
# grpc.keepalive_time_ms at or above this means no keepalive PINGs (grpcio's "infinite").
_NO_KEEPALIVE_MS: Final = 2**31 - 1
# grpc.http2.max_pings_without_data when the channel sets none (grpcio's default).
_MAX_PINGS_WITHOUT_DATA: Final = 2


class CallNotStarted(Exception):
    """HTTP/2 says the server did not process the call: it refused the stream (RST_STREAM
    REFUSED_STREAM, or a stream id above GOAWAY's last-stream-id). The channel retries it
    once on a new connection; nothing else is ever sent twice (a pooled connection is
    checked before a request is written on it, see ``SyncConnection.usable``)."""


class ConnectionClosed(ConnectionResetError):
    """The server closed the connection (end of file)."""


def native_ssl_context(config: ChannelConfig) -> ssl.SSLContext:
    """The TLS context of a ``grpcs://`` channel: verification on, ALPN ``h2``."""
    tls = TLSConfig(ca_file=config.ca_file, cert_file=config.cert_file, key_file=config.key_file)
    return tls.context(alpn=("h2",))


def _option(config: ChannelConfig, name: str) -> int | None:
    """A non-negative integer channel option (grpcio's -1, "unlimited", is None)."""
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
    # _nbytes, inline (a request of a known form has five parts).
    size = sum([len(p) if type(p) is bytes else memoryview(p).nbytes for p in parts])
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


def queue_data(h2: H2Connection, stream_id: int, parts: list[BytesLike], end_stream: bool) -> bool:
    """Queue ``parts`` (taken from the front of the list) as DATA on ``stream_id`` until the
    flow-control window runs out. Returns whether some are left: the caller sends what is
    queued, waits for the window to open, and calls again. ``end_stream`` ends the stream with
    the last part."""
    while parts:
        part = parts[0]
        sent = h2.send_data(stream_id, part, end_stream=end_stream and len(parts) == 1)
        if sent == _nbytes(part):
            del parts[0]
            continue
        parts[0] = memoryview(part).cast("B")[sent:]
        return True
    return False


def open_unary(h2: H2Connection, block: bytes, parts: list[BytesLike]) -> int:
    """Open a unary call's stream; a request of one small part (the usual one) is queued
    with its headers and taken from ``parts``. The rest is for :func:`queue_data`."""
    if len(parts) == 1 and type(parts[0]) is bytes:
        stream_id, queued = h2.open_request(block, parts[0])
        if queued:
            parts.clear()
        return stream_id
    return h2.open_stream(block)


def reset_error(code: int, url: str | None) -> tuple[str, TransportError]:
    """The gRPC status name and the error of a call whose stream the server reset (gRPC's
    mapping of HTTP/2 error codes)."""
    if code == ErrorCode.CANCEL:
        status = "CANCELLED"
    elif code == ErrorCode.REFUSED_STREAM:
        status = "UNAVAILABLE"
    else:
        status = "INTERNAL"
    return status, TransportError(
        f"gRPC {status}: the server reset the stream ({ErrorCode.name_of(code)})",
        url=url,
        unprocessed=code == ErrorCode.REFUSED_STREAM,  # "did no work on it" (RFC 9113 8.7)
    )


class ChannelSettings:
    """What the calls of one channel need of it: the server's address, TLS, the request
    header encoder, message size limits, and the errors that name the channel.

    Example::

        settings = ChannelSettings(channel_config(parse_url("grpc://localhost:8001")), 10.0)
        block, parts = settings.unary_request(method, request, 5.0, (), None)
        conn = SyncConnection.open(settings, deadline)
        response = conn.unary(block, parts, deadline, settings.receive_limit)
    """

    __slots__ = (
        "config",
        "connect_timeout",
        "headers",
        "host",
        "http_url",
        "keepalive_max_pings",
        "keepalive_time",
        "keepalive_timeout",
        "keepalive_without_calls",
        "port",
        "receive_limit",
        "send_limit",
        "server_hostname",
        "ssl",
        "target",
        "url",
    )

    def __init__(self, config: ChannelConfig, connect_timeout: float | None) -> None:
        host, _, port = config.target.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidInputError(f"gRPC target {config.target!r} has no host:port")
        self.config = config
        self.target = config.target
        self.url = config.url
        self.host = host.strip("[]")
        self.port = int(port)
        self.connect_timeout = connect_timeout
        self.ssl = native_ssl_context(config) if config.secure else None
        self.server_hostname = config.server_hostname or self.host
        self.headers = RequestHeaders(
            scheme="https" if config.secure else "http", authority=config.target
        )
        #: The HTTP URL of the same host and port, suggested when it turns out to speak
        #: HTTP/1.1 (the client's URL names the server's HTTP port).
        self.http_url = f"{'https' if config.secure else 'http'}://{config.target}"
        self.send_limit = _option(config, "grpc.max_send_message_length")
        self.receive_limit = _option(config, "grpc.max_receive_message_length")
        # Keepalive PINGs, from grpcio's channel arguments (see GRPCKeepAlive): seconds
        # between PINGs (None: none), how long an answer may take, PINGs with no call.
        every = _option(config, "grpc.keepalive_time_ms")
        self.keepalive_time = None if every is None or every >= _NO_KEEPALIVE_MS else every / 1e3
        answer = _option(config, "grpc.keepalive_timeout_ms")
        self.keepalive_timeout = _PING_TIMEOUT if answer is None else answer / 1e3
        self.keepalive_without_calls = bool(_option(config, "grpc.keepalive_permit_without_calls"))
        # Keepalive PINGs in a row with no HEADERS or DATA sent between (0: no limit):
        # servers count PINGs without data as strikes and say GOAWAY too_many_pings.
        most = _option(config, "grpc.http2.max_pings_without_data")
        self.keepalive_max_pings = _MAX_PINGS_WITHOUT_DATA if most is None else most

    # -- a call's request side

    def request_head(
        self, method: str, timeout: float | None, metadata: Metadata, compression: str | None
    ) -> tuple[bytes, str | None]:
        """The header block of a call and the compression of its messages (the argument,
        else the channel's)."""
        compression = check_compression(compression) or self.config.compression
        block = self.headers.block(method, timeout=timeout, encoding=compression, metadata=metadata)
        return block, compression

    def frame(
        self, message: BytesLike | tuple[BytesLike, ...], compression: str | None
    ) -> list[BytesLike]:
        """``message`` framed (and compressed) for sending; see :func:`frame_message`."""
        return frame_message(message, compression, self.send_limit)

    def unary_request(
        self,
        method: str,
        request: BytesLike | tuple[BytesLike, ...],
        timeout: float | None,
        metadata: Metadata,
        compression: str | None,
    ) -> tuple[bytes, list[BytesLike]]:
        """A unary call's header block and framed request (:meth:`request_head` and
        :meth:`frame` in one, for the per-call path)."""
        compression = check_compression(compression) or self.config.compression
        block = self.headers.block(method, timeout=timeout, encoding=compression, metadata=metadata)
        return block, frame_message(request, compression, self.send_limit)

    def unary_result(
        self, response: CallResponse, want_metadata: bool
    ) -> tuple[bytes | bytearray, Metadata]:
        """A finished unary call's one message and (if asked) metadata; its error if not OK."""
        code, message = response.status()
        if code != "OK":
            raise status_error(code, message, self.url, retry_pushback(response.trailer_list or ()))
        if len(response.messages) != 1:
            raise ProtocolError(
                f"a unary call answered with {len(response.messages)} messages instead of one"
            )
        return response.messages[0], (response.metadata() if want_metadata else ())

    # -- connecting

    def connect_timeout_until(self, deadline: float | None, now: float) -> float | None:
        """How long a connect may take: the connect timeout, within the call's deadline."""
        if deadline is None:
            return self.connect_timeout
        left = deadline - now
        if left <= 0:
            raise DeadlineExceededError("gRPC deadline exceeded before connecting", url=self.url)
        return left if self.connect_timeout is None else min(self.connect_timeout, left)

    def connect_error(self, exc: BaseException) -> KServeError:
        """The error of a connect that failed with ``exc`` (raise it ``from exc``)."""
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            return DeadlineExceededError(
                f"gRPC connect to {self.target} timed out", url=self.url, unprocessed=True
            )
        return TransportError(
            f"gRPC UNAVAILABLE: failed to connect to {self.target}: {exc}",
            url=self.url,
            unprocessed=True,
        )

    def check_alpn(self, protocol: str | None) -> None:
        """Refuse a TLS connection on which the server did not choose HTTP/2."""
        if protocol != "h2":
            raise TransportError(
                f"gRPC UNAVAILABLE: {self.target} did not agree to HTTP/2 (ALPN h2)",
                url=self.url,
                unprocessed=True,
            )

    # -- errors that name the channel

    def lost_error(self, exc: BaseException | None, answered: bool = True) -> TransportError:
        """The error of a connection lost with ``exc``; ``answered``: whether the server had
        sent anything. An HTTP/2 server sends its SETTINGS at once, unasked; a server that
        closes without a byte in answer to the HTTP/2 preface is most likely an HTTP/1.1
        server (Triton's HTTP port does so), or a TLS one."""
        if not answered:
            hint = f"this port probably speaks HTTP/1.1 — did you mean {self.http_url}?"
            if self.ssl is None:
                hint += f" (or, if it wants TLS, grpcs://{self.target})"
            return TransportError(
                f"gRPC UNAVAILABLE: {self.target} closed the connection without answering "
                f"the HTTP/2 preface: {hint}",
                url=self.url,
            )
        return TransportError(
            f"gRPC UNAVAILABLE: connection to {self.target} lost" + (f": {exc}" if exc else ""),
            url=self.url,
        )

    def not_started_error(self, what: str) -> TransportError:
        # HTTP/2 said so (REFUSED_STREAM, GOAWAY): the server did not process it.
        return TransportError(
            f"gRPC UNAVAILABLE: the server closed the connection before the {what} started",
            url=self.url,
            unprocessed=True,
        )

    def deadline_error(self, when: str = "(client side)") -> DeadlineExceededError:
        return DeadlineExceededError(f"gRPC deadline exceeded {when}", url=self.url)

    def unanswered_ping_error(self) -> TransportError:
        return TransportError(
            f"gRPC UNAVAILABLE: {self.target} did not answer a PING within "
            f"{self.keepalive_timeout:g} s; connection dropped",
            url=self.url,
        )


def feed_response(
    events: list[Event], stream_id: int, response: CallResponse
) -> list[Event] | None:
    """Hand the HEADERS and DATA events of ``stream_id`` to its ``response`` (those of other
    streams are dropped); returns the events of other kinds, in order (None: there were
    none), for the caller to act on."""
    others: list[Event] | None = None
    for event in events:
        kind = type(event)
        if kind is DataReceived:
            if event.stream_id == stream_id:  # type: ignore[attr-defined]
                response.data(event.data, event.end_stream)  # type: ignore[attr-defined]
        elif kind is HeadersReceived:
            if event.stream_id == stream_id:  # type: ignore[attr-defined]
                response.headers(event.headers, event.end_stream)  # type: ignore[attr-defined]
        elif others is None:
            others = [event]
        else:
            others.append(event)
    return others


def _reset_call_error(event: StreamReset, response: CallResponse, url: str) -> Exception:
    """What a unary call gets when its stream ended early: a refused stream the server never
    answered is retried; a malformed response is its protocol error."""
    if event.error is not None:
        return event.error
    if event.refused and not response.http_status:
        return CallNotStarted()
    return reset_error(event.error_code, url)[1]


# ---------------------------------------------------------------------------------- sync


class SyncConnection:
    """A socket and its HTTP/2 state; used by one thread at a time.

    Every blocking use of the socket goes through a deadline (:meth:`flush`,
    :meth:`read_events`); :meth:`poll_events` reads without waiting.

    Keepalive (``grpc.keepalive_time_ms``): nobody reads the connection between calls, so
    it PINGs only while a call waits, after each such interval without a byte from the
    server (at most ``grpc.http2.max_pings_without_data`` in a row until a call sends:
    :meth:`starting_call`, :meth:`sending`); no answer within the keepalive timeout fails
    the call with TransportError. A call's waits ask :meth:`keepalive_wake` when to call
    :meth:`keepalive` (the stream's reader waits in ``select``, the unary call in
    :meth:`read_events`).
    """

    __slots__ = (
        "_buffer",
        "_heard",
        "_nonblocking",
        "_ping",
        "_ping_deadline",
        "_pings_sent",
        "_view",
        "h2",
        "pings_without_data",
        "settings",
        "sock",
        "tls",
    )

    def __init__(self, sock: socket.socket, settings: ChannelSettings) -> None:
        self.sock = sock
        self.settings = settings
        self.tls = settings.ssl is not None
        self.h2 = H2Connection(http_url=settings.http_url)
        self._buffer = bytearray(_RECV_SIZE)
        self._view = memoryview(self._buffer)
        # The socket's timeout is 0 (poll_events) until a blocking use re-arms it; switching
        # costs a system call, so only when the mode changes.
        self._nonblocking = False
        # Keepalive: when bytes last arrived (kept only with keepalive on), the PING whose
        # answer is awaited and by when, PINGs since a call last sent (see the class doc).
        self._heard = time.monotonic()
        self._ping: bytes | None = None
        self._ping_deadline = 0.0
        self._pings_sent = 0
        self.pings_without_data = 0

    @classmethod
    def open(cls, settings: ChannelSettings, deadline: float | None) -> SyncConnection:
        """Connect (TLS with ALPN ``h2`` for ``grpcs://``) and send the HTTP/2 preface."""
        timeout = settings.connect_timeout_until(deadline, time.monotonic())
        try:
            sock = socket.create_connection((settings.host, settings.port), timeout=timeout)
        except OSError as exc:
            raise settings.connect_error(exc) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if settings.ssl is not None:
                try:
                    sock = settings.ssl.wrap_socket(sock, server_hostname=settings.server_hostname)
                except (OSError, ssl.SSLError, ssl.CertificateError) as exc:
                    raise TransportError(
                        f"gRPC UNAVAILABLE: TLS handshake with {settings.target} failed: {exc}",
                        url=settings.url,
                        unprocessed=True,
                    ) from exc
                settings.check_alpn(sock.selected_alpn_protocol())
            conn = cls(sock, settings)
            conn.h2.initiate()
            conn.flush(deadline)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise
        return conn

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def shutdown(self) -> None:
        """Shut the socket down for both directions without closing it (the file descriptor
        stays valid for a thread still selecting on it); wakes a thread waiting on it.
        Bypasses SSLSocket.shutdown, which would drop the TLS object another thread may be
        using."""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def say_goodbye(self) -> None:
        """Send the GOAWAY a protocol error queued (best effort), then close."""
        with contextlib.suppress(OSError, KServeError, ValueError):
            self.flush(time.monotonic() + _GOODBYE_SEND)
            # Read what is still coming for a moment first: closing a socket with unread
            # data makes the kernel reset the connection, and the server may lose the GOAWAY.
            until = time.monotonic() + _GOODBYE_DRAIN
            self.sock.settimeout(0.05)
            self._nonblocking = False
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
                if self.poll_events() is None:  # PINGs, SETTINGS, GOAWAY sent while idle
                    break
                self.flush(None)
                if not isinstance(self.sock, ssl.SSLSocket) or not self.sock.pending():
                    break
        except (OSError, KServeError):
            return False
        return h2.can_open_stream()

    def _arm(self, deadline: float | None) -> None:
        self._nonblocking = False
        if deadline is None:
            self.sock.settimeout(None)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise self.settings.deadline_error()
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
            raise self.settings.deadline_error("while sending") from exc

    def read_events(self, deadline: float | None) -> list[Event]:
        """Wait (until ``deadline``) for bytes; their HTTP/2 events. With keepalive on, the
        wait PINGs a silent server (and fails if it does not answer)."""
        if self.settings.keepalive_time is not None:
            return self._read_events_alive(deadline)
        self._arm(deadline)
        try:
            n = self.sock.recv_into(self._buffer)
        except TimeoutError as exc:
            raise self.settings.deadline_error() from exc
        if not n:
            raise ConnectionClosed("the server closed the connection")
        return self.h2.receive(self._view[:n])

    def _read_events_alive(self, deadline: float | None) -> list[Event]:
        while True:
            wake = self.keepalive_wake()
            if wake is None or (deadline is not None and deadline <= wake):
                self._arm(deadline)
                keepalive = False
            else:
                self._nonblocking = False
                self.sock.settimeout(max(0.0, wake - time.monotonic()))
                keepalive = True
            try:
                n = self.sock.recv_into(self._buffer)
            except TimeoutError as exc:
                if not keepalive:
                    raise self.settings.deadline_error() from exc
                self.keepalive(deadline)
                continue
            if not n:
                raise ConnectionClosed("the server closed the connection")
            return self._received(n)

    def _received(self, n: int) -> list[Event]:
        """The events of ``n`` bytes read, noted for keepalive (which is on)."""
        events = self.h2.receive(self._view[:n])
        self._heard = time.monotonic()
        ping = self._ping
        if ping is not None:
            for event in events:
                if type(event) is PingAcknowledged and event.payload == ping:
                    self._ping = None
        return events

    def starting_call(self) -> None:
        """A call starts (its HEADERS are queued): keepalive counts the server's silence
        from now, not from before the connection waited in the pool unread (a PING of an
        earlier call, unanswered meanwhile, is forgotten)."""
        self.pings_without_data = 0
        if self.settings.keepalive_time is not None:
            self._heard = time.monotonic()
            self._ping = None

    def sending(self) -> None:
        """A call sends DATA: keepalive PINGs may go on (see keepalive_max_pings)."""
        self.pings_without_data = 0

    def keepalive_wake(self) -> float | None:
        """When :meth:`keepalive` has something to do (None: nothing, or keepalive off)."""
        interval = self.settings.keepalive_time
        if interval is None:
            return None
        if self._ping is not None:
            return self._ping_deadline
        most = self.settings.keepalive_max_pings
        if most and self.pings_without_data >= most:
            return None
        return self._heard + interval

    def keepalive(self, deadline: float | None) -> None:
        """PING a server silent for the keepalive interval; TransportError if the PING sent
        earlier went unanswered for the keepalive timeout."""
        wake = self.keepalive_wake()
        now = time.monotonic()
        if wake is None or now < wake:
            return
        if self._ping is not None:
            raise self.settings.unanswered_ping_error()
        self._pings_sent += 1
        self.pings_without_data += 1
        self._ping = struct.pack(">Q", self._pings_sent)
        self._ping_deadline = now + self.settings.keepalive_timeout
        self.h2.ping(self._ping)
        self.flush(deadline)

    def poll_events(self) -> list[Event] | None:
        """One read of what has arrived, without waiting: its HTTP/2 events, or None when
        nothing had. Raises :class:`ConnectionClosed` at the end of the connection."""
        sock = self.sock
        if not self._nonblocking:
            sock.settimeout(0.0)
            self._nonblocking = True
        try:
            n = sock.recv_into(self._buffer)
        except _WOULD_BLOCK:
            return None
        if not n:
            raise ConnectionClosed("the server closed the connection")
        if self.settings.keepalive_time is not None:
            return self._received(n)
        return self.h2.receive(self._view[:n])

    def unary(
        self, block: bytes, parts: list[BytesLike], deadline: float | None, limit: int | None
    ) -> CallResponse:
        """Run one call to its end on this connection (``parts`` is consumed).

        Raises :class:`CallNotStarted` when the server refused the stream (RST_STREAM
        REFUSED_STREAM, or GOAWAY below it). A connection lost once the request was written
        is the call's error, never a retry: the server may have run it."""
        h2 = self.h2
        response = CallResponse(limit)
        stream_id = open_unary(h2, block, parts)
        self.starting_call()
        try:
            if queue_data(h2, stream_id, parts, True):
                # The window is full: send what is queued, read until it opens (or the
                # server answers early, e.g. with an error status).
                while True:
                    self.flush(deadline)
                    while not response.done and not h2.send_window(stream_id):
                        others = feed_response(self.read_events(deadline), stream_id, response)
                        if others is not None:
                            self._check_reset(others, stream_id, response)
                        self.flush(deadline)  # PING and SETTINGS ACKs must not wait
                    if response.done or not queue_data(h2, stream_id, parts, True):
                        break
            self.flush(deadline)
            while not response.done:
                events = self.read_events(deadline)
                others = feed_response(events, stream_id, response)
                if others is not None:
                    self._check_reset(others, stream_id, response)
                if h2.has_data_to_send:
                    self.flush(deadline)
        except ProtocolError as exc:
            if not isinstance(exc, H2ConnectionError):
                # A malformed response, not a broken connection: a stream error (RFC 9113
                # section 5.4.2). The stream goes (a no-op if HTTP/2 reset it already).
                h2.reset_stream(stream_id, ErrorCode.PROTOCOL_ERROR)
            raise
        finally:
            if response.done:
                h2.end_stream(stream_id)
        return response

    def after_stream_error(self) -> bool:
        """Send the RST_STREAM a stream error queued (best effort, briefly); whether the
        connection may serve the next call."""
        if self.h2.closed:
            return False
        try:
            self.flush(time.monotonic() + _GOODBYE_SEND)
        except (OSError, KServeError):
            return False
        return True

    def _check_reset(self, events: list[Event], stream_id: int, response: CallResponse) -> None:
        """Raise the error of a reset of the call's stream among ``events``."""
        for event in events:
            # A reset after the response ended (NO_ERROR: "stop sending") is no error.
            # After a GOAWAY can_open_stream() is false: the connection is not pooled again.
            if (
                isinstance(event, StreamReset)
                and event.stream_id == stream_id
                and not response.done
            ):
                raise _reset_call_error(event, response, self.settings.url)


# --------------------------------------------------------------------------------- async


class _Deadlines:
    """The deadlines of one connection's unary calls, watched by one timer (at the earliest)
    rather than one per call: a timer per call costs a handle, a heap push of Python-level
    comparisons and a cancel, a few µs of a call's 50. Entries of calls that ended stay in
    the heap until they come up or the heap is compacted (when it is twice the calls in
    flight), so it stays about as large as the calls in flight."""

    __slots__ = ("_at", "_expire", "_heap", "_live", "_loop", "_timer")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        live: Mapping[int, object],
        expire: Callable[[int], None],
    ) -> None:
        self._loop = loop
        self._live = live  # stream id -> call, while the call runs
        self._expire = expire
        self._heap: list[tuple[float, int]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def watch(self, stream_id: int, deadline: float) -> None:
        heap = self._heap
        heapq.heappush(heap, (deadline, stream_id))
        if len(heap) > 2 * len(self._live) + 64:
            live = self._live
            heap[:] = [entry for entry in heap if entry[1] in live]
            heapq.heapify(heap)
        if self._timer is None or deadline < self._at:
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        heap, live = self._heap, self._live
        while heap and heap[0][1] not in live:
            heapq.heappop(heap)
        if heap:
            self._at = heap[0][0]
            self._timer = self._loop.call_at(self._at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        heap, now = self._heap, self._loop.time()
        while heap and heap[0][0] <= now:
            stream_id = heapq.heappop(heap)[1]
            if stream_id in self._live:
                self._expire(stream_id)
        self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._heap.clear()


class AsyncConnection(asyncio.BufferedProtocol):
    """One HTTP/2 connection shared by many concurrent calls (streams) of one event loop.

    A call registers its stream with :meth:`open_call` (a :class:`CallResponse` and a future
    the connection resolves when the stream ends), sends with :func:`queue_data` and
    :meth:`send_rest`, and :meth:`drop` s it when it gives up. ``on_retire`` is told when the
    connection takes no new calls (GOAWAY, lost, broken); it closes when its last call ends.

    Liveness: when a call's deadline passes, the connection PINGs the server and takes no
    new call until the answer comes; without an answer within the keepalive timeout it is
    dropped and its calls fail (a black-holed connection must not take every later call
    down with it). With ``grpc.keepalive_time_ms`` set it also PINGs after each such
    interval without a byte from the server (with calls in flight, or always with
    ``grpc.keepalive_permit_without_calls``), under the same timeout, and at most
    ``grpc.http2.max_pings_without_data`` of them until a call sends HEADERS or DATA.
    """

    def __init__(
        self, settings: ChannelSettings, on_retire: Callable[[AsyncConnection], None]
    ) -> None:
        self.h2 = H2Connection(http_url=settings.http_url)
        self.settings = settings
        self.transport: asyncio.Transport | None = None
        self._on_retire = on_retire
        # The loop reads into this one buffer (BufferedProtocol): with data_received it
        # would allocate 256 KiB per read, which glibc serves with mmap, mremap and munmap
        # (three system calls and a page fault per read) unless the process's malloc
        # history happened to raise its mmap threshold. What the HTTP/2 parser keeps
        # past a read (a partial frame, message bytes) it copies.
        self._read_buffer = memoryview(bytearray(_RECV_SIZE))
        self._calls: dict[int, tuple[CallResponse, asyncio.Future[None]]] = {}
        # Stream calls that acknowledge their DATA as their reader takes it: how many bytes
        # of messages each has waiting to be read.
        self._backlogs: dict[int, Callable[[], int]] = {}
        # Set whenever a sender waiting for flow-control window should look again.
        self._window = asyncio.Event()
        self.lost: BaseException | None = None
        self.retired = False
        # Resolved by connection_lost: aclose waits for it (TLS shutdown takes a round trip).
        self._loop = asyncio.get_running_loop()
        self.gone: asyncio.Future[None] = self._loop.create_future()
        # asyncio's flow control: True while the transport's buffer is over its high-water
        # mark (request DATA waits). CPython 3.12+'s selector transports never pause from
        # writelines(): whether the server reads what it made us send is checked in flush()
        # from the buffer's size instead.
        self.write_paused = False
        # Reply bytes (see _UNREAD_REPLIES_LIMIT) written since the buffer last drained, and
        # the h2 total already counted.
        self._unread_replies = 0
        self._replies_counted = 0
        self._abort_timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._deadlines = _Deadlines(self._loop, self._calls, self._expire)
        # The PING whose answer is awaited, and the timer that drops the connection without
        # it; ``suspect``: the PING follows an expired call, no new calls until answered.
        self._ping: bytes | None = None
        self._ping_timer: asyncio.TimerHandle | None = None
        self._pings_sent = 0
        self.suspect = False
        self._heard = False  # bytes arrived since the last keepalive tick
        # Keepalive PINGs since HEADERS or DATA last went out (see keepalive_max_pings);
        # calls reset it when they send.
        self.pings_without_data = 0
        self._keepalive: asyncio.TimerHandle | None = None
        if settings.keepalive_time is not None:
            self._keepalive = self._loop.call_later(settings.keepalive_time, self._keepalive_tick)

    @classmethod
    async def open(
        cls,
        settings: ChannelSettings,
        deadline: float | None,
        on_retire: Callable[[AsyncConnection], None],
    ) -> AsyncConnection:
        """Connect (TLS with ALPN ``h2`` for ``grpcs://``); the preface goes out at once."""
        loop = asyncio.get_running_loop()
        timeout = settings.connect_timeout_until(deadline, loop.time())
        try:
            transport, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: cls(settings, on_retire),
                    settings.host,
                    settings.port,
                    ssl=settings.ssl,
                    server_hostname=settings.server_hostname if settings.ssl is not None else None,
                ),
                timeout,
            )
        except (OSError, ssl.SSLError, ssl.CertificateError, asyncio.TimeoutError) as exc:
            raise settings.connect_error(exc) from exc
        if settings.ssl is not None:
            sslobj = transport.get_extra_info("ssl_object")
            try:
                settings.check_alpn(None if sslobj is None else sslobj.selected_alpn_protocol())
            except TransportError:
                transport.close()
                raise
        return conn

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not isinstance-checked: uvloop's transports do not derive from asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        self.h2.initiate()
        self.flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.received(self._read_buffer[:nbytes])

    def received(self, data: memoryview | bytes) -> None:
        """Handle bytes read: feed the calls their HTTP/2 events, wake the finished."""
        self._heard = True
        woke = False
        try:
            events = self.h2.receive(data)
            for event in events:
                kind = type(event)
                if kind is DataReceived or kind is HeadersReceived:
                    stream_id: int = event.stream_id  # type: ignore[attr-defined]
                    entry = self._calls.get(stream_id)
                    if entry is None:
                        continue
                    response, future = entry
                    try:
                        if kind is DataReceived:
                            response.data(event.data, event.end_stream)  # type: ignore[attr-defined]
                            if self._backlogs:
                                self._release(stream_id)
                        else:
                            response.headers(event.headers, event.end_stream)  # type: ignore[attr-defined]
                    except KServeError as exc:
                        self._fail_call(stream_id, exc)
                        continue
                    if response.done:
                        del self._calls[stream_id]
                        self._backlogs.pop(stream_id, None)
                        self.h2.end_stream(stream_id)
                        if not future.done():
                            future.set_result(None)
                            woke = True
                        self._call_ended()
                elif kind is StreamReset:
                    assert isinstance(event, StreamReset)
                    entry = self._calls.pop(event.stream_id, None)
                    self._backlogs.pop(event.stream_id, None)
                    if entry is not None and not entry[0].done and not entry[1].done():
                        entry[1].set_exception(
                            _reset_call_error(event, entry[0], self.settings.url)
                        )
                    self._call_ended()
                elif kind is GoAwayReceived:
                    self.retire()
                elif isinstance(event, PingAcknowledged) and event.payload == self._ping:
                    self._answered()
            # Wake senders waiting for window: the window may have opened, or their call
            # may have ended (answered early, reset) while they waited.
            self._window.set()
            self.flush()
            if woke:
                # The callers just woken run in the loop's next round, in the order they
                # were woken; a flush scheduled now runs right after them and sends the
                # requests they make then in one write, a round earlier than their own
                # flush_soon() would (one select() and one round fewer per read).
                self.flush_soon()
        except KServeError as exc:
            self.flush()
            self._abort(exc)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._window.set()  # senders waiting for the buffer to drain go on

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._abort_timer, self._ping_timer, self._keepalive):
            if timer is not None:
                timer.cancel()
        self._deadlines.stop()
        if not self.gone.done():
            self.gone.set_result(None)
        error = self.settings.lost_error(exc, self.h2.got_bytes)
        if self.lost is None:  # a protocol error that closed it stays the reason
            self.lost = error
        self.retire()
        # Never retried: a call whose request was written may have run on the server.
        for _response, future in self._calls.values():
            if not future.done():
                future.set_exception(error)
        self._calls.clear()
        self._backlogs.clear()
        self._window.set()

    # -- the connection's state

    def retire(self) -> None:
        """No new calls on this connection; it closes when its last call ends."""
        self.retired = True
        self._on_retire(self)
        if not self._calls:
            self._close_transport()

    @property
    def usable(self) -> bool:
        return (
            self.lost is None
            and not self.suspect
            and self.h2.can_open_stream()
            and self.transport is not None
        )

    def _call_ended(self) -> None:
        """A call left the connection: a retired one closes after its last call (GOAWAY'd
        connections whose calls timed out too)."""
        if self.retired and not self._calls:
            self._close_transport()

    # -- liveness

    def check_alive(self, suspect: bool = True) -> None:
        """PING the server; drop the connection if no answer comes within the keepalive
        timeout. ``suspect``: no new calls until the answer (a call's deadline passed)."""
        if self.lost is not None or self.transport is None or self.gone.done():
            return
        self.suspect = self.suspect or suspect
        if self._ping is not None:
            return  # one PING at a time; its timer is running
        self._pings_sent += 1
        self._ping = struct.pack(">Q", self._pings_sent)
        self.h2.ping(self._ping)
        self.flush()
        self._ping_timer = self._loop.call_later(self.settings.keepalive_timeout, self._unanswered)

    def _answered(self) -> None:
        self._ping = None
        self.suspect = False
        if self._ping_timer is not None:
            self._ping_timer.cancel()
            self._ping_timer = None

    def _unanswered(self) -> None:
        self._ping_timer = None
        self._abort(self.settings.unanswered_ping_error(), drop=True)

    def _keepalive_tick(self) -> None:
        settings = self.settings
        interval = settings.keepalive_time
        assert interval is not None
        if self.lost is not None or self.gone.done():
            return
        most = settings.keepalive_max_pings
        if (
            not self._heard
            and self._ping is None  # one PING at a time
            and (self._calls or settings.keepalive_without_calls)
            and (not most or self.pings_without_data < most)
        ):
            self.pings_without_data += 1
            self.check_alive(suspect=False)
        self._heard = False
        self._keepalive = self._loop.call_later(interval, self._keepalive_tick)

    def flush(self) -> None:
        buffers = self.h2.data_to_send()
        transport = self.transport
        if buffers and transport is not None and not transport.is_closing():
            transport.writelines(buffers)
            replies = self.h2.replies_queued - self._replies_counted
            if replies:
                self._replies_counted += replies
                self._count_unread(transport, replies)

    def _count_unread(self, transport: asyncio.Transport, replies: int) -> None:
        """Drop the connection if the server leaves too many of our answers unread: count
        ``replies`` (bytes just written) unless the transport's buffer has drained."""
        if transport.get_write_buffer_size() <= _DRAINED:
            self._unread_replies = 0  # the server reads: what we owed it went out
            return
        self._unread_replies += replies
        if self._unread_replies > _UNREAD_REPLIES_LIMIT:
            self._abort(
                TransportError(
                    f"gRPC UNAVAILABLE: {self.settings.target} stopped reading "
                    f"(over {_UNREAD_REPLIES_LIMIT >> 20} MiB of acknowledgements left "
                    "unsent); connection dropped",
                    url=self.settings.url,
                ),
                drop=True,
            )

    def flush_soon(self) -> None:
        """Write what HTTP/2 queued once the tasks running in this round of the event loop
        have had their turn: the calls that one read's responses set going again (16 in
        flight: up to 16 requests) go out in one write, one system call, not one each."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def _close_transport(self) -> None:
        """Close (what is buffered goes out first, TLS says goodbye), but drop the socket if
        that has not happened within a second: a peer that does not read must not keep it."""
        transport = self.transport
        if transport is None or self.gone.done():
            return
        transport.close()
        if self._abort_timer is None:
            self._abort_timer = self._loop.call_later(_GOODBYE_SEND, self.abort)

    def wake(self) -> None:
        """Make senders waiting for window look at their call again (it may have ended)."""
        self._window.set()

    def close(self) -> None:
        """Say GOAWAY and close (calls in flight fail as the connection goes)."""
        if self.transport is not None and not self.gone.done():
            self.h2.close()
            self.flush()
            self._close_transport()

    def abort(self) -> None:
        """Drop the socket now (a TLS shutdown that did not finish)."""
        if not self.gone.done() and self.transport is not None:
            self.transport.abort()

    def _fail_call(self, stream_id: int, exc: BaseException) -> None:
        entry = self._calls.get(stream_id)
        self.drop(stream_id, ErrorCode.PROTOCOL_ERROR)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(exc)

    def _abort(self, exc: BaseException, drop: bool = False) -> None:
        """Fail every call with ``exc`` and close; ``drop``: at once, discarding what is
        still buffered (the peer does not read it)."""
        if self.lost is None:
            self.lost = exc  # also the answer to calls that come after (see call)
        calls = list(self._calls.values())
        self._calls.clear()
        self._backlogs.clear()
        self.retire()
        for _response, future in calls:
            if not future.done():
                future.set_exception(exc)
        self._window.set()  # senders waiting for window see their call failed
        if drop:
            self.abort()
        else:
            self._close_transport()

    # -- calls

    def open_call(
        self,
        block: bytes,
        response: CallResponse,
        future: asyncio.Future[None],
        end_stream: bool = False,
        backlog: Callable[[], int] | None = None,
        parts: list[BytesLike] | None = None,
    ) -> int:
        """Start a stream; the connection feeds ``response`` and resolves ``future`` when
        the stream ends (or fails it). Returns the stream's id.

        ``parts``: a unary call's request, of which what is queued now is taken (see
        :func:`open_unary`; not while the transport has asked us to pause writing).

        ``backlog`` (stream calls) says how many bytes of messages wait for the call's
        reader: the stream's DATA then goes back to the flow-control windows only while
        that is under ``_STREAM_BACKLOG`` (see :meth:`release`), so a reader that falls
        behind slows the server down instead of growing the backlog.

        Raises the connection's error once it is lost (a new connection can break before
        its first call: the server's first bytes may already violate the protocol)."""
        if self.lost is not None:
            raise self.lost
        self.pings_without_data = 0
        if parts is not None and not self.write_paused:
            stream_id = open_unary(self.h2, block, parts)
        else:
            stream_id = self.h2.open_stream(
                block, end_stream=end_stream, acknowledge_on_receipt=backlog is None
            )
        self._calls[stream_id] = (response, future)
        if backlog is not None:
            self._backlogs[stream_id] = backlog
        return stream_id

    def _release(self, stream_id: int) -> None:
        backlog = self._backlogs.get(stream_id)
        if backlog is not None and backlog() <= _STREAM_BACKLOG:
            held = self.h2.unacknowledged(stream_id)
            if held:
                self.h2.acknowledge_received_data(stream_id, held)

    def release(self, stream_id: int) -> None:
        """A stream call's reader took messages: give the stream's DATA back to the
        flow-control windows if its backlog is small enough now."""
        self._release(stream_id)
        if self.h2.has_data_to_send:
            self.flush()

    def drop(self, stream_id: int, code: int) -> None:
        """Reset a call's stream and forget it, if the connection still has it."""
        self._backlogs.pop(stream_id, None)
        if self._calls.pop(stream_id, None) is not None:
            self.h2.reset_stream(stream_id, code)
            self.flush()
            self._call_ended()

    async def send_rest(
        self,
        stream_id: int,
        parts: list[BytesLike],
        end_stream: bool,
        stopped: Callable[[], bool],
    ) -> bool:
        """Send the ``parts`` :func:`queue_data` left, as the window opens. Returns False,
        with parts unsent, once ``stopped()`` says the call ended meanwhile; raises the
        connection's error if it broke."""
        h2 = self.h2
        while True:
            self.flush()
            # DATA waits while the server is not reading what we wrote (asyncio paused us).
            while self.write_paused or not h2.send_window(stream_id):
                if stopped():
                    return False
                if self.lost is not None:
                    raise self.lost
                self._window.clear()
                await self._window.wait()
            if stopped():
                return False
            if not queue_data(h2, stream_id, parts, end_stream):
                return True

    async def call(
        self, block: bytes, parts: list[BytesLike], limit: int | None, deadline: float | None
    ) -> CallResponse:
        """Run one unary call (``parts`` is consumed); raises :class:`CallNotStarted` for a
        call that may be retried on a new connection."""
        if self.lost is not None:  # e.g. the server's first bytes already broke the protocol
            raise self.lost
        response = CallResponse(limit)
        future: asyncio.Future[None] = self._loop.create_future()
        stream_id = self.open_call(block, response, future, parts=parts)
        # The connection's deadline timer, not asyncio.wait_for: no extra task per call.
        if deadline is not None:
            self._deadlines.watch(stream_id, deadline)
        try:
            # parts is empty when open_call queued the request with the headers.
            if parts and (self.write_paused or queue_data(self.h2, stream_id, parts, True)):
                await self.send_rest(stream_id, parts, True, future.done)
            self.flush_soon()
            await future
        except BaseException:
            # Cancelled or failed: the stream goes, the connection stays.
            self.drop(stream_id, ErrorCode.CANCEL)
            raise
        return response

    def _expire(self, stream_id: int) -> None:
        """A call's deadline passed: reset its stream, fail it, wake a sender waiting."""
        entry = self._calls.get(stream_id)
        if entry is None:
            return
        self.drop(stream_id, ErrorCode.CANCEL)
        if not entry[1].done():
            entry[1].set_exception(self.settings.deadline_error())
        self._window.set()
        self.check_alive()  # a server that stopped answering must not get the next call
