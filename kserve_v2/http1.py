"""Sans-IO HTTP/1.1 client pieces shared by the sync and async transports.

Nothing here touches a socket. The transports drive two objects:

* :func:`serialize_head` turns a request line and headers into the bytes of the request head.
* :class:`ResponseParser` reads one response at a time. Its interface is the one of
  :class:`asyncio.BufferedProtocol` on purpose: the I/O side asks :meth:`ResponseParser.get_buffer`
  where the next bytes should land, receives into it (``socket.recv_into`` or the event loop
  does it), and reports the count with :meth:`ResponseParser.buffer_updated`. That lets a large
  ``Content-Length`` body be received straight into its final ``bytearray`` with no intermediate
  copies, in both the sync and the async transport. The body's buffer follows the bytes that
  arrive, not the ``Content-Length`` the server announced: it starts at
  :data:`FIRST_BODY_BUFFER` and doubles in place when full (an 84-byte response announcing
  1 GiB costs 1 MiB, not 1 GiB).

Decompression (``gzip`` / ``deflate``) is separate: :func:`decode_body` for a complete body and
:class:`StreamDecoder` for a streamed one (:class:`StreamedBody` pairs it with the parser).

What else the transports decide without I/O lives here too: how request buffers are measured
(:func:`body_length`) and handed to writers that count with ``len()`` (:func:`byte_views`), and
when a request may be sent again (:class:`NoResponse`).

Anything malformed raises :class:`kserve_v2.errors.ProtocolError`; the parser never lets an
``IndexError`` or ``ValueError`` escape.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

from kserve_v2.errors import InvalidInputError, ProtocolError, TransportError

__all__ = [
    "DEFAULT_MAX_DECODED_PIECE",
    "DEFAULT_MAX_HEADER_SIZE",
    "FIRST_BODY_BUFFER",
    "NoResponse",
    "OutgoingRequest",
    "RETRY_SAFE_METHODS",
    "ResponseParser",
    "StreamDecoder",
    "StreamedBody",
    "body_length",
    "body_too_large",
    "byte_views",
    "decode_body",
    "looks_like_http2",
    "serialize_head",
    "speaks_http2_error",
]

#: Upper bound of a response head (status line + headers) and of any single framing line.
DEFAULT_MAX_HEADER_SIZE = 64 * 1024
#: The first buffer of a ``Content-Length`` body larger than what came with its head: the
#: buffer then doubles (up to the announced length) each time it is full, so memory follows
#: the bytes received and a lying ``Content-Length`` costs at most this much. Growing happens
#: in place (``realloc``; large blocks are remapped, not copied), and the finished body is one
#: ``bytearray`` of exactly the announced length.
FIRST_BODY_BUFFER = 1024 * 1024
#: Upper bound of what one piece of a streamed body decompresses to, per coding. Pieces are at
#: most a 64 KiB read, and deflate inflates at most ~1032:1, so one coding never reaches it;
#: stacked codings ("gzip, gzip") multiply the ratios, and a 600-byte body would otherwise
#: inflate to 256 MiB in one call.
DEFAULT_MAX_DECODED_PIECE = 64 * 1024 * 1024

# Methods whose requests carry a Content-Length even when the body is empty (RFC 9110 8.6).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Request headers the transport writes itself.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})

#: A request as the transports send it: the head's bytes, the body's buffers, the body's length
#: in bytes, whether it is a HEAD request (whose response has no body), and whether it may be
#: sent again after a connection closed without answering (:meth:`NoResponse.check_retry`).
OutgoingRequest = tuple[bytes, Sequence[bytes | bytearray | memoryview], int, bool, bool]

_STATUS_LINE_START = b"HTTP/"
_HEXDIGITS = frozenset(b"0123456789abcdefABCDEF")
_STATUS_CODES = {str(code): code for code in range(100, 1000)}
_CHUNK_SIZE_DIGITS = 15  # 16**15 bytes is far beyond any real chunk; stops absurd sizes early

# Parser states (plain ints: compared on every buffer_updated call).
_IDLE = 0
_HEAD = 1
_LENGTH = 2  # Content-Length body received straight into the body bytearray
_LENGTH_STREAM = 3  # Content-Length body handed out piece by piece from the scratch buffer
_CHUNK_SIZE = 4
_CHUNK_DATA = 5
_CHUNK_CRLF = 6
_TRAILERS = 7
_UNTIL_EOF = 8
_DONE = 9


def looks_like_http2(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data``, the first bytes a server sent, are an HTTP/2 server's first frame
    rather than an HTTP/1 status line: a SETTINGS frame header (RFC 9113 sections 3.4, 6.5:
    a payload of 6-byte settings, type 0x4, flags 0, stream 0), as a gRPC port sends the
    moment a connection opens.

    Example::

        >>> looks_like_http2(b"\\x00\\x00\\x12\\x04\\x00\\x00\\x00\\x00\\x00" + bytes(18))
        True
        >>> looks_like_http2(b"HTTP/1.1 200 OK\\r\\n")
        False
    """
    if len(data) < 9:
        return False
    length = (data[0] << 16) | (data[1] << 8) | data[2]
    return (
        data[3] == 0x4
        and data[4] == 0
        and not (data[5] | data[6] | data[7] | data[8])
        and length % 6 == 0
    )


