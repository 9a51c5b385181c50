"""The client side of one HTTP/2 connection, without I/O (RFC 9113).

:class:`H2Connection` turns what the caller wants to send into bytes (:meth:`~H2Connection.
data_to_send`) and the bytes the peer sent into events (:meth:`~H2Connection.receive`). It
keeps the state HTTP/2 requires of a client: the SETTINGS exchange, both directions' flow
control (connection and stream windows), the HPACK decoder (every header block is decoded,
even on streams the caller dropped, because HPACK state is per connection), PING and
SETTINGS acknowledgements, GOAWAY and RST_STREAM. Sockets, threads, event loops and the
meaning of the headers are the caller's (see :mod:`kserve_v2.transport.native`).

Design choices, for speed on small calls and no copies on large ones:

* Header blocks are encoded by the caller (gRPC request headers barely change between
  calls, so the caller caches them) and passed in as bytes.
* DATA payloads are handed out as they arrive, as slices of the buffer given to
  :meth:`~H2Connection.receive`, without waiting for the whole frame and without copying.
  A :class:`DataReceived`'s ``data`` is therefore valid only until the next ``receive``
  call: copy what you keep.
* Outgoing DATA is a list of buffers: frame headers plus slices of the caller's buffer, so
  a 64 MiB message is not copied to be framed.
* Receive windows are as large as HTTP/2 allows and topped up when half used, so the peer
  never waits on us; the caller buffers what it receives.

Every stream this side opens follows one state table, :data:`STREAM_TRANSITIONS` (RFC 9113
section 5.1, written out like h11's ``_state.py``). Three kinds of trouble, three answers:

* the peer breaks HTTP/2: :class:`H2ConnectionError` (a
  :class:`~kserve_v2.errors.ProtocolError`) after a GOAWAY naming the error is queued; the
  connection is unusable afterwards. Malformed input never raises anything else.
* the peer's response on one stream is malformed (RFC 9113 section 8: header names and
  pseudo-headers, checked like python-hyper/h2's ``validate_headers``): a stream error; the
  stream is reset with PROTOCOL_ERROR and reported as a :class:`StreamReset` carrying the
  ``error``, and the connection goes on.
* this side asks for something the state does not allow (sending after its own END_STREAM,
  on a closed stream, opening one after GOAWAY): :class:`H2StateError`, an
  :class:`~kserve_v2.errors.InvalidInputError` naming the state, never a ProtocolError.

Example::

    conn = H2Connection()
    conn.initiate()
    sock.sendall(b"".join(conn.data_to_send()))
    stream_id = conn.open_stream(header_block, end_stream=False)
    conn.send_data(stream_id, b"...", end_stream=True)
    sock.sendall(b"".join(conn.data_to_send()))
    for event in conn.receive(sock.recv(65536)):
        ...
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Sequence
from typing import Final

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.h2.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW,
    FLAG_ACK,
    FLAG_END_HEADERS,
    FLAG_END_STREAM,
    FLAG_PADDED,
    FLAG_PRIORITY,
    GOAWAY,
    HEADERS,
    MAX_FRAME_SIZE_LIMIT,
    MAX_WINDOW,
    PING,
    PREFACE,
    PRIORITY,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    FrameType,
    Setting,
    frame_header,
)
from kserve_v2.h2.hpack import Decoder, HPACKError

__all__ = [
    "CONTINUATION_BACKLOG",
    "DataReceived",
    "Event",
    "GoAwayReceived",
    "H2ConnectionError",
    "H2Connection",
    "H2StateError",
    "HeadersReceived",
    "PingAcknowledged",
    "StreamInput",
    "StreamReset",
    "StreamState",
    "WindowUpdated",
    "check_response_headers",
]

Buffer = bytes | bytearray | memoryview

_FRAME_HEADER: Final = struct.Struct(">HBBBL")
_U32: Final = struct.Struct(">L")
_GOAWAY: Final = struct.Struct(">LL")
_SETTING: Final = struct.Struct(">HL")
# The longest first frame an HTTP/2 server can send (its preface, a SETTINGS frame, within
# the initial SETTINGS_MAX_FRAME_SIZE): first bytes announcing more are not HTTP/2 at all.
_FIRST_FRAME_MOST: Final = 1 << 14

#: SETTINGS_MAX_FRAME_SIZE this side announces: large DATA frames mean fewer frames to parse
#: for big tensors; header blocks of this size are still bounded by max_header_list_size.
RECEIVE_MAX_FRAME_SIZE: Final = 1 << 20
#: Each stream's receive window (our SETTINGS_INITIAL_WINDOW_SIZE): what a server may send
#: on a stream beyond what this side has consumed. Refilled once half is consumed, it is
#: large enough that a fast server does not wait for us on loopback or a fast network, and
#: it bounds what a stream whose reader falls behind can make us buffer.
RECEIVE_WINDOW: Final = 16 << 20
#: The connection's receive window: the largest allowed (the stream windows are the bound).
CONNECTION_RECEIVE_WINDOW: Final = MAX_WINDOW
# Top the connection window up once this much of it has been consumed.
_CONNECTION_REFILL: Final = CONNECTION_RECEIVE_WINDOW // 2
#: The largest header list (RFC 7541 sizes) this side accepts, announced as
#: SETTINGS_MAX_HEADER_LIST_SIZE. A header block (HEADERS + CONTINUATION, still compressed)
#: larger than the limit is refused before it is decoded: HPACK never makes a field longer
#: than the 32 bytes of overhead each one counts for.
DEFAULT_MAX_HEADER_LIST_SIZE: Final = 1 << 20
#: CONTINUATION frames one header block may take (python-hyper/h2's bound): empty ones
#: cost nothing on the wire, and without a bound a peer could send them for ever.
CONTINUATION_BACKLOG: Final = 64


class H2ConnectionError(ProtocolError):
    """The peer broke HTTP/2 (or sent GOAWAY with an error); ``code`` is the HTTP/2 error
    code this side reported (or received)."""

    def __init__(self, message: str, code: int = ErrorCode.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.code = code


class H2StateError(InvalidInputError):
    """This side asked for something the connection's state does not allow: sending on a
    stream after its own END_STREAM, on a stream that is closed or was never opened, opening
    a stream once no more may open, feeding bytes to a closed connection. The caller's
    mistake, never the peer's (that is :class:`H2ConnectionError`); the connection is
    unharmed. ``stream_id`` and ``state`` say where it happened (0 and None: the connection).
    """

    def __init__(
        self, message: str, *, stream_id: int = 0, state: StreamState | None = None
    ) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.state = state


# ------------------------------------------------------------------------- stream states


@enum.unique
class StreamState(enum.IntEnum):
    """The states of a stream this client opened (RFC 9113 section 5.1; "idle" and
    "reserved" never apply: a client stream opens with its HEADERS, and push is off)."""

    #: Both sides may send.
    OPEN = 0
    #: We sent END_STREAM; the server may still send.
    HALF_CLOSED_LOCAL = 1
    #: The server sent END_STREAM; we may still send.
    HALF_CLOSED_REMOTE = 2
    #: Both sides ended, or the stream was reset.
    CLOSED = 3


@enum.unique
class StreamInput(enum.IntEnum):
    """What happens to a stream: a frame sent or received."""

    #: We send DATA (or anything else that does not end our side).
    SEND_DATA = 0
    #: We end our side: DATA or trailers with END_STREAM.
    SEND_END_STREAM = 1
    #: The server sends a header block (response headers or trailers).
    RECV_HEADERS = 2
    #: The server sends DATA.
    RECV_DATA = 3
    #: The server's frame carries END_STREAM.
    RECV_END_STREAM = 4
    #: Either side resets the stream.
    RESET = 5


_S = StreamState
_I = StreamInput
#: The whole stream state machine (h11's ``_state.py`` habit): (state, input) -> next state.
#: A pair that is missing is illegal: our own inputs raise :class:`H2StateError` naming the
#: state, the peer's are a connection error (STREAM_CLOSED).
STREAM_TRANSITIONS: Final[dict[tuple[StreamState, StreamInput], StreamState]] = {
    (_S.OPEN, _I.SEND_DATA): _S.OPEN,
    (_S.OPEN, _I.SEND_END_STREAM): _S.HALF_CLOSED_LOCAL,
    (_S.OPEN, _I.RECV_HEADERS): _S.OPEN,
    (_S.OPEN, _I.RECV_DATA): _S.OPEN,
    (_S.OPEN, _I.RECV_END_STREAM): _S.HALF_CLOSED_REMOTE,
    (_S.OPEN, _I.RESET): _S.CLOSED,
    (_S.HALF_CLOSED_LOCAL, _I.RECV_HEADERS): _S.HALF_CLOSED_LOCAL,
    (_S.HALF_CLOSED_LOCAL, _I.RECV_DATA): _S.HALF_CLOSED_LOCAL,
    (_S.HALF_CLOSED_LOCAL, _I.RECV_END_STREAM): _S.CLOSED,
    (_S.HALF_CLOSED_LOCAL, _I.RESET): _S.CLOSED,
    (_S.HALF_CLOSED_REMOTE, _I.SEND_DATA): _S.HALF_CLOSED_REMOTE,
    (_S.HALF_CLOSED_REMOTE, _I.SEND_END_STREAM): _S.CLOSED,
    (_S.HALF_CLOSED_REMOTE, _I.RESET): _S.CLOSED,
}
# The table as nested tuples, _NEXT[state][input] (None: illegal): two index operations per
# frame instead of hashing a pair of enum members.
_NEXT: Final = tuple(
    tuple(STREAM_TRANSITIONS.get((state, event)) for event in StreamInput) for state in StreamState
)
# The inputs as module constants, for the per-frame paths (see frames.py on enum attributes).
_SEND_DATA: Final = StreamInput.SEND_DATA
_SEND_END_STREAM: Final = StreamInput.SEND_END_STREAM
_RECV_HEADERS: Final = StreamInput.RECV_HEADERS
_RECV_DATA: Final = StreamInput.RECV_DATA
_RECV_END_STREAM: Final = StreamInput.RECV_END_STREAM
_HALF_CLOSED_REMOTE: Final = StreamState.HALF_CLOSED_REMOTE
del _S, _I


# ----------------------------------------------------------------------- header checks

# RFC 9110 section 5.1 field names (tokens), lowercase as RFC 9113 section 8.2.1 requires.
_FIELD_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]+")
# RFC 9113 section 8.2.1: no NUL, CR or LF anywhere in a value.
_BAD_VALUE_CHAR: Final = re.compile(r"[\x00\r\n]")
# Hop-by-hop fields, which HTTP/2 forbids (RFC 9113 section 8.2.2).
_CONNECTION_FIELDS: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)


def _field_problem(name: str, value: str) -> str | None:
    """What is wrong with a regular (not pseudo-) field, or None."""
    if not _FIELD_NAME.fullmatch(name):
        return f"invalid header name {name!r}"
    if name in _CONNECTION_FIELDS:
        return f"connection-specific header {name!r}"
    if name == "te" and value != "trailers":
        return f"te header {value!r} (only 'trailers' is allowed)"
    # Surrounding whitespace, which RFC 9113 also forbids, is let through: Triton 2.51 ends its
    # grpc-message values with a space, and such a value is harmless to read.
    if _BAD_VALUE_CHAR.search(value):
        return f"invalid value of header {name!r}: {value[:80]!r}"
    return None


def check_response_headers(
    headers: Sequence[tuple[str, str]],
    trailers: bool,
    checked: set[tuple[str, str]] | None = None,
) -> str | None:
    """What makes a response header block (or, with ``trailers``, a trailer block) malformed
    under RFC 9113 section 8, or None when it is well formed (python-hyper/h2's
    ``validate_headers`` rules): names lowercase tokens, values without NUL/CR/LF (surrounding
    whitespace is tolerated: Triton sends it), no connection-specific fields; pseudo-headers
    first, only ``:status`` (three digits) and exactly once in a response, none in trailers.

    ``checked`` remembers regular fields already found valid (header blocks repeat the same
    fields call after call); the caller bounds its size.

    Example::

        check_response_headers([(":status", "200")], trailers=False)  # None
        check_response_headers([("grpc-status", "0")], trailers=False)  # "... no :status"
    """
    status = None
    regular = False
    for field in headers:
        name = field[0]
        if name and name[0] == ":":
            if trailers:
                return f"pseudo-header {name!r} in trailers"
            if regular:
                return f"pseudo-header {name!r} after a regular header"
            if name != ":status":
                return f"pseudo-header {name!r} in a response"
            if status is not None:
                return "more than one :status"
            status = field[1]
            if not (len(status) == 3 and status.isascii() and status.isdigit()):
                return f":status {status[:40]!r} is not a three-digit code"
            continue
        regular = True
        if checked is not None and field in checked:
            continue
        problem = _field_problem(name, field[1])
        if problem is not None:
            return problem
        if checked is not None:
            checked.add(field)
    if status is None and not trailers:
        return "response headers without :status"
    return None


# Fields, and whole header blocks, remembered as valid per connection, at most (then
# forgotten all at once): a server's blocks repeat call after call, and a block seen before
# costs one lookup instead of a check of each field.
_CHECKED_FIELDS_MAX: Final = 256
_CHECKED_BLOCKS_MAX: Final = 64


# ---------------------------------------------------------------------------------- events


class Event:
    """Base class of what :meth:`H2Connection.receive` reports."""

    __slots__ = ()


class HeadersReceived(Event):
    """A complete header block on a stream: the response headers, or its trailers."""

    __slots__ = ("end_stream", "headers", "stream_id")

    def __init__(self, stream_id: int, headers: list[tuple[str, str]], end_stream: bool) -> None:
        self.stream_id = stream_id
        self.headers = headers
        self.end_stream = end_stream

    def __repr__(self) -> str:
        return f"HeadersReceived({self.stream_id}, {self.headers!r}, end_stream={self.end_stream})"


class DataReceived(Event):
    """Part of a stream's DATA. ``data`` is a view valid until the next ``receive`` call;
    ``end_stream`` is set on the last part of the stream (possibly empty)."""

    __slots__ = ("data", "end_stream", "stream_id")

    def __init__(self, stream_id: int, data: memoryview, end_stream: bool) -> None:
        self.stream_id = stream_id
        self.data = data
        self.end_stream = end_stream

    def __repr__(self) -> str:
        return (
            f"DataReceived({self.stream_id}, {len(self.data)} bytes, end_stream={self.end_stream})"
        )


class StreamReset(Event):
    """A stream ended early: the peer reset it (RST_STREAM), GOAWAY left it unprocessed
    (``refused``), or the peer's response on it was malformed (``error``, the
    :class:`~kserve_v2.errors.ProtocolError` to report; this side reset it with
    PROTOCOL_ERROR, RFC 9113 section 8.1.1, and the connection goes on)."""

    __slots__ = ("error", "error_code", "refused", "stream_id")

    def __init__(
        self,
        stream_id: int,
        error_code: int,
        refused: bool = False,
        error: ProtocolError | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.error_code = error_code
        self.refused = refused
        self.error = error

    def __repr__(self) -> str:
        return f"StreamReset({self.stream_id}, {ErrorCode.name_of(self.error_code)})"


class WindowUpdated(Event):
    """More may be sent: on ``stream_id``, or on every stream when it is 0."""

    __slots__ = ("stream_id",)

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id


class GoAwayReceived(Event):
    """The peer will process no stream above ``last_stream_id``; no new streams may open."""

    __slots__ = ("debug_data", "error_code", "last_stream_id")

    def __init__(self, last_stream_id: int, error_code: int, debug_data: bytes) -> None:
        self.last_stream_id = last_stream_id
        self.error_code = error_code
        self.debug_data = debug_data

    def __repr__(self) -> str:
        return (
            f"GoAwayReceived(last_stream_id={self.last_stream_id}, "
            f"{ErrorCode.name_of(self.error_code)}, {self.debug_data!r})"
        )


class PingAcknowledged(Event):
    """The answer to one of our PINGs."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


