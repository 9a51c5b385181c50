"""Fixtures of the client tests: one client in each of the four HTTP set-ups, called alike.

The set-ups (``kind``):

* ``sync-stdlib``: :class:`Client` with its default transport (stdlib sockets);
* ``sync-httpx``: :class:`Client` over an :class:`HTTPXTransport`;
* ``async-asyncio``: :class:`AsyncClient` with its default transport (asyncio);
* ``async-httpx``: :class:`AsyncClient` over an :class:`AsyncHTTPXTransport`;
* ``async-uvloop``: ``async-asyncio`` on uvloop (skipped where uvloop is not installed).

:class:`ClientUnderTest` wraps any of them so a test body reads the same for all four: the
async clients' coroutines are run to completion on an event loop owned by the wrapper. Clients
are opened and closed through their real context-manager protocol (``__enter__``/``__exit__``,
``__aenter__``/``__aexit__``), and a transport passed in is closed by its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client, WireMessage
from kserve_v2.endpoint import parse_url
from tests.loops import HAS_UVLOOP, loop_factories, loop_of, new_event_loop

SYNC_KINDS = ("sync-stdlib", "sync-httpx")
ASYNC_KINDS = ("async-asyncio", "async-httpx", "async-uvloop")
KINDS = SYNC_KINDS + ASYNC_KINDS

# Client options that a transport passed in must be given itself (the client applies only
# its per-request timeout to a foreign transport).
_TRANSPORT_OPTIONS = {
    "connect_timeout": "connect_timeout",
    "pool_size": "max_connections",
    "max_response_size": "max_response_size",
}


class ClientUnderTest:
    """A :class:`Client` or :class:`AsyncClient` of one set-up, with synchronous methods.

    ``seen`` holds the :class:`WireMessage` objects of every exchange when the wrapper was
    made with ``record=True``.
    """

    def __init__(self, kind: str, url: str, *, record: bool = False, **options: Any) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown client set-up {kind!r}")
        self.kind = kind
        self.is_async = kind in ASYNC_KINDS
        self.seen: list[WireMessage] = []
        if record:
            options["wire_hook"] = self.seen.append
        transport_options = {
            name: options.pop(option)
            for option, name in _TRANSPORT_OPTIONS.items()
            if option in options and kind.endswith("httpx")
        }
        endpoint = parse_url(url)
        origin = f"{endpoint.scheme}://{endpoint.authority}"
        if loop_of(kind) == "uvloop" and not HAS_UVLOOP:
            pytest.skip("uvloop is not installed")
        self._loop = new_event_loop(loop_of(kind)) if self.is_async else None
        self.transport: Any = None
        try:
            self.client: Any = self.run(self._open(origin, url, options, transport_options))
        except BaseException:
            if self._loop is not None:
                self._loop.close()
            raise
        self._closed = False

    def run(self, value: Any) -> Any:
        """``value`` itself, or its result when it is awaitable (run on the wrapper's loop)."""
        if inspect.isawaitable(value):
            assert self._loop is not None, "a sync client returned an awaitable"
            return self._loop.run_until_complete(value)
        return value

    def _open(
        self, origin: str, url: str, options: dict[str, Any], transport_options: dict[str, Any]
    ) -> Any:
        if self.kind == "sync-stdlib":
            return Client(url, **options).__enter__()
        if self.kind == "sync-httpx":
            from kserve_v2.transport.httpx import HTTPXTransport

            self.transport = HTTPXTransport(origin, **transport_options).__enter__()
            return Client(url, transport=self.transport, **options).__enter__()

        async def open_async() -> AsyncClient:
            # Made inside the loop, as an application would.
            if self.kind == "async-httpx":
                from kserve_v2.transport.httpx import AsyncHTTPXTransport

                self.transport = await AsyncHTTPXTransport(origin, **transport_options).__aenter__()
                options["transport"] = self.transport
            return await AsyncClient(url, **options).__aenter__()

        return open_async()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "client":
            raise AttributeError(name)  # not set yet: no recursion through self.client
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.run(attribute(*args, **kwargs))

        return call

    def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Run ``calls`` (functions returning coroutines) concurrently; async set-ups only."""
        assert self._loop is not None, "gather() needs an async client"

        async def run_all() -> list[Any]:
            return list(await asyncio.gather(*(call() for call in calls)))

        return self._loop.run_until_complete(run_all())

    def close(self) -> None:
        """Leave the client's context manager, then the transport's; idempotent.

        The event loop of an async set-up stays open (calls on the closed client can still
        be tried) until :meth:`shutdown`.
        """
        if self._closed:
            return
        self._closed = True
        if not self.is_async:
            self.client.__exit__(None, None, None)
            if self.transport is not None:
                self.transport.__exit__(None, None, None)
            return
        self.run(self.client.__aexit__(None, None, None))
        if self.transport is not None:
            self.run(self.transport.__aexit__(None, None, None))

    def shutdown(self) -> None:
        """:meth:`close`, then close the event loop of an async set-up."""
        try:
            self.close()
        finally:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

    def __repr__(self) -> str:
        return f"<ClientUnderTest {self.kind} {self.client!r}>"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """The client set-up; tests for some set-ups only parametrize ``kind`` themselves."""
    return str(request.param)


@pytest.fixture
def connect(kind: str, triton: Any) -> Iterator[Callable[..., ClientUnderTest]]:
    """``connect(url=None, record=False, **client_options)``: a client of the set-up ``kind``,
    to the session's server by default (recording: ``binary=True`` unless given); all are
    closed at the end of the test."""
    made: list[ClientUnderTest] = []

    def connect(url: str | None = None, **options: Any) -> ClientUnderTest:
        if options.get("record"):
            # A recording client looks at the wire of binary requests, one exchange per
            # call: binary=True (given), not the default, which first asks the server's
            # metadata (tested in tests/rest/test_backend.py and tests/interop).
            options.setdefault("binary", True)
        client = ClientUnderTest(kind, url or triton.http_url, **options)
        made.append(client)
        return client

    yield connect
    for client in reversed(made):
        client.shutdown()


@pytest.fixture
def client(connect: Callable[..., ClientUnderTest]) -> ClientUnderTest:
    """A client to the session's server that records the wire messages in ``client.seen``."""
    return connect(record=True)


# -- looking at the wire ------------------------------------------------------------------------


def lower_headers(message: WireMessage) -> dict[str, str]:
    return {key.lower(): value for key, value in message.headers}


def joined_body(message: WireMessage) -> bytes:
    return b"".join(bytes(memoryview(part).cast("B")) for part in message.body)


def json_header(message: WireMessage) -> dict[str, Any]:
    """The JSON part of an inference request or response body (binary-data extension aware)."""
    body = joined_body(message)
    length = lower_headers(message).get("inference-header-content-length")
    obj = json.loads(body if length is None else body[: int(length)])
    assert isinstance(obj, dict)
    return obj


def exchanges(seen: Sequence[WireMessage]) -> list[tuple[WireMessage, WireMessage]]:
    """(send, receive) pairs of a sequential client, checking that they alternate."""
    assert [m.direction for m in seen] == ["send", "receive"] * (len(seen) // 2)
    return [(seen[i], seen[i + 1]) for i in range(0, len(seen), 2)]


def only_exchange(seen: Sequence[WireMessage]) -> tuple[WireMessage, WireMessage]:
    """The (send, receive) pair of a client that made exactly one call."""
    (pair,) = exchanges(seen)
    return pair


def connections_to(port: int) -> int:
    """TCP sockets this process holds open to ``port`` on the loopback (Linux ``/proc``)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in inodes:
                count += 1
    return count


# -- one input reused across calls (InferInput.set_data / set_shared_memory) ---------------------

#: The shapes a reused input takes in turn (identity_fp32 takes any rank-2 shape).
REUSE_SHAPES = ((1, 3), (2, 5), (4, 1))


def reuse_data(step: int, shape: tuple[int, ...]) -> Any:
    import numpy as np

    return (np.arange(int(np.prod(shape)), dtype=np.float32) + 10 * step).reshape(shape)


def reuse_one_input(client: Any, region_name: str) -> int:
    """Infer with one :class:`InferInput` over and over, changing its data and shape, and
    moving it into a registered system shared-memory region and back; returns the number of
    inferences checked. ``client`` is a sync :class:`Client` or a :class:`ClientUnderTest`."""
    import numpy as np

    from kserve_v2 import InferInput
    from kserve_v2.shm import SystemSharedMemoryRegion

    x = InferInput("INPUT0", np.zeros((1, 1), np.float32))
    checked = 0
    with SystemSharedMemoryRegion.create(region_name, 4096) as region:
        client.register_region(region)
        try:
            for step, shape in enumerate(REUSE_SHAPES):
                data = reuse_data(step, shape)
                x.set_data(data)
                out = client.infer("identity_fp32", [x]).as_numpy("OUTPUT0")
                np.testing.assert_array_equal(out, data)
                placed = reuse_data(step + 100, shape[::-1])
                x.set_shared_memory(region.name, region.write(placed), shape=placed.shape)
                out = client.infer("identity_fp32", [x]).as_numpy("OUTPUT0")
                np.testing.assert_array_equal(out, placed)
                checked += 2
        finally:
            client.unregister_region(region)
    return checked


@pytest.hookimpl(optionalhook=True)
def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``async def`` tests here run on asyncio's loop and on uvloop (see tests/loops.py)."""
    return loop_factories()