def speaks_http2_error(grpc_url: str | None = None) -> ProtocolError:
    """The error of an HTTP/1.1 request answered in HTTP/2 (see :func:`looks_like_http2`):
    the URL says ``http://`` but the port is a gRPC one. ``grpc_url`` is the URL to suggest
    (``grpc://host:port``)."""
    return ProtocolError(
        f"this port speaks HTTP/2 (gRPC?) — did you mean {grpc_url or 'grpc://...'}?"
    )


_ZEROS: list[memoryview] = []


def _zeros() -> memoryview:
    """A :data:`FIRST_BODY_BUFFER`-sized block of zeros (made on first use)."""
    if not _ZEROS:
        _ZEROS.append(memoryview(bytes(FIRST_BODY_BUFFER)))
    return _ZEROS[0]


def _preview(data: bytes | bytearray | str, limit: int = 80) -> str:
    text = data if isinstance(data, str) else bytes(data[: limit + 1]).decode("latin-1")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def body_length(body: Sequence[bytes | bytearray | memoryview]) -> int:
    """Total size in bytes of a request body given as a sequence of buffers."""
    total = 0
    for part in body:
        # len() is the byte count only for bytes/bytearray; a memoryview may be multi-byte typed.
        kind = type(part)
        total += len(part) if kind is bytes or kind is bytearray else memoryview(part).nbytes
    return total


def byte_views(
    body: Sequence[bytes | bytearray | memoryview],
) -> list[bytes | bytearray | memoryview]:
    """Return ``body`` with every multi-byte or multi-dimensional memoryview cast to bytes.

    Writers that measure and slice what they are given with ``len()`` and ``[n:]`` (asyncio
    transports, httpx/h11) count elements, not bytes, for e.g. a float32 memoryview.

    >>> [len(part) for part in byte_views([b"ab", memoryview(bytes(8)).cast("i")])]
    [2, 8]
    """
    out: list[bytes | bytearray | memoryview] = []
    for part in body:
        if type(part) is bytes or type(part) is bytearray:
            out.append(part)
        else:
            view = memoryview(part)
            if view.ndim != 1 or view.itemsize != 1 or view.format != "B" or not view.c_contiguous:
                try:  # casting refuses what is not contiguous
                    view = view.cast("B")
                except TypeError as exc:
                    raise InvalidInputError(
                        f"request body parts must be contiguous bytes-like objects: {exc}"
                    ) from exc
            out.append(view)
    return out


#: Methods whose requests may be sent again after a connection closed without an answer: the
#: safe methods of RFC 9110 9.2.1 (a server does nothing for them that a second copy would
#: repeat). An inference (POST) that reached the server is never sent again.
RETRY_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class NoResponse(Exception):
    """The connection closed before a single response byte arrived.

    On a reused keep-alive connection that is often the server having closed it while it was
    idle, just as the request went out; but it may also have read the request, run it, and
    died before answering. :meth:`check_retry` decides whether the request is sent again on a
    new connection. The exception's ``__cause__`` is the socket error, if there was one.

    ``sent``: whether the request may have reached the server whole (False when writing it
    failed, so that the server cannot have had all of it).
    """

    def __init__(self, *, sent: bool = True) -> None:
        super().__init__()
        self.sent = sent

    def check_retry(self, reused: bool, retry_safe: bool, url: str) -> None:
        """Return when the request may be sent again, on a new connection; otherwise raise
        the error the caller sees.

        Sent again only on a connection that had carried earlier requests (``reused``: a
        new connection that closes at once is a failure), and only when no second copy can
        do harm: the request did not reach the server whole, or its method is safe
        (``retry_safe``, see :data:`RETRY_SAFE_METHODS`). An inference that was written is
        never sent twice: the model would run twice.

        >>> NoResponse().check_retry(True, True, "http://h")  # a GET on a reused connection
        >>> NoResponse(sent=False).check_retry(True, False, "http://h")  # never written whole
        """
        if reused and (retry_safe or not self.sent):
            return
        if self.sent:
            message = (
                "the server closed the connection without sending a response; the request "
                "may have been processed, so it was not sent again"
            )
        else:
            message = "the server closed the connection without sending a response"
        raise TransportError(message, url=url) from self.__cause__


