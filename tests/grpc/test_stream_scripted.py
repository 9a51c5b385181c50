"""The streams (:class:`GRPCStream`, generated from :class:`AsyncGRPCStream`) over a scripted
call: the test plays the server, answering the requests it received. Together with the live
tests in ``test_stream.py``: when the call opens, the reader's ends, closing and cancelling."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kserve_v2 import (
    AsyncClient,
    Client,
    DeadlineExceededError,
    ProtocolError,
    ServerError,
    TransportError,
    WireMessage,
)
from kserve_v2.endpoint import parse_url
from kserve_v2.grpc import AsyncGRPCStream, GRPCStream
from kserve_v2.grpc.backend import GRPCBackend
from kserve_v2.grpc.routing import READER_NAME, STREAM_METHOD
from kserve_v2.h2.frames import DATA, FLAG_END_STREAM, HEADERS
from tests.hostile.h2_server import (
    GRPC_OK_HEADERS,
    GUARD,
    U32,
    Handler,
    Peer,
    PeerClosed,
    Request,
    grpc_message,
    scripted_servers,
)

pb = pytest.importorskip("kserve_v2.grpc._generated.grpc_service_pb2")

URL = "grpc://scripted:1"
INPUTS = {"INPUT0": np.ones((1, 2), np.int32)}


def response(request_id: str, *, final: bool = True, error: str = "") -> bytes:
    message = pb.ModelStreamInferResponse(error_message=error)
    message.infer_response.id = request_id
    message.infer_response.model_name = "m"
    message.infer_response.parameters["triton_final_response"].bool_param = final
    if not error:  # a data response (one with no outputs is Triton's empty final response)
        output = message.infer_response.outputs.add(name="OUT", datatype="INT32", shape=[1])
        output.contents.int_contents.append(7)
    data: bytes = message.SerializeToString()
    return data


def request_id_of(data: bytes) -> str:
    request_id: str = pb.ModelInferRequest.FromString(data).id
    return request_id


@dataclass
class Config:
    url: str = URL


class ScriptedCall:
    """A :class:`~kserve_v2.interfaces.SyncStreamCall`: ``messages`` are what the reader
    gets (``None`` ends the call with OK, an exception is raised there)."""

    def __init__(self) -> None:
        self.messages: queue.SimpleQueue[bytes | BaseException | None] = queue.SimpleQueue()
        self.sent: list[bytes] = []
        self.half_closed = False
        self.ended_sending = threading.Event()
        self.cancelled = False
        self.status: str | None = None

    def send(self, data: bytes) -> None:
        if self.half_closed or self.cancelled:
            raise TransportError("closed")
        self.sent.append(data)

    def done_sending(self) -> None:
        self.half_closed = True
        self.ended_sending.set()

    def __iter__(self) -> Iterator[bytes]:
        while (item := self.messages.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        self.status = "CANCELLED" if self.cancelled else "OK"

    def cancel(self) -> None:
        self.cancelled = True
        self.messages.put(None)


class AsyncScriptedCall:
    """The :class:`~kserve_v2.interfaces.AsyncStreamCall` twin of :class:`ScriptedCall`."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        self.sent: list[bytes] = []
        self.half_closed = False
        self.ended_sending = asyncio.Event()
        self.cancelled = False
        self.status: str | None = None

    async def write(self, data: bytes) -> None:
        if self.half_closed or self.cancelled:
            raise TransportError("closed")
        self.sent.append(data)

    async def done_writing(self) -> None:
        self.half_closed = True
        self.ended_sending.set()

    async def read(self) -> bytes | None:
        item = await self.messages.get()
        if isinstance(item, BaseException):
            raise item
        if item is None:
            self.status = "CANCELLED" if self.cancelled else "OK"
        return item

    def cancel(self) -> None:
        self.cancelled = True
        self.messages.put_nowait(None)


# The scripted server is Triton: its metadata lists the ``parameters`` extension, so stream
# requests ask for the empty final response (the stream asks the metadata on its first send).
TRITON_METADATA = pb.ServerMetadataResponse(
    name="triton", version="2.51.0", extensions=["parameters"]
).SerializeToString()


