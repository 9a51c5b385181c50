"""The hostile-server kit, HTTP/1.1 over TLS: a server that stalls or garbles the handshake,
answers a TLS client in plaintext, or ends a response by dropping the connection without
TLS's ``close_notify`` (a truncation attack), on every HTTP/1.1 transport (and the asyncio
one on uvloop too).

RFC 9112 section 9.8: a response framed by Content-Length or chunked coding is complete when
its framing says so, whatever the close looks like; one framed by the end of the connection
is complete only if a ``close_notify`` came before the end ("Treating an incomplete message
as complete could expose implementations to attack"): without it, an attacker who can cut
the TCP connection can shorten the body. The invariants are those of the other tables.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kserve_v2 import DeadlineExceededError, ProtocolError, TransportError
from tests.hostile.http1_server import (
    GOOD_BODY,
    GOOD_OUTPUT,
    GOOD_RESPONSE,
    KINDS,
    UVLOOP_KIND,
    Act,
    Attack,
    Peer,
    fin,
    head,
    response,
    run_attack,
    scripted_tls_servers,
    send,
    stall,
)
from tests.hostile.invariants import cases
from tests.transport.servers import Certs, make_certs, server_ssl_context

STALL = 0.5

Step = Callable[[Peer], object]

#: A JSON answer framed by the end of the connection (no Content-Length, not chunked).
UNTIL_CLOSE = head("200 OK", "Content-Type: application/json") + GOOD_BODY
#: Framed answers that say the server closes the connection after them ("Connection: close":
#: a client that kept the connection would race the server's close on its next call).
LENGTH_THEN_CLOSE = response(GOOD_BODY, "Connection: close")
CHUNKED_THEN_CLOSE = (
    head(
        "200 OK",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
        "Connection: close",
    )
    + f"{len(GOOD_BODY):x}\r\n".encode()
    + GOOD_BODY
    + b"\r\n0\r\n\r\n"
)


def over_tls(*steps: Step) -> Act:
    """An attack inside a good TLS session: handshake, read the request, then ``steps``."""

    def act(peer: Peer) -> None:
        peer.start_tls()
        peer.read_request()
        for step in steps:
            step(peer)

    return act


def raw(*steps: Step) -> Act:
    """An attack on the handshake itself: ``steps`` on the plain TCP connection."""

    def act(peer: Peer) -> None:
        for step in steps:
            step(peer)

    return act


def close_tls(peer: Peer) -> None:
    peer.close_tls()


def read_client_hello(peer: Peer) -> None:
    assert peer.sock.recv(65536), "the client sent no ClientHello"


ATTACKS: dict[str, Attack] = {
    "good": Attack(over_tls(send(GOOD_RESPONSE)), None),
    # Framed responses are complete when the framing says so, however the connection ends.
    "length-framed-then-abrupt-close": Attack(over_tls(send(LENGTH_THEN_CLOSE), fin), None),
    "chunked-then-abrupt-close": Attack(over_tls(send(CHUNKED_THEN_CLOSE), fin), None),
    "until-close-with-close-notify": Attack(over_tls(send(UNTIL_CLOSE), close_tls), None),
    # Ended by the connection without close_notify: it may have been cut (RFC 9112 9.8).
    "until-close-without-close-notify": Attack(over_tls(send(UNTIL_CLOSE), fin), ProtocolError),
    "cut-mid-body-without-close-notify": Attack(
        over_tls(send(GOOD_RESPONSE[:-10]), fin), ProtocolError
    ),
    "cut-mid-body-with-close-notify": Attack(
        over_tls(send(GOOD_RESPONSE[:-10]), close_tls), ProtocolError
    ),
    # The handshake.
    "handshake-stall": Attack(raw(stall), DeadlineExceededError, timeout=STALL),
    "close-during-handshake": Attack(raw(read_client_hello, fin), TransportError),
    "plaintext-answer": Attack(raw(read_client_hello, send(GOOD_RESPONSE)), TransportError),
    "garbage-answer": Attack(raw(read_client_hello, send(bytes(range(256)) * 4)), TransportError),
}

#: What a transport is known not to do, with the reason (strict xfail: a fix shows). Those
#: in ``NOT_RUN`` leave a socket to the garbage collector, whose ResourceWarning would fail
#: whichever test is running then: they are listed, not run.
KNOWN: dict[tuple[str, str], str] = {
    **{
        ("until-close-without-close-notify", kind): "httpx (h11) takes a body that runs to "
        "the end of a TLS connection as complete without close_notify"
        for kind in ("httpx", "ahttpx")
    },
    **{
        ("until-close-with-close-notify", kind): "httpcore reuses a connection whose "
        "response ended with close_notify before the TCP FIN arrived: the next call fails once"
        for kind in ("httpx", "ahttpx")
    },
    ("handshake-stall", "ahttpx"): "httpcore does not close the TCP connection when its TLS "
    "handshake is cancelled (by the call's deadline): the socket is left to the garbage "
    "collector",
}
NOT_RUN = {("handshake-stall", "ahttpx")}

CASES = cases(((name, kind) for name in ATTACKS for kind in (*KINDS, UVLOOP_KIND)), KNOWN, NOT_RUN)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    pytest.importorskip("cryptography")
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_attacked(act: Act) -> Callable[[Peer], None]:
    """``act`` on the first connection, then its requests served well over TLS (if the
    client kept it); every later connection a good TLS server."""

    def handler(peer: Peer) -> None:
        if peer.index == 0:
            act(peer)
        else:
            peer.start_tls()
        peer.serve()

    return handler


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_tls_attack(name: str, kind: str, certs: Certs) -> None:
    run_attack(
        kind,
        ATTACKS[name],
        lambda runner, timeout: runner.infer(timeout=timeout),
        GOOD_OUTPUT,
        servers=lambda: scripted_tls_servers(server_ssl_context(certs)),
        handler=tls_attacked,
        ca_file=str(certs.ca_file),
    )