def serialize_head(
    method: str,
    target: str,
    host: str,
    headers: Sequence[tuple[str, str]],
    content_length: int,
) -> bytes:
    """Return the bytes of an HTTP/1.1 request head, ending with the blank line.

    ``host`` is the ``Host`` header value (used unless ``headers`` has one). ``Content-Length``
    is always written by this function from ``content_length``; a caller-supplied one is
    ignored.

    Raises :class:`InvalidInputError` for a header or target that would break the framing
    (CR/LF injection, non-latin-1 text, ``Transfer-Encoding``).

    >>> serialize_head("GET", "/v2/health/ready", "localhost:8000", (), 0)
    b'GET /v2/health/ready HTTP/1.1\\r\\nHost: localhost:8000\\r\\n\\r\\n'
    """
    parts = [method, " ", target, " HTTP/1.1\r\n"]
    own_host = True
    lines = 2  # request line + final blank line
    for name, value in headers:
        lname = name.lower()
        if lname in _OWN_HEADERS:
            if lname == "host":
                own_host = False
            elif lname == "transfer-encoding":
                raise InvalidInputError(
                    "requests are always sent with Content-Length; "
                    "a Transfer-Encoding header is not supported",
                    value=value,
                )
            else:  # content-length: always computed from the body
                continue
        if not name or ":" in name or " " in name:
            raise InvalidInputError(f"invalid HTTP header name {name!r}", value=name)
        parts += (name, ": ", value, "\r\n")
        lines += 1
    if own_host:
        parts += ("Host: ", host, "\r\n")
        lines += 1
    if content_length or method in _BODY_METHODS:
        parts += ("Content-Length: ", str(content_length), "\r\n")
        lines += 1
    parts.append("\r\n")
    text = "".join(parts)
    # One count over the whole head instead of a check per header: any CR or LF smuggled in a
    # target, name or value shows up as an extra line break.
    if text.count("\n") != lines or text.count("\r") != lines or " " in target:
        _raise_bad_head(method, target, headers)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"HTTP request head must be latin-1 text: {exc}", value=text
        ) from exc


def _raise_bad_head(method: str, target: str, headers: Sequence[tuple[str, str]]) -> None:
    for piece in (method, target):
        if any(c in piece for c in " \r\n"):
            raise InvalidInputError(f"invalid HTTP request line piece {piece!r}", value=piece)
    for name, value in headers:
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise InvalidInputError(
                f"HTTP header {name!r} contains a line break", value=(name, value)
            )
    raise InvalidInputError("invalid HTTP request head")  # pragma: no cover - defensive


