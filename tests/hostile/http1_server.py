"""The hostile-server kit, HTTP/1.1 half: a scripted HTTP/1.1 server on loopback.

:class:`ScriptedServer` is a real TCP server in a thread: each connection it accepts runs the
test's handler with a :class:`Peer`, which reads requests and writes whatever bytes the test
wants (malformed ones above all). :class:`Runner` drives one client of it through the public
API, an inference (or a ``generate_stream``) with :class:`~kserve_v2.Client` or
:class:`~kserve_v2.AsyncClient` (on an event loop of its own, so one test body drives both)
over one of the HTTP/1.1 transports: the default ones (``stdlib``, ``aio``) or httpx's
(``httpx``, ``ahttpx``). No socket read on either side can wait for ever: the server's
sockets time out after ``IO_TIMEOUT``, every call has a deadline, async calls a guard.

:class:`Attack` says what a hostile server does and what each transport must make of it;
:func:`run_attack` makes one attacked call and checks the invariants every table keeps (see
:mod:`tests.hostile.invariants`). Used by ``tests/hostile/test_http1_attacks.py`` (inferences),
``test_http1_stream_attacks.py`` (``generate_stream``) and ``test_http1_tls_attacks.py`` (over
TLS).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kserve_v2 import AsyncClient, Client, TLSOptions
from tests.hostile.invariants import AttackBase, attacked_call, nothing_left_behind
from tests.hostile.threaded_server import IO_TIMEOUT, ThreadedServer, serving

#: The clients' default call deadline (the server's sockets time out after IO_TIMEOUT: a
#: test can fail, but never hang).
CALL_TIMEOUT = 5.0
#: Async calls are abandoned after this long even when the client's own deadline fails.
GUARD = 20.0
#: A flooding or trickling server gives up after this long (the client put up with it).
FLOOD_LIMIT = 20.0
#: The transports: the package's own (sync, asyncio), and httpx's (sync, asyncio).
KINDS = ("stdlib", "aio", "httpx", "ahttpx")
#: The package's asyncio transport on uvloop, whose TLS reports a connection's end
#: differently (the TLS table runs it too).
UVLOOP_KIND = "aio-uvloop"
ASYNC_KINDS = frozenset({"aio", "ahttpx", UVLOOP_KIND})

MODEL = "m"
#: The inference every call makes, and the answer a well-behaved server gives.
INPUTS = {"IN": np.array([1, 2, 3], dtype=np.int32)}
GOOD_BODY = json.dumps(
    {
        "model_name": MODEL,
        "outputs": [{"name": "OUT", "datatype": "INT32", "shape": [3], "data": [2, 4, 6]}],
    }
).encode()
GOOD_OUTPUT = [2, 4, 6]
#: The generate_stream request every stream call makes.
PAYLOAD = {"text_input": "hi"}
#: Events a stream call reads at most before it stops early (a server may never end one).
STREAM_MOST = 1000


def head(status: str = "200 OK", *headers: str) -> bytes:
    """A response head: the status line, then ``headers`` (``Name: value``)."""
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode("latin-1")


def response(body: bytes = GOOD_BODY, *headers: str) -> bytes:
    """A complete JSON response with ``body`` (Content-Length framing)."""
    return head(
        "200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *headers
    ) + bytes(body)


GOOD_RESPONSE = response()


class PeerClosed(Exception):
    """The client closed the connection."""


class Peer:
    """The server side of one connection."""

    def __init__(self, sock: socket.socket, index: int) -> None:
        self.sock = sock
        #: Which connection of the server this is (0: the first).
        self.index = index
        self.buf = bytearray()
        #: The requests read on this connection: (request line, body).
        self.requests: list[tuple[str, bytes]] = []
        #: The server's TLS context (https servers only).
        self.tls_context: ssl.SSLContext | None = None

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise PeerClosed
        self.buf += data

    def read_request(self) -> tuple[str, bytes]:
        """Read one request (Content-Length framing, as the clients send them)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        end = self.buf.index(b"\r\n\r\n")
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(self.buf) < length:
            self._fill()
        body = bytes(self.buf[:length])
        del self.buf[:length]
        self.requests.append((lines[0], body))
        return lines[0], body

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def start_tls(self) -> None:
        """Take the client's TLS handshake; the connection speaks TLS from then on."""
        assert self.tls_context is not None, "not a TLS server's connection"
        self.sock = self.tls_context.wrap_socket(self.sock, server_side=True)

    def close_tls(self) -> None:
        """Say TLS's ``close_notify`` and nothing more: no TCP FIN, no waiting for the
        client's own alert (a server ends a response framed by the end of the connection
        so, then closes when the client does). :meth:`send_fin` on a TLS connection is the
        abrupt close instead, with no ``close_notify``: what a truncation looks like."""
        sock = self.sock
        assert isinstance(sock, ssl.SSLSocket)
        sock.setblocking(False)
        try:
            sock.unwrap()  # sends the alert, then wants the client's: not waited for
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        finally:
            sock.settimeout(IO_TIMEOUT)

    def send_fin(self) -> None:
        """Close our side of the connection (the client reads its end)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def wait_closed(self, seconds: float = FLOOD_LIMIT) -> bool:
        """Read and drop everything until the client closes (True) or ``seconds`` pass."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                continue
            except OSError:
                return True
        return False

    def flood(self, data: bytes, seconds: float = FLOOD_LIMIT) -> bool:
        """Send ``data`` again and again, without reading, until the client closes the
        connection (True) or ``seconds`` pass (False: the client put up with it)."""
        until = time.monotonic() + seconds
        self.sock.settimeout(0.5)
        try:
            while time.monotonic() < until:
                with contextlib.suppress(TimeoutError):
                    self.sock.sendall(data)
        except OSError:
            return True
        finally:
            self.sock.settimeout(IO_TIMEOUT)
        return False

    def trickle(self, data: bytes, pause: float, seconds: float = FLOOD_LIMIT) -> bool:
        """Slowloris: ``data`` one byte every ``pause`` seconds, until all is sent (False),
        the client closes the connection (True) or ``seconds`` pass (False)."""
        until = time.monotonic() + seconds
        try:
            for byte in data:
                if time.monotonic() > until:
                    return False
                self.sock.sendall(bytes((byte,)))
                time.sleep(pause)
        except OSError:
            return True
        return False

    def serve(self) -> None:
        """Answer every further request well, until the client goes away."""
        while True:
            self.read_request()
            self.send(GOOD_RESPONSE)