class _ScriptedChannel:
    def __init__(self, call: Any) -> None:
        self.config: Any = Config()
        self.call = call
        self.opened = 0

    def open_stream(self, method: str, **options: Any) -> Any:
        self.opened += 1
        return self.call


class Channel(_ScriptedChannel):
    def call_unary(self, method: str, request: Any, **options: Any) -> tuple[bytes, tuple[()]]:
        assert method.endswith("/ServerMetadata"), method
        return TRITON_METADATA, ()


class AsyncChannel(_ScriptedChannel):
    async def call_unary(
        self, method: str, request: Any, **options: Any
    ) -> tuple[bytes, tuple[()]]:
        assert method.endswith("/ServerMetadata"), method
        return TRITON_METADATA, ()


def sync_stream(**options: Any) -> tuple[GRPCStream, Channel]:
    channel = Channel(ScriptedCall())
    return GRPCStream(channel, GRPCBackend(parse_url(URL)), None, **options), channel


def async_stream(**options: Any) -> tuple[AsyncGRPCStream, AsyncChannel]:
    channel = AsyncChannel(AsyncScriptedCall())
    return AsyncGRPCStream(channel, GRPCBackend(parse_url(URL)), None, **options), channel


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(READER_NAME)]


# --------------------------------------------------------------------------------- sync


def test_a_stream_opens_its_call_on_first_use_only() -> None:
    stream, channel = sync_stream()
    assert channel.opened == 0
    assert not reader_threads()
    stream.close()
    assert stream.closed
    assert channel.opened == 0
    with pytest.raises(TransportError, match="closed"):
        stream.send("m", INPUTS)
    assert list(stream) == []


def test_requests_get_their_responses() -> None:
    stream, channel = sync_stream()
    call = channel.call
    with stream:
        assert channel.opened == 1
        first = stream.send("m", INPUTS, request_id="a")
        second = stream.send("m", INPUTS)
        assert [request_id_of(data) for data in call.sent] == ["a", second.id]
        call.messages.put(response(second.id))
        call.messages.put(response("a", final=False))
        call.messages.put(response("a"))
        assert [r.id for r in first.results(timeout=30)] == ["a", "a"]
        assert [r.id for r in stream] == [second.id]
        assert first.done
        assert second.done
        assert stream.pending == 0
        call.messages.put(None)  # the server ends the stream
    assert call.half_closed
    assert stream.closed
    assert not reader_threads()


def test_close_waits_for_the_final_responses() -> None:
    stream, channel = sync_stream()
    call = channel.call
    stream.send("m", INPUTS, request_id="a")
    closing = threading.Thread(target=stream.close)
    closing.start()
    assert not call.half_closed  # close() waits for the request's final response first
    call.messages.put(response("a"))
    assert call.ended_sending.wait(30)  # then half-closes, and waits for the server's end
    assert not stream.closed
    call.messages.put(None)
    closing.join(30)
    assert stream.closed
    assert stream.pending == 0


def test_a_failing_reader_ends_every_request_with_its_error() -> None:
    stream, channel = sync_stream()
    request = stream.send("m", INPUTS)
    channel.call.messages.put(ProtocolError("garbled message"))
    with pytest.raises(ProtocolError, match="garbled"):
        request.results(timeout=30)
    with pytest.raises(ProtocolError, match="garbled"):
        stream.send("m", INPUTS)
    stream.close()
    assert channel.call.cancelled  # the call was ended where the reader stopped


def test_an_error_response_belongs_to_its_request() -> None:
    stream, channel = sync_stream()
    call = channel.call
    with stream:
        bad = stream.send("m", INPUTS, request_id="bad")
        good = stream.send("m", INPUTS, request_id="good")
        call.messages.put(response("bad", error="no such model"))
        call.messages.put(response("good"))
        with pytest.raises(ServerError, match="no such model"):
            bad.results(timeout=30)
        assert [r.id for r in good.results(timeout=30)] == ["good"]
        call.messages.put(None)