class ResponseParser:
    """Incremental HTTP/1.1 response parser with a buffered-protocol interface.

    One parser serves one connection for its whole life; :meth:`start` prepares it for the next
    response. The I/O loop is::

        parser.start()
        while not parser.done:          # or, streaming: until parser.head_done, then pieces
            n = sock.recv_into(parser.get_buffer())
            if n == 0:
                parser.eof_received()   # completes an until-EOF body or raises ProtocolError
            else:
                parser.buffer_updated(n)

    After completion: :attr:`status`, :attr:`reason`, :attr:`headers` (lower-case names,
    repeated names joined with ``", "``), :attr:`body` (a ``bytearray``; undecoded) and
    :attr:`keep_alive` (whether the connection can carry another request).

    With ``stream=True`` the body is not accumulated: decoded-from-framing pieces are appended
    to :attr:`pieces` as they arrive, for the caller to take.

    ``max_body_size`` bounds an accumulated body: a larger ``Content-Length`` is refused before
    anything is allocated, a chunked or until-EOF body as soon as it grows past the limit
    (:class:`ProtocolError`; the connection must not be reused).
    """

    __slots__ = (
        "_body_view",
        "_buf",
        "_chunk_left",
        "_end",
        "_grpc_url",
        "_head_request",
        "_last_framing",
        "_last_head",
        "_last_parse",
        "_length",
        "_max_body_size",
        "_max_header_size",
        "_remaining",
        "_scan",
        "_start",
        "_state",
        "_trailer_bytes",
        "_view",
        "body",
        "got_bytes",
        "head_done",
        "headers",
        "keep_alive",
        "pieces",
        "reason",
        "status",
        "stream",
    )

    def __init__(
        self,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_body_size: int | None = None,
        *,
        grpc_url: str | None = None,
    ) -> None:
        if max_header_size < 64:
            raise ValueError("max_header_size must be at least 64 bytes")
        # Suggested when the server answers in HTTP/2 (a gRPC port): grpc://host:port.
        self._grpc_url = grpc_url
        self._max_header_size = max_header_size
        # Largest accumulated body (streamed bodies are not limited: they are not kept).
        self._max_body_size = max_body_size
        # The scratch buffer holds the head, framing lines and small bodies. It never changes
        # size (memoryviews of it are handed out), so it is also the recv size.
        self._buf = bytearray(max_header_size)
        self._view = memoryview(self._buf)
        self._start = 0  # first unconsumed byte in the scratch buffer
        self._end = 0  # end of received bytes in the scratch buffer
        self._scan = 0  # where the search for the end of the head resumes
        self._state = _IDLE
        self._head_request = False
        self._remaining = 0
        self._length = 0  # the Content-Length of the body being received (_LENGTH)
        self._chunk_left = 0
        self._trailer_bytes = 0
        self._body_view: memoryview | None = None
        self._last_head = ""  # never a real head: those have a status line
        # The last head's status, reason, headers and whether it lets the connection be
        # reused; then its body framing (_body_framing), once a response needed it.
        self._last_parse: tuple[int, str, dict[str, str], bool] = (0, "", {}, False)
        self._last_framing: tuple[int, int] | None = None
        self.stream = False
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.keep_alive = False
        self.head_done = False
        self.got_bytes = False
        self.pieces: list[bytes] = []

    # -- public API --------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether the whole response (head and body) has been parsed."""
        return self._state == _DONE

    @property
    def idle(self) -> bool:
        """True before the first :meth:`start` and after a complete response."""
        return self._state in (_IDLE, _DONE)

    @property
    def has_unread_data(self) -> bool:
        """Whether bytes beyond the end of the response sit in the buffer (a broken peer)."""
        return self._end != self._start

    def start(self, *, head_request: bool = False, stream: bool = False) -> None:
        """Prepare for the next response.

        ``head_request``: the request was ``HEAD``, so the response has no body whatever its
        headers say. ``stream``: hand out body pieces through :attr:`pieces` instead of
        accumulating :attr:`body`.
        """
        if self._end != self._start:
            if looks_like_http2(self._view[self._start : self._end]):
                raise speaks_http2_error(self._grpc_url)  # a gRPC port speaks first
            raise ProtocolError(
                "unexpected data received before the response was requested",
                value=bytes(self._buf[self._start : min(self._end, self._start + 80)]),
            )
        self._start = self._end = self._scan = 0
        self._state = _HEAD
        self._head_request = head_request
        self.stream = stream
        self._body_view = None
        # headers/body are replaced (not cleared) by the next head: the previous response's
        # objects may still be in the caller's hands.
        self.status = 0
        self.keep_alive = False
        self.head_done = False
        self.got_bytes = False
        if self.pieces:
            self.pieces = []

    def get_buffer(self) -> memoryview:
        """Return the writable buffer the next received bytes must be written to.

        Never empty. While a ``Content-Length`` body is being received this is the unfilled
        tail of the body itself, grown (doubled) first when it is full. The caller must not
        keep the buffer beyond its :meth:`buffer_updated` call.
        """
        if self._state == _LENGTH:
            filled = self._length - self._remaining
            if filled == len(self.body):
                self._grow_body(filled)
            view = self._body_view
            assert view is not None
            return view[filled:]
        if self._end == len(self._buf):
            # Only reachable between responses or after DONE with trailing garbage; keep the
            # "never empty" promise by dropping what cannot be parsed anyway.
            self._start = self._end = self._scan = 0
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> bool:
        """Account for ``nbytes`` new bytes written into the last :meth:`get_buffer` buffer.

        Returns :attr:`done`. Raises :class:`ProtocolError` for a malformed response.
        """
        self.got_bytes = True
        state = self._state
        if state == _LENGTH:
            self._remaining -= nbytes
            if self._remaining == 0:
                self._body_view = None
                self._finish()
                return True
            return False
        self._end += nbytes
        if state in (_IDLE, _DONE):
            # Bytes nobody asked for: the connection cannot be trusted any more.
            self.keep_alive = False
            return state == _DONE
        self._process()
        return self._state == _DONE

    def eof_received(self, clean: bool = True) -> None:
        """The peer closed its side. Completes an until-EOF body, else raises ProtocolError.

        ``clean=False``: the connection is TLS and ended without ``close_notify``. A body
        framed by the end of the connection is then refused, since whoever can cut the TCP
        connection could have shortened it (RFC 9112 section 9.8); bodies framed by
        Content-Length or chunked coding are complete when their framing says so.
        """
        state = self._state
        if state == _UNTIL_EOF:
            if not clean:
                raise ProtocolError(
                    "the response body runs to the end of the connection, and the TLS "
                    "connection ended without close_notify: it may have been cut short"
                )
            self.keep_alive = False
            self._finish()
            return
        if state in (_DONE, _IDLE):
            self.keep_alive = False
            return
        if state == _HEAD:
            if not self.got_bytes:
                raise ProtocolError("the server closed the connection without sending a response")
            raise ProtocolError(
                "the server closed the connection in the middle of the response head",
                value=bytes(self._buf[self._start : min(self._end, self._start + 80)]),
            )
        if state in (_LENGTH, _LENGTH_STREAM):
            raise ProtocolError(
                f"truncated response body: the connection closed with {self._remaining} of "
                f"{self._content_length()} bytes still missing"
            )
        raise ProtocolError("truncated chunked response body: the connection closed early")

    def take_pieces(self) -> list[bytes]:
        """Return and clear the streamed body pieces received so far."""
        pieces = self.pieces
        self.pieces = []
        return pieces

    # -- internals ---------------------------------------------------------------------------

    def _content_length(self) -> str:
        return self.headers.get("content-length", "?")

    def _finish(self) -> None:
        self._state = _DONE
        if self._start == self._end:
            self._start = self._end = 0
        else:
            # Bytes after the end of the response: never reuse such a connection.
            self.keep_alive = False

    def _process(self) -> None:
        buf = self._buf
        while True:
            state = self._state
            start = self._start
            end = self._end
            if state == _HEAD:
                # An HTTP/2 server (a gRPC port) answers with a SETTINGS frame: say so, rather
                # than wait for a head that never comes. One byte decides for real heads.
                if (
                    end - start >= 9
                    and buf[start] != 72
                    and looks_like_http2(buf[start : start + 9])
                ):
                    raise speaks_http2_error(self._grpc_url)
                idx = buf.find(b"\r\n\r\n", self._scan, end)
                if idx < 0:
                    # A peer that is no HTTP/1.1 server (an HTTP/2 one's SETTINGS, a TLS
                    # alert, garbage) is told apart at its first bytes, not at the deadline.
                    prefix = min(end - start, 5)
                    if buf[start : start + prefix] != _STATUS_LINE_START[:prefix]:
                        raise ProtocolError(
                            "the response does not start with an HTTP/1.x status line",
                            value=bytes(buf[start : min(end, start + 16)]),
                        )
                    if end - start >= self._max_header_size:
                        raise ProtocolError(
                            f"response head larger than {self._max_header_size} bytes"
                        )
                    self._scan = max(start, end - 3)
                    self._compact()
                    return
                self._parse_head(start, idx)
            elif state == _LENGTH_STREAM:
                take = min(self._remaining, end - start)
                if take:
                    self.pieces.append(bytes(buf[start : start + take]))
                    self._start = start + take
                    self._remaining -= take
                if self._remaining == 0:
                    self._finish()
                    return
                self._start = self._end = 0
                return
            elif state == _CHUNK_DATA:
                take = min(self._chunk_left, end - start)
                if take:
                    if self.stream:
                        self.pieces.append(bytes(buf[start : start + take]))
                    else:
                        self.body += self._view[start : start + take]
                        self._check_growth()
                    self._start = start = start + take
                    self._chunk_left -= take
                if self._chunk_left:
                    self._start = self._end = 0
                    return
                self._state = _CHUNK_CRLF
            elif state == _CHUNK_CRLF:
                if end - start < 2:
                    self._compact()
                    return
                if buf[start] != 13 or buf[start + 1] != 10:
                    raise ProtocolError(
                        "malformed chunked body: chunk data not followed by CRLF",
                        value=bytes(buf[start : start + 2]),
                    )
                self._start = start + 2
                self._state = _CHUNK_SIZE
            elif state == _CHUNK_SIZE:
                idx = buf.find(b"\r\n", start, end)
                if idx < 0:
                    if end - start >= self._max_header_size:
                        raise ProtocolError("chunk size line too long")
                    self._compact()
                    return
                self._start = idx + 2
                size = _parse_chunk_size(buf, start, idx)
                if size:
                    self._chunk_left = size
                    self._state = _CHUNK_DATA
                else:
                    self._trailer_bytes = 0
                    self._state = _TRAILERS
            elif state == _TRAILERS:
                idx = buf.find(b"\r\n", start, end)
                if idx < 0:
                    if self._trailer_bytes + end - start >= self._max_header_size:
                        raise ProtocolError("chunked trailer section too large")
                    self._compact()
                    return
                # Trailer fields are skipped: nothing in the protocol uses them.
                self._start = idx + 2
                if idx == start:
                    self._finish()
                    return
                self._trailer_bytes += idx + 2 - start
                if self._trailer_bytes >= self._max_header_size:
                    raise ProtocolError("chunked trailer section too large")
            elif state == _UNTIL_EOF:
                if end > start:
                    if self.stream:
                        self.pieces.append(bytes(buf[start:end]))
                    else:
                        self.body += self._view[start:end]
                        self._check_growth()
                self._start = self._end = 0
                return
            else:  # _LENGTH (entered from _parse_head with an empty scratch) or _DONE
                if state == _DONE and start != end:
                    self.keep_alive = False
                return

    def _check_growth(self) -> None:
        limit = self._max_body_size
        if limit is not None and len(self.body) > limit:
            self.keep_alive = False
            raise body_too_large(limit)

    def _grow_body(self, filled: int) -> None:
        """Double the full body buffer (up to the announced length)."""
        body = self.body
        size = min(self._length, max(2 * filled, FIRST_BODY_BUFFER))
        # Our own view must go for the bytearray to be resized in place.
        self._body_view = None
        try:
            try:
                # Appended from one small zero block, not bytes(n): a temporary the size of the
                # growth would be zeroed (calloc) and then copied, twice the work.
                zeros = _zeros()
                while len(body) < size:
                    body += zeros[: size - len(body)]
            except BufferError:
                # Someone still holds a view of the last buffer (an event loop that does not
                # let it go after buffer_updated): grow into a new bytearray instead.
                grown = bytearray(size)
                grown[:filled] = body
                body = self.body = grown
        except MemoryError:
            # A peer's Content-Length must not crash the caller: say what it claimed.
            raise ProtocolError(
                f"response body of {self._length} bytes (Content-Length) cannot be allocated "
                f"beyond its first {filled} bytes",
                value=self._length,
            ) from None
        self._body_view = memoryview(body)

    def _compact(self) -> None:
        """Make room at the end of the scratch buffer by moving unconsumed bytes to the front."""
        start = self._start
        if start == self._end:
            self._start = self._end = self._scan = 0
        elif start and len(self._buf) - self._end < 4096:
            n = self._end - start
            # Same-size slice assignment: allowed although memoryviews of the buffer exist.
            self._buf[:n] = self._buf[start : self._end]
            self._scan = max(0, self._scan - start)
            self._start = 0
            self._end = n

    def _parse_head(self, start: int, idx: int) -> None:
        """Parse the head in ``buf[start:idx]`` and set up the body framing."""
        self._start = idx + 4
        self._scan = idx + 4
        text = self._buf[start:idx].decode("latin-1")
        # A connection mostly sees the same head over and over (same model, same sizes): the
        # last head's parse and framing are reused when the text is identical. Callers get
        # their own headers dict.
        if text == self._last_head:
            status, reason, parsed, keep_alive = self._last_parse
        else:
            version, status, reason, parsed = _parse_head_text(text)
            connection = parsed.get("connection")
            if version == "HTTP/1.1":
                keep_alive = connection is None or "close" not in _tokens(connection)
            else:
                keep_alive = connection is not None and "keep-alive" in _tokens(connection)
            self._last_head = text
            self._last_parse = (status, reason, parsed, keep_alive)
            self._last_framing = None
        if status < 200 and status != 101:
            # Interim response (100 Continue, 103 Early Hints): skip it, a final one follows.
            return
        headers = parsed.copy()
        self.status = status
        self.reason = reason
        self.headers = headers
        self.head_done = True
        # After a server error the connection is not reused: some servers close it then
        # without a word (uvicorn after an unhandled exception: MLServer, KServe), and the
        # next request, sent at once, would be lost (an inference is never sent twice). One
        # new connection per server error costs less.
        self.keep_alive = keep_alive and status < 500
        if self._head_request or status == 204 or status == 304 or status == 101:
            self.body = bytearray()
            if status == 101:  # switched protocols: the connection is no longer HTTP/1.1
                self.keep_alive = False
            self._finish()
            return
        framing = self._last_framing
        if framing is None:
            framing = self._last_framing = _body_framing(headers)
        state, length = framing
        if state == _CHUNK_SIZE:
            if length:
                # Both framings at once is a request-smuggling pattern: trust chunked for this
                # response and never reuse the connection (RFC 9112 6.3).
                self.keep_alive = False
            self.body = bytearray()
            self._state = _CHUNK_SIZE
            return
        if state == _UNTIL_EOF:
            self.body = bytearray()
            self.keep_alive = False
            self._state = _UNTIL_EOF
            return
        if self.stream:
            self.body = bytearray()
            self._remaining = length
            self._state = _LENGTH_STREAM
            return
        if self._max_body_size is not None and length > self._max_body_size:
            self.keep_alive = False
            raise body_too_large(self._max_body_size, length)
        start = self._start
        avail = self._end - start
        if length <= avail:
            self.body = self._buf[start : start + length]
            self._start = start + length
            self._finish()
            return
        # Memory follows the bytes received: the rest of the body gets its room as it comes
        # (get_buffer grows it), never all at once on the server's word.
        body = bytearray(min(length, max(avail, FIRST_BODY_BUFFER)))
        body[:avail] = self._view[start : self._end]
        self.body = body
        self._body_view = memoryview(body)
        self._length = length
        self._remaining = length - avail
        self._start = self._end = 0
        self._state = _LENGTH


