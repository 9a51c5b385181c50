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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kserve_v2 import DeadlineExceededError, KServeError, ProtocolError, TransportError
from tests.hostile.http1_server import (
    GOOD_BODY,
    GOOD_OUTPUT,
    GOOD_RESPONSE,
    KINDS,
    UVLOOP_KIND,
    Act,
    Peer,
    Runner,
    fin,
    head,
    response,
    scripted_tls_servers,
    send,
    stall,
)
from tests.hostile.invariants import memory_growth, open_fds
from tests.transport.servers import Certs, make_certs, server_ssl_context

MEMORY = 4 << 20
MARGIN = 8.0
STALL = 0.5

Expect = type[KServeError] | tuple[type[KServeError], ...] | None
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


@dataclass(frozen=True)
class Attack:
    act: Act
    error: Expect
    errors: dict[str, Expect] = field(default_factory=dict)
    timeout: float = 5.0

    def expected(self, kind: str) -> Expect:
        return self.errors.get(kind, self.error)


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

CASES = [
    pytest.param(
        name,
        kind,
        id=f"{name}-{kind}",
        marks=[
            pytest.mark.xfail(
                reason=KNOWN[name, kind], strict=True, run=(name, kind) not in NOT_RUN
            )
        ]
        if (name, kind) in KNOWN
        else [],
    )
    for name in ATTACKS
    for kind in (*KINDS, UVLOOP_KIND)
]


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
    attack = ATTACKS[name]
    if kind.endswith("httpx"):
        pytest.importorskip("httpx", reason="the 'httpx' extra is not installed")
    if kind == UVLOOP_KIND:
        uvloop = pytest.importorskip("uvloop", reason="the 'uvloop' extra is not installed")
        # libuv keeps a descriptor open for the process once its first loop ran: not ours.
        uvloop.new_event_loop().close()
    expected = attack.expected(kind)
    threads_before = set(threading.enumerate())
    fds_before = open_fds()
    options: dict[str, Any] = {"ca_file": str(certs.ca_file)}
    with scripted_tls_servers(server_ssl_context(certs)) as start:
        server = start(tls_attacked(attack.act))
        runner = Runner(kind, server.url, **options)
        try:
            started = time.monotonic()
            with memory_growth() as growth:
                if expected is None:
                    assert runner.infer(timeout=attack.timeout) == GOOD_OUTPUT
                else:
                    with pytest.raises(expected) as caught:
                        runner.infer(timeout=attack.timeout)
                    assert isinstance(caught.value, KServeError)
            took = time.monotonic() - started
            assert took < attack.timeout + MARGIN, f"the call took {took:.1f} s"
            assert growth[0] < MEMORY, f"the call added {growth[0] >> 10} KiB"
            assert runner.infer(timeout=10.0) == GOOD_OUTPUT
        finally:
            runner.close()
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"
    assert open_fds() <= fds_before, "sockets left behind"
