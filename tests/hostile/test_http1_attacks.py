"""The hostile-server kit, HTTP/1.1 half: a table of attacks, each run against every HTTP/1.1
transport this package has, with the invariants every one must keep.

A scripted server (:mod:`tests.hostile.http1_server`) answers the first request of its first
connection with the attack, and every later request well. Each case makes an inference through
:class:`~kserve_v2.Client` / :class:`~kserve_v2.AsyncClient` over the default transports (sync
``stdlib``, asyncio ``aio``) and over httpx's (``httpx``, ``ahttpx``), and checks:

* the call ends with the package's own error (the one the table names), or succeeds where the
  response is legal however odd, and within its timeout (plus a generous margin);
* the client's memory grows by a bounded amount during the call (tracemalloc's peak);
* no thread or socket is left behind once client and server are closed;
* the same client object then makes a successful call (the server answers well from then on).

What a transport is known not to do is listed in ``KNOWN`` with the reason: those cases are
expected to fail the invariants (strict xfail), so that a fix shows, and a new deviation fails.
Attacks that take the call's whole timeout use short timeouts (a second); none depends on
timing for its outcome.
"""

from __future__ import annotations

import gzip

import pytest

from kserve_v2 import (
    DeadlineExceededError,
    ProtocolError,
    TransportError,
)
from tests.hostile.http1_server import (
    GOOD_BODY,
    GOOD_OUTPUT,
    GOOD_RESPONSE,
    KINDS,
    Attack,
    Peer,
    Runner,
    answer,
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
from tests.hostile.invariants import MARGIN, Expect, cases

#: The timeout of attacks that stall or trickle: they end with the call's deadline (short,
#: so that the whole table runs in well under a minute; the outcome does not depend on it).
STALL = 0.5
#: max_response_size for the attacks that send more than that.
LIMIT = 1 << 20


# ---------------------------------------------------------------------------- attack parts


def gzip_bomb(size: int = 64 << 20) -> bytes:
    """``size`` zero bytes, gzipped (64 MiB: about 64 KiB on the wire)."""
    return gzip.compress(bytes(size), compresslevel=9)


GZIP_BOMB = gzip_bomb()
#: The truncation points of a good response: cut before each of these offsets, then FIN.
CUTS = {
    "nothing": 0,
    "mid-status-line": 7,
    "after-status-line": GOOD_RESPONSE.index(b"\r\n") + 2,
    "mid-headers": GOOD_RESPONSE.index(b"Content-Length") + 5,
    "after-head": GOOD_RESPONSE.index(b"\r\n\r\n") + 4,
    "mid-body": len(GOOD_RESPONSE) - len(GOOD_BODY) // 2,
    "one-byte-short": len(GOOD_RESPONSE) - 1,
}
#: The truncation points where the server also stalls instead of closing ("nothing": a
#: silent server).
STALLS = ("nothing", "mid-status-line", "mid-headers", "after-head", "mid-body")
#: httpx reads a response closed before its head is complete as "disconnected without
#: sending a response" (TransportError); the default transports call a partial head a
#: ProtocolError.
HTTPX_CUT_HEAD: dict[str, Expect] = dict.fromkeys(("httpx", "ahttpx"), TransportError)
H2_SETTINGS = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64"
GARBAGE = bytes(range(255, 127, -1)) * 4

ATTACKS: dict[str, Attack] = {
    # -- the head
    "head-over-64kib": Attack(
        answer(send(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (200 << 10)), stall),
        ProtocolError,
    ),
    "header-flood-over-64kib": Attack(
        answer(send(b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 20000), stall), ProtocolError
    ),
    "many-headers-under-64kib": Attack(
        answer(
            send(head("200 OK", *[f"X-{n}: v" for n in range(4000)])[:-2]),
            send(
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(GOOD_BODY), GOOD_BODY)
            ),
        ),
        None,
    ),
    # A head that takes longer to trickle than the call's timeout and margin together.
    "header-trickle": Attack(
        answer(trickle(response(GOOD_BODY, "X-Pad: " + "a" * int((STALL + MARGIN) / 0.05)))),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "body-trickle": Attack(
        answer(send(GOOD_RESPONSE[: -len(GOOD_BODY)]), trickle(GOOD_BODY)),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "interim-response-flood": Attack(
        answer(flood(b"HTTP/1.1 100 Continue\r\n\r\n" * 64)),
        DeadlineExceededError,
        timeout=STALL,
    ),
    # -- status lines
    "status-not-a-number": Attack(answer(send(head("2x0 OK")), fin), ProtocolError),
    "status-four-digits": Attack(answer(send(head("2000 OK")), fin), ProtocolError),
    "status-line-http2": Attack(
        answer(send(b"HTTP/2 200\r\nContent-Length: 0\r\n\r\n"), fin), ProtocolError
    ),
    "status-line-icy": Attack(answer(send(b"ICY 200 OK\r\n\r\n"), fin), ProtocolError),
    "status-line-empty": Attack(answer(send(b"\r\n\r\n"), fin), ProtocolError),
    "h2-settings-answer": Attack(answer(send(H2_SETTINGS), stall), ProtocolError, timeout=STALL),
    "binary-garbage": Attack(
        answer(send(GARBAGE), stall),
        ProtocolError,
        dict.fromkeys(("httpx", "ahttpx"), DeadlineExceededError),  # h11 waits for a head
        timeout=STALL,
    ),
    "binary-garbage-with-crlf": Attack(
        answer(send(GARBAGE + b"\r\n\r\n" + GARBAGE), fin), ProtocolError
    ),
    # -- Content-Length lies
    "length-shorter-than-body": Attack(
        answer(
            send(
                response(GOOD_BODY)[: -len(GOOD_BODY)].replace(
                    b"Content-Length: %d" % len(GOOD_BODY), b"Content-Length: 10"
                )
                + GOOD_BODY
            )
        ),
        ProtocolError,  # a JSON body cut at 10 bytes
    ),
    "length-1gib-then-close": Attack(
        answer(send(head("200 OK", f"Content-Length: {1 << 30}") + GOOD_BODY), fin),
        ProtocolError,
        HTTPX_CUT_HEAD | {"httpx": ProtocolError, "ahttpx": ProtocolError},
    ),
    "length-1gib-then-stall": Attack(
        answer(send(head("200 OK", f"Content-Length: {1 << 30}") + GOOD_BODY), stall),
        DeadlineExceededError,
        timeout=STALL,
    ),
    "length-negative": Attack(
        answer(send(head("200 OK", "Content-Length: -1")), fin), ProtocolError
    ),
    "length-not-a-number": Attack(
        answer(send(head("200 OK", "Content-Length: abc") + GOOD_BODY), fin), ProtocolError
    ),
    "length-duplicated-different": Attack(
        answer(
            send(
                head("200 OK", f"Content-Length: {len(GOOD_BODY)}", "Content-Length: 1") + GOOD_BODY
            ),
            fin,
        ),
        ProtocolError,
    ),
    "length-over-the-limit": Attack(
        answer(send(head("200 OK", f"Content-Length: {LIMIT + 1}") + GOOD_BODY), stall),
        ProtocolError,
        options={"max_response_size": LIMIT},
    ),
    # -- chunked framing
    "chunk-size-not-hex": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: chunked") + b"zz\r\nab\r\n0\r\n\r\n"), fin),
        ProtocolError,
    ),
    "chunk-without-crlf": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: chunked") + b"2\r\nabXX0\r\n\r\n"), fin),
        ProtocolError,
    ),
    "chunk-size-huge": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: chunked") + b"f" * 40 + b"\r\n"), fin),
        ProtocolError,
    ),
    "chunk-size-1pib-then-close": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: chunked") + b"4000000000000\r\nab"), fin),
        ProtocolError,
    ),
    "chunk-size-line-endless": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: chunked")), flood(b"0" * 65536)),
        ProtocolError,
        timeout=STALL,
    ),
    "chunks-endless-over-the-limit": Attack(
        answer(
            send(head("200 OK", "Transfer-Encoding: chunked")),
            flood(b"1000\r\n" + b"x" * 4096 + b"\r\n"),
        ),
        ProtocolError,
        options={"max_response_size": LIMIT},
    ),
    "unknown-transfer-encoding": Attack(
        answer(send(head("200 OK", "Transfer-Encoding: gzip, chunked") + b"0\r\n\r\n"), fin),
        ProtocolError,
    ),
    # -- bodies
    "gzip-bomb-over-the-limit": Attack(
        answer(
            send(
                head(
                    "200 OK",
                    "Content-Type: application/json",
                    "Content-Encoding: gzip",
                    f"Content-Length: {len(GZIP_BOMB)}",
                )
                + GZIP_BOMB
            )
        ),
        ProtocolError,
        options={"max_response_size": LIMIT},
    ),
    "gzip-corrupt": Attack(
        answer(send(response(b"\x1f\x8b\x08\x00garbage-garbage", "Content-Encoding: gzip"))),
        ProtocolError,
    ),
    "until-eof-body-over-the-limit": Attack(
        answer(send(head("200 OK", "Content-Type: application/json")), flood(b"x" * 65536)),
        ProtocolError,
        options={"max_response_size": LIMIT},
    ),
    "json-not-json": Attack(answer(send(response(b"\x00not json at all"))), ProtocolError),
    "binary-header-length-beyond-the-body": Attack(
        answer(
            send(response(GOOD_BODY, f"Inference-Header-Content-Length: {len(GOOD_BODY) + 1000}"))
        ),
        ProtocolError,
    ),
    "binary-header-length-not-a-number": Attack(
        answer(send(response(GOOD_BODY, "Inference-Header-Content-Length: 12x"))),
        ProtocolError,
    ),
    "bytes-after-the-response": Attack(
        answer(send(GOOD_RESPONSE + b"HTTP/1.1 200 OK\r\n\r\nsmuggled")), None
    ),
}
for _point, _cut in CUTS.items():
    ATTACKS[f"close-{_point}"] = Attack(
        answer(send(GOOD_RESPONSE[:_cut]), fin),
        TransportError if _cut == 0 else ProtocolError,
        HTTPX_CUT_HEAD if _cut < CUTS["after-head"] else {},
    )
    if _point in STALLS:
        ATTACKS[f"stall-{_point}"] = Attack(
            answer(send(GOOD_RESPONSE[:_cut]), stall), DeadlineExceededError, timeout=STALL
        )