def test_an_ok_end_before_a_final_response_fails_the_request() -> None:
    """The server ends the stream with status OK while a request still waits for its final
    response: its consumers raise ProtocolError (they used to end with no result and no
    error); a request answered in full is unaffected."""
    stream, channel = sync_stream()
    call = channel.call
    with stream:
        answered = stream.send("m", INPUTS, request_id="answered")
        partial = stream.send("m", INPUTS, request_id="partial")
        silent = stream.send("m", INPUTS, request_id="silent")
        call.messages.put(response("answered"))
        call.messages.put(response("partial", final=False))
        call.messages.put(None)
        assert [r.id for r in answered.results(timeout=30)] == ["answered"]
        with pytest.raises(ProtocolError, match="'partial' was still waiting"):
            partial.results(timeout=30)
        with pytest.raises(ProtocolError, match="'silent' was still waiting"):
            list(silent)
        with pytest.raises(ProtocolError, match="'partial', 'silent' were still waiting"):
            list(stream)
    assert stream.closed


def test_a_close_that_times_out_fails_the_requests_left() -> None:
    stream, channel = sync_stream(close_timeout=0.05)
    request = stream.send("m", INPUTS, request_id="a")
    stream.close()  # the final response never comes: cancelled after 0.05 s
    assert channel.call.cancelled
    with pytest.raises(DeadlineExceededError, match="closed and cancelled after waiting"):
        request.results(timeout=30)


def test_cancel_ends_the_call_and_the_reader() -> None:
    seen: list[WireMessage] = []
    channel = Channel(ScriptedCall())
    stream = GRPCStream(channel, GRPCBackend(parse_url(URL)), seen.append)
    request = stream.send("m", INPUTS)
    stream.cancel()
    assert stream.closed
    assert request.done
    assert channel.call.cancelled
    assert not reader_threads()
    # The first send asked the server's metadata (Triton?) on the channel's unary side.
    assert [(m.method, m.direction) for m in seen[:2]] == [("unary", "send"), ("unary", "receive")]
    assert [m.direction for m in seen[2:]] == ["send", "send", "receive"]
    assert seen[-1].status == "CANCELLED"
    stream.cancel()  # idempotent


def test_a_wire_hook_may_close_the_stream_from_the_reader() -> None:
    channel = Channel(ScriptedCall())
    streams: list[GRPCStream] = []

    def hook(message: WireMessage) -> None:
        if message.method == "stream" and message.direction == "receive" and message.body:
            streams[0].close()  # on the reader thread: half-closes, does not wait

    stream = GRPCStream(channel, GRPCBackend(parse_url(URL)), hook)
    streams.append(stream)
    with stream:
        request = stream.send("m", INPUTS)
        channel.call.messages.put(response(request.id))
        assert len(request.results(timeout=30)) == 1
        assert channel.call.half_closed
        channel.call.messages.put(None)
    assert stream.closed


def test_an_iteration_made_before_the_first_send_waits_until_the_close() -> None:
    stream, channel = sync_stream()
    call = channel.call
    results = iter(stream)  # made before anything was sent: waits for requests
    with ThreadPoolExecutor(1) as pool:
        consumer = pool.submit(lambda: [r.id for r in results])
        stream.send("m", INPUTS, request_id="a")
        call.messages.put(response("a"))
        stream.send("m", INPUTS, request_id="b")  # "a" complete meanwhile: still waiting
        call.messages.put(response("b", final=False))
        call.messages.put(response("b"))
        assert not consumer.done() or consumer.exception() is None
        closer = threading.Thread(target=stream.close)
        closer.start()  # close() waits for the final responses, then half-closes
        assert call.ended_sending.wait(30)
        call.messages.put(None)
        closer.join(30)
        assert consumer.result(timeout=30) == ["a", "b", "b"]


def test_iteration_rules_are_explicit_with_responses() -> None:
    stream, channel = sync_stream()
    call = channel.call
    assert list(stream.responses(until_closed=False)) == []  # nothing in flight: ends
    stream.send("m", INPUTS, request_id="a")
    call.messages.put(response("a"))
    assert [r.id for r in stream] == ["a"]  # sent first, then iterated: ends when answered
    waiting = stream.responses(until_closed=True)
    closer = threading.Thread(target=stream.close)
    closer.start()
    assert call.ended_sending.wait(30)
    call.messages.put(None)
    assert list(waiting) == []  # ends once the sending side is closed
    closer.join(30)
    assert stream.closed


