"""The grpcio channels (:mod:`kserve_v2.transport.grpcio`) against the scripted HTTP/2 server
of the hostile-server kit: what grpcio hands back from a broken server becomes the
package's own errors, never a foreign exception or a silently lost message."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kserve_v2 import ProtocolError
from kserve_v2.transport import grpcio as grpcio_transport
from tests.hostile.h2_server import (
    GRPC_OK_HEADERS,
    Handler,
    Peer,
    Request,
    Runner,
    ScriptedServer,
    each_request,
    scripted_servers,
)

pytest.importorskip("grpc", reason="the 'grpc' extra (grpcio) is not installed")


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], ScriptedServer]]:
    with scripted_servers() as start:
        yield start


@pytest.fixture(params=["sync", "async"])
def client_of(request: pytest.FixtureRequest) -> Iterator[Callable[[ScriptedServer], Runner]]:
    runners: list[Runner] = []

    def make(server: ScriptedServer) -> Runner:
        runner = Runner(request.param, server.url, grpc_transport="grpcio")
        runners.append(runner)
        return runner

    yield make
    for runner in runners:
        runner.close()


def ok_without_message(peer: Peer, request: Request, _n: int) -> None:
    peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
    peer.send_trailers(request.stream_id)


def message_cut_short(peer: Peer, request: Request, _n: int) -> None:
    """A prefix announcing 9 bytes, 3 of them, then status OK: grpcio drops the message."""
    peer.send_headers(request.stream_id, GRPC_OK_HEADERS)
    peer.send_data(request.stream_id, b"\0\0\0\0\x09abc")
    peer.send_trailers(request.stream_id)


@pytest.mark.parametrize("respond", [ok_without_message, message_cut_short])
@pytest.mark.parametrize("want_metadata", [False, True])
def test_ok_status_without_a_message_is_a_protocol_error(
    serve: Callable[[Handler], ScriptedServer],
    client_of: Callable[[ScriptedServer], Runner],
    respond: Callable[[Peer, Request, int], None],
    want_metadata: bool,
) -> None:
    """grpcio hands back None for the message: it was a TypeError from the wire codec
    (``memoryview(None)``), or None returned as if it were bytes."""
    client = client_of(serve(each_request(respond)))
    with pytest.raises(ProtocolError, match="no \\(whole\\) response message"):
        client.unary(b"", want_metadata=want_metadata)
    with pytest.raises(ProtocolError):
        client.live()


class _Call:
    """A stand-in for grpcio's stream call: these messages, then the end."""

    def __init__(self, messages: list[Any]) -> None:
        self._messages = messages

    def __iter__(self) -> Iterator[Any]:
        return iter(self._messages)

    async def read(self) -> Any:
        return self._messages.pop(0) if self._messages else grpcio_transport._import_grpc_aio().EOF


def test_sync_stream_message_none_is_a_protocol_error() -> None:
    call: Any = object.__new__(grpcio_transport._GrpcioStreamCall)
    call._call = _Call([b"a", None, b"b"])
    call._url = "grpc://x"
    call._grpc = grpcio_transport.import_grpc()
    call._cancelled = False
    call._sending = False
    call._lock = threading.Lock()
    call.status = None
    messages = iter(call)
    assert next(messages) == b"a"
    with pytest.raises(ProtocolError):
        next(messages)  # not b"b", as if nothing were missing


def test_async_stream_message_none_is_a_protocol_error() -> None:
    """A None from read() would look like the end of the stream: the message lost, the
    stream ended early without an error."""
    call: Any = object.__new__(grpcio_transport._AsyncGrpcioStreamCall)
    call._call = _Call([b"a", None])
    call._url = "grpc://x"
    call._grpc = grpcio_transport.import_grpc()
    call._eof = grpcio_transport._import_grpc_aio().EOF
    call._cancelled = False
    call.status = None

    async def run() -> None:
        assert await call.read() == b"a"
        with pytest.raises(ProtocolError):
            await call.read()

    asyncio.run(run())
