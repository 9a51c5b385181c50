"""The Server-Sent Events decoder: a golden table, every split of the input, totality."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kserve_v2.errors import ProtocolError
from kserve_v2.rest.sse import ServerSentEvent, SSEDecoder, encode_event


def decode_all(data: bytes, pieces: list[int] | None = None) -> tuple[list[ServerSentEvent], bool]:
    """Events of ``data`` fed in pieces cut at the ``pieces`` offsets; and ``pending`` at the
    end."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    cuts = [0, *sorted(pieces or []), len(data)]
    for start, end in itertools.pairwise(cuts):
        events.extend(decoder.feed(data[start:end]))
    pending = decoder.pending
    assert decoder.end() == []
    return events, pending


# (case, stream bytes, events, pending at the end): the WHATWG parsing rules, one per row.
GOLDEN: list[tuple[str, bytes, list[ServerSentEvent], bool]] = [
    ("empty stream", b"", [], False),
    ("one event", b"data: x\n\n", [ServerSentEvent("x")], False),
    (
        "Triton generate_stream",
        b'data: {"text_output":"hello"}\n\ndata: {"text_output":" big"}\n\n',
        [ServerSentEvent('{"text_output":"hello"}'), ServerSentEvent('{"text_output":" big"}')],
        False,
    ),
    ("CRLF line ends", b"data: a\r\n\r\n", [ServerSentEvent("a")], False),
    (
        "CR line ends",
        b"data: a\r\rdata: b\r\r",
        [ServerSentEvent("a"), ServerSentEvent("b")],
        False,
    ),
    ("mixed line ends", b"data: a\r\ndata: b\n\r", [ServerSentEvent("a\nb")], False),
    ("multi-line data", b"data: a\ndata: b\ndata\n\n", [ServerSentEvent("a\nb\n")], False),
    ("no space after colon", b"data:x\n\n", [ServerSentEvent("x")], False),
    ("only one space removed", b"data:  x \n\n", [ServerSentEvent(" x ")], False),
    ("empty data is an event", b"data:\n\n", [ServerSentEvent("")], False),
    ("no data: not dispatched", b"event: ping\n\n", [], False),
    ("comment", b": keep-alive\n\ndata: x\n\n", [ServerSentEvent("x")], False),
    ("comment inside an event", b"data: a\n: note\ndata: b\n\n", [ServerSentEvent("a\nb")], False),
    ("unknown field ignored", b"foo: bar\ndata: x\n\n", [ServerSentEvent("x")], False),
    (
        "event type",
        b"event: error\ndata: boom\n\n",
        [ServerSentEvent("boom", event="error")],
        False,
    ),
    (
        "event type resets after dispatch",
        b"event: error\ndata: a\n\ndata: b\n\n",
        [ServerSentEvent("a", event="error"), ServerSentEvent("b")],
        False,
    ),
    ("empty event type is message", b"event:\ndata: x\n\n", [ServerSentEvent("x")], False),
    (
        "id carries over",
        b"id: 7\ndata: a\n\ndata: b\n\n",
        [ServerSentEvent("a", id="7"), ServerSentEvent("b", id="7")],
        False,
    ),
    ("id with NUL ignored", b"id: a\x00b\ndata: x\n\n", [ServerSentEvent("x")], False),
    ("retry", b"retry: 3000\ndata: x\n\n", [ServerSentEvent("x", retry=3000)], False),
    ("retry not digits", b"retry: 3s\ndata: x\n\n", [ServerSentEvent("x")], False),
    ("leading BOM dropped", b"\xef\xbb\xbfdata: x\n\n", [ServerSentEvent("x")], False),
    ("second BOM kept", b"\n\xef\xbb\xbfdata: x\n\n", [], False),
    ("invalid UTF-8 replaced", b"data: \xff\n\n", [ServerSentEvent("\ufffd")], False),
    ("field without colon", b"data\n\n", [ServerSentEvent("")], False),
    ("unfinished event is pending", b"data: x\n", [], True),
    ("unfinished line is pending", b"data: x", [], True),
    ("trailing CR is complete", b"data: x\r\r", [ServerSentEvent("x")], False),
]