# -------------------------------------------------------------------------------- async


async def test_async_stream_opens_on_first_use_only() -> None:
    stream, channel = async_stream()
    await stream.aclose()
    assert stream.closed
    assert channel.opened == 0
    with pytest.raises(TransportError, match="closed"):
        await stream.send("m", INPUTS)


async def test_async_requests_get_their_responses() -> None:
    stream, channel = async_stream()
    call = channel.call
    async with stream:
        first = await stream.send("m", INPUTS, request_id="a")
        second = await stream.send("m", INPUTS)
        call.messages.put_nowait(response(second.id))
        call.messages.put_nowait(response("a", final=False))
        call.messages.put_nowait(response("a"))
        assert [r.id for r in await first.results(timeout=30)] == ["a", "a"]
        assert [r.id async for r in stream] == [second.id]
        assert stream.pending == 0
        call.messages.put_nowait(None)
    assert call.half_closed
    assert stream.closed


async def test_async_close_waits_for_the_final_responses() -> None:
    stream, channel = async_stream()
    call = channel.call
    await stream.send("m", INPUTS, request_id="a")
    closing = asyncio.ensure_future(stream.aclose())
    call.messages.put_nowait(response("a"))
    await asyncio.wait_for(call.ended_sending.wait(), 30)  # after the final response
    assert not stream.closed
    call.messages.put_nowait(None)
    await closing
    assert stream.closed


async def test_async_wait_times_out_and_keeps_the_responses() -> None:
    stream, channel = async_stream()
    async with stream:
        request = await stream.send("m", INPUTS, request_id="a")
        channel.call.messages.put_nowait(response("a", final=False))
        with pytest.raises(TimeoutError):  # DeadlineExceededError is one
            await request.results(timeout=0.05)
        channel.call.messages.put_nowait(response("a"))
        assert len(await stream.wait("a", timeout=30)) == 2
        channel.call.messages.put_nowait(None)


async def test_async_ok_end_before_a_final_response_fails_the_request() -> None:
    stream, channel = async_stream()
    call = channel.call
    async with stream:
        answered = await stream.send("m", INPUTS, request_id="answered")
        silent = await stream.send("m", INPUTS, request_id="silent")
        call.messages.put_nowait(response("answered"))
        call.messages.put_nowait(None)
        assert [r.id for r in await answered.results(timeout=30)] == ["answered"]
        with pytest.raises(ProtocolError, match="'silent' was still waiting"):
            await silent.results(timeout=30)
        with pytest.raises(ProtocolError, match="'silent' was still waiting"):
            [r async for r in stream]
    assert stream.closed


async def test_async_close_that_times_out_fails_the_requests_left() -> None:
    stream, channel = async_stream(close_timeout=0.05)
    request = await stream.send("m", INPUTS, request_id="a")
    await stream.aclose()
    assert channel.call.cancelled
    with pytest.raises(DeadlineExceededError, match="closed and cancelled after waiting"):
        await request.results(timeout=30)


async def test_a_cancelled_reader_task_fails_the_requests_in_flight() -> None:
    stream, _ = async_stream()
    request = await stream.send("m", INPUTS)
    readers = [t for t in asyncio.all_tasks() if t.get_name().startswith(READER_NAME)]
    assert len(readers) == 1
    await asyncio.sleep(0)  # the reader starts, and waits for a message
    readers[0].cancel()
    with pytest.raises(TransportError, match="reader was stopped"):
        await request.results(timeout=30)
    await stream.cancel()
    assert stream.closed


async def test_async_iteration_made_before_the_first_send_waits_until_the_close() -> None:
    stream, channel = async_stream()
    call = channel.call

    async def consume() -> list[str]:
        return [r.id async for r in stream]

    consumer = asyncio.ensure_future(consume())
    await asyncio.sleep(0)  # one turn of the loop: the consumer is now waiting, nothing sent
    assert not consumer.done()
    await stream.send("m", INPUTS, request_id="a")
    call.messages.put_nowait(response("a"))
    await stream.send("m", INPUTS, request_id="b")
    call.messages.put_nowait(response("b"))
    closing = asyncio.ensure_future(stream.aclose())
    await asyncio.wait_for(call.ended_sending.wait(), 30)
    call.messages.put_nowait(None)
    await closing
    assert await asyncio.wait_for(consumer, 30) == ["a", "b"]