def body_too_large(
    limit: int, length: int | None = None, *, decoded: bool = False
) -> ProtocolError:
    """The error for a response body beyond ``max_response_size`` (``length``: as announced)."""
    what = "decompressed response body" if decoded else "response body"
    size = f"of {length} bytes " if length is not None else ""
    return ProtocolError(
        f"{what} {size}is larger than max_response_size ({limit} bytes)",
        value=length if length is not None else limit,
    )


def _parse_head_text(text: str) -> tuple[str, int, str, dict[str, str]]:
    """The HTTP version, status code, reason and headers (lower-case names) of a head."""
    lines = text.split("\r\n")
    status_line = lines[0]
    version, _, rest = status_line.partition(" ")
    # One dict lookup validates and converts the code ("2x0", "²00", " 20" miss).
    status = _STATUS_CODES.get(rest[:3], 0)
    if (
        not status
        or (version != "HTTP/1.1" and version != "HTTP/1.0")
        or (len(rest) > 3 and rest[3] != " ")
    ):
        raise ProtocolError("malformed HTTP status line", value=_preview(status_line))
    headers: dict[str, str] = {}
    del lines[0]
    for line in lines:
        name, sep, value = line.partition(":")
        # name[:1] is also "" (hence "in") for an empty name; a leading space is obsolete
        # line folding, a trailing one is forbidden before the colon (RFC 9112 5.1).
        if not sep or name[:1] in " \t" or name[-1] in " \t":
            raise ProtocolError("malformed HTTP header line", value=_preview(line))
        name = name.lower()
        value = value.strip(" \t")
        if name in headers:
            headers[name] = headers[name] + ", " + value
        else:
            headers[name] = value
    return version, status, rest[4:], headers


