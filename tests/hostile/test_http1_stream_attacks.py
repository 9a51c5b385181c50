"""The hostile-server kit, HTTP/1.1 streams: ``generate_stream`` (Server-Sent Events) against a
server that cuts, stalls, trickles, floods or garbles the event stream, on every HTTP/1.1
transport (sync ``stdlib``, asyncio ``aio``, httpx's ``httpx`` and ``ahttpx``).

The invariants are those of the inference table (``test_http1_attacks.py``): the call ends
with the package's own error (the one the table names) or succeeds where the stream is legal,
within its timeout plus a margin; memory grows by a bounded amount; no thread or socket is left
behind; the same client then makes a good call. A stream's ``timeout`` bounds the wait for the
response head and then for each next event, so a server that keeps sending bytes without ever
completing an event (a trickled event, comments for ever) is cut off at the deadline too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from kserve_v2 import DeadlineExceededError, ProtocolError, ServerError
from tests.hostile.http1_server import (
    KINDS,
    STREAM_MOST,
    Attack,
    Peer,
    Runner,
    answer,
    attacked,
    fin,
    flood,
    head,
    response,
    run_attack,
    scripted_servers,
    send,
    stall,
    trickle,
)
from tests.hostile.invariants import cases

#: The timeout of the attacks that end at the deadline (short: the outcome does not depend
#: on it).
STALL = 0.5


#: The events of a good stream, and what the client makes of them.
EVENT_A = {"model_name": "m", "text_output": "a"}
EVENT_B = {"model_name": "m", "text_output": "b"}
GOOD_EVENTS = [EVENT_A, EVENT_B]


def event(obj: Any, kind: str | None = None) -> bytes:
    """One server-sent event carrying ``obj`` as JSON."""
    prefix = f"event: {kind}\n" if kind is not None else ""
    return f"{prefix}data: {json.dumps(obj)}\n\n".encode()


EVENTS = event(EVENT_A) + event(EVENT_B)


def sse_head(*headers: str) -> bytes:
    return head("200 OK", "Content-Type: text/event-stream", *headers)


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


LAST_CHUNK = b"0\r\n\r\n"


def slowly(raw: bytes, pause: float = 0.001) -> Callable[[Peer], None]:
    """Send ``raw`` a byte at a time (a legal, slow stream: each event completes soon)."""

    def step(peer: Peer) -> None:
        peer.trickle(raw, pause)

    return step


CHUNKED = sse_head("Transfer-Encoding: chunked")


ATTACKS: dict[str, Attack] = {
    # Legal streams, however framed: the client must take them.
    "good-chunked": Attack(answer(send(CHUNKED + chunk(EVENTS) + LAST_CHUNK)), None),
    "good-content-length": Attack(
        answer(send(sse_head(f"Content-Length: {len(EVENTS)}") + EVENTS)), None
    ),
    "good-until-close": Attack(answer(send(sse_head() + EVENTS), fin), None),
    "good-a-byte-a-chunk": Attack(
        answer(send(CHUNKED), slowly(b"".join(chunk(bytes([b])) for b in EVENTS) + LAST_CHUNK)),
        None,
    ),
    "good-comments-and-crlf": Attack(
        answer(
            send(CHUNKED + chunk(b": hi\r\n\r\n" + EVENTS.replace(b"\n", b"\r\n")) + LAST_CHUNK)
        ),
        None,
    ),
    "not-an-event-stream": Attack(
        answer(send(response(json.dumps(EVENT_A).encode()))), None, events=[EVENT_A]
    ),
    # Errors the server reports: the server's own error.
    "error-status": Attack(
        answer(
            send(
                head("500 Internal Server Error", "Content-Type: application/json")[:-2]
                + b"Content-Length: 17\r\n\r\n"
                + b'{"error": "boom"}'
            )
        ),
        ServerError,
    ),
    "error-event": Attack(
        answer(send(CHUNKED + chunk(event(EVENT_A) + event({"error": "boom"}, "error")))),
        ServerError,
    ),
    "error-in-an-event": Attack(
        answer(send(CHUNKED + chunk(event(EVENT_A) + event({"error": "boom"})))), ServerError
    ),
    # Cut streams: an error, never a shorter stream passed off as whole.
    "cut-mid-event": Attack(answer(send(sse_head() + EVENTS[:-5]), fin), ProtocolError),
    "cut-before-the-last-chunk": Attack(answer(send(CHUNKED + chunk(EVENTS)), fin), ProtocolError),
    "cut-mid-chunk": Attack(answer(send(CHUNKED + chunk(EVENTS)[:-9]), fin), ProtocolError),
    "cut-short-of-content-length": Attack(
        answer(send(sse_head(f"Content-Length: {len(EVENTS) + 100}") + EVENTS), fin),
        ProtocolError,
    ),
    # Garbled streams.
    "chunk-size-not-hex": Attack(
        answer(send(CHUNKED + chunk(event(EVENT_A)) + b"zz\r\n")), ProtocolError
    ),
    "event-not-json": Attack(answer(send(CHUNKED + chunk(b"data: {not json\n\n"))), ProtocolError),
    "event-not-an-object": Attack(
        answer(send(CHUNKED + chunk(b"data: [1, 2]\n\n"))), ProtocolError
    ),
    # Streams that never end an event: the deadline (or the event size limit) ends them.
    "stall-after-head": Attack(answer(send(CHUNKED), stall), DeadlineExceededError, timeout=STALL),
    "stall-after-an-event": Attack(
        answer(send(CHUNKED + chunk(event(EVENT_A))), stall),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "trickle-an-event": Attack(
        answer(send(sse_head() + b"data: "), trickle(b"x" * 100_000)),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "comments-for-ever": Attack(
        answer(send(sse_head()), flood(b": keep-alive\n" * 1000)),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "a-line-without-end": Attack(
        answer(send(sse_head() + b"data: "), flood(b"x" * 65536)),
        ProtocolError,
        # 64 MiB (the event size limit) arrives long before the deadline.
        timeout=60.0,
        memory=200 << 20,
    ),
    # A stream that never ends but is good: the caller stops early, the client hangs up.
    "events-for-ever": Attack(
        answer(send(sse_head()), flood(event(EVENT_A) * 100)),
        None,
        events=[EVENT_A] * STREAM_MOST,
        # The asyncio transport reads up to 256 pieces (of at most 64 KiB) ahead of the
        # consumer before it stops reading: up to 16 MiB against a flood.
        memory=20 << 20,
    ),
}

#: What a transport is known not to do, with the reason (strict xfail: a fix shows).
KNOWN: dict[tuple[str, str], str] = {}

CASES = cases(((name, kind) for name in ATTACKS for kind in KINDS), KNOWN)


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_stream_attack(name: str, kind: str) -> None:
    attack = ATTACKS[name]
    run_attack(
        kind,
        attack,
        lambda runner, timeout: runner.generate_stream(timeout=timeout),
        GOOD_EVENTS if attack.events is None else attack.events,
    )


@pytest.mark.parametrize("kind", ["stdlib", "aio"])  # the sync and the async stream loop
def test_the_callers_time_between_events_does_not_count(kind: str) -> None:
    """The deadline of the next event starts when the caller comes back for it: a caller
    that spends the whole timeout on one event still gets the next, which the server sends
    (after comments) later than the timeout after the first."""
    timeout = 2.0

    def act(peer: Peer) -> None:
        peer.read_request()
        peer.send(sse_head() + event(EVENT_A))
        until = time.monotonic() + 1.5 * timeout
        while time.monotonic() < until:
            peer.send(b": still working\n")
            time.sleep(0.05)
        peer.send(event(EVENT_B))
        peer.send_fin()

    with scripted_servers() as start:
        server = start(attacked(act))
        runner = Runner(kind, server.url)
        try:
            got = runner.generate_stream(timeout=timeout, pause=timeout)
        finally:
            runner.close()
    assert got == GOOD_EVENTS