Handler = Callable[[Peer], None]


class ScriptedServer(ThreadedServer[Peer]):
    """A loopback TCP server running ``handler`` on each connection, in a thread per
    connection; handler exceptions are collected and reported when the test ends. A client
    that goes away (``PeerClosed``, ``OSError``) is what hostile handlers expect sooner or
    later, not an error."""

    scheme = "http"
    name = "scripted-http1"
    expected = (PeerClosed, OSError)

    def peer(self, sock: socket.socket, index: int) -> Peer:
        return Peer(sock, index)

    def requests(self) -> list[tuple[str, bytes]]:
        """Every request read so far, connection by connection."""
        with self._lock:
            return [request for peer in self.peers for request in peer.requests]


def scripted_servers() -> contextlib.AbstractContextManager[Callable[[Handler], ScriptedServer]]:
    """Starts scripted servers; at the end closes them and fails on handler errors."""
    return serving(ScriptedServer)


class TLSScriptedServer(ScriptedServer):
    """A :class:`ScriptedServer` with an ``https`` URL: its handlers start TLS themselves
    (:meth:`Peer.start_tls`, with ``context``), so that an attack can also stall or garble
    the handshake."""

    scheme = "https"
    name = "scripted-https"

    def __init__(self, handler: Handler, context: ssl.SSLContext) -> None:
        self.context = context
        super().__init__(handler)

    def peer(self, sock: socket.socket, index: int) -> Peer:
        peer = Peer(sock, index)
        peer.tls_context = self.context
        return peer


def scripted_tls_servers(
    context: ssl.SSLContext,
) -> contextlib.AbstractContextManager[Callable[[Handler], TLSScriptedServer]]:
    """Starts ``https`` scripted servers whose handshakes use ``context`` (see
    :func:`scripted_servers`)."""
    return serving(functools.partial(TLSScriptedServer, context=context))


class Runner:
    """One client of the scripted server, called synchronously: a :class:`Client`, or an
    :class:`AsyncClient` on an event loop of its own (each call runs the loop until done),
    over the HTTP/1.1 transport ``kind``. ``options``: the client's (the transport's, for
    httpx: ``timeout``, ``max_response_size``), and ``ca_file``, the CA an ``https`` server's
    certificate is checked against."""

    def __init__(self, kind: str, url: str, **options: Any) -> None:
        options.setdefault("timeout", CALL_TIMEOUT)
        options.setdefault("connect_timeout", IO_TIMEOUT)
        self.kind = kind
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any
        if kind.endswith("httpx"):
            from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport

            transport_class = AsyncHTTPXTransport if kind in ASYNC_KINDS else HTTPXTransport
            transport_options = {
                key: options.pop(key)
                for key in ("timeout", "connect_timeout", "max_response_size", "ca_file")
                if key in options
            }
            options["transport"] = lambda: transport_class(url, **transport_options)
        elif "ca_file" in options:  # https: trust the scripted server's CA
            options["tls"] = TLSOptions(ca_file=options.pop("ca_file"))
        # A transport passed in is the caller's to close.
        self._transport: Any = None
        if kind not in ASYNC_KINDS:
            if "transport" in options:
                options["transport"] = self._transport = options["transport"]()
            self._client = Client(url, binary=False, **options)
            return
        if kind == UVLOOP_KIND:
            import uvloop

            self._loop = uvloop.new_event_loop()
        else:
            self._loop = asyncio.new_event_loop()

        async def make() -> AsyncClient:
            if "transport" in options:
                options["transport"] = self._transport = options["transport"]()
            return AsyncClient(url, binary=False, **options)

        self._client = self._loop.run_until_complete(make())

    def _run(self, result: Any) -> Any:
        if self._loop is None:
            return result
        return self._loop.run_until_complete(asyncio.wait_for(result, GUARD))

    def infer(self, *, timeout: float = CALL_TIMEOUT) -> list[int]:
        """One inference; the output it got."""
        result = self._run(self._client.infer(MODEL, INPUTS, timeout=timeout))
        output: list[int] = result.as_numpy("OUT").tolist()
        return output

    def generate_stream(
        self, *, timeout: float = CALL_TIMEOUT, most: int = STREAM_MOST, pause: float = 0.0
    ) -> list[dict[str, Any]]:
        """One ``generate_stream`` read to its end, or to ``most`` events (then closed early:
        the client drops the connection); the events it got. ``pause``: seconds the caller
        spends on each event (as a slow consumer would) before it asks for the next."""
        if self._loop is None:
            events: list[dict[str, Any]] = []
            with self._client.generate_stream(MODEL, PAYLOAD, timeout=timeout) as stream:
                for event in stream:
                    events.append(event)
                    if len(events) >= most:
                        break
                    time.sleep(pause)
            return events

        async def read() -> list[dict[str, Any]]:
            events: list[dict[str, Any]] = []
            async with self._client.generate_stream(MODEL, PAYLOAD, timeout=timeout) as stream:
                async for event in stream:
                    events.append(event)
                    if len(events) >= most:
                        break
                    await asyncio.sleep(pause)
            return events

        result: list[dict[str, Any]] = self._run(read())
        return result

    def close(self) -> None:
        if self._loop is None:
            self._client.close()
            if self._transport is not None:
                self._transport.close()
            return
        try:
            self._loop.run_until_complete(self._client.aclose())
            if self._transport is not None:
                self._loop.run_until_complete(self._transport.aclose())
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()


