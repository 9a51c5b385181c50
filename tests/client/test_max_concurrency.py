"""``max_concurrency`` on both clients, over a transport that holds every request until the
test lets them go: requests past the limit wait, and all of them complete."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client, DeadlineExceededError, InvalidInputError
from kserve_v2.interfaces import HTTPRequest, HTTPResponse

LIMIT = 2
CALLS = 6


class GatedTransport:
    """A sync transport whose requests all wait at a gate; it counts those inside."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.inside = 0
        self.peak = 0
        self.opened = False

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        with self.cond:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self.cond.notify_all()
            assert self.cond.wait_for(lambda: self.opened, timeout=60)
            self.inside -= 1
        return HTTPResponse(200)

    def stream(self, request: HTTPRequest) -> Any:
        raise AssertionError("not used")

    def close(self) -> None:
        pass


class AsyncGatedTransport:
    """The asyncio twin of :class:`GatedTransport`."""

    def __init__(self) -> None:
        self.inside = 0
        self.peak = 0
        self.changed = asyncio.Event()
        self.gate = asyncio.Event()

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        self.inside += 1
        self.peak = max(self.peak, self.inside)
        self.changed.set()
        await self.gate.wait()
        self.inside -= 1
        return HTTPResponse(200)

    def astream(self, request: HTTPRequest) -> Any:
        raise AssertionError("not used")

    async def aclose(self) -> None:
        pass


def test_sync_requests_past_the_limit_wait() -> None:
    transport = GatedTransport()
    with (
        Client("http://server:8000", transport=transport, max_concurrency=LIMIT) as client,
        ThreadPoolExecutor(CALLS) as pool,
    ):
        calls = [pool.submit(client.is_server_live) for _ in range(CALLS)]
        with transport.cond:
            assert transport.cond.wait_for(lambda: transport.inside == LIMIT, timeout=60)
            transport.opened = True
            transport.cond.notify_all()
        assert [call.result(timeout=60) for call in calls] == [True] * CALLS
    assert transport.peak == LIMIT
    assert transport.inside == 0


async def test_async_requests_past_the_limit_wait() -> None:
    transport = AsyncGatedTransport()
    async with AsyncClient(
        "http://server:8000", transport=transport, max_concurrency=LIMIT
    ) as client:
        calls = [asyncio.ensure_future(client.is_server_live()) for _ in range(CALLS)]
        while transport.inside < LIMIT:
            transport.changed.clear()
            await transport.changed.wait()
        transport.gate.set()
        assert await asyncio.gather(*calls) == [True] * CALLS
    assert transport.peak == LIMIT


def test_sync_wait_for_a_slot_is_bounded_by_the_call_timeout() -> None:
    transport = GatedTransport()
    with (
        Client("http://server:8000", transport=transport, max_concurrency=1) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        holder = pool.submit(client.is_server_live)
        with transport.cond:
            assert transport.cond.wait_for(lambda: transport.inside == 1, timeout=60)
        with pytest.raises(DeadlineExceededError, match=r"no free slot within 0\.2 s"):
            client.is_server_live(timeout=0.2)
        with transport.cond:
            transport.opened = True
            transport.cond.notify_all()
        assert holder.result(timeout=60) is True
        assert client.is_server_live(timeout=0.2) is True  # the slot came back


async def test_async_wait_for_a_slot_is_bounded_by_the_call_timeout() -> None:
    transport = AsyncGatedTransport()
    async with AsyncClient("http://server:8000", transport=transport, max_concurrency=1) as client:
        holder = asyncio.ensure_future(client.is_server_live())
        while transport.inside < 1:
            transport.changed.clear()
            await transport.changed.wait()
        with pytest.raises(DeadlineExceededError, match=r"no free slot within 0\.2 s"):
            await client.is_server_live(timeout=0.2)
        transport.gate.set()
        assert await holder is True
        assert await client.is_server_live(timeout=0.2) is True


def test_a_generate_stream_left_open_holds_its_slot_within_bounds(triton: Any) -> None:
    # A stream iterated once and kept (not closed) holds its slot: later calls fail after
    # their timeout instead of waiting for ever; closing the stream gives the slot back.
    with Client(triton.http_url, max_concurrency=1, timeout=5) as client:
        stream = client.generate_stream("text_generate", {"text_input": "a b c"})
        assert next(iter(stream))["text_output"] == "a"
        with pytest.raises(DeadlineExceededError, match="a generate_stream not closed"):
            client.is_server_live(timeout=0.3)
        stream.close()
        assert client.is_server_live() is True


async def test_an_async_generate_stream_left_open_holds_its_slot_within_bounds(
    triton: Any,
) -> None:
    async with AsyncClient(triton.http_url, max_concurrency=1, timeout=5) as client:
        stream = client.generate_stream("text_generate", {"text_input": "a b c"})
        assert (await stream.__anext__())["text_output"] == "a"
        with pytest.raises(DeadlineExceededError, match="a generate_stream not closed"):
            await client.is_server_live(timeout=0.3)
        await stream.aclose()
        assert await client.is_server_live() is True


def test_without_a_limit_nothing_waits() -> None:
    transport = GatedTransport()
    with (
        Client("http://server:8000", transport=transport) as client,
        ThreadPoolExecutor(CALLS) as pool,
    ):
        calls = [pool.submit(client.is_server_live) for _ in range(CALLS)]
        with transport.cond:
            assert transport.cond.wait_for(lambda: transport.inside == CALLS, timeout=60)
            transport.opened = True
            transport.cond.notify_all()
        assert all(call.result(timeout=60) for call in calls)


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_max_concurrency_is_a_positive_integer(client_class: type, bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="max_concurrency"):
        client_class("http://server:8000", max_concurrency=bad)
