"""gRPC over HTTP/2, without I/O: request header blocks, the length-prefixed message framing,
and reading a call's response (headers, messages, trailers) into a status.

This is the gRPC layer of the native transport (:mod:`kserve_v2.transport.native`); HTTP/2 itself
is :mod:`kserve_v2.h2.connection`. It follows gRPC's "PROTOCOL-HTTP2" document: requests
carry ``:method POST``, ``:scheme``, ``:path /package.Service/Method``, ``:authority``,
``te: trailers``, ``content-type: application/grpc``, ``grpc-timeout`` and
``grpc-encoding`` when set, then the caller's metadata; each message is a 1-byte compressed
flag, a 4-byte big-endian length and the message; a response ends with trailers carrying
``grpc-status`` and the percent-encoded ``grpc-message`` (or is a "trailers-only" response
whose single header block carries them).

Example::

    headers = RequestHeaders(scheme="http", authority="localhost:8001")
    block = headers.block("/inference.GRPCInferenceService/ServerLive", timeout=5.0)
    prefix = message_prefix(len(body))
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Final
from urllib.parse import unquote

from kserve_v2.errors import DeadlineExceededError, KServeError, ProtocolError, ServerError
from kserve_v2.grpc.status import StatusCode
from kserve_v2.h2.hpack import Encoder
from kserve_v2.version import __version__

__all__ = [
    "STATUS_NAMES",
    "CallResponse",
    "MessageReader",
    "RequestHeaders",
    "compress_message",
    "grpc_timeout",
    "message_prefix",
    "status_error",
]

#: gRPC status names by wire number: :class:`StatusCode`'s, as a tuple for the lookup that
#: ends every call (a tuple index is cheaper than ``StatusCode(n).name``).
STATUS_NAMES: Final = tuple(code.name for code in StatusCode)
# ... and by the grpc-status text that ends every call ("0"): a lookup, not a parse.
_STATUS_BY_TEXT: Final = {str(number): name for number, name in enumerate(STATUS_NAMES)}

# gRPC's mapping of HTTP statuses that are not 200 (a proxy or a non-gRPC server answered).
_HTTP_TO_GRPC: Final = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}

_PREFIX: Final = struct.Struct(">BL")
USER_AGENT: Final = f"kserve-v2/{__version__}"
ACCEPT_ENCODING: Final = "identity,deflate,gzip"
# Memory follows the bytes received, not the length a prefix announces: a message's buffer
# starts at most this large when its prefix arrives, then grows geometrically (by
# _GROWTH) as its bytes come, never beyond the message. A 112-byte reply announcing 64 MiB
# costs this much, not 64 MiB; a real 64 MiB message costs a few reallocations (which
# mostly move pages, not bytes) on top of its one copy.
_FIRST_ALLOCATION: Final = 1 << 20
_GROWTH: Final = 2


def message_prefix(length: int, compressed: bool = False) -> bytes:
    """The 5-byte prefix of a message: compressed flag and big-endian length."""
    return _PREFIX.pack(1 if compressed else 0, length)


def compress_message(data: bytes | bytearray | memoryview, encoding: str) -> bytes:
    """``data`` compressed for ``grpc-encoding: encoding`` (``gzip`` or ``deflate``, which in
    gRPC means the zlib format)."""
    if encoding == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    return zlib.compress(data)


def _decompress(data: bytes | bytearray, encoding: str | None, limit: int | None) -> bytearray:
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise ServerError(
            f"the server sent a compressed message with grpc-encoding {encoding!r}",
            grpc_code=StatusCode.INTERNAL.name,
        )
    engine = zlib.decompressobj(wbits)
    try:
        # One byte beyond the limit tells a message that is too large from one that fits
        # exactly (whose end-of-stream marker may still be unread at the limit).
        out = engine.decompress(data, limit + 1 if limit is not None else 0)
        if limit is not None and len(out) > limit:
            raise ServerError(
                f"a compressed message decompresses to more than the {limit}-byte limit",
                grpc_code=StatusCode.RESOURCE_EXHAUSTED.name,
            )
        if not engine.eof:
            raise ProtocolError(f"truncated {encoding} message")
    except zlib.error as exc:
        raise ProtocolError(f"undecodable {encoding} message: {exc}") from exc
    # A copy, but the arrays viewing a message stay writeable whether it came compressed
    # or not (and decompressing costs far more than the copy).
    return bytearray(out)


def grpc_timeout(seconds: float) -> str:
    """A ``grpc-timeout`` value: at most 8 digits and a unit, rounded up (never shorter)."""
    if seconds <= 0:
        return "1n"
    if not seconds < math.inf:  # math.ceil cannot take infinity (nor NaN)
        return "99999999H"
    for unit, scale in (("u", 1e6), ("m", 1e3), ("S", 1.0), ("M", 1 / 60), ("H", 1 / 3600)):
        value = math.ceil(seconds * scale)
        if value <= 99_999_999:
            return f"{value}{unit}"
    return "99999999H"


class RequestHeaders:
    """Encodes request header blocks; the fixed part of each method's block is cached
    (HPACK blocks concatenate because the encoder never uses the dynamic table)."""

    def __init__(self, *, scheme: str, authority: str, user_agent: str = USER_AGENT) -> None:
        self._encoder = Encoder()
        self._scheme = scheme
        self._authority = authority
        self._user_agent = user_agent
        self._fixed: dict[str, bytes] = {}
        # By the timeout in seconds: a client's calls mostly share one.
        self._timeouts: dict[float, bytes] = {}

    def block(
        self,
        path: str,
        *,
        timeout: float | None = None,
        encoding: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        extra: Sequence[tuple[str, str]] = (),
    ) -> bytes:
        """The header block of a call to ``path`` (``/package.Service/Method``)."""
        fixed = self._fixed.get(path)
        if fixed is None:
            fixed = self._fixed[path] = self._encoder.encode(
                [
                    (":method", "POST"),
                    (":scheme", self._scheme),
                    (":path", path),
                    (":authority", self._authority),
                    ("te", "trailers"),
                    ("content-type", "application/grpc"),
                    ("user-agent", self._user_agent),
                    ("grpc-accept-encoding", ACCEPT_ENCODING),
                ]
            )
        if timeout is None and encoding is None and not metadata and not extra:
            return fixed
        parts = [fixed]
        if timeout is not None:
            encoded = self._timeouts.get(timeout)
            if encoded is None:
                if len(self._timeouts) > 256:
                    self._timeouts.clear()
                encoded = self._timeouts[timeout] = self._encoder.encode(
                    [("grpc-timeout", grpc_timeout(timeout))]
                )
            parts.append(encoded)
        dynamic = list(extra)
        if encoding is not None:
            dynamic.append(("grpc-encoding", encoding))
        dynamic.extend(metadata)
        if dynamic:
            parts.append(self._encoder.encode(dynamic, sensitive=_SENSITIVE))
        return b"".join(parts)


_SENSITIVE: Final = frozenset({"authorization", "proxy-authorization", "cookie"})


class MessageReader:
    """Splits a stream's DATA into length-prefixed messages; calls
    ``on_message((flag, data))`` for each complete one (one argument: a list's ``append``
    takes them as they are). Chunks may be views that die after the call: they are copied."""

    __slots__ = ("_buffer", "_filled", "_flag", "_head", "_limit", "_need", "_on_message")

    def __init__(
        self,
        on_message: Callable[[tuple[int, bytes | bytearray]], object],
        limit: int | None = None,
    ) -> None:
        self._on_message = on_message
        self._limit = limit
        self._head = bytearray()  # a split 5-byte prefix
        self._buffer: bytearray | None = None  # the message being filled
        self._filled = 0
        self._need = 0
        self._flag = 0

    @property
    def idle(self) -> bool:
        """No partial message is pending (a stream may end only here)."""
        return self._buffer is None and not self._head

    def feed(self, chunk: memoryview) -> None:
        pos = 0
        end = len(chunk)
        while pos < end:
            buffer = self._buffer
            if buffer is not None:
                filled = self._filled
                take = min(self._need - filled, end - pos)
                size = len(buffer)
                if filled + take > size:  # grow geometrically, up to the message's length
                    buffer += bytes(min(self._need, max(size * _GROWTH, filled + take)) - size)
                buffer[filled : filled + take] = chunk[pos : pos + take]
                self._filled = filled + take
                pos += take
                if self._filled == self._need:
                    self._buffer = None
                    self._on_message((self._flag, buffer))
                continue
            if self._head or end - pos < 5:
                take = min(5 - len(self._head), end - pos)
                self._head += chunk[pos : pos + take]
                pos += take
                if len(self._head) < 5:
                    return
                flag, length = _PREFIX.unpack(self._head)
                self._head.clear()
            else:
                flag, length = _PREFIX.unpack_from(chunk, pos)
                pos += 5
                if end - pos >= length and self._check(flag, length):
                    # The whole message is here: one copy, straight out of the chunk,
                    # into a bytearray like a message that spans reads (numpy arrays
                    # viewing it are writeable whatever its size).
                    self._on_message((flag, bytearray(chunk[pos : pos + length])))
                    pos += length
                    continue
            self._check(flag, length)
            if length == 0:
                self._on_message((flag, b""))
                continue
            self._flag = flag
            self._need = length
            self._filled = 0
            self._buffer = bytearray(min(length, _FIRST_ALLOCATION))

    def _check(self, flag: int, length: int) -> bool:
        if flag > 1:
            raise ProtocolError(f"gRPC message with compressed flag {flag} (only 0 or 1 exist)")
        if self._limit is not None and length > self._limit:
            raise ServerError(
                f"received message of {length} bytes, more than the {self._limit}-byte limit",
                grpc_code=StatusCode.RESOURCE_EXHAUSTED.name,
            )
        return True


def _small_int(text: str) -> int:
    """A header's decimal value, or -1 when it is not a few ASCII digits (``int`` alone would
    take other Unicode digits, signs, spaces, underscores, and raise on thousands of digits)."""
    if 0 < len(text) <= 9 and text.isascii() and text.isdigit():
        return int(text)
    return -1


def status_error(
    code: str, message: str, url: str | None = None, retry_after: float | None = None
) -> KServeError:
    """The kserve-v2 error for a non-OK gRPC status (the same tree grpcio's errors map to);
    ``retry_after``: the server's pushback
    (:func:`~kserve_v2.grpc.status.retry_pushback`)."""
    if code == StatusCode.DEADLINE_EXCEEDED.name:
        return DeadlineExceededError(f"gRPC deadline exceeded: {message}", url=url)
    return ServerError(message, grpc_code=code, retry_after=retry_after)


class CallResponse:
    """One call's response as it arrives: headers, messages, trailers.

    Feed it the HTTP/2 events of its stream (:meth:`headers`, :meth:`data`); ``done`` turns
    true at the end of the stream, then :meth:`status` is the call's gRPC status and
    ``messages`` its (decompressed) messages. ``on_message`` (for streams) receives each
    message as it completes instead of ``messages`` collecting them.
    """

    __slots__ = (
        "_arrived",
        "_encoding",
        "_limit",
        "_on_message",
        "_reader",
        "_skip_body",
        "done",
        "header_list",
        "http_status",
        "messages",
        "trailer_list",
    )

    def __init__(
        self,
        limit: int | None = None,
        on_message: Callable[[bytes | bytearray], None] | None = None,
    ) -> None:
        self.http_status = 0
        self.header_list: list[tuple[str, str]] = []
        self.trailer_list: list[tuple[str, str]] | None = None
        self.messages: list[bytes | bytearray] = []
        self.done = False
        self._encoding: str | None = None
        self._limit = limit
        self._on_message = on_message
        # The reader hands complete messages to a plain list, not to a method of this
        # object: a reference cycle would keep every (possibly huge) message alive until
        # the cyclic garbage collector happened to run.
        self._arrived: list[tuple[int, bytes | bytearray]] = []
        self._reader = MessageReader(self._arrived.append, limit)
        self._skip_body = False

    def _message(self, flag: int, data: bytes | bytearray) -> None:
        if flag:
            data = _decompress(data, self._encoding, self._limit)
        if self._on_message is not None:
            self._on_message(data)
        else:
            self.messages.append(data)

    def headers(self, headers: list[tuple[str, str]], end_stream: bool) -> None:
        if not self.http_status:
            self.header_list = headers
            content_type = None
            for name, value in headers:
                if name == ":status":
                    self.http_status = 200 if value == "200" else _small_int(value)
                elif name == "grpc-encoding":
                    self._encoding = value
                elif name == "content-type":
                    content_type = value
            if self.http_status == 0:
                raise ProtocolError("response headers without :status")
            # Not gRPC (an error page from a proxy, say): the body is not parsed as messages,
            # status() reports the HTTP status or content-type instead.
            self._skip_body = self.http_status != 200 or (
                content_type is not None and not content_type.startswith("application/grpc")
            )
            if end_stream:  # trailers-only
                self.trailer_list = headers
                self.done = True
            return
        if not end_stream:
            raise ProtocolError("a second header block that does not end the stream")
        self.trailer_list = headers
        self.done = True

    def data(self, chunk: memoryview, end_stream: bool) -> None:
        if not self.http_status:
            raise ProtocolError("DATA before the response headers")
        if chunk and not self._skip_body:
            self._reader.feed(chunk)
            if self._arrived:
                arrived = self._arrived
                try:
                    for flag, message in arrived:
                        if flag or self._on_message is not None:
                            self._message(flag, message)
                        else:  # a unary call's plain message
                            self.messages.append(message)
                finally:
                    arrived.clear()
        if end_stream:
            self.done = True

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Headers and trailers, pseudo-headers left out (what grpcio calls metadata)."""
        items = [*self.header_list]
        if self.trailer_list is not None and self.trailer_list is not self.header_list:
            items += self.trailer_list
        return tuple((name, value) for name, value in items if not name.startswith(":"))

    def status(self) -> tuple[str, str]:
        """``(code name, message)`` of the finished call."""
        trailers = self.trailer_list
        code_text = None
        message = ""
        content_type = ""
        for name, value in trailers or ():
            if name == "grpc-status":
                code_text = value
            elif name == "grpc-message":
                message = unquote(value, errors="replace")
        for name, value in self.header_list:
            if name == "content-type":
                content_type = value
        if self.http_status != 200 and code_text is None:
            return (
                _HTTP_TO_GRPC.get(self.http_status, StatusCode.UNKNOWN).name,
                f"HTTP status {self.http_status} from a server that did not answer in gRPC",
            )
        if not content_type.startswith("application/grpc") and code_text is None:
            return StatusCode.UNKNOWN.name, f"response content-type {content_type!r} is not gRPC"
        if code_text is None:
            return StatusCode.INTERNAL.name, "the server ended the call without a grpc-status"
        code = _STATUS_BY_TEXT.get(code_text)
        if code is None:  # not in its usual form ("00", say), or unknown
            number = _small_int(code_text)
            if not 0 <= number < len(STATUS_NAMES):
                return StatusCode.UNKNOWN.name, f"unknown grpc-status {code_text!r}: {message}"
            code = STATUS_NAMES[number]
        if not self._reader.idle:
            return StatusCode.INTERNAL.name, "the stream ended inside a message"
        return code, message