def _body_framing(headers: dict[str, str]) -> tuple[int, int]:
    """How a response's body is delimited: ``(_CHUNK_SIZE, 1 if it also has a Content-Length
    else 0)``, ``(_UNTIL_EOF, 0)`` or ``(_LENGTH, length)``."""
    transfer_encoding = headers.get("transfer-encoding")
    if transfer_encoding is not None:
        codings = [c for c in _tokens(transfer_encoding) if c != "identity"]
        if codings == ["chunked"]:
            return _CHUNK_SIZE, int("content-length" in headers)
        if codings:
            raise ProtocolError("unsupported Transfer-Encoding", value=_preview(transfer_encoding))
    content_length = headers.get("content-length")
    if content_length is None:
        return _UNTIL_EOF, 0
    return _LENGTH, _parse_content_length(content_length)


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",") if token.strip()]


def _parse_content_length(value: str) -> int:
    if "," in value:
        # "Content-Length: 5, 5" is tolerated when all values agree (RFC 9110 8.6).
        values = {v.strip(" \t") for v in value.split(",")}
        if len(values) != 1:
            raise ProtocolError("conflicting Content-Length values", value=_preview(value))
        value = values.pop()
    if not value or len(value) > 18 or not value.isdigit() or not value.isascii():
        raise ProtocolError("invalid Content-Length", value=_preview(value))
    return int(value)


