"""Fixtures for the transport tests: local servers and one sync driver for all four transports."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar, cast

import pytest

from kserve_v2.transport import (
    AsyncHTTPTransport,
    HTTPRequest,
    HTTPResponse,
    HTTPTransport,
)
from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport
from tests.loops import NO_UVLOOP, loop_factories, loop_of, new_event_loop
from tests.transport.servers import Certs, Handler, RawServer, make_certs

T = TypeVar("T")

#: The HTTP transports; ``aio-uvloop`` is the asyncio one on uvloop (skipped without it).
KINDS = [
    "stdlib",
    "aio",
    pytest.param("aio-uvloop", marks=NO_UVLOOP),
    "httpx",
    "ahttpx",
]
ASYNC_KINDS = {"aio", "aio-uvloop", "ahttpx"}


class Runner:
    """Drives any of the four transports through one synchronous interface.

    Async transports run on an event loop in a background thread, so the same test body
    (including the many-threads ones, which then become many concurrent tasks) covers all four.
    """

    def __init__(self, kind: str, url: str | None, **options: Any) -> None:
        self.kind = kind
        self._closed = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        if kind in ASYNC_KINDS:
            self.loop = new_event_loop(loop_of(kind))
            self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
            self._thread.start()
        factory: dict[str, Callable[..., Any]] = {
            "stdlib": HTTPTransport,
            "aio": AsyncHTTPTransport,
            "aio-uvloop": AsyncHTTPTransport,
            "httpx": HTTPXTransport,
            "ahttpx": AsyncHTTPXTransport,
        }
        self.transport = factory[kind](url, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def request(self, request: HTTPRequest) -> HTTPResponse:
        if self.loop is None:
            return cast(HTTPResponse, self.transport.handle_request(request))
        return self._run(self.transport.handle_async_request(request))

    def stream(
        self,
        request: HTTPRequest,
        on_piece: Callable[[bytes], None] | None = None,
        read_all: bool = False,
    ) -> tuple[int, dict[str, str], list[bytes]]:
        """Stream ``request``; returns status, headers and the pieces as they were yielded."""
        if self.loop is None:
            with self.transport.stream(request) as response:
                if read_all:
                    return response.status, dict(response.headers), [response.read()]
                pieces = []
                for piece in response.iter_bytes():
                    pieces.append(piece)
                    if on_piece is not None:
                        on_piece(piece)
                return response.status, dict(response.headers), pieces

        async def go() -> tuple[int, dict[str, str], list[bytes]]:
            async with self.transport.astream(request) as response:
                if read_all:
                    return response.status, dict(response.headers), [await response.aread()]
                pieces = []
                async for piece in response.aiter_bytes():
                    pieces.append(piece)
                    if on_piece is not None:
                        on_piece(piece)
                return response.status, dict(response.headers), pieces

        return self._run(go())

    def close_transport(self) -> None:
        """Close the transport only (the event loop keeps running)."""
        if self.loop is None:
            self.transport.close()
        else:
            self._run(self.transport.aclose())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.loop is None:
            self.transport.close()
            return
        self._run(self.transport.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        assert self._thread is not None
        self._thread.join()
        self.loop.close()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def make_runner(kind: str) -> Iterator[Callable[..., Runner]]:
    runners: list[Runner] = []

    def make(url: str | None, **options: Any) -> Runner:
        runner = Runner(kind, url, **options)
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler, **options: Any) -> RawServer:
        server = RawServer(handler, **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.hookimpl(optionalhook=True)
def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``async def`` tests here run on asyncio's loop and on uvloop (see tests/loops.py)."""
    return loop_factories()
