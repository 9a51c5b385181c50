"""A URL whose scheme does not match what the port speaks: an ``http://`` URL at a gRPC port
(the server answers in HTTP/2), a ``grpc://`` URL at an HTTP/1.1 port. The error says so and
names the URL that was probably meant, for every transport, against the live Triton (its
gRPC port for HTTP clients, its HTTP port for gRPC clients) and a small HTTP/1.1 server that
answers the HTTP/2 preface with ``400``, as most HTTP/1.1 servers do (Triton's closes
without a word)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kserve_v2 import AsyncClient, Client, KServeError, ProtocolError, TransportError
from kserve_v2.http1 import ResponseParser, looks_like_http2, speaks_http2_error

#: What a gRPC server sends the moment a connection opens (Triton's gRPC port, verbatim).
GRPC_PREFACE = (
    b"\x00\x00\x18\x04\x00\x00\x00\x00\x00\x00\x04\x00@\x00\x00\x00\x05\x00@\x00\x00\x00\x06"
    b"\x00\x00@\x00\xfe\x03\x00\x00\x00\x01\x00\x00\x04\x08\x00\x00\x00\x00\x00\x00?\x00\x01"
)
HTTP_TRANSPORTS = ("stdlib", "httpx", "asyncio", "async-httpx")


# -- without a server -----------------------------------------------------------------------


def test_an_http2_preface_is_recognised() -> None:
    assert looks_like_http2(GRPC_PREFACE)
    assert looks_like_http2(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # empty SETTINGS
    for other in (b"HTTP/1.1 200 OK\r\n", GRPC_PREFACE[:8], b"\x00\x00\x05\x04" + bytes(5)):
        assert not looks_like_http2(other)


@pytest.mark.parametrize("before_start", [False, True])
def test_the_parser_names_the_grpc_url(before_start: bool) -> None:
    parser = ResponseParser(grpc_url="grpc://h:8001")
    if not before_start:
        parser.start()
    parser.get_buffer()[: len(GRPC_PREFACE)] = GRPC_PREFACE

    def receive() -> None:
        parser.buffer_updated(len(GRPC_PREFACE))
        parser.start()  # bytes before the request: start() finds them

    with pytest.raises(ProtocolError) as info:
        receive()
    assert str(info.value) == "this port speaks HTTP/2 (gRPC?) — did you mean grpc://h:8001?"
    assert str(speaks_http2_error()).endswith("did you mean grpc://...?")


# -- HTTP clients at Triton's gRPC port --------------------------------------------------------


def http_client(transport: str, url: str) -> Any:
    if transport == "stdlib":
        return Client(url, timeout=30)
    if transport == "asyncio":
        return AsyncClient(url, timeout=30)
    from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport

    if transport == "httpx":
        return Client(url, transport=HTTPXTransport(url, timeout=30))
    return AsyncClient(url, transport=AsyncHTTPXTransport(url, timeout=30))


def call(client: Any, method: str, *args: Any) -> Any:
    """``client.method(*args)`` on a sync or async client, then close it."""
    if isinstance(client, Client):
        with client:
            return getattr(client, method)(*args)

    async def run() -> Any:
        async with client:
            return await getattr(client, method)(*args)

    return asyncio.run(run())


@pytest.mark.parametrize("transport", HTTP_TRANSPORTS)
def test_http_url_at_a_grpc_port(transport: str, triton: Any) -> None:
    grpc_port = triton.grpc_port
    client = http_client(transport, f"http://127.0.0.1:{grpc_port}")
    with pytest.raises(ProtocolError) as info:
        call(client, "server_metadata")
    assert str(info.value) == (
        f"this port speaks HTTP/2 (gRPC?) — did you mean grpc://127.0.0.1:{grpc_port}?"
    )


# -- gRPC clients at an HTTP/1.1 port ---------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("grpc_transport", ["native", "grpcio"])
def test_grpc_url_at_tritons_http_port(grpc_transport: str, is_async: bool, triton: Any) -> None:
    """Triton's HTTP port closes the connection without answering the HTTP/2 preface: most
    likely an HTTP/1.1 server, which the error says (with the URL meant) without claiming it."""
    port = triton.http_port
    cls = AsyncClient if is_async else Client
    client = cls(f"grpc://127.0.0.1:{port}", grpc_transport=grpc_transport, timeout=30)
    with pytest.raises(TransportError) as info:
        call(client, "server_metadata")
    assert f"this port probably speaks HTTP/1.1 — did you mean http://127.0.0.1:{port}?" in str(
        info.value
    )


def test_a_native_stream_at_tritons_http_port(triton: Any) -> None:
    port = triton.http_port
    with (
        Client(f"grpc://127.0.0.1:{port}", timeout=30) as client,
        pytest.raises(TransportError, match=r"probably speaks HTTP/1\.1") as info,
        client.stream() as stream,
    ):
        stream.send("simple", {"INPUT0": [[1]]}).results()
    assert f"did you mean http://127.0.0.1:{port}?" in str(info.value)


@pytest.fixture
def http1_port() -> Iterator[int]:
    """A server that answers anything with ``HTTP/1.1 400 Bad Request`` and closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    listener.close()
    thread.join(10)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("grpc_transport", ["native", "grpcio"])
def test_grpc_url_at_an_http1_port_that_answers(
    grpc_transport: str, is_async: bool, http1_port: int
) -> None:
    cls = AsyncClient if is_async else Client
    client = cls(f"grpc://127.0.0.1:{http1_port}", grpc_transport=grpc_transport, timeout=30)
    with pytest.raises(KServeError) as info:
        call(client, "server_metadata")
    assert f"this port speaks HTTP/1.1 — did you mean http://127.0.0.1:{http1_port}?" in str(
        info.value
    )
