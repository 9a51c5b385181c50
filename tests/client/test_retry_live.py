"""Retries against the live Triton, both protocols and clients: a port where nothing listens
until the first backoff brings it up (a loopback forwarder to the session's server), and a
port that takes each request and drops the connection unanswered.

The server comes up from the policy's ``random`` function, which the client calls once per
backoff: no timing decides what the test sees.
"""

from __future__ import annotations

import contextlib
import inspect
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from kserve_v2 import AsyncClient, Client, RetryPolicy, TransportError
from kserve_v2.testing import TritonServer

# (protocol, client class, gRPC transport)
SETUPS = [
    ("http", Client, None),
    ("http", AsyncClient, None),
    ("grpc", Client, "native"),
    ("grpc", AsyncClient, "native"),
    ("grpc", Client, "grpcio"),
    ("grpc", AsyncClient, "grpcio"),
]
IDS = ["http-sync", "http-async", "grpc-sync", "grpc-async", "grpcio-sync", "grpcio-async"]

INPUTS = {
    "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
    "INPUT1": np.ones((1, 16), dtype=np.int32),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Forwarder:
    """A loopback port, closed until :meth:`start`; then it forwards every connection to
    ``target`` (the live server), or with ``drop`` reads the request and closes the
    connection without an answer (the server may have processed it)."""

    def __init__(self, target: int, *, drop: bool = False) -> None:
        self.port = free_port()
        self.target = target
        self.drop = drop
        self.accepted = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        if self._listener is not None:
            return
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._spawn(self._accept, self._listener)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self.accepted += 1
                self._sockets.append(conn)
            if self.drop:
                with contextlib.suppress(OSError):
                    conn.recv(1 << 16)  # the request (its start) arrived ...
                    conn.shutdown(socket.SHUT_RDWR)  # ... and no answer comes
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self._lock:
                self._sockets.append(upstream)
            self._spawn(self._pump, conn, upstream)
            self._spawn(self._pump, upstream, conn)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept() on Linux
            self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(10)
        for sock in sockets:
            sock.close()


@pytest.fixture
def forwarders() -> Iterator[list[Forwarder]]:
    made: list[Forwarder] = []
    yield made
    for forwarder in made:
        forwarder.close()


def start_on_first_failure(forwarder: Forwarder, seen: list[Any]) -> Callable[[Any], None]:
    """A wire hook that keeps the messages and brings the forwarder up when the first try
    has failed, before the client's backoff."""

    def hook(message: Any) -> None:
        seen.append(message)
        if message.direction == "receive" and message.error is not None:
            forwarder.start()

    return hook


def client_for(
    setup: tuple[str, Any, str | None], port: int, policy: RetryPolicy, **options: Any
) -> Any:
    protocol, cls, grpc_transport = setup
    if protocol == "http":
        return cls(f"http://127.0.0.1:{port}", retry=policy, **options)
    return cls(f"grpc://127.0.0.1:{port}", retry=policy, grpc_transport=grpc_transport, **options)


async def call(client: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    result = getattr(client, method)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


async def close(client: Any) -> None:
    await call(client, "aclose" if isinstance(client, AsyncClient) else "close")


def target_port(triton: TritonServer, protocol: str) -> int:
    return triton.http_port if protocol == "http" else triton.grpc_port


@pytest.mark.parametrize("setup", SETUPS, ids=IDS)
async def test_a_read_is_retried_until_the_server_comes_up(
    triton: TritonServer, forwarders: list[Forwarder], setup: tuple[str, Any, str | None]
) -> None:
    forwarder = Forwarder(target_port(triton, setup[0]))
    forwarders.append(forwarder)
    seen: list[Any] = []
    # grpcio keeps failing fast while its channel backs off from the refused connect (about
    # a second): enough short tries to outlast that; the others succeed at the second.
    policy = RetryPolicy(attempts=100, initial_backoff=0.05, max_backoff=0.2, jitter=False)
    hook = start_on_first_failure(forwarder, seen)
    client = client_for(setup, forwarder.port, policy, wire_hook=hook)
    try:
        assert await call(client, "is_server_ready") is True
    finally:
        await close(client)
    outcomes = [m.error is None for m in seen if m.direction == "receive"]
    assert outcomes[0] is False  # refused: nothing listened yet
    assert outcomes[-1] is True
    if setup[2] != "grpcio":
        assert outcomes == [False, True]


@pytest.mark.parametrize("setup", SETUPS[:4], ids=IDS[:4])
async def test_infer_never_reached_the_server_so_it_is_sent_again_and_runs_once(
    triton: TritonServer, forwarders: list[Forwarder], setup: tuple[str, Any, str | None]
) -> None:
    forwarder = Forwarder(target_port(triton, setup[0]))
    forwarders.append(forwarder)
    seen: list[Any] = []
    policy = RetryPolicy(random=lambda: 0.0)  # no sleep
    hook = start_on_first_failure(forwarder, seen)
    options = {"binary": True} if setup[0] == "http" else {}
    client = client_for(setup, forwarder.port, policy, wire_hook=hook, **options)
    try:
        result = await call(client, "infer", "simple", INPUTS, retry="unprocessed")
    finally:
        await close(client)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), INPUTS["INPUT0"] + 1)
    # Two tries: the refused one (nothing listened: the model cannot have run), then the
    # one that ran it, over the one connection the server came up with.
    assert [m.error is None for m in seen if m.direction == "receive"] == [False, True]
    assert forwarder.accepted == 1


@pytest.mark.parametrize("setup", SETUPS[:4], ids=IDS[:4])
@pytest.mark.parametrize(("mode", "sent"), [("unprocessed", 1), ("idempotent", 3)])
async def test_infer_that_may_have_run_is_sent_again_only_when_asked(
    triton: TritonServer,
    forwarders: list[Forwarder],
    setup: tuple[str, Any, str | None],
    mode: str,
    sent: int,
) -> None:
    forwarder = Forwarder(target_port(triton, setup[0]), drop=True)
    forwarders.append(forwarder)
    forwarder.start()
    policy = RetryPolicy(attempts=3, random=lambda: 0.0)
    options = {"binary": True} if setup[0] == "http" else {}
    client = client_for(setup, forwarder.port, policy, **options)
    try:
        with pytest.raises(TransportError) as caught:
            await call(client, "infer", "simple", INPUTS, retry=mode)
    finally:
        await close(client)
    assert not caught.value.unprocessed
    assert forwarder.accepted == sent
