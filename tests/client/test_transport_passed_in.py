"""A transport passed to a client (``transport=``): requests go to the client's URL.

The client's URL says where, the transport how. A transport of this package made without a
URL (an ``httpx.Client`` without ``base_url``) or for another server gets absolute request
targets naming the client's server; one made for the client's server, and one that does not
say where it sends (no ``origin``), gets the usual origin-form targets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client
from kserve_v2.hooks import WireMessage
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.transport import AsyncHTTPTransport, HTTPTransport
from tests.transport.servers import RawServer, Request, ServerConn, keep_alive

NOWHERE = "http://127.0.0.1:1"  # nothing listens on port 1


def _live(request: Request, conn: ServerConn) -> None:
    conn.respond(200 if request.target == "/v2/health/live" else 404)


@pytest.fixture
def server() -> Iterator[RawServer]:
    with RawServer(keep_alive(_live)) as raw:
        yield raw


def _httpx(url: str | None, base_url: str = "", asynchronous: bool = False) -> Any:
    httpx = pytest.importorskip("httpx")
    from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport

    if asynchronous:
        return AsyncHTTPXTransport(url, client=httpx.AsyncClient(base_url=base_url))
    return HTTPXTransport(url, client=httpx.Client(base_url=base_url))


#: Transports by how they are made: (a factory of the sync one, of the async one, whether
#: the client must name its server in the targets).
MADE: dict[str, tuple[Callable[[str], Any], Callable[[str], Any], bool]] = {
    "stdlib-for-the-server": (HTTPTransport, AsyncHTTPTransport, False),
    "stdlib-for-another-server": (
        lambda _: HTTPTransport(NOWHERE),
        lambda _: AsyncHTTPTransport(NOWHERE),
        True,
    ),
    "stdlib-without-url": (lambda _: HTTPTransport(), lambda _: AsyncHTTPTransport(), True),
    "httpx-for-the-server": (_httpx, lambda url: _httpx(url, asynchronous=True), False),
    "httpx-without-url": (lambda _: _httpx(None), lambda _: _httpx(None, asynchronous=True), True),
    "httpx-base-url-of-another-server": (
        lambda _: _httpx(None, NOWHERE),
        lambda _: _httpx(None, NOWHERE, asynchronous=True),
        True,
    ),
    "httpx-base-url-with-a-path": (
        lambda url: _httpx(None, url + "/prefix"),
        lambda url: _httpx(None, url + "/prefix", asynchronous=True),
        True,
    ),
}


@pytest.mark.parametrize("made", list(MADE))
def test_sync_requests_go_to_the_clients_url(server: RawServer, made: str) -> None:
    make, _, absolute = MADE[made]
    seen: list[WireMessage] = []
    transport = make(server.url)
    try:
        with Client(server.url, transport=transport, wire_hook=seen.append) as client:
            assert client.is_server_live()
    finally:
        transport.close()
        if hasattr(transport, "client"):
            transport.client.close()  # the httpx client passed in: the transport leaves it
    assert [r.target for r in server.requests] == ["/v2/health/live"]
    expected = f"{server.url}/v2/health/live" if absolute else "/v2/health/live"
    assert seen[0].target == expected


@pytest.mark.parametrize("made", list(MADE))
def test_async_requests_go_to_the_clients_url(server: RawServer, made: str) -> None:
    _, make, absolute = MADE[made]
    seen: list[WireMessage] = []

    async def main() -> None:
        transport = make(server.url)
        try:
            async with AsyncClient(server.url, transport=transport, wire_hook=seen.append) as c:
                assert await c.is_server_live()
        finally:
            await transport.aclose()
            if hasattr(transport, "client"):
                await transport.client.aclose()

    asyncio.run(main())
    assert [r.target for r in server.requests] == ["/v2/health/live"]
    expected = f"{server.url}/v2/health/live" if absolute else "/v2/health/live"
    assert seen[0].target == expected


def test_a_base_path_is_kept_in_absolute_targets(server: RawServer) -> None:
    seen: list[WireMessage] = []
    with (
        HTTPTransport() as transport,
        Client(server.url + "/gw", transport=transport, wire_hook=seen.append) as client,
    ):
        assert not client.is_server_live()  # the server answers 404 for /gw/v2/health/live
    assert seen[0].target == f"{server.url}/gw/v2/health/live"
    assert [r.target for r in server.requests] == ["/gw/v2/health/live"]


class _Unplaced:
    """A transport that does not say where it sends (no ``origin``): it gets origin-form
    targets, as HTTPRequest's contract says."""

    def __init__(self) -> None:
        self.targets: list[str] = []

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        self.targets.append(request.target)
        return HTTPResponse(200)

    def stream(self, request: HTTPRequest) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_a_transport_that_does_not_say_where_gets_origin_form_targets() -> None:
    transport = _Unplaced()
    with Client("http://gw:8000/base", transport=transport) as client:  # type: ignore[arg-type]
        assert client.is_server_live()
    assert transport.targets == ["/base/v2/health/live"]