# ---------------------------------------------------------------------------- attack parts

#: What the server does with the first connection.
Act = Callable[[Peer], None]


def answer(*steps: Callable[[Peer], object]) -> Act:
    """An attack on the first request: read it, then ``steps`` in order."""

    def act(peer: Peer) -> None:
        peer.read_request()
        for step in steps:
            step(peer)

    return act


def send(raw: bytes) -> Callable[[Peer], None]:
    return lambda peer: peer.send(raw)


def fin(peer: Peer) -> None:
    peer.send_fin()


def stall(peer: Peer) -> None:
    """Say nothing more until the client gives up and closes."""
    assert peer.wait_closed(), "the client never closed the connection"


def flood(raw: bytes) -> Callable[[Peer], None]:
    """Send ``raw`` again and again, never reading, until the client hangs up."""

    def step(peer: Peer) -> None:
        assert peer.flood(raw), "the client never closed the connection"

    return step


def trickle(raw: bytes, pause: float = 0.05) -> Callable[[Peer], None]:
    """Slowloris: ``raw`` a byte at a time; the client must give up at its deadline."""

    def step(peer: Peer) -> None:
        assert peer.trickle(raw, pause), "the client never closed the connection"

    return step


def attacked(act: Act) -> Callable[[Peer], None]:
    """The server: ``act`` on the first connection, then its requests served well (if the
    client kept it); every later connection well-behaved."""

    def handler(peer: Peer) -> None:
        if peer.index == 0:
            act(peer)
        peer.serve()

    return handler


# ------------------------------------------------------------------------------ the tables


@dataclass(frozen=True)
class Attack(AttackBase[Peer]):
    """What a hostile HTTP/1.1 server does, and what each transport must make of it."""

    #: What a stream that succeeds yields (None: the table's good events).
    events: list[dict[str, Any]] | None = None


def require(kind: str) -> None:
    """Skip a case whose transport's extra is not installed."""
    if kind.endswith("httpx"):
        pytest.importorskip("httpx", reason="the 'httpx' extra is not installed")
    if kind == UVLOOP_KIND:
        uvloop = pytest.importorskip("uvloop", reason="the 'uvloop' extra is not installed")
        # libuv keeps a descriptor open for the process once its first loop ran: not ours.
        uvloop.new_event_loop().close()


def run_attack(
    kind: str,
    attack: Attack,
    call: Callable[[Runner, float], object],
    good: object,
    servers: Callable[
        [], contextlib.AbstractContextManager[Callable[[Handler], ScriptedServer]]
    ] = scripted_servers,
    handler: Callable[[Act], Handler] = attacked,
    **options: Any,
) -> None:
    """One case of a table: ``call(runner, timeout)`` with a ``kind`` client of a server that
    ``handler`` makes of the attack (by default: the attack on the first connection, good
    answers after it), checked by :func:`~tests.hostile.invariants.attacked_call` (and equal
    to ``good`` when it succeeds); then the same client makes a good inference, and nothing
    is left behind once client and server are closed."""
    require(kind)
    expected = attack.expected(kind)
    with nothing_left_behind(), servers() as start:
        server = start(handler(attack.act))
        runner = Runner(kind, server.url, **attack.options, **options)
        try:
            got = attacked_call(
                lambda: call(runner, attack.timeout), expected, attack.timeout, attack.memory
            )
            if expected is None:
                assert got == good
            assert runner.infer(timeout=10.0) == GOOD_OUTPUT
        finally:
            runner.close()