#: What a transport is known not to do, with the reason (strict xfail: a fix shows).
#: Those in ``SLOW`` take the server's patience (seconds) to fail and are not run.
KNOWN: dict[tuple[str, str], str] = {
    **{
        (name, kind): "h11 takes the bytes beyond a response's Content-Length for the start "
        "of the next response on that connection: the next call fails (once)"
        for name in ("length-shorter-than-body", "bytes-after-the-response")
        for kind in ("httpx", "ahttpx")
    },
    **{
        (name, "httpx"): "httpx's timeouts bound each read: a sync call whose server trickles "
        "heads (a byte, or an interim response, at a time) outlives its deadline"
        for name in ("header-trickle", "interim-response-flood")
    },
}
SLOW = {("header-trickle", "httpx"), ("interim-response-flood", "httpx")}


# -------------------------------------------------------------------------------- the runs


CASES = cases(((name, kind) for name in ATTACKS for kind in KINDS), KNOWN, SLOW)


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_attack(name: str, kind: str) -> None:
    run_attack(
        kind, ATTACKS[name], lambda runner, timeout: runner.infer(timeout=timeout), GOOD_OUTPUT
    )


def test_an_infer_is_not_sent_twice_when_a_reused_connection_closes_unanswered() -> None:
    """Issue #12 item 6, through the client: the server reads the second inference of a
    connection and closes without answering; the call fails and the model ran once."""
    for kind in KINDS:

        def handler(peer: Peer) -> None:
            if peer.index == 0:
                peer.read_request()
                peer.send(GOOD_RESPONSE)
                peer.read_request()
                return  # hang up without answering
            peer.serve()

        with scripted_servers() as start:
            server = start(handler)
            runner = Runner(kind, server.url)
            try:
                assert runner.infer() == GOOD_OUTPUT
                with pytest.raises(TransportError, match="without sending a response") as info:
                    runner.infer()
                if not kind.endswith("httpx"):
                    assert "may have been processed" in str(info.value)
                assert len(server.requests()) == 2, kind
                assert runner.infer() == GOOD_OUTPUT
            finally:
                runner.close()
