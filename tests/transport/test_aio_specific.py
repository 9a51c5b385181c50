"""What only one of the default transports has: asyncio tasks and cancellation, pool slots."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import warnings
from collections.abc import Awaitable, Callable

import pytest

from kserve_v2.errors import DeadlineExceededError, InvalidInputError, TransportError
from kserve_v2.transport import (
    AsyncHTTPTransport,
    AsyncTransport,
    HTTPRequest,
    HTTPTransport,
    Transport,
)
from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport
from tests.loops import LOOP_PARAMS, run
from tests.transport.servers import RawServer, Request, ServerConn, echo_app, keep_alive

Serve = Callable[..., RawServer]


def _slow_echo(request: Request, conn: ServerConn) -> None:
    conn.sleep(float(request.headers.get("x-delay", "0")))
    conn.respond(200, request.body)


def test_protocol_conformance() -> None:
    with HTTPTransport("http://127.0.0.1:1") as sync, HTTPXTransport("http://127.0.0.1:1") as hx:
        assert isinstance(sync, Transport)
        assert isinstance(hx, Transport)
    assert isinstance(AsyncHTTPTransport("http://127.0.0.1:1"), AsyncTransport)
    assert isinstance(AsyncHTTPXTransport("http://127.0.0.1:1"), AsyncTransport)


@pytest.mark.parametrize(
    "url", ["ftp://host", "http://", "http://host:99999", "http://host/base/path", "http://h:x"]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidInputError):
        HTTPTransport(url)


def test_origin_form_target_needs_a_url() -> None:
    with HTTPTransport() as transport, pytest.raises(InvalidInputError):
        transport.handle_request(HTTPRequest("GET", "/v2"))


async def test_many_concurrent_tasks(serve: Serve) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=3) as transport:

        async def one(i: int) -> bytes:
            request = HTTPRequest(
                "POST", f"/{i}", headers=[("X-Delay", "0.01")], body=[b"task %d" % i]
            )
            return bytes((await transport.handle_async_request(request)).body)

        results = await asyncio.gather(*(one(i) for i in range(60)))
    assert results == [b"task %d" % i for i in range(60)]
    assert server.connections <= 3


async def _warm_up(transport: AsyncHTTPTransport) -> None:
    """One exchange, so that the next request finds an idle keep-alive connection."""
    response = await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"warm"]))
    assert bytes(response.body) == b"warm"


@pytest.mark.parametrize("warm", [False, True])
async def test_cancelled_request_frees_its_connection(serve: Serve, warm: bool) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        if warm:
            await _warm_up(transport)
        slow = asyncio.ensure_future(
            transport.handle_async_request(
                HTTPRequest("POST", "/", headers=[("X-Delay", "1")], body=[b"slow"])
            )
        )
        await asyncio.sleep(0.2)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        # The pool's only slot came back, and the half-done connection was not reused.
        response = await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"next"]))
        assert bytes(response.body) == b"next"
    assert server.connections == 2


async def test_timeout_on_a_reused_connection(serve: Serve) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        await _warm_up(transport)
        slow = HTTPRequest("POST", "/", headers=[("X-Delay", "1")], body=[b"slow"], timeout=0.2)
        with pytest.raises(DeadlineExceededError, match="timed out"):
            await transport.handle_async_request(slow)
        # The pool's only slot came back; the connection with the late answer was dropped.
        response = await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"next"]))
        assert bytes(response.body) == b"next"
    assert server.connections == 2


async def test_expired_deadline_on_a_reused_connection_sends_nothing(serve: Serve) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        await _warm_up(transport)
        with pytest.raises(DeadlineExceededError, match="timed out"):
            await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"x"], timeout=0))
        response = await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"next"]))
        assert bytes(response.body) == b"next"
    assert [bytes(r.body) for r in server.requests] == [b"warm", b"next"]


async def test_large_body_on_a_reused_connection(serve: Serve) -> None:
    # Larger than one joined write: on Python 3.10/3.11 it goes out in slices.
    body = bytes(range(256)) * 4096
    server = serve(keep_alive(echo_app))
    async with AsyncHTTPTransport(server.url) as transport:
        await _warm_up(transport)
        for _ in range(2):
            request = HTTPRequest("POST", "/", body=[b"<", memoryview(body), b">"])
            response = await transport.handle_async_request(request)
            assert bytes(response.body) == b"<" + body + b">"
    assert server.connections == 1


async def test_idle_connection_closed_before_the_loop_saw_it_is_not_used(serve: Serve) -> None:
    # The server closes the idle connection and the event loop has had no turn to see the
    # EOF: the pool's poll before reuse finds it, so the inference goes out on a new
    # connection, once (a written one would not be sent again).
    closed = threading.Event()

    def handler(conn: ServerConn) -> None:
        request = conn.read_request()
        if request is not None:
            conn.respond(200, request.body)
            conn.sock.shutdown(socket.SHUT_RDWR)
            closed.set()

    server = serve(handler)
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        await _warm_up(transport)
        assert closed.wait(10)  # blocks the loop: it cannot process the EOF meanwhile
        response = await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"x"]))
        assert bytes(response.body) == b"x"
    assert [bytes(r.body) for r in server.requests] == [b"warm", b"x"]
    assert server.connections == 2


async def test_failed_retry_of_a_stale_connection_gives_its_slot_back(serve: Serve) -> None:
    # The first connection answers once, then hangs up on the next request; every later
    # connection hangs up on its first request: the one retry fails too.
    answered: list[bool] = []

    def handler(conn: ServerConn) -> None:
        if conn.read_request() is None:
            return
        if not answered:
            answered.append(True)
            conn.respond(200, b"first")
            conn.read_request()

    server = serve(handler)
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        await transport.handle_async_request(HTTPRequest("POST", "/", body=[b"a"]))
        for _ in range(2):  # the second one would wait for the slot if it had leaked
            with pytest.raises(TransportError, match="without sending a response") as info:
                # A GET: the kind of request that is sent again on a new connection.
                await transport.handle_async_request(HTTPRequest("GET", "/", timeout=5))
            assert not isinstance(info.value, DeadlineExceededError)
    assert server.connections == 3


async def test_cancelled_waiter_passes_its_turn_on(serve: Serve) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        delay = [("X-Delay", "0.3")]
        first = asyncio.ensure_future(
            transport.handle_async_request(HTTPRequest("POST", "/", headers=delay, body=[b"1"]))
        )
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(
            transport.handle_async_request(HTTPRequest("POST", "/", body=[b"2"]))
        )
        third = asyncio.ensure_future(
            transport.handle_async_request(HTTPRequest("POST", "/", body=[b"3"]))
        )
        await asyncio.sleep(0.05)
        waiting.cancel()
        assert bytes((await first).body) == b"1"
        assert bytes((await third).body) == b"3"
        with pytest.raises(asyncio.CancelledError):
            await waiting


async def test_async_pool_wait_timeout(serve: Serve) -> None:
    server = serve(keep_alive(_slow_echo))
    async with AsyncHTTPTransport(server.url, max_connections=1) as transport:
        busy = asyncio.ensure_future(
            transport.handle_async_request(
                HTTPRequest("POST", "/", headers=[("X-Delay", "0.5")], body=[b"x"])
            )
        )
        await asyncio.sleep(0.05)
        with pytest.raises(DeadlineExceededError, match="pooled connections"):
            await transport.handle_async_request(HTTPRequest("GET", "/", timeout=0.1))
        assert (await busy).status == 200


def test_other_event_loop_is_refused_while_connections_are_open(serve: Serve) -> None:
    server = serve(keep_alive(echo_app))
    transport = AsyncHTTPTransport(server.url)
    loop1 = asyncio.new_event_loop()
    loop2 = asyncio.new_event_loop()
    try:
        loop1.run_until_complete(transport.handle_async_request(HTTPRequest("GET", "/")))
        with pytest.raises(TransportError, match="another event loop"):
            loop2.run_until_complete(transport.handle_async_request(HTTPRequest("GET", "/")))
        loop1.run_until_complete(transport.aclose())
    finally:
        loop1.close()
        loop2.close()


@pytest.mark.parametrize("loop_kind", LOOP_PARAMS)
def test_aclose_after_the_loop_ended_ends_the_connections(serve: Serve, loop_kind: str) -> None:
    """A loop that ended before aclose() (asyncio.run() over) can close nothing: aclose()
    does not fail, and the server sees each connection end (its socket shut down by
    aclose() on asyncio's loop; uvloop closes its transports as its loop closes)."""
    ended = threading.Event()

    def handler(conn: ServerConn) -> None:
        keep_alive(echo_app)(conn)  # returns when the client's side of the connection ends
        ended.set()

    server = serve(handler)
    transport = AsyncHTTPTransport(server.url)
    held = [transport]  # dropped at the end, for the garbage collector to take the socket

    async def call() -> int:
        return (await held[0].handle_async_request(HTTPRequest("GET", "/"))).status

    with warnings.catch_warnings():
        # Both loops warn of the transport left open: asyncio's as it is collected, uvloop
        # as its loop closes.
        warnings.simplefilter("ignore", ResourceWarning)
        assert run(call(), loop_kind) == 200
        run(transport.aclose(), loop_kind)
        assert ended.wait(10)
        run(transport.aclose(), loop_kind)  # again: nothing left to do
        with pytest.raises(TransportError, match="closed"):
            run(call(), loop_kind)
        del transport
        held.clear()
        gc.collect()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failures_do_not_leak_pool_slots(serve: Serve) -> None:
    port = _free_port()
    with HTTPTransport(f"http://127.0.0.1:{port}", max_connections=1, timeout=5) as transport:
        for _ in range(5):
            with pytest.raises(TransportError):
                transport.handle_request(HTTPRequest("GET", "/"))
    server = serve(keep_alive(_slow_echo))
    with HTTPTransport(server.url, max_connections=1, timeout=5) as transport:
        for _ in range(3):
            with pytest.raises(DeadlineExceededError):
                transport.handle_request(
                    HTTPRequest("GET", "/", headers=[("X-Delay", "0.5")], timeout=0.05)
                )
        assert transport.handle_request(HTTPRequest("POST", "/", body=[b"ok"])).body == b"ok"


async def test_async_failures_do_not_leak_pool_slots() -> None:
    port = _free_port()
    async with AsyncHTTPTransport(f"http://127.0.0.1:{port}", max_connections=1) as transport:
        for _ in range(5):
            with pytest.raises(TransportError):
                await transport.handle_async_request(HTTPRequest("GET", "/", timeout=5))


def test_stream_left_early_closes_the_connection(serve: Serve) -> None:
    def app(request: Request, conn: ServerConn) -> None:
        conn.respond_chunked([b"x" * 1000] * 100)

    server = serve(keep_alive(app))
    with HTTPTransport(server.url) as transport:
        with transport.stream(HTTPRequest("GET", "/")) as response:
            assert next(iter(response.iter_bytes()))
        # Not read to the end: the connection cannot carry another request.
        assert transport.handle_request(HTTPRequest("GET", "/")).status == 200
    assert server.connections == 2


async def test_async_stream_left_early_closes_the_connection(serve: Serve) -> None:
    def app(request: Request, conn: ServerConn) -> None:
        # More pieces than the transport reads ahead for a consumer (256): the body cannot
        # be complete when the consumer leaves (uvloop reads 100 KB in one go).
        conn.respond_chunked([b"x" * 1000] * 1000)

    server = serve(keep_alive(app))
    async with AsyncHTTPTransport(server.url) as transport:
        async with transport.astream(HTTPRequest("GET", "/")) as response:
            async for piece in response.aiter_bytes():
                assert piece
                break
        assert (await transport.handle_async_request(HTTPRequest("GET", "/"))).status == 200
    assert server.connections == 2


async def _read_stream(url: str, on_first_piece: Callable[[], Awaitable[object]]) -> bytes:
    """The body of ``GET /`` read with ``astream``; ``on_first_piece`` is awaited while the
    consumer holds the first piece (the event loop keeps receiving meanwhile)."""
    got = []
    request = HTTPRequest("GET", "/")
    async with AsyncHTTPTransport(url) as transport, transport.astream(request) as response:
        async for piece in response.aiter_bytes():
            got.append(piece)
            if len(got) == 1:
                await on_first_piece()
    return b"".join(got)


async def test_slow_stream_consumer_gets_everything(serve: Serve) -> None:
    # Many small chunks while the consumer sleeps: reading pauses and resumes.
    pieces = [b"%06d" % i for i in range(3000)]
    server = serve(keep_alive(lambda req, conn: conn.respond_chunked(pieces)))
    assert await _read_stream(server.url, lambda: asyncio.sleep(0.3)) == b"".join(pieces)


async def test_stream_end_received_while_the_consumer_holds_a_piece(serve: Serve) -> None:
    # The rest of the body and its end arrive while the consumer still works on the first
    # piece: the event loop parses them meanwhile, and none of them may be lost.
    first_taken = threading.Event()
    rest_sent = threading.Event()

    def app(request: Request, conn: ServerConn) -> None:
        conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        first_taken.wait(10)
        conn.send(b"6\r\nsecond\r\n5\r\nthird\r\n0\r\n\r\n")
        rest_sent.set()

    async def hold_the_first_piece() -> None:
        first_taken.set()
        await asyncio.get_running_loop().run_in_executor(None, rest_sent.wait, 10)
        for _ in range(5):  # let the event loop read what is already there
            await asyncio.sleep(0)

    server = serve(keep_alive(app))
    assert await _read_stream(server.url, hold_the_first_piece) == b"firstsecondthird"


async def test_stream_per_read_timeout(serve: Serve) -> None:
    def app(request: Request, conn: ServerConn) -> None:
        conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        conn.sleep(1.0)
        conn.send(b"0\r\n\r\n")

    server = serve(keep_alive(app))
    request = HTTPRequest("GET", "/", timeout=0.3)
    async with AsyncHTTPTransport(server.url) as transport, transport.astream(request) as response:
        iterator = response.aiter_bytes()
        assert await iterator.__anext__() == b"first"
        with pytest.raises(DeadlineExceededError):
            await iterator.__anext__()
    with HTTPTransport(server.url) as sync, sync.stream(request) as sync_response:
        pieces = sync_response.iter_bytes()
        assert next(pieces) == b"first"
        with pytest.raises(DeadlineExceededError):
            next(pieces)