def _parse_chunk_size(buf: bytearray, start: int, end: int) -> int:
    line = bytes(buf[start:end])
    semi = line.find(b";")
    digits = (line if semi < 0 else line[:semi]).strip(b" \t")
    if not digits or len(digits) > _CHUNK_SIZE_DIGITS or not _HEXDIGITS.issuperset(digits):
        raise ProtocolError("malformed chunked body: invalid chunk size line", value=line[:80])
    return int(digits, 16)


# -- Content-Encoding --------------------------------------------------------------------------

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_KNOWN_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "identity"})


def _looks_like_zlib(data: bytes | bytearray) -> bool:
    """Whether ``data`` starts with a valid zlib header (RFC 1950: CM=8, CINFO<=7, FCHECK)."""
    return (
        len(data) >= 2
        and data[0] & 0x0F == 8
        and data[0] >> 4 <= 7
        and ((data[0] << 8) | data[1]) % 31 == 0
    )


def _codings(content_encoding: str) -> list[str] | None:
    """Codings to undo, outermost first; ``None`` when one is unknown (leave the body as is)."""
    codings = _tokens(content_encoding)
    if not _KNOWN_CODINGS.issuperset(codings):
        return None
    codings.reverse()
    return [c for c in codings if c != "identity"]


class _Truncated(Exception):
    """A compressed body that ends before its stream does (raised and caught in here only:
    decode_body tells it apart from a body beyond the limit, which must not be retried)."""


def _inflate_all(data: bytes | bytearray, wbits: int, limit: int | None) -> bytes:
    out: list[bytes] = []
    total = 0
    while True:
        obj = zlib.decompressobj(wbits)
        # One byte beyond the limit is enough to know: a bomb never inflates in memory. (A
        # max_length of 0 is zlib's "no limit"; with one, it is at least 1 here.)
        piece = obj.decompress(data, 0 if limit is None else limit - total + 1)
        total += len(piece)
        if limit is not None and total > limit:
            raise body_too_large(limit, decoded=True)
        out.append(piece)
        if not obj.eof:
            raise _Truncated
        data = obj.unused_data
        # Only gzip has multiple members; trailing zero padding is tolerated like gzip(1) does.
        if wbits != _GZIP_WBITS or not data.strip(b"\0"):
            return b"".join(out)


def decode_body(body: bytearray, content_encoding: str, limit: int | None = None) -> bytearray:
    """Undo ``Content-Encoding`` (gzip, x-gzip, deflate; stacked codings too) on a whole body.

    ``deflate`` is accepted both zlib-wrapped (what RFC 9110 means) and raw (what some servers
    send), as browsers do. A body with an unknown coding (``br``, ``zstd``) is returned as is;
    the caller still sees the ``content-encoding`` header. Corrupt data raises ProtocolError,
    and so does a body that decompresses to more than ``limit`` bytes (each coding's output
    is bounded, so a small "decompression bomb" never inflates in memory).
    """
    if not body:
        return body
    codings = _codings(content_encoding)
    if not codings:
        return body
    data: bytes | bytearray = body
    for coding in codings:
        try:
            if coding == "deflate":
                if _looks_like_zlib(data):
                    try:
                        data = _inflate_all(data, zlib.MAX_WBITS, limit)
                        continue
                    except (zlib.error, _Truncated):
                        pass  # a raw stream whose first bytes happen to look like a header
                data = _inflate_all(data, -zlib.MAX_WBITS, limit)
            else:
                data = _inflate_all(data, _GZIP_WBITS, limit)
        except zlib.error as exc:
            raise ProtocolError(f"cannot decode {coding} response body: {exc}") from exc
        except _Truncated:
            what = "deflate" if coding == "deflate" else "gzip"
            raise ProtocolError(f"truncated {what} response body") from None
    return bytearray(data)


