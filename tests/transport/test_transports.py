"""The four HTTP transports against local servers: one suite, parametrized over all of them.

``kind`` is one of ``stdlib`` (HTTPTransport), ``aio`` (AsyncHTTPTransport), ``httpx`` and
``ahttpx``; async ones are driven from a background event loop (see conftest.Runner).
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    ProtocolError,
    TransportError,
)
from kserve_v2.transport import AsyncHTTPTransport, HTTPRequest, HTTPTransport
from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport
from tests.transport.conftest import Runner
from tests.transport.servers import (
    RawServer,
    Request,
    ServerConn,
    echo_app,
    keep_alive,
)

MakeRunner = Callable[..., Runner]
Serve = Callable[..., RawServer]
OURS = {"stdlib", "aio", "aio-uvloop"}


def only(kind: str, kinds: set[str], why: str) -> None:
    if kind not in kinds:
        pytest.skip(why)


# -- basics ------------------------------------------------------------------------------------


def test_get_and_post(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(echo_app))
    runner = make_runner(server.url, timeout=10)
    r = runner.request(HTTPRequest("GET", "/v2/health/ready?x=1", headers=[("X-Test", "yes")]))
    assert r.status == 200
    assert r.reason == "OK"
    assert r.headers["x-method"] == "GET"
    assert r.headers["x-target"] == "/v2/health/ready?x=1"
    assert server.requests[0].headers["x-test"] == "yes"
    assert server.requests[0].headers["host"] == f"127.0.0.1:{server.port}"
    assert "content-length" not in server.requests[0].headers or (
        server.requests[0].headers["content-length"] == "0"
    )
    r = runner.request(HTTPRequest("POST", "/infer", body=[b'{"a": 1}']))
    assert (r.status, bytes(r.body)) == (200, b'{"a": 1}')
    assert all(name == name.lower() for name in r.headers)


def test_error_status_is_not_an_exception(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(lambda req, conn: conn.respond(404, b'{"error":"x"}', reason="NF")))
    r = make_runner(server.url).request(HTTPRequest("GET", "/missing"))
    assert (r.status, r.reason, bytes(r.body)) == (404, "NF", b'{"error":"x"}')


def test_multi_buffer_body_arrives_intact(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(echo_app))
    runner = make_runner(server.url)
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    parts = [
        b"head",
        bytearray(b"-mid-"),
        memoryview(arr),
        memoryview(b"0123456789")[2:5],
        np.arange(5, dtype=np.int64).data,
        b"",
    ]
    r = runner.request(HTTPRequest("POST", "/echo", body=parts))
    expected = b"head-mid-" + arr.tobytes() + b"234" + np.arange(5, dtype=np.int64).tobytes()
    assert bytes(r.body) == expected


@pytest.mark.parametrize(
    "strided",
    [
        memoryview(np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2]),
        memoryview(bytes(range(16)))[::2],
    ],
    ids=["int32-2d", "bytes-1d"],
)
def test_non_contiguous_body_part_is_refused(
    serve: Serve, make_runner: MakeRunner, strided: memoryview
) -> None:
    server = serve(keep_alive(echo_app))
    with pytest.raises(InvalidInputError, match="contiguous"):
        make_runner(server.url).request(HTTPRequest("POST", "/echo", body=[b"x", strided]))


def test_many_small_buffers(serve: Serve, make_runner: MakeRunner) -> None:
    # More buffers than one sendmsg may carry (IOV_MAX is 1024 on Linux).
    server = serve(keep_alive(echo_app))
    parts = [bytes([i % 256]) * (i % 7 + 1) for i in range(3000)]
    r = make_runner(server.url).request(HTTPRequest("POST", "/echo", body=parts))
    assert bytes(r.body) == b"".join(parts)


def _digest_app(request: Request, conn: ServerConn) -> None:
    conn.respond(200, hashlib.sha256(request.body).hexdigest().encode())


def test_64mib_numpy_body(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(_digest_app))
    arr = np.random.default_rng(0).random(8 * 1024 * 1024)  # float64: 64 MiB
    assert arr.nbytes == 64 * 1024 * 1024
    r = make_runner(server.url, timeout=120).request(
        HTTPRequest("POST", "/big", body=[b'{"x":1}', memoryview(arr)])
    )
    assert bytes(r.body) == hashlib.sha256(b'{"x":1}' + arr.tobytes()).hexdigest().encode()


def test_large_response_body_is_writable(serve: Serve, make_runner: MakeRunner) -> None:
    payload = np.arange(4 * 1024 * 1024, dtype=np.int32).tobytes()  # 16 MiB
    server = serve(keep_alive(lambda req, conn: conn.respond(200, payload)))
    r = make_runner(server.url).request(HTTPRequest("GET", "/big"))
    assert bytes(r.body) == payload
    out = np.frombuffer(r.body, dtype=np.int32)
    if kind_of(r.body) == "bytearray":
        assert out.flags.writeable
    assert out[-1] == 4 * 1024 * 1024 - 1


def kind_of(body: object) -> str:
    return type(body).__name__


def test_head_request_and_204(serve: Serve, make_runner: MakeRunner) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        if req.method == "HEAD":
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
        else:
            conn.send(b"HTTP/1.1 204 No Content\r\n\r\n")

    server = serve(keep_alive(app))
    runner = make_runner(server.url)
    r = runner.request(HTTPRequest("HEAD", "/"))
    assert (r.status, bytes(r.body), r.headers["content-length"]) == (200, b"", "1234")
    r = runner.request(HTTPRequest("DELETE", "/"))
    assert (r.status, bytes(r.body)) == (204, b"")
    assert server.connections == 1


def test_absolute_url_target(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(echo_app))
    runner = make_runner(None)
    r = runner.request(HTTPRequest("GET", f"{server.url}/v2?y=2"))
    assert r.headers["x-target"] == "/v2?y=2"


# -- framing and encodings ---------------------------------------------------------------------


PAYLOAD = b'{"model_name":"m","outputs":[' + b"1," * 5000 + b"2]}"


def _raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


@pytest.mark.parametrize(
    "mode",
    ["length", "chunked", "eof", "gzip", "deflate-zlib", "deflate-raw", "gzip-chunked", "100"],
)
def test_response_framings_and_encodings(serve: Serve, make_runner: MakeRunner, mode: str) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        if mode == "length":
            conn.respond(200, PAYLOAD)
        elif mode == "chunked":
            conn.respond_chunked([PAYLOAD[i : i + 777] for i in range(0, len(PAYLOAD), 777)])
        elif mode == "eof":
            conn.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + PAYLOAD)
            conn.sock.close()
        elif mode == "gzip":
            conn.respond(200, gzip.compress(PAYLOAD), [("Content-Encoding", "gzip")])
        elif mode == "deflate-zlib":
            conn.respond(200, zlib.compress(PAYLOAD), [("Content-Encoding", "deflate")])
        elif mode == "deflate-raw":
            conn.respond(200, _raw_deflate(PAYLOAD), [("Content-Encoding", "deflate")])
        elif mode == "gzip-chunked":
            data = gzip.compress(PAYLOAD)
            conn.respond_chunked(
                [data[i : i + 100] for i in range(0, len(data), 100)],
                [("Content-Encoding", "gzip")],
            )
        else:
            conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            conn.respond(200, PAYLOAD)

    server = serve(keep_alive(app))
    runner = make_runner(server.url)
    for _ in range(2):
        r = runner.request(HTTPRequest("POST", "/", body=[b"{}"]))
        assert r.status == 200
        assert bytes(r.body) == PAYLOAD
        if "gzip" in mode or "deflate" in mode:
            assert r.headers["content-encoding"] in ("gzip", "deflate")
    assert server.connections == (2 if mode == "eof" else 1)


# -- connections -------------------------------------------------------------------------------


def test_keep_alive_reuse(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(echo_app))
    runner = make_runner(server.url)
    for i in range(20):
        r = runner.request(HTTPRequest("POST", "/", body=[str(i).encode()]))
        assert bytes(r.body) == str(i).encode()
    assert server.connections == 1


def test_connection_close_header_opens_a_new_connection(
    serve: Serve, make_runner: MakeRunner
) -> None:
    server = serve(keep_alive(lambda req, conn: conn.respond(200, b"x", [("Connection", "close")])))
    runner = make_runner(server.url)
    for _ in range(3):
        assert runner.request(HTTPRequest("GET", "/")).status == 200
    assert server.connections == 3


def test_server_closing_idle_connections_is_transparent(
    serve: Serve, make_runner: MakeRunner
) -> None:
    # One response per connection, then a close *without* "Connection: close": the client's
    # pooled connection is dead by the time it is used again. The client notices before
    # writing to it (an inference is never sent again once written), so every request
    # reaches the server once.
    closed = threading.Semaphore(0)

    def handler(conn: ServerConn) -> None:
        request = conn.read_request()
        if request is not None:
            conn.respond(200, request.body)
            conn.sock.close()
            closed.release()

    server = serve(handler)
    runner = make_runner(server.url)
    for i in range(5):
        r = runner.request(HTTPRequest("POST", "/", body=[b"n%d" % i]))
        assert bytes(r.body) == b"n%d" % i
        assert closed.acquire(timeout=10)  # the close is on its way before the next request
    assert server.connections == 5
    assert [bytes(r.body) for r in server.requests] == [b"n%d" % i for i in range(5)]


def _answers_once_then_hangs_up(conn: ServerConn) -> None:
    """Answers the first request of a connection, then reads the next one and closes without
    answering: what a client sees when the server's keep-alive timeout fires just as it
    sends, or when the server dies while running the request."""
    first = conn.read_request()
    if first is None:
        return
    conn.respond(200, b"first")
    conn.read_request()  # then hang up


def test_a_connection_is_not_reused_after_a_server_error(
    serve: Serve, make_runner: MakeRunner, kind: str
) -> None:
    # uvicorn (MLServer, KServe) answers an unhandled exception with a 500 and closes the
    # connection without "Connection: close"; here the close comes as the next request
    # arrives, the worst case of that race. An inference sent on that connection would be
    # lost (never sent twice): after a 5xx the next request goes on a new connection.
    only(kind, OURS, "httpx reuses it")

    def handler(conn: ServerConn) -> None:
        if conn.read_request() is None:
            return
        conn.respond(500, b"Internal Server Error", [("Content-Type", "text/plain")])
        conn.read_request()  # then hang up, unanswered

    server = serve(handler)
    runner = make_runner(server.url)
    assert runner.request(HTTPRequest("POST", "/infer", body=[b"x"])).status == 500
    assert runner.request(HTTPRequest("POST", "/infer", body=[b"y"])).status == 500
    assert server.connections == 2
    assert [bytes(r.body) for r in server.requests] == [b"x", b"y"]


def test_stale_connection_race_retries_a_get_once(
    serve: Serve, make_runner: MakeRunner, kind: str
) -> None:
    only(kind, OURS, "httpx does not retry")
    server = serve(_answers_once_then_hangs_up)
    runner = make_runner(server.url)
    assert bytes(runner.request(HTTPRequest("GET", "/a")).body) == b"first"
    assert bytes(runner.request(HTTPRequest("GET", "/b")).body) == b"first"
    assert server.connections == 2
    assert [r.target for r in server.requests] == ["/a", "/b", "/b"]


def test_a_written_inference_is_never_sent_again(
    serve: Serve, make_runner: MakeRunner, kind: str
) -> None:
    # The reused connection closes without a response byte after the POST went out: the
    # model may have run, so the request fails instead of running it a second time.
    server = serve(_answers_once_then_hangs_up)
    runner = make_runner(server.url)
    assert bytes(runner.request(HTTPRequest("POST", "/", body=[b"a"])).body) == b"first"
    with pytest.raises(TransportError, match="without sending a response") as info:
        runner.request(HTTPRequest("POST", "/", body=[b"b"]))
    assert not isinstance(info.value, DeadlineExceededError)
    if kind in OURS:  # httpx (h11) says "Server disconnected without sending a response."
        assert "may have been processed" in str(info.value)
    assert [bytes(r.body) for r in server.requests] == [b"a", b"b"]
    assert server.connections == 1
    # The transport goes on with a new connection.
    assert bytes(runner.request(HTTPRequest("POST", "/", body=[b"c"])).body) == b"first"


def test_fresh_connection_closed_without_response_is_not_retried(
    serve: Serve, make_runner: MakeRunner
) -> None:
    def handler(conn: ServerConn) -> None:
        conn.read_request()

    server = serve(handler)
    with pytest.raises(TransportError) as info:
        make_runner(server.url).request(HTTPRequest("POST", "/", body=[b"x"]))
    assert not isinstance(info.value, DeadlineExceededError)
    assert server.connections == 1


def test_no_retry_after_a_partial_response(
    serve: Serve, make_runner: MakeRunner, kind: str
) -> None:
    def handler(conn: ServerConn) -> None:
        if conn.read_request() is None:
            return
        conn.respond(200, b"ok")
        if conn.read_request() is None:
            return
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Len")

    server = serve(handler)
    runner = make_runner(server.url)
    runner.request(HTTPRequest("GET", "/"))
    # h11 calls a partial head "disconnected without sending a response".
    expected = ProtocolError if kind in OURS else (ProtocolError, TransportError)
    with pytest.raises(expected):
        runner.request(HTTPRequest("GET", "/"))
    assert server.connections == 1


def _slow_app(delay: float) -> Callable[[Request, ServerConn], None]:
    def app(request: Request, conn: ServerConn) -> None:
        conn.sleep(delay)
        conn.respond(200, request.body)

    return app


def test_pool_limit_is_respected(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(_slow_app(0.05)))
    runner = make_runner(server.url, max_connections=2, timeout=30)

    def one(i: int) -> bytes:
        return bytes(runner.request(HTTPRequest("POST", "/", body=[b"%d" % i])).body)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(16)))
    assert results == [b"%d" % i for i in range(16)]
    assert server.connections <= 2


def test_many_threads_one_transport(serve: Serve, make_runner: MakeRunner, kind: str) -> None:
    server = serve(keep_alive(echo_app))
    # httpcore 1.0.9's sync pool may close a connection it handed to a waiting thread
    # (encode/httpcore#1110): give httpx enough connections not to queue.
    limit = 16 if kind == "httpx" else 4
    runner = make_runner(server.url, max_connections=limit)

    def work(t: int) -> None:
        for i in range(40):
            body = b"thread %d request %d " % (t, i) * (i + 1)
            r = runner.request(HTTPRequest("POST", f"/{t}/{i}", body=[body[:7], body[7:]]))
            assert r.status == 200
            assert bytes(r.body) == body
            assert r.headers["x-target"] == f"/{t}/{i}"

    with ThreadPoolExecutor(12) as pool:
        for future in [pool.submit(work, t) for t in range(12)]:
            future.result()
    assert server.connections <= limit


# -- timeouts and failures ---------------------------------------------------------------------


def test_request_timeout(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(_slow_app(2.0)))
    runner = make_runner(server.url, timeout=10)
    start = time.monotonic()
    with pytest.raises(DeadlineExceededError) as info:
        runner.request(HTTPRequest("GET", "/", timeout=0.3))
    assert time.monotonic() - start < 1.8
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, TransportError)


def test_default_timeout(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(_slow_app(2.0)))
    with pytest.raises(DeadlineExceededError):
        make_runner(server.url, timeout=0.3).request(HTTPRequest("GET", "/"))


def test_timeout_then_the_transport_still_works(serve: Serve, make_runner: MakeRunner) -> None:
    def app(request: Request, conn: ServerConn) -> None:
        if request.target == "/slow":
            conn.sleep(1.0)
        conn.respond(200, request.target.encode())

    server = serve(keep_alive(app))
    runner = make_runner(server.url, timeout=10)
    with pytest.raises(DeadlineExceededError):
        runner.request(HTTPRequest("GET", "/slow", timeout=0.2))
    # The timed-out connection is not reused: its late answer would be taken for this one.
    assert bytes(runner.request(HTTPRequest("GET", "/fast")).body) == b"/fast"


def test_waiting_for_a_pooled_connection_times_out(serve: Serve, make_runner: MakeRunner) -> None:
    server = serve(keep_alive(_slow_app(0.8)))
    runner = make_runner(server.url, max_connections=1, timeout=10)
    busy = threading.Thread(target=runner.request, args=(HTTPRequest("GET", "/"),))
    busy.start()
    time.sleep(0.2)
    try:
        with pytest.raises(DeadlineExceededError):
            runner.request(HTTPRequest("GET", "/", timeout=0.2))
    finally:
        busy.join()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused(make_runner: MakeRunner) -> None:
    runner = make_runner(f"http://127.0.0.1:{_free_port()}", timeout=5)
    with pytest.raises(TransportError) as info:
        runner.request(HTTPRequest("GET", "/"))
    assert not isinstance(info.value, DeadlineExceededError)
    assert info.value.__cause__ is not None


def test_connection_reset_mid_response(serve: Serve, make_runner: MakeRunner) -> None:
    def handler(conn: ServerConn) -> None:
        conn.read_request()
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        # RST instead of FIN: SO_LINGER with a zero timeout.
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
        conn.sock.close()

    server = serve(handler)
    with pytest.raises((TransportError, ProtocolError)):
        make_runner(server.url).request(HTTPRequest("GET", "/"))


# -- malformed responses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", id="truncated"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n", id="bad-status"),
        pytest.param(b"SPDY/9 200 OK\r\n\r\n", id="bad-version"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\nabc\r\n0\r\n\r\n",
            id="bad-chunk-size",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nX-Huge: " + b"a" * (256 * 1024) + b"\r\n\r\n",
            id="oversize-headers",
        ),
    ],
)
def test_malformed_responses(serve: Serve, make_runner: MakeRunner, raw: bytes) -> None:
    def handler(conn: ServerConn) -> None:
        conn.read_request()
        conn.send(raw)
        conn.sock.shutdown(socket.SHUT_WR)
        conn.read_request()  # wait for the client to go away

    server = serve(handler)
    with pytest.raises(ProtocolError):
        make_runner(server.url, timeout=10).request(HTTPRequest("GET", "/"))


def test_bad_gzip_body(serve: Serve, make_runner: MakeRunner) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        conn.respond(200, b"\x1f\x8bnot gzip", [("Content-Encoding", "gzip")])

    server = serve(keep_alive(app))
    with pytest.raises(ProtocolError):
        make_runner(server.url).request(HTTPRequest("GET", "/"))


def test_invalid_request_headers(serve: Serve, make_runner: MakeRunner, kind: str) -> None:
    only(kind, OURS, "httpx validates with its own exception types")
    server = serve(keep_alive(echo_app))
    with pytest.raises(InvalidInputError):
        make_runner(server.url).request(HTTPRequest("GET", "/", headers=[("X", "a\r\nB: c")]))
    assert server.connections == 0


# -- streaming ---------------------------------------------------------------------------------


def test_streaming_sse_pieces_arrive_as_sent(serve: Serve, make_runner: MakeRunner) -> None:
    got_first = threading.Event()
    events = [b'data: {"text": "%d"}\n\n' % i for i in range(5)]

    def app(req: Request, conn: ServerConn) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        conn.send(head + b"Transfer-Encoding: chunked\r\n\r\n")
        for i, event in enumerate(events):
            conn.send(b"%x\r\n%s\r\n" % (len(event), event))
            if i == 0:
                # The rest only comes once the client has seen the first event: proves that
                # the client hands pieces out as they arrive instead of buffering the body.
                assert got_first.wait(10)
        conn.send(b"0\r\n\r\n")

    server = serve(keep_alive(app))
    runner = make_runner(server.url, timeout=10)
    status, headers, pieces = runner.stream(
        HTTPRequest("POST", "/v2/models/m/generate_stream", body=[b"{}"]),
        on_piece=lambda piece: got_first.set(),
    )
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert b"".join(pieces) == b"".join(events)
    assert len(pieces) >= 2
    # The connection went back to the pool after the stream was consumed.
    assert runner.request(HTTPRequest("POST", "/", body=[b"x"])).status == 200
    assert server.connections == 1


@pytest.mark.parametrize("mode", ["length", "gzip", "eof"])
def test_streaming_read_all(serve: Serve, make_runner: MakeRunner, mode: str) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        if mode == "gzip":
            conn.respond(200, gzip.compress(PAYLOAD), [("Content-Encoding", "gzip")])
        elif mode == "eof":
            conn.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + PAYLOAD)
            conn.sock.close()
        else:
            conn.respond(200, PAYLOAD)

    server = serve(keep_alive(app))
    runner = make_runner(server.url)
    assert runner.stream(HTTPRequest("GET", "/"), read_all=True)[2] == [PAYLOAD]
    assert b"".join(runner.stream(HTTPRequest("GET", "/"))[2]) == PAYLOAD


def test_streaming_truncated_body(serve: Serve, make_runner: MakeRunner) -> None:
    def handler(conn: ServerConn) -> None:
        conn.read_request()
        conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        conn.sock.shutdown(socket.SHUT_WR)
        conn.read_request()

    server = serve(handler)
    with pytest.raises(ProtocolError):
        make_runner(server.url).stream(HTTPRequest("GET", "/"))


def test_closed_transport_refuses_requests(
    serve: Serve, make_runner: MakeRunner, kind: str
) -> None:
    only(kind, OURS, "httpx raises its own closed-client error")
    server = serve(keep_alive(echo_app))
    runner = make_runner(server.url)
    runner.request(HTTPRequest("GET", "/"))
    runner.close_transport()
    with pytest.raises(TransportError):
        runner.request(HTTPRequest("GET", "/"))


# -- max_response_size -------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_max_response_size_refuses_larger_bodies(
    serve: Serve, make_runner: MakeRunner, framing: str
) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        body = b"x" * int(req.target.strip("/"))
        if framing == "length":
            conn.respond(200, body)
        else:
            conn.respond_chunked([body[i : i + 1000] for i in range(0, len(body), 1000)])

    server = serve(keep_alive(app))
    runner = make_runner(server.url, max_response_size=5000)
    assert runner.request(HTTPRequest("GET", "/5000")).body == b"x" * 5000
    with pytest.raises(ProtocolError, match="max_response_size") as info:
        runner.request(HTTPRequest("GET", "/5001"))
    assert info.value.value == (5001 if framing == "length" else 5000)
    # The transport is still usable (the refused connection is not reused half-read).
    assert runner.request(HTTPRequest("GET", "/10")).body == b"x" * 10


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_max_response_size_bounds_decompression(
    serve: Serve, make_runner: MakeRunner, encoding: str
) -> None:
    plain = b"\0" * (8 << 20)
    bomb = gzip.compress(plain) if encoding == "gzip" else zlib.compress(plain)

    def app(req: Request, conn: ServerConn) -> None:
        conn.respond(200, bomb, [("Content-Encoding", encoding)])

    server = serve(keep_alive(app))
    with pytest.raises(ProtocolError, match="max_response_size"):
        make_runner(server.url, max_response_size=1 << 20).request(HTTPRequest("GET", "/"))
    fits = make_runner(server.url, max_response_size=len(plain))
    assert fits.request(HTTPRequest("GET", "/")).body == plain


def test_max_response_size_leaves_streams_alone(serve: Serve, make_runner: MakeRunner) -> None:
    def app(req: Request, conn: ServerConn) -> None:
        conn.respond_chunked([b"y" * 1000] * 5)

    server = serve(keep_alive(app))
    runner = make_runner(server.url, max_response_size=100)
    _, _, pieces = runner.stream(HTTPRequest("GET", "/"))
    assert b"".join(pieces) == b"y" * 5000


@pytest.mark.parametrize("value", [0, -1, 1.5, "10", True])
@pytest.mark.parametrize(
    "transport", [HTTPTransport, AsyncHTTPTransport, HTTPXTransport, AsyncHTTPXTransport]
)
def test_max_response_size_is_validated(transport: type, value: object) -> None:
    with pytest.raises(InvalidInputError, match="max_response_size"):
        transport("http://127.0.0.1:1", max_response_size=value)
