"""Server-Sent Events (``text/event-stream``), parsed incrementally and without I/O.

Triton's ``generate_stream`` endpoint answers with an event stream: one ``data:`` line of JSON
per response, separated by blank lines. :class:`SSEDecoder` follows the WHATWG
"interpreting an event stream" algorithm: bytes go in (:meth:`SSEDecoder.feed`) in pieces of
any size, complete events come out; nothing here reads a socket.

Rules kept from the specification:

* lines end with CRLF, LF or CR (a CR at the very end of a piece waits for the next piece to
  see whether an LF follows);
* one leading UTF-8 byte-order mark is dropped; invalid UTF-8 becomes U+FFFD;
* ``:`` starts a comment; a field without a colon has an empty value; one space after the
  colon is removed; unknown fields are ignored;
* ``data`` lines are joined with ``\\n``; an event with no data is not dispatched;
* ``id`` containing NUL is ignored; ``retry`` is used only when it is all ASCII digits;
* the event type defaults to ``"message"``; the last event id carries over to later events;
* an event not ended by a blank line when the stream ends is discarded
  (:attr:`SSEDecoder.pending` tells whether something was).

Example::

    >>> decoder = SSEDecoder()
    >>> decoder.feed(b'data: {"text_output": "hel')
    []
    >>> decoder.feed(b'lo"}\\n\\n: keep-alive\\nevent: error\\ndata: boom\\n\\n')
    [ServerSentEvent(data='{"text_output": "hello"}'), ServerSentEvent(data='boom', event='error')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kserve_v2.errors import ProtocolError

__all__ = ["DEFAULT_MAX_EVENT_SIZE", "SSEDecoder", "ServerSentEvent", "encode_event"]

#: Most bytes one event (or one line) may take before :class:`SSEDecoder` gives up; a peer that
#: never ends a line must not make the client buffer without limit.
DEFAULT_MAX_EVENT_SIZE: Final = 64 * 1024 * 1024

_BOM: Final = "\ufeff"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event.

    ``data`` is the event's data lines joined by ``\\n``; ``event`` its type (``"message"``
    unless the stream said otherwise); ``id`` the last event id seen so far (``None`` before
    any); ``retry`` the reconnection time in milliseconds, when this event set one.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None

    def __repr__(self) -> str:
        parts = [f"data={self.data!r}"]
        if self.event != "message":
            parts.append(f"event={self.event!r}")
        if self.id is not None:
            parts.append(f"id={self.id!r}")
        if self.retry is not None:
            parts.append(f"retry={self.retry}")
        return f"ServerSentEvent({', '.join(parts)})"


class SSEDecoder:
    """Turns the bytes of an event stream into :class:`ServerSentEvent` objects.

    Feed it pieces as they arrive; each call returns the events those bytes completed. Call
    :meth:`end` when the stream is over. Never raises on malformed input (the format has no
    malformed input); only an event or line longer than ``max_event_size`` bytes raises
    :class:`~kserve_v2.errors.ProtocolError`.
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_event_type",
        "_field_seen",
        "_last_id",
        "_line",
        "_max",
        "_retry",
        "_skip_lf",
        "_start",
    )

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        if isinstance(max_event_size, bool) or not isinstance(max_event_size, int):
            raise TypeError("max_event_size must be an int")
        self._max = max_event_size
        # Bytes of the line being received (no terminator seen yet).
        self._line = bytearray()
        # The previous piece ended in CR: an LF starting the next piece belongs to that CR.
        self._skip_lf = False
        self._start = True  # the byte-order mark may only come first
        self._data: list[str] = []
        self._data_size = 0
        self._event_type = ""
        self._retry: int | None = None
        self._last_id: str | None = None
        self._field_seen = False  # a field line arrived since the last dispatch

    @property
    def pending(self) -> bool:
        """Whether bytes or fields of an unfinished event are buffered (lost if the stream ends)."""
        return bool(self._line) or self._field_seen

    @property
    def last_event_id(self) -> str | None:
        """The last ``id`` field seen (what a reconnecting client would send back)."""
        return self._last_id

    def feed(self, data: bytes | bytearray | memoryview) -> list[ServerSentEvent]:
        """Take the next piece of the stream; return the events it completed, in order."""
        chunk = bytes(data)
        if not chunk:
            return []
        events: list[ServerSentEvent] = []
        pos = 0
        end = len(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                pos = 1
        while pos < end:
            cr = chunk.find(b"\r", pos)
            lf = chunk.find(b"\n", pos)
            if cr < 0 and lf < 0:
                self._line += chunk[pos:]
                self._check_size(len(self._line))
                break
            stop = lf if cr < 0 else cr if lf < 0 else min(cr, lf)
            self._line += chunk[pos:stop]
            self._check_size(len(self._line))
            line, self._line = bytes(self._line), bytearray()
            event = self._process_line(line)
            if event is not None:
                events.append(event)
            pos = stop + 1
            if chunk[stop] == 0x0D:  # CR: swallow the LF of a CRLF, here or in the next piece
                if pos < end:
                    if chunk[pos] == 0x0A:
                        pos += 1
                else:
                    self._skip_lf = True
        return events

    def end(self) -> list[ServerSentEvent]:
        """The stream is over: discard any unfinished event (as the specification says).

        Returns the events still due, which is always none; check :attr:`pending` first to
        tell a cleanly ended stream from a cut one.
        """
        self._line = bytearray()
        self._reset_event()
        self._skip_lf = False
        return []

    # -- internals -----------------------------------------------------------------------------

    def _check_size(self, line_size: int) -> None:
        if line_size + self._data_size > self._max:
            raise ProtocolError(f"server-sent event larger than {self._max} bytes", value=line_size)

    def _decode(self, line: bytes) -> str:
        # Line terminators are ASCII, so splitting bytes first never cuts a UTF-8 sequence;
        # each line is decoded on its own.
        text = line.decode("utf-8", "replace")
        if self._start:
            self._start = False
            if text.startswith(_BOM):
                text = text[1:]
        return text

    def _process_line(self, raw: bytes) -> ServerSentEvent | None:
        if self._start and not raw:
            self._start = False
        line = self._decode(raw) if raw else ""
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None  # comment (keep-alive)
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        self._field_seen = True
        if name == "data":
            self._data.append(value)
            self._data_size += len(raw) + 1
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._reset_event()
            return None
        event = ServerSentEvent(
            data="\n".join(self._data),
            event=self._event_type or "message",
            id=self._last_id,
            retry=self._retry,
        )
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        self._data = []
        self._data_size = 0
        self._event_type = ""
        self._retry = None
        self._field_seen = False


def encode_event(event: ServerSentEvent) -> bytes:
    """The wire form of ``event`` (LF line ends, blank line after): tests and test servers.

    ``decoder.feed(encode_event(e))`` gives back ``e`` when ``e.event``, ``e.id`` hold no line
    break and ``e.id`` no NUL.

    Example::

        >>> encode_event(ServerSentEvent('{"a": 1}'))
        b'data: {"a": 1}\\n\\n'
    """
    lines = []
    if event.event != "message":
        lines.append(f"event: {event.event}")
    if event.id is not None:
        lines.append(f"id: {event.id}")
    if event.retry is not None:
        lines.append(f"retry: {event.retry}")
    # splitlines-like split on the three terminators the decoder knows (not \v, \f, ...).
    text = event.data.replace("\r\n", "\n").replace("\r", "\n")
    lines.extend(f"data: {part}" for part in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode("utf-8")