class _Inflater:
    __slots__ = ("gzip", "obj", "pending")

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.obj: zlib._Decompress | None = None
        self.pending = b""

    def feed(self, data: bytes, limit: int) -> bytes:
        obj = self.obj
        if obj is None:
            if self.gzip:
                obj = self.obj = zlib.decompressobj(_GZIP_WBITS)
            else:
                # Two bytes decide between zlib-wrapped and raw deflate.
                data = self.pending + data
                if len(data) < 2:
                    self.pending = data
                    return b""
                self.pending = b""
                wbits = zlib.MAX_WBITS if _looks_like_zlib(data) else -zlib.MAX_WBITS
                obj = self.obj = zlib.decompressobj(wbits)
        # One byte beyond the limit tells a piece that is too large (max_length is >= 1 here:
        # 0 would mean no limit).
        out = obj.decompress(data, limit + 1)
        while self.gzip and obj.eof and obj.unused_data.strip(b"\0") and len(out) <= limit:
            rest = obj.unused_data
            obj = self.obj = zlib.decompressobj(_GZIP_WBITS)
            out += obj.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise ProtocolError(
                f"a {len(data)}-byte piece of the streamed {'gzip' if self.gzip else 'deflate'} "
                f"response body decompresses to more than {limit} bytes",
                value=len(data),
            )
        return out

    def flush(self) -> bytes:
        obj = self.obj
        if obj is None:
            if self.pending:
                raise ProtocolError("truncated deflate response body")
            return b""
        out = obj.flush()
        if not obj.eof:
            raise ProtocolError(f"truncated {'gzip' if self.gzip else 'deflate'} response body")
        return out


class StreamDecoder:
    """Incremental ``Content-Encoding`` decoder for streamed bodies.

    >>> dec = StreamDecoder("gzip")
    >>> import gzip
    >>> data = gzip.compress(b"hello")
    >>> dec.decode(data[:5]) + dec.decode(data[5:]) + dec.flush()
    b'hello'
    """

    __slots__ = ("_limit", "_stages")

    def __init__(
        self, content_encoding: str | None, max_piece_size: int = DEFAULT_MAX_DECODED_PIECE
    ) -> None:
        codings = _codings(content_encoding) if content_encoding else None
        self._stages = [_Inflater(c != "deflate") for c in codings] if codings else []
        #: What one piece may decompress to, per coding (a bomb raises ProtocolError).
        self._limit = max_piece_size

    @property
    def active(self) -> bool:
        """False when the body passes through unchanged."""
        return bool(self._stages)

    def decode(self, data: bytes) -> bytes:
        """Decode the next piece; may return ``b""`` while the decoder needs more input."""
        try:
            for stage in self._stages:
                data = stage.feed(data, self._limit)
        except zlib.error as exc:
            raise ProtocolError(f"cannot decode compressed response body: {exc}") from exc
        return data

    def flush(self) -> bytes:
        """Finish decoding; raises ProtocolError when the compressed stream was truncated."""
        out = b""
        try:
            for stage in self._stages:
                if out:
                    out = stage.feed(out, self._limit)
                out += stage.flush()
        except zlib.error as exc:
            raise ProtocolError(f"cannot decode compressed response body: {exc}") from exc
        return out


class StreamedBody:
    """The body of a streamed response (``ResponseParser.start(stream=True)``), decoded as the
    parser hands its pieces out; the transports' streaming loops only receive and wait.

    >>> import gzip
    >>> parser = ResponseParser()
    >>> parser.start(stream=True)
    >>> data = gzip.compress(b"hello")
    >>> head = b"HTTP/1.1 200 OK\\r\\nContent-Encoding: gzip\\r\\nContent-Length: %d\\r\\n\\r\\n"
    >>> received = head % len(data) + data
    >>> parser.get_buffer()[: len(received)] = received
    >>> parser.buffer_updated(len(received))
    True
    >>> body = StreamedBody(parser)
    >>> b"".join(body.take()), body.finished
    (b'hello', True)
    """

    __slots__ = ("_decoder", "_parser", "finished")

    def __init__(self, parser: ResponseParser) -> None:
        self._parser = parser
        self._decoder = StreamDecoder(parser.headers.get("content-encoding"))
        #: Whether the whole body has been handed out (set by :meth:`take`).
        self.finished = False

    def take(self) -> Iterator[bytes]:
        """The (decompressed) pieces received since the last call; once the response is
        complete and all its pieces are out, the decoder's tail, and :attr:`finished` is set."""
        parser = self._parser
        decoder = self._decoder
        for piece in parser.take_pieces():
            if decoder.active:
                piece = decoder.decode(piece)
            if piece:
                yield piece
        # Pieces that came while the caller held the last ones (an event loop kept receiving)
        # are taken next time: the body is finished only when none is left.
        if parser.done and not parser.pieces:
            self.finished = True
            tail = decoder.flush()
            if tail:
                yield tail