# --------------------------------------------------------------------------------- streams


class _Stream:
    __slots__ = (
        "acknowledge_on_receipt",
        "held",
        "recv_consumed",
        "recv_window",
        "response_started",
        "send_window",
        "state",
    )

    def __init__(
        self, send_window: int, recv_window: int, state: StreamState, on_receipt: bool
    ) -> None:
        self.send_window = send_window
        self.recv_window = recv_window  # what the peer may still send
        self.recv_consumed = 0  # consumed, not yet given back with WINDOW_UPDATE
        self.held = 0  # received, not yet acknowledged by the caller
        self.acknowledge_on_receipt = on_receipt
        self.state = state
        self.response_started = False  # the final (not 1xx) response headers arrived


class H2Connection:
    """A client HTTP/2 connection's state; see the module docstring."""

    def __init__(
        self,
        *,
        max_header_list_size: int = DEFAULT_MAX_HEADER_LIST_SIZE,
        receive_window: int | None = None,
        http_url: str | None = None,
    ) -> None:
        window = RECEIVE_WINDOW if receive_window is None else receive_window
        if not 0 < window <= MAX_WINDOW:
            raise InvalidInputError(
                f"receive_window must be between 1 and 2**31-1, not {window}", value=window
            )
        # Suggested when the server answers in HTTP/1 (the URL names an HTTP port).
        self._http_url = http_url
        self._stream_window = window
        self._stream_refill = max(1, window // 2)
        self._decoder = Decoder(max_header_list_size=max_header_list_size)
        self._max_header_list_size = max_header_list_size
        self._out: list[Buffer] = []
        #: Bytes of the small frames queued so far that answer the peer or end a stream:
        #: acknowledgements, window updates, resets (a running total; not HEADERS, DATA or
        #: our own PINGs). A peer can make us queue these by what it sends: a transport
        #: bounds how many it leaves unsent (:mod:`kserve_v2.transport.native`).
        self.replies_queued = 0
        self._streams: dict[int, _Stream] = {}
        self._next_stream_id = 1
        # What the peer allows us.
        self.peer_max_frame_size = DEFAULT_MAX_FRAME_SIZE
        self.peer_initial_window = DEFAULT_WINDOW
        self.peer_max_concurrent_streams: int | None = None
        self._send_window = DEFAULT_WINDOW
        # Receive side: the connection window (raised by initiate), what of it was consumed.
        self._recv_window = DEFAULT_WINDOW
        self._recv_consumed = 0
        self._buf = bytearray()  # an incomplete frame header or control frame
        self._data_stream = 0  # the DATA frame whose payload is arriving
        self._data_left = 0  # its payload bytes still to come
        self._pad_left = 0  # its padding still to come, after the payload
        self._data_end = False  # it ends its stream
        self._header_stream = 0  # a header block continues in CONTINUATION frames
        self._header_parts: list[bytes] = []
        self._header_end_stream = False
        self._header_size = 0
        self._header_frames = 0  # CONTINUATION frames of the block so far
        self.goaway: GoAwayReceived | None = None
        self.closed = False
        self._got_bytes = False
        self._got_settings = False  # the server's preface (a SETTINGS frame) arrived
        self._checked_fields: set[tuple[str, str]] = set()
        # Header blocks found well formed: response headers, and trailers.
        self._checked_heads: set[tuple[tuple[str, str], ...]] = set()
        self._checked_trailers: set[tuple[tuple[str, str], ...]] = set()

    # ------------------------------------------------------------------ sending

    def initiate(self) -> None:
        """Queue the connection preface, our SETTINGS and the connection window's top-up."""
        settings = b"".join(
            _SETTING.pack(key, value)
            for key, value in (
                (Setting.ENABLE_PUSH, 0),
                (Setting.INITIAL_WINDOW_SIZE, self._stream_window),
                (Setting.MAX_FRAME_SIZE, RECEIVE_MAX_FRAME_SIZE),
                (Setting.MAX_HEADER_LIST_SIZE, self._max_header_list_size),
            )
        )
        increment = CONNECTION_RECEIVE_WINDOW - DEFAULT_WINDOW
        self._recv_window += increment
        self._out += (
            PREFACE,
            frame_header(len(settings), SETTINGS, 0, 0) + settings,
            frame_header(4, WINDOW_UPDATE, 0, 0) + _U32.pack(increment),
        )

    def data_to_send(self) -> list[Buffer]:
        """Everything queued for the peer, in order (and forget it)."""
        out, self._out = self._out, []
        return out

    @property
    def has_data_to_send(self) -> bool:
        return bool(self._out)

    @property
    def got_bytes(self) -> bool:
        """Whether the server sent anything yet (its preface comes first, unasked)."""
        return self._got_bytes

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def can_open_stream(self) -> bool:
        """A new stream may start: no GOAWAY, ids left, under the peer's concurrency limit."""
        limit = self.peer_max_concurrent_streams
        return (
            self.goaway is None
            and not self.closed
            and self._next_stream_id <= MAX_WINDOW
            and (limit is None or len(self._streams) < limit)
        )

    def open_stream(
        self,
        header_block: bytes,
        *,
        end_stream: bool = False,
        acknowledge_on_receipt: bool = True,
    ) -> int:
        """Start a stream with an HPACK-encoded header block; returns its id.

        The stream's DATA goes back to the flow-control windows as it arrives, or, with
        ``acknowledge_on_receipt=False``, only as the caller says it consumed it
        (:meth:`acknowledge_received_data`): then a server cannot send more than the
        stream's window beyond what the caller has taken, and a slow consumer slows the
        server down instead of growing a buffer.

        Raises :class:`H2StateError` when :meth:`can_open_stream` says no."""
        state = StreamState.HALF_CLOSED_LOCAL if end_stream else StreamState.OPEN
        stream_id, _ = self._new_stream(state, acknowledge_on_receipt)
        self._queue_headers(stream_id, header_block, end_stream)
        return stream_id

    def open_request(self, header_block: bytes, body: bytes) -> tuple[int, bool]:
        """:meth:`open_stream`, and ``body`` queued with the headers as one DATA frame that
        ends the stream when it fits one frame within both flow-control windows: a unary
        call's small request, its two frames in one buffer. Returns the stream's id and
        whether ``body`` was queued; if not, the stream is open and the caller sends the body
        with :meth:`send_data`.

        Raises :class:`H2StateError` when :meth:`can_open_stream` says no."""
        size = len(body)
        limit = self.peer_max_frame_size
        window = self.peer_initial_window
        if size > limit or size > window or size > self._send_window:
            return self.open_stream(header_block), False
        stream_id, stream = self._new_stream(StreamState.HALF_CLOSED_LOCAL, True)
        stream.send_window -= size
        self._send_window -= size
        data = frame_header(size, DATA, FLAG_END_STREAM, stream_id) + body
        if len(header_block) <= limit:
            self._out.append(
                frame_header(len(header_block), HEADERS, FLAG_END_HEADERS, stream_id)
                + header_block
                + data
            )
        else:
            self._queue_headers(stream_id, header_block, False)
            self._out.append(data)
        return stream_id, True

    def _new_stream(self, state: StreamState, on_receipt: bool) -> tuple[int, _Stream]:
        """A new stream's id and state (nothing queued yet); H2StateError if none may open."""
        if not self.can_open_stream():
            raise self._cannot_open()
        stream_id = self._next_stream_id
        self._next_stream_id += 2
        stream = self._streams[stream_id] = _Stream(
            self.peer_initial_window, self._stream_window, state, on_receipt
        )
        return stream_id, stream

    def _cannot_open(self) -> H2StateError:
        if self.closed:
            reason = "it is closed"
        elif self.goaway is not None:
            reason = "the server sent GOAWAY"
        elif self._next_stream_id > MAX_WINDOW:
            reason = "its stream ids are used up"
        else:
            reason = "the server's MAX_CONCURRENT_STREAMS is reached"
        return H2StateError(f"no new stream may be opened on this connection: {reason}")

    def stream_state(self, stream_id: int) -> StreamState | None:
        """The state of a stream this side opened (CLOSED once forgotten); None for an id
        never opened."""
        stream = self._streams.get(stream_id)
        if stream is not None:
            return stream.state
        if stream_id & 1 and 0 < stream_id < self._next_stream_id:
            return StreamState.CLOSED
        return None

    def _sending(self, stream_id: int, event: StreamInput) -> _Stream:
        """The stream, moved on by one of our own inputs; H2StateError if not allowed."""
        stream = self._streams.get(stream_id)
        following = _NEXT[stream.state][event] if stream is not None else None
        if stream is None or following is None:
            raise self._not_allowed(stream_id, event)
        stream.state = following
        return stream

    def _not_allowed(self, stream_id: int, event: StreamInput) -> H2StateError:
        """The error of one of our own inputs the stream's state does not allow."""
        state = self.stream_state(stream_id)
        where = state.name if state is not None else "not opened"
        action = "send DATA" if event == _SEND_DATA else "end the stream"
        return H2StateError(
            f"cannot {action} on stream {stream_id}: it is {where}",
            stream_id=stream_id,
            state=state,
        )

    def send_trailers(self, stream_id: int, header_block: bytes) -> None:
        """Queue a header block that ends our side of the stream."""
        self._sending(stream_id, _SEND_END_STREAM)
        self._queue_headers(stream_id, header_block, True)

    def _queue_headers(self, stream_id: int, block: bytes, end_stream: bool) -> None:
        limit = self.peer_max_frame_size
        flags = FLAG_END_STREAM if end_stream else 0
        if len(block) <= limit:
            self._out.append(
                frame_header(len(block), HEADERS, flags | FLAG_END_HEADERS, stream_id) + block
            )
            return
        parts = [block[i : i + limit] for i in range(0, len(block), limit)]
        for index, part in enumerate(parts):
            last = FLAG_END_HEADERS if index == len(parts) - 1 else 0
            kind = HEADERS if index == 0 else CONTINUATION
            self._out.append(
                frame_header(len(part), kind, (flags if index == 0 else 0) | last, stream_id)
            )
            self._out.append(part)

    def send_window(self, stream_id: int) -> int:
        """How many DATA bytes may go out on ``stream_id`` now."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return 0
        return max(0, min(self._send_window, stream.send_window))

    def send_data(self, stream_id: int, data: Buffer, *, end_stream: bool = False) -> int:
        """Queue as much of ``data`` as the flow-control windows allow, without copying it.

        Returns the number of bytes queued; the rest must wait for a :class:`WindowUpdated`.
        ``end_stream`` takes effect only when all of ``data`` was queued.
        """
        stream = self._streams.get(stream_id)
        if stream is None or _NEXT[stream.state][_SEND_DATA] is None:
            raise self._not_allowed(stream_id, _SEND_DATA)
        # Slicing bytes copies: only a payload that fits one frame stays bytes (its one
        # slice is the object itself); anything larger is framed as views into it.
        view: Buffer
        if isinstance(data, bytes) and len(data) <= self.peer_max_frame_size:
            view = data
        else:
            view = memoryview(data).cast("B")
        total = len(view)
        allowed = min(total, self._send_window, stream.send_window)
        if allowed < 0:
            allowed = 0
        limit = self.peer_max_frame_size
        out = self._out
        sent = 0
        while sent < allowed or (sent == total == 0):
            size = min(limit, allowed - sent)
            done = sent + size == total
            flags = FLAG_END_STREAM if done and end_stream else 0
            out.append(frame_header(size, DATA, flags, stream_id))
            if size:
                out.append(view[sent : sent + size])
            sent += size
            if total == 0:
                break
        self._send_window -= allowed
        stream.send_window -= allowed
        if end_stream and allowed == total:
            following = _NEXT[stream.state][_SEND_END_STREAM]
            if following is None:
                raise self._not_allowed(stream_id, _SEND_END_STREAM)
            stream.state = following
        return allowed

    def reset_stream(self, stream_id: int, code: int = ErrorCode.CANCEL) -> None:
        """Queue RST_STREAM and forget the stream (its late frames are dropped)."""
        if self._forget(stream_id):
            self._out.append(frame_header(4, RST_STREAM, 0, stream_id) + _U32.pack(code))
            self.replies_queued += 13

    def end_stream(self, stream_id: int) -> None:
        """Forget a stream both sides have finished (its window bookkeeping goes too)."""
        stream = self._streams.pop(stream_id, None)
        if stream is not None and (stream.held or stream_id == self._data_stream):
            self._streams[stream_id] = stream
            self._forget(stream_id)

    def _forget(self, stream_id: int) -> bool:
        """Drop a stream's state; whether there was any. DATA the caller had not acknowledged
        goes back to the connection window (the stream's is gone with it)."""
        stream = self._streams.pop(stream_id, None)
        if stream is None:
            return False
        if stream.held:
            self._consumed(None, 0, stream.held)
        if stream_id == self._data_stream:
            self._data_stream = 0  # the rest of the DATA frame arriving now is dropped too
        return True

    def acknowledge_received_data(self, stream_id: int, nbytes: int) -> None:
        """The caller consumed ``nbytes`` of a stream's DATA (opened with
        ``acknowledge_on_receipt=False``): they go back to the flow-control windows, and a
        WINDOW_UPDATE is queued once half a window is free. More than the stream holds, or
        a stream that is gone (its bytes went back when it went), is ignored."""
        stream = self._streams.get(stream_id)
        if stream is None or nbytes <= 0:
            return
        nbytes = min(nbytes, stream.held)
        if nbytes:
            stream.held -= nbytes
            self._consumed(stream, stream_id, nbytes)

    def unacknowledged(self, stream_id: int) -> int:
        """DATA bytes of a stream received and not yet acknowledged by the caller."""
        stream = self._streams.get(stream_id)
        return 0 if stream is None else stream.held

    def ping(self, payload: bytes = b"\0" * 8) -> None:
        """Queue a PING (answered by a :class:`PingAcknowledged`)."""
        if len(payload) != 8:
            raise InvalidInputError("a PING payload is 8 bytes", value=payload)
        self._out.append(frame_header(8, PING, 0, 0) + payload)

    def close(self, code: int = ErrorCode.NO_ERROR, debug: bytes = b"") -> None:
        """Queue GOAWAY; the connection is closed for this side."""
        if not self.closed:
            self.closed = True
            # A client's GOAWAY names the last stream the *server* started: none.
            payload = _GOAWAY.pack(0, code) + debug
            self._out.append(frame_header(len(payload), GOAWAY, 0, 0) + payload)

    # ---------------------------------------------------------------- receiving

    def _reply(self, frame: bytes) -> None:
        """Queue a small frame answering the peer (acknowledgement, window update). Such
        frames in a row share one buffer: a flood of PINGs costs 17 bytes an answer, not an
        object each (the only bytearrays queued are these)."""
        self.replies_queued += len(frame)
        out = self._out
        if out and type(out[-1]) is bytearray:
            out[-1] += frame
        else:
            out.append(bytearray(frame))

    def _fail(self, message: str, code: int = ErrorCode.PROTOCOL_ERROR) -> H2ConnectionError:
        self.close(code, message.encode("ascii", "replace")[:200])
        return H2ConnectionError(f"HTTP/2 {ErrorCode.name_of(code)}: {message}", code)

    def receive(self, data: Buffer) -> list[Event]:
        """Feed bytes read from the peer; returns what they meant, in order.

        Raises :class:`H2ConnectionError` when the peer broke the protocol.
        """
        if self.closed:
            raise H2StateError("the HTTP/2 connection is closed")
        if not self._got_bytes and data:
            self._got_bytes = True
            if bytes(data[:5]) == b"HTTP/":  # the usual mistake: an HTTP/1 port
                status_line = bytes(data[:40]).decode("latin-1").split("\r\n")[0]
                self.close(ErrorCode.PROTOCOL_ERROR, b"HTTP/1 answer")
                raise H2ConnectionError(
                    f"this port speaks HTTP/1.1 — did you mean {self._http_url or 'http://...'}? "
                    f"(the server answered {status_line!r})"
                )
            head = bytes(data[:3])
            if len(head) == 3 and int.from_bytes(head, "big") > _FIRST_FRAME_MOST:
                # Not a frame header at all (an HTTP/0.9 page, a TLS alert, a banner): say what
                # came rather than judge it as a frame.
                self.close(ErrorCode.PROTOCOL_ERROR, b"not HTTP/2")
                sent = bytes(data[:24])
                if sent[:1] in (b"\x15", b"\x16") and sent[1:2] == b"\x03":  # a TLS record
                    hint = "this port speaks TLS — did you mean grpcs://?"
                else:
                    hint = (
                        "this port does not speak HTTP/2 — did you mean "
                        f"{self._http_url or 'http://...'}?"
                    )
                raise H2ConnectionError(f"{hint} (the server sent {sent!r}...)")
        events: list[Event] = []
        unpack_from = _FRAME_HEADER.unpack_from
        view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        pos = 0
        end = len(view)
        buf = self._buf
        while pos < end:
            if self._data_left or self._pad_left:
                pos = self._data_payload(view, pos, end, events)
                continue
            if buf:
                # Complete the header (and, for control frames, the payload) kept from before.
                if len(buf) < 9:
                    take = min(9 - len(buf), end - pos)
                    buf += view[pos : pos + take]
                    pos += take
                    if len(buf) < 9:
                        break
                need = self._unit_size(buf, 0) - len(buf)
                if need > 0:
                    take = min(need, end - pos)
                    buf += view[pos : pos + take]
                    pos += take
                    if take < need:
                        break
                unit = memoryview(bytes(buf))
                buf.clear()
                self._frame(unit, 0, events)
                continue
            if end - pos < 9:
                buf += view[pos:end]
                break
            # _unit_size and _frame's unpacking, inline: this runs for every frame.
            high, low, kind, flags, stream_id = unpack_from(view, pos)
            length = (high << 8) | low
            if length > RECEIVE_MAX_FRAME_SIZE:
                raise self._too_large(length)
            size = 9 + length if kind != DATA else (10 if flags & FLAG_PADDED and length else 9)
            if end - pos < size:
                buf += view[pos:end]
                break
            self._handle_frame(length, kind, flags, stream_id & 0x7FFFFFFF, view, pos, events)
            pos += size
        return events

    def _unit_size(self, data: Buffer, pos: int) -> int:
        """Bytes needed before a frame can be handled: all of a control frame; a DATA frame's
        header and pad length only (its payload is streamed)."""
        high, low, kind, flags, _ = _FRAME_HEADER.unpack_from(data, pos)
        length: int = (high << 8) | low
        if length > RECEIVE_MAX_FRAME_SIZE:
            raise self._too_large(length)
        if kind == DATA:
            return 10 if flags & FLAG_PADDED and length else 9
        return 9 + length

    def _too_large(self, length: int) -> H2ConnectionError:
        return self._fail(
            f"frame of {length} bytes exceeds SETTINGS_MAX_FRAME_SIZE {RECEIVE_MAX_FRAME_SIZE}",
            ErrorCode.FRAME_SIZE_ERROR,
        )

    def _frame(self, data: memoryview, pos: int, events: list[Event]) -> None:
        high, low, kind, flags, stream_id = _FRAME_HEADER.unpack_from(data, pos)
        self._handle_frame(
            (high << 8) | low, kind, flags, stream_id & 0x7FFFFFFF, data, pos, events
        )

    def _handle_frame(
        self,
        length: int,
        kind: int,
        flags: int,
        stream_id: int,
        data: memoryview,
        pos: int,
        events: list[Event],
    ) -> None:
        """Handle the frame whose header (already unpacked) is at ``data[pos]``: all of it
        is there but a DATA frame's payload (see :meth:`_unit_size`)."""
        if not self._got_settings:
            # RFC 9113 section 3.4: the server's preface is a SETTINGS frame, first.
            if kind != SETTINGS or flags & FLAG_ACK:
                raise self._fail(
                    f"the server's first frame is {FrameType.name_of(kind)}, not SETTINGS"
                )
            self._got_settings = True
        if self._header_stream and kind != CONTINUATION:
            raise self._fail("a header block was interrupted by another frame")
        if kind == DATA:
            self._data_header(length, flags, stream_id, data, pos, events)
            return
        payload = data[pos + 9 : pos + 9 + length]
        if kind == HEADERS:
            self._headers(payload, flags, stream_id, events)
        elif kind == CONTINUATION:
            self._continuation(payload, flags, stream_id, events)
        elif kind == SETTINGS:
            self._settings(payload, flags, stream_id, events)
        elif kind == WINDOW_UPDATE:
            self._window_update(payload, stream_id, events)
        elif kind == PING:
            self._ping(payload, flags, stream_id, events)
        elif kind == RST_STREAM:
            if stream_id == 0 or length != 4:
                raise self._fail(
                    "malformed RST_STREAM",
                    ErrorCode.FRAME_SIZE_ERROR if length != 4 else ErrorCode.PROTOCOL_ERROR,
                )
            if self._forget(stream_id):
                code = _U32.unpack_from(payload)[0]
                # REFUSED_STREAM: the server did no work on it, so it is safe to retry.
                refused = code == ErrorCode.REFUSED_STREAM
                events.append(StreamReset(stream_id, code, refused=refused))
        elif kind == GOAWAY:
            self._goaway(payload, stream_id, events)
        elif kind == PUSH_PROMISE:
            raise self._fail("PUSH_PROMISE although SETTINGS_ENABLE_PUSH is 0")
        elif kind == PRIORITY:
            if stream_id == 0:
                raise self._fail("PRIORITY on stream 0")
            if length != 5:
                raise self._fail("PRIORITY frame is not 5 bytes", ErrorCode.FRAME_SIZE_ERROR)
        # Unknown frame types are ignored (RFC 9113 section 4.1).

    # -- DATA

    def _data_header(
        self,
        length: int,
        flags: int,
        stream_id: int,
        data: memoryview,
        pos: int,
        events: list[Event],
    ) -> None:
        if stream_id == 0:
            raise self._fail("DATA on stream 0")
        pad = 0
        if flags & FLAG_PADDED:
            if length == 0:
                raise self._fail("padded DATA without a pad length", ErrorCode.FRAME_SIZE_ERROR)
            pad = data[pos + 9]
            if pad >= length:
                raise self._fail("DATA padding longer than the frame")
            payload = length - 1 - pad
        else:
            payload = length
        stream = self._streams.get(stream_id)
        self._account_received(length, payload, stream, stream_id)
        end_stream = bool(flags & FLAG_END_STREAM)
        if stream is not None:
            # The state table, inline (per frame): END_STREAM implies DATA's own input.
            following = _NEXT[stream.state][_RECV_END_STREAM if end_stream else _RECV_DATA]
            if following is None:
                raise self._closed_stream(stream, stream_id, "DATA")
            stream.state = following
        if stream_id >= self._next_stream_id or not stream_id & 1:
            raise self._fail(f"DATA on stream {stream_id}, which this client never opened")
        self._data_stream = stream_id if stream is not None else 0
        self._data_left = payload
        self._pad_left = pad
        self._data_end = end_stream
        if payload == 0 and stream is not None and end_stream:
            # An empty DATA frame says something only when it ends the stream (a flood of
            # empty ones must not become a flood of events).
            events.append(DataReceived(stream_id, memoryview(b""), end_stream))

    def _data_payload(self, view: memoryview, pos: int, end: int, events: list[Event]) -> int:
        left = self._data_left
        if left:
            take = left if left <= end - pos else end - pos
            self._data_left = left = left - take
            if self._data_stream:
                events.append(
                    DataReceived(
                        self._data_stream, view[pos : pos + take], self._data_end and not left
                    )
                )
            pos += take
        if not left and self._pad_left:
            skip = min(self._pad_left, end - pos)
            self._pad_left -= skip
            pos += skip
        return pos

    def _account_received(
        self, length: int, payload: int, stream: _Stream | None, stream_id: int
    ) -> None:
        """Receive-side flow control of a DATA frame: both windows shrink by its length; what
        is consumed now (all of it, or only its padding for a stream whose caller
        acknowledges what it consumes) goes back to them (:meth:`_consumed`, inline here:
        this runs for every DATA frame)."""
        window = self._recv_window - length
        if window < 0:
            raise self._fail("the peer overran the connection window", ErrorCode.FLOW_CONTROL_ERROR)
        self._recv_window = window
        if stream is None:
            if length:
                self._consumed(None, stream_id, length)
            return
        window = stream.recv_window - length
        if window < 0:
            raise self._fail(
                f"the peer overran stream {stream_id}'s window", ErrorCode.FLOW_CONTROL_ERROR
            )
        stream.recv_window = window
        if not stream.acknowledge_on_receipt:
            stream.held += payload
            length -= payload
            if length:
                self._consumed(stream, stream_id, length)
            return
        consumed = self._recv_consumed + length
        if consumed >= _CONNECTION_REFILL or stream.recv_consumed + length >= self._stream_refill:
            self._consumed(stream, stream_id, length)
            return
        self._recv_consumed = consumed
        if stream.state < _HALF_CLOSED_REMOTE:
            stream.recv_consumed += length

    def _consumed(self, stream: _Stream | None, stream_id: int, nbytes: int) -> None:
        """``nbytes`` of DATA were consumed: give them back to the connection window, and to
        the stream's while the peer may still send on it, each once half of it is free."""
        consumed = self._recv_consumed + nbytes
        if consumed >= _CONNECTION_REFILL:
            self._reply(frame_header(4, WINDOW_UPDATE, 0, 0) + _U32.pack(consumed))
            self._recv_window += consumed
            consumed = 0
        self._recv_consumed = consumed
        if stream is not None and stream.state < _HALF_CLOSED_REMOTE:
            consumed = stream.recv_consumed + nbytes
            if consumed >= self._stream_refill:
                self._reply(frame_header(4, WINDOW_UPDATE, 0, stream_id) + _U32.pack(consumed))
                stream.recv_window += consumed
                consumed = 0
            stream.recv_consumed = consumed

    # -- headers

    def _headers(
        self, payload: memoryview, flags: int, stream_id: int, events: list[Event]
    ) -> None:
        if stream_id == 0:
            raise self._fail("HEADERS on stream 0")
        if stream_id >= self._next_stream_id or not stream_id & 1:
            raise self._fail(f"HEADERS on stream {stream_id}, which this client never opened")
        start = 0
        stop = len(payload)
        if flags & FLAG_PADDED:
            if stop < 1 or payload[0] >= stop:
                raise self._fail("HEADERS padding longer than the frame")
            start = 1
            stop -= payload[0]
        if flags & FLAG_PRIORITY:
            start += 5
            if start > stop:
                raise self._fail(
                    "HEADERS too short for its priority fields", ErrorCode.FRAME_SIZE_ERROR
                )
        stream = self._streams.get(stream_id)
        end_stream = bool(flags & FLAG_END_STREAM)
        if stream is not None:
            following = _NEXT[stream.state][_RECV_END_STREAM if end_stream else _RECV_HEADERS]
            if following is None:
                raise self._closed_stream(stream, stream_id, "HEADERS")
            stream.state = following
        block = payload[start:stop]
        if flags & FLAG_END_HEADERS:
            self._header_block(stream_id, block, end_stream, events)
            return
        if len(block) > self._max_header_list_size:
            raise self._fail("header block too large", ErrorCode.ENHANCE_YOUR_CALM)
        self._header_stream = stream_id
        self._header_parts = [bytes(block)]
        self._header_size = len(block)
        self._header_frames = 0
        self._header_end_stream = end_stream

    def _continuation(
        self, payload: memoryview, flags: int, stream_id: int, events: list[Event]
    ) -> None:
        if stream_id == 0 or stream_id != self._header_stream:
            raise self._fail("CONTINUATION without a header block to continue")
        self._header_size += len(payload)
        if self._header_size > self._max_header_list_size:
            raise self._fail("header block too large", ErrorCode.ENHANCE_YOUR_CALM)
        self._header_frames += 1
        if self._header_frames > CONTINUATION_BACKLOG:
            raise self._fail(
                f"header block in more than {CONTINUATION_BACKLOG} CONTINUATION frames",
                ErrorCode.ENHANCE_YOUR_CALM,
            )
        self._header_parts.append(bytes(payload))
        if flags & FLAG_END_HEADERS:
            block = b"".join(self._header_parts)
            self._header_stream = 0
            self._header_parts = []
            self._header_block(stream_id, memoryview(block), self._header_end_stream, events)

    def _closed_stream(self, stream: _Stream, stream_id: int, kind: str) -> H2ConnectionError:
        """The error of a peer's frame the stream's state does not allow (it ended)."""
        return self._fail(
            f"{kind} on stream {stream_id} after it ended ({stream.state.name})",
            ErrorCode.STREAM_CLOSED,
        )

    def _header_block(
        self, stream_id: int, block: memoryview, end_stream: bool, events: list[Event]
    ) -> None:
        try:
            headers = self._decoder.decode(block)
        except HPACKError as exc:
            raise self._fail(
                f"undecodable header block: {exc}", ErrorCode.COMPRESSION_ERROR
            ) from exc
        stream = self._streams.get(stream_id)
        if stream is None:
            return  # a stream we dropped: decoded only for the HPACK state
        trailers = stream.response_started
        known = self._checked_trailers if trailers else self._checked_heads
        key = tuple(headers)
        if key in known:
            problem = None
        else:
            checked = self._checked_fields
            if len(checked) > _CHECKED_FIELDS_MAX:
                checked.clear()
            problem = check_response_headers(headers, trailers, checked)
            if problem is None:
                if len(known) >= _CHECKED_BLOCKS_MAX:
                    known.clear()
                known.add(key)
        if problem is None:
            if trailers:
                if not end_stream:
                    problem = "a header block after the response headers does not end the stream"
            elif headers[0][1][0] == "1":  # 1xx: informational, the response is still to come
                if end_stream:
                    problem = f"informational response {headers[0][1]} ends the stream"
                else:
                    return
            else:
                stream.response_started = True
        if problem is not None:
            # A malformed response is a stream error (RFC 9113 section 8.1.1): the call
            # fails, the connection (whose HPACK state is intact) goes on.
            self.reset_stream(stream_id, ErrorCode.PROTOCOL_ERROR)
            error = ProtocolError(f"malformed response on stream {stream_id}: {problem}")
            events.append(StreamReset(stream_id, ErrorCode.PROTOCOL_ERROR, error=error))
            return
        events.append(HeadersReceived(stream_id, headers, end_stream))

    # -- connection control

    def _settings(
        self, payload: memoryview, flags: int, stream_id: int, events: list[Event]
    ) -> None:
        if stream_id != 0:
            raise self._fail("SETTINGS on a stream")
        if flags & FLAG_ACK:
            if len(payload):
                raise self._fail("SETTINGS ACK with a payload", ErrorCode.FRAME_SIZE_ERROR)
            return
        if len(payload) % 6:
            raise self._fail("SETTINGS payload not a multiple of 6", ErrorCode.FRAME_SIZE_ERROR)
        window_delta = 0
        for offset in range(0, len(payload), 6):
            key, value = _SETTING.unpack_from(payload, offset)
            if key == Setting.INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise self._fail(
                        "SETTINGS_INITIAL_WINDOW_SIZE above 2**31-1", ErrorCode.FLOW_CONTROL_ERROR
                    )
                window_delta += value - self.peer_initial_window
                self.peer_initial_window = value
            elif key == Setting.MAX_FRAME_SIZE:
                if not DEFAULT_MAX_FRAME_SIZE <= value <= MAX_FRAME_SIZE_LIMIT:
                    raise self._fail(f"SETTINGS_MAX_FRAME_SIZE {value} out of range")
                self.peer_max_frame_size = value
            elif key == Setting.MAX_CONCURRENT_STREAMS:
                self.peer_max_concurrent_streams = value
            elif key == Setting.ENABLE_PUSH and value:
                # RFC 9113 section 6.5.2: a server never enables push (a client does).
                raise self._fail(f"SETTINGS_ENABLE_PUSH {value} from a server (must be 0)")
            # HEADER_TABLE_SIZE: our encoder never inserts into the dynamic table, so any
            # size the peer allows is fine; MAX_HEADER_LIST_SIZE is advisory; unknown: ignored.
        if window_delta:
            for stream in self._streams.values():
                stream.send_window += window_delta
                if stream.send_window > MAX_WINDOW:
                    raise self._fail(
                        "a stream window grew above 2**31-1", ErrorCode.FLOW_CONTROL_ERROR
                    )
            if window_delta > 0:
                events.append(WindowUpdated(0))
        self._reply(frame_header(0, SETTINGS, FLAG_ACK, 0))

    def _window_update(self, payload: memoryview, stream_id: int, events: list[Event]) -> None:
        if len(payload) != 4:
            raise self._fail("WINDOW_UPDATE is not 4 bytes", ErrorCode.FRAME_SIZE_ERROR)
        increment = _U32.unpack_from(payload)[0] & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                raise self._fail("WINDOW_UPDATE of 0 on the connection")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise self._fail("connection window above 2**31-1", ErrorCode.FLOW_CONTROL_ERROR)
            events.append(WindowUpdated(0))
            return
        stream = self._streams.get(stream_id)
        if stream is None:
            return  # a stream we finished or reset: late updates are normal
        if increment == 0:
            self.reset_stream(stream_id, ErrorCode.PROTOCOL_ERROR)
            events.append(StreamReset(stream_id, ErrorCode.PROTOCOL_ERROR))
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self.reset_stream(stream_id, ErrorCode.FLOW_CONTROL_ERROR)
            events.append(StreamReset(stream_id, ErrorCode.FLOW_CONTROL_ERROR))
            return
        events.append(WindowUpdated(stream_id))

    def _ping(self, payload: memoryview, flags: int, stream_id: int, events: list[Event]) -> None:
        if stream_id != 0:
            raise self._fail("PING on a stream")
        if len(payload) != 8:
            raise self._fail("PING is not 8 bytes", ErrorCode.FRAME_SIZE_ERROR)
        if flags & FLAG_ACK:
            events.append(PingAcknowledged(bytes(payload)))
        else:
            self._reply(frame_header(8, PING, FLAG_ACK, 0) + bytes(payload))

    def _goaway(self, payload: memoryview, stream_id: int, events: list[Event]) -> None:
        if stream_id != 0:
            raise self._fail("GOAWAY on a stream")
        if len(payload) < 8:
            raise self._fail("GOAWAY shorter than 8 bytes", ErrorCode.FRAME_SIZE_ERROR)
        last, code = _GOAWAY.unpack_from(payload)
        last &= 0x7FFFFFFF
        event = GoAwayReceived(last, code, bytes(payload[8:]))
        self.goaway = event
        events.append(event)
        # Streams above last_stream_id were not processed: the caller may retry them.
        for refused in sorted(sid for sid in self._streams if sid > last):
            self._forget(refused)
            events.append(StreamReset(refused, ErrorCode.REFUSED_STREAM, refused=True))


def encode_settings(settings: Sequence[tuple[int, int]]) -> bytes:
    """A SETTINGS frame carrying these (identifier, value) pairs (for tests and servers)."""
    payload = b"".join(_SETTING.pack(key, value) for key, value in settings)
    return frame_header(len(payload), SETTINGS, 0, 0) + payload