async def test_async_iteration_rules_are_explicit_with_responses() -> None:
    stream, channel = async_stream()
    call = channel.call
    assert [r async for r in stream.responses(until_closed=False)] == []
    await stream.send("m", INPUTS, request_id="a")
    call.messages.put_nowait(response("a"))
    assert [r.id async for r in stream] == ["a"]
    waiting = stream.responses(until_closed=True)
    closing = asyncio.ensure_future(stream.aclose())
    await asyncio.wait_for(call.ended_sending.wait(), 30)
    call.messages.put_nowait(None)
    assert [r async for r in waiting] == []
    await closing
    assert stream.closed


# ------------------------------------------- over HTTP/2: both transports, sync and async

# What the scripted HTTP/2 server (the hostile-server kit's) does after the metadata request:
# read two stream requests, answer the first in full, then (once the test has that answer,
# so both requests were written) end the stream with status OK.


def _ends_ok_after_one_answer(answered: threading.Event) -> Handler:
    def handler(peer: Peer) -> None:
        peer.handshake()
        calls: dict[int, Request] = {}  # frame by frame: the calls interleave
        stream_id, buffered, ids = 0, b"", []
        while len(ids) < 2:
            try:
                got = peer.next_request_frame()
            except PeerClosed:  # a connection of the metadata request only (sync native)
                return
            if got.kind == HEADERS:
                calls[got.stream_id] = request = peer.request_of(got)
                if request.header(":path") == STREAM_METHOD:
                    stream_id = got.stream_id
                continue
            assert got.kind == DATA, got
            if got.stream_id == stream_id:
                buffered += got.payload
                while len(buffered) >= 5 and len(buffered) >= 5 + U32.unpack(buffered[1:5])[0]:
                    size = U32.unpack(buffered[1:5])[0]
                    ids.append(request_id_of(buffered[5 : 5 + size]))
                    buffered = buffered[5 + size :]
            elif got.flags & FLAG_END_STREAM:  # the metadata request, whole
                peer.send_response(got.stream_id, TRITON_METADATA)
        peer.send_headers(stream_id, GRPC_OK_HEADERS)
        peer.send_data(stream_id, grpc_message(response(ids[0])))
        assert answered.wait(GUARD)
        answered.clear()
        peer.send_trailers(stream_id)
        peer.read_until_closed()  # the client's half-close, then its goodbye

    return handler


@pytest.mark.parametrize("transport", ["native", "grpcio"])
async def test_ok_end_over_http2_fails_the_unanswered_request(transport: str) -> None:
    """The same against a scripted HTTP/2 server, through both gRPC transports and both
    clients: the answered request completes, the other raises ProtocolError."""
    answered = threading.Event()
    with scripted_servers() as start:
        server = start(_ends_ok_after_one_answer(answered))
        with (
            Client(server.url, timeout=GUARD, grpc_transport=transport) as client,
            client.stream() as stream,
        ):
            first = stream.send("m", INPUTS, request_id="answered")
            owed = stream.send("m", INPUTS, request_id="owed")
            assert [r.id for r in first.results(timeout=GUARD)] == ["answered"]
            answered.set()
            with pytest.raises(ProtocolError, match="'owed' was still waiting"):
                owed.results(timeout=GUARD)
        async with (
            AsyncClient(server.url, timeout=GUARD, grpc_transport=transport) as aclient,
            aclient.stream() as astream,
        ):
            afirst = await astream.send("m", INPUTS, request_id="answered")
            aowed = await astream.send("m", INPUTS, request_id="owed")
            assert [r.id async for r in afirst] == ["answered"]
            answered.set()
            with pytest.raises(ProtocolError, match="'owed' was still waiting"):
                await asyncio.wait_for(aowed.results(timeout=GUARD), GUARD)