@pytest.mark.parametrize(
    ("data", "expected", "pending"), [c[1:] for c in GOLDEN], ids=[c[0] for c in GOLDEN]
)
def test_golden(data: bytes, expected: list[ServerSentEvent], pending: bool) -> None:
    assert decode_all(data) == (expected, pending)


@pytest.mark.parametrize(("data", "expected"), [c[1:3] for c in GOLDEN], ids=[c[0] for c in GOLDEN])
def test_every_split_gives_the_same_events(data: bytes, expected: list[ServerSentEvent]) -> None:
    # The CR/LF pair, a UTF-8 sequence or the BOM may be cut anywhere between two pieces.
    for cut in range(len(data) + 1):
        assert decode_all(data, [cut])[0] == expected, cut
    assert decode_all(data, list(range(len(data))))[0] == expected  # byte by byte


def test_events_come_out_as_soon_as_complete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.pending
    assert decoder.feed(b"\ndata: b") == [ServerSentEvent("a")]
    assert decoder.feed(b"\n\n") == [ServerSentEvent("b")]
    assert not decoder.pending


def test_last_event_id() -> None:
    decoder = SSEDecoder()
    assert decoder.last_event_id is None
    decoder.feed(b"id: 42\n\n")  # no data: nothing dispatched, but the id is kept
    assert decoder.last_event_id == "42"
    assert decoder.feed(b"data: x\n\n") == [ServerSentEvent("x", id="42")]


def test_event_size_limit() -> None:
    decoder = SSEDecoder(max_event_size=16)
    assert decoder.feed(b"data: 0123456789\n") == []
    with pytest.raises(ProtocolError, match="larger than 16 bytes"):
        decoder.feed(b"data: 0123456789\n")
    with pytest.raises(ProtocolError, match="larger than 16 bytes"):
        SSEDecoder(max_event_size=16).feed(b"x" * 17)  # a line that never ends


def test_repr_shows_what_is_set() -> None:
    assert repr(ServerSentEvent("x")) == "ServerSentEvent(data='x')"
    assert repr(ServerSentEvent("x", "error", "1", 5)) == (
        "ServerSentEvent(data='x', event='error', id='1', retry=5)"
    )


# Text of a field value: any characters but the line terminators and NUL.
FIELD_TEXT = st.text(st.characters(exclude_characters="\r\n\x00", exclude_categories=("Cs",)))
# Event data: may hold LF (it becomes several data lines); CR is normalised, so left out.
EVENT_DATA = st.text(st.characters(exclude_characters="\r", exclude_categories=("Cs",)))
# Events as a server writes them.
EVENTS = st.builds(
    ServerSentEvent,
    data=EVENT_DATA,
    event=FIELD_TEXT.filter(lambda s: s != "" and not s.startswith(" ")) | st.just("message"),
    id=st.none(),
    retry=st.none() | st.integers(min_value=0, max_value=10**12),
)


@given(events=st.lists(EVENTS, max_size=5), cuts=st.lists(st.integers(0, 10**4), max_size=8))
@settings(max_examples=300, deadline=None)
def test_round_trip(events: list[ServerSentEvent], cuts: list[int]) -> None:
    data = b"".join(encode_event(e) for e in events)
    decoded, pending = decode_all(data, [c % (len(data) + 1) for c in cuts])
    assert decoded == events
    assert not pending


@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=6))
@settings(max_examples=500, deadline=None)
def test_any_bytes_decode_the_same_however_split(data: bytes, cuts: list[int]) -> None:
    # Totality: no input raises (below the size limit), and the split never matters.
    whole = decode_all(data)
    assert decode_all(data, [c % (len(data) + 1) for c in cuts]) == whole
    for event in whole[0]:
        assert isinstance(event.data, str)
        assert event.event
