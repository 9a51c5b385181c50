"""Bidirectional streams (``client.stream()``) against the live Triton server: decoupled
models, sequences, per-request errors, Triton's gRPC error mode, concurrency, cancellation."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from kserve_v2 import (
    AsyncClient,
    Client,
    DeadlineExceededError,
    InferResult,
    InvalidInputError,
    RequestedOutput,
    ServerError,
    TransportError,
    WireMessage,
)
from kserve_v2.grpc import AsyncGRPCStream, GRPCStream, routing
from kserve_v2.grpc.codec import generated
from kserve_v2.shm import SystemSharedMemoryRegion
from tests.conftest import unwatch, watch
from tests.grpc.conftest import make_repository, reader_threads

FAILURE = "kserve-v2 test failure: deliberate error"
IN = np.arange(4, dtype=np.int32)
_unique = itertools.count(1)


def repeat(n: int, *, delay_ms: float = 0, error_at: int | None = None) -> dict[str, Any]:
    """Inputs of ``repeat_decoupled``: ``n`` responses (OUT = IN, IDX = i), then final."""
    inputs: dict[str, Any] = {"IN": IN, "REPEAT": np.array([n], np.int32)}
    if delay_ms:
        inputs["DELAY_MS"] = np.array([delay_ms], np.float32)
    if error_at is not None:
        inputs["ERROR_AT"] = np.array([error_at], np.int32)
    return inputs


def idx(results: list[InferResult]) -> list[int]:
    return [int(r.as_numpy("IDX")[0]) for r in results]


SIMPLE_INPUTS = {"INPUT0": np.ones((1, 16), np.int32), "INPUT1": np.ones((1, 16), np.int32)}


def one(value: int, dtype: npt.DTypeLike = np.int32) -> npt.NDArray[Any]:
    return np.array([value], dtype)


def sequence_id() -> int:
    """Correlation ids unique across tests (and test runs against a reused server)."""
    return (uuid.uuid4().int & 0xFFFFFFFF) * 1000 + next(_unique)


# -------------------------------------------------------------------------- decoupled models


def test_decoupled_responses_per_request(client: Client) -> None:
    with client.stream() as stream:
        request = stream.send("repeat_decoupled", repeat(3))
        results = list(request)
        assert idx(results) == [0, 1, 2]
        assert all(np.array_equal(r.as_numpy("OUT"), IN) for r in results)
        assert [r.final for r in results] == [False, False, False]
        assert {r.id for r in results} == {request.id}
        assert request.done
        assert stream.pending == 0
        assert stream.send("repeat_decoupled", repeat(0)).results(timeout=30) == []
        assert idx(stream.wait(stream.send("repeat_decoupled", repeat(2)), timeout=30)) == [0, 1]
    assert stream.closed


def test_empty_final_responses_when_asked(client: Client) -> None:
    with client.stream(enable_empty_final_response=True) as stream:
        results = stream.send("repeat_decoupled", repeat(2), request_id="with-final").results()
        assert [r.final for r in results] == [False, False, True]
        assert results[-1].outputs == ()
        assert results[-1].id == "with-final"
        (only,) = stream.send("repeat_decoupled", repeat(0)).results(timeout=30)
        assert (only.final, only.outputs) == (True, ())
        # A model that is not decoupled answers once, flagged final, with no extra response.
        (single,) = stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)}).results()
        assert single.final is True
        assert single.as_numpy("OUTPUT0").tolist() == [[1, 1]]


def answered(stream: GRPCStream) -> None:
    """Wait until every request sent on ``stream`` is complete, its responses left unread.

    Triton 2.51 writes the responses of a decoupled model and of another model on one stream
    from their own threads, unguarded (see TritonServer.known_crash): two writes at once may
    crash it or, more rarely, lose a response while the server runs on, which leaves its
    request waiting for ever. A test that reads both from one stream sends the one once the
    other is answered."""
    deadline = time.monotonic() + 30
    while stream.pending:
        assert time.monotonic() < deadline, "the server did not answer within 30 s"
        time.sleep(0.01)


async def answered_async(stream: AsyncGRPCStream) -> None:
    """:func:`answered` on an asyncio stream."""
    deadline = time.monotonic() + 30
    while stream.pending:
        assert time.monotonic() < deadline, "the server did not answer within 30 s"
        await asyncio.sleep(0.01)


def test_stream_iteration_yields_every_response_then_stops(client: Client) -> None:
    with client.stream() as stream:
        c = stream.send("identity_int16", {"INPUT0": np.ones((1, 1), np.int16)})
        answered(stream)  # before the decoupled model's requests (see answered)
        a = stream.send("repeat_decoupled", repeat(3, delay_ms=20), request_id="a")
        b = stream.send("repeat_decoupled", repeat(2, delay_ms=20), request_id="b")
        results = list(stream)
        by_id: dict[str, list[InferResult]] = {}
        for result in results:
            by_id.setdefault(result.id, []).append(result)
        assert idx(by_id["a"]) == [0, 1, 2]
        assert idx(by_id["b"]) == [0, 1]
        assert len(by_id[c.id]) == 1
        assert a.done
        assert b.done
        assert list(stream) == []  # nothing in flight: iteration ends at once


def test_a_consumer_started_before_the_first_send_gets_every_response(client: Client) -> None:
    """A consumer thread iterating the stream before anything was sent waits for the
    requests, and ends once the sender closed the stream and every answer is in."""
    with ThreadPoolExecutor(1) as pool:
        with client.stream() as stream:
            results = iter(stream)  # nothing sent yet: iterates until the stream is closed
            consumer = pool.submit(lambda: [(r.id, int(r.as_numpy("IDX")[0])) for r in results])
            for n, request_id in ((2, "a"), (3, "b"), (1, "c")):
                stream.send("repeat_decoupled", repeat(n, delay_ms=5), request_id=request_id)
            # leaving the block closes the sending side once the requests are answered
        got = consumer.result(timeout=60)
    assert sorted(got) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("c", 0)]
    assert [i for r, i in got if r == "b"] == [0, 1, 2]  # in order within a request


async def test_a_consumer_task_started_before_the_first_send_gets_every_response(
    aclient: AsyncClient,
) -> None:
    async with aclient.stream() as stream:

        async def consume() -> list[tuple[str, int]]:
            return [(r.id, int(r.as_numpy("IDX")[0])) async for r in stream]

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0)  # one turn of the loop: the consumer waits, nothing sent yet
        for n, request_id in ((2, "a"), (3, "b"), (1, "c")):
            await stream.send("repeat_decoupled", repeat(n, delay_ms=5), request_id=request_id)
            await stream.send("repeat_decoupled", repeat(0), request_id=f"{request_id}-none")
    got = await asyncio.wait_for(consumer, 60)
    assert sorted(got) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("c", 0)]


def test_responses_are_taken_once(client: Client) -> None:
    with client.stream() as stream:
        request = stream.send("repeat_decoupled", repeat(3))
        first = next(iter(request))
        rest = list(stream)  # the other two, not the first again
        assert idx([first]) == [0]
        assert idx(rest) == [1, 2]
        assert request.results() == []


def test_request_ids(client: Client) -> None:
    with client.stream() as stream:
        first = stream.send("repeat_decoupled", repeat(1, delay_ms=300), request_id="mine")
        with pytest.raises(InvalidInputError, match="in flight"):
            stream.send("repeat_decoupled", repeat(1), request_id="mine")
        made_up = stream.send("repeat_decoupled", repeat(1))
        assert made_up.id
        assert made_up.id != "mine"
        assert first.results()[0].id == "mine"
        # once complete, an id may be used again
        assert stream.send("repeat_decoupled", repeat(1), request_id="mine").results()


def test_wait_timeout_keeps_the_responses(client: Client) -> None:
    with client.stream() as stream:
        request = stream.send("repeat_decoupled", repeat(3, delay_ms=300))
        with pytest.raises(DeadlineExceededError):
            request.results(timeout=0.5)  # some responses arrived, not all
        assert idx(request.results(timeout=30)) == [0, 1, 2]


async def test_wait_timeout_keeps_the_responses_async(aclient: AsyncClient) -> None:
    async with aclient.stream() as stream:
        request = await stream.send("repeat_decoupled", repeat(3, delay_ms=300))
        with pytest.raises(DeadlineExceededError):
            await request.results(timeout=0.5)
        assert idx(await request.results(timeout=30)) == [0, 1, 2]


# ----------------------------------------------------------------------------------- errors


def test_an_error_belongs_to_its_request_and_the_stream_goes_on(client: Client) -> None:
    with client.stream() as stream:
        failing = stream.send("failing", {"INPUT0": np.ones(2, np.int32)})
        fine = stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)})
        with pytest.raises(ServerError) as info:
            failing.results()
        assert info.value.message == FAILURE
        assert failing.done
        assert fine.results()[0].as_numpy("OUTPUT0").tolist() == [[1, 1]]
        unknown = stream.send("no_such_model", {"INPUT0": np.ones((1, 2), np.int32)})
        with pytest.raises(ServerError, match="unknown model"):
            list(unknown)
        assert unknown.done
        later = stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)})
        assert len(later.results()) == 1


def test_decoupled_error_mid_request(client: Client) -> None:
    with client.stream() as stream:
        request = stream.send("repeat_decoupled", repeat(3, error_at=1))
        responses = iter(request)
        assert idx([next(responses)]) == [0]
        with pytest.raises(ServerError, match=FAILURE):
            next(responses)
        # The model carries on after its error response: the rest is still there.
        assert idx(list(request)) == [2]
        with pytest.raises(ServerError, match=FAILURE):
            stream.send("repeat_decoupled", repeat(3, error_at=0)).results()


def test_stream_iteration_raises_per_request_errors(client: Client) -> None:
    with client.stream() as stream:
        stream.send("failing", {"INPUT0": np.ones(2, np.int32)})
        stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)})
        results, errors = [], []
        while True:
            try:
                results.extend(stream)
                break
            except ServerError as exc:
                errors.append(exc)
        assert [e.message for e in errors] == [FAILURE]
        assert len(results) == 1


class _ErrorModeServer:
    """The server of the ``triton_grpc_error`` tests, started again when a test left it dead
    (and watched by the rerun hook in tests/conftest.py, which restarts it and reruns a test
    that failed while it died of Triton 2.51's known gRPC stream race)."""

    def __init__(self, factory: Any, repository: Any) -> None:
        self.server = factory.start(repository)

    def url(self) -> str:
        if not self.server.is_running():
            self.server.stop()
            self.server.start()
        return f"grpc://{self.server.grpc_url}"


@pytest.fixture(scope="module")
def error_mode_server(
    triton_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_ErrorModeServer]:
    """A server of their own for the ``triton_grpc_error`` tests: Triton 2.51 now and then
    aborts (``ASSERTION FAILED: !byte_buffer->Valid()``) after ending a stream on an error,
    which must not take the session's server down with it."""
    repository = make_repository(
        tmp_path_factory.mktemp("error-mode-repo"), "failing", "identity_int8", "repeat_decoupled"
    )
    holder = _ErrorModeServer(triton_factory, repository)
    watch(holder.server)
    try:
        yield holder
    finally:
        unwatch(holder.server)
        holder.server.stop()


@pytest.fixture
def error_mode_url(error_mode_server: _ErrorModeServer) -> str:
    """The error-mode server's URL; a server an earlier test's stream brought down (the abort
    may come after that test ended) is replaced first."""
    return error_mode_server.url()


def test_triton_grpc_error_mode_ends_the_stream(error_mode_url: str, grpc_transport: str) -> None:
    # Only models that stop at their first error: Triton 2.51 crashes when a decoupled model
    # keeps sending on a stream this mode has already ended.
    with Client(error_mode_url, grpc_transport=grpc_transport) as client:
        with client.stream(triton_grpc_error=True) as stream:
            request = stream.send("failing", {"INPUT0": np.ones(2, np.int32)})
            with pytest.raises(ServerError) as info:
                request.results(timeout=30)
            assert (info.value.grpc_code, info.value.message) == ("INTERNAL", FAILURE)
            with pytest.raises(ServerError):
                list(stream)
            with pytest.raises(ServerError):
                stream.send("identity_int8", {"INPUT0": np.ones((1, 1), np.int8)})
        with client.stream(triton_grpc_error=True) as stream:  # without errors: as usual
            message = {"INPUT0": np.ones((1, 1), np.int8)}
            (result,) = stream.send("identity_int8", message).results(timeout=30)
            assert result.final is True
        # Decoupled requests need the empty final response to end (safe: no error occurs).
        with client.stream(triton_grpc_error=True, enable_empty_final_response=True) as stream:
            results = stream.send("repeat_decoupled", repeat(2)).results(timeout=30)
            assert [r.final for r in results] == [False, False, True]


async def test_async_triton_grpc_error_mode(error_mode_url: str, grpc_transport: str) -> None:
    async with (
        AsyncClient(error_mode_url, grpc_transport=grpc_transport) as client,
        client.stream(triton_grpc_error=True) as stream,
    ):
        request = await stream.send("failing", {"INPUT0": np.ones(2, np.int32)})
        with pytest.raises(ServerError) as info:
            await request.results(timeout=30)
        assert info.value.grpc_code == "INTERNAL"
        with pytest.raises(ServerError):
            await stream.send("failing", {"INPUT0": np.ones(2, np.int32)})


def test_triton_grpc_error_mode_does_not_ask_for_empty_finals(
    error_mode_url: str, grpc_transport: str
) -> None:
    """Triton 2.51 aborts if asked for an empty final response in this mode (see stream.py):
    a decoupled request then stays in flight after its last data response. (Last of the
    error-mode tests: Triton may abort on the request cancelled here.)"""
    with (
        Client(error_mode_url, grpc_transport=grpc_transport) as client,
        client.stream(triton_grpc_error=True) as stream,
    ):
        request = stream.send("repeat_decoupled", repeat(1))
        assert idx(list(itertools.islice(request, 1))) == [0]
        assert not request.done
        stream.cancel()
    assert request.done


# -------------------------------------------------------------------------------- sequences


@pytest.mark.parametrize("model", ["sequence_accumulate", "sequence_accumulate_string"])
def test_sequences_over_a_stream(client: Client, model: str) -> None:
    if model == "sequence_accumulate":
        ids: list[int | str] = [sequence_id(), sequence_id()]
    else:
        ids = [f"seq-{uuid.uuid4()}", f"seq-{uuid.uuid4()}"]
    values = [[1, 2, 3], [10, 20, 30]]
    with client.stream() as stream:
        requests = []
        for step in range(3):  # two sequences interleaved on one stream
            for seq, vals in zip(ids, values, strict=True):
                requests.append(
                    stream.send(
                        model,
                        {"INPUT": one(vals[step])},
                        sequence_id=seq,
                        sequence_start=step == 0,
                        sequence_end=step == 2,
                    )
                )
        sums = [int(r.results()[0].as_numpy("OUTPUT")[0]) for r in requests]
    assert sums == [1, 10, 3, 30, 6, 60]


@pytest.mark.parametrize("model", ["sequence_accumulate", "sequence_accumulate_string"])
def test_sequences_over_unary_infer(client: Client, model: str) -> None:
    seq: int | str = sequence_id() if model == "sequence_accumulate" else f"u-{uuid.uuid4()}"
    sums = []
    for step, value in enumerate([5, 6, 7]):
        result = client.infer(
            model,
            {"INPUT": one(value)},
            sequence_id=seq,
            sequence_start=step == 0,
            sequence_end=step == 2,
        )
        sums.append(int(result.as_numpy("OUTPUT")[0]))
    assert sums == [5, 11, 18]


async def test_sequences_async(aclient: AsyncClient) -> None:
    seq = sequence_id()
    async with aclient.stream() as stream:
        requests = [
            await stream.send(
                "sequence_accumulate",
                {"INPUT": one(v)},
                sequence_id=seq,
                sequence_start=i == 0,
                sequence_end=i == 2,
            )
            for i, v in enumerate([2, 4, 8])
        ]
        sums = [int((await r.results())[0].as_numpy("OUTPUT")[0]) for r in requests]
    assert sums == [2, 6, 14]


# ------------------------------------------------------------------------------ concurrency


def test_concurrent_streams_from_threads(client: Client) -> None:
    def worker(n: int) -> list[int]:
        with client.stream() as stream:
            requests = [
                stream.send("identity_int64", {"INPUT0": np.full((1, 1), n * 100 + i, np.int64)})
                for i in range(5)
            ]
            return [int(r.results()[0].as_numpy("OUTPUT0")[0, 0]) for r in requests]

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(worker, range(4)))
    assert answers == [[n * 100 + i for i in range(5)] for n in range(4)]


def test_one_stream_many_sending_threads(client: Client) -> None:
    with client.stream() as stream:

        def worker(n: int) -> tuple[int, list[int]]:
            request = stream.send("repeat_decoupled", {"IN": one(n), "REPEAT": one(2)})
            results = request.results(timeout=60)
            return n, [int(r.as_numpy("OUT")[0]) for r in results]

        with ThreadPoolExecutor(4) as pool:
            answers = dict(pool.map(worker, range(8)))
    assert answers == {n: [n, n] for n in range(8)}


async def test_concurrent_streams_async(aclient: AsyncClient) -> None:
    async def worker(n: int) -> list[int]:
        async with aclient.stream() as stream:
            request = await stream.send("repeat_decoupled", {"IN": one(n), "REPEAT": one(3)})
            return [int(r.as_numpy("OUT")[0]) async for r in request]

    answers = await asyncio.gather(*(worker(n) for n in range(4)))
    assert answers == [[n] * 3 for n in range(4)]


async def test_async_stream_basics(aclient: AsyncClient) -> None:
    async with aclient.stream(enable_empty_final_response=True) as stream:
        request = await stream.send("repeat_decoupled", repeat(2))
        assert [r.final for r in await request.results(timeout=30)] == [False, False, True]
        await stream.send("repeat_decoupled", repeat(2), request_id="x")
        await answered_async(stream)
        await stream.send("failing", {"INPUT0": np.ones(2, np.int32)}, request_id="bad")
        await answered_async(stream)
        await stream.send("repeat_decoupled", repeat(1), request_id="y")
        seen: list[str] = []
        errors: list[tuple[list[str], str]] = []
        while True:
            try:
                async for result in stream:  # kept one by one: an error may come mid-way
                    seen.append(result.id)
                break
            except ServerError as exc:
                errors.append((list(seen), exc.message))
        # The error comes in its place among the responses, and reading goes on after it.
        assert seen == ["x", "x", "x", "y", "y"]
        assert errors == [(["x", "x", "x"], FAILURE)]
        with pytest.raises(DeadlineExceededError):
            await (await stream.send("repeat_decoupled", repeat(1, delay_ms=500))).results(0.05)
    assert stream.closed


# ------------------------------------------------------------------ closing and cancelling


def test_cancel_is_prompt_and_leaves_no_thread(client: Client) -> None:
    stream = client.stream()
    request = stream.send("repeat_decoupled", repeat(20, delay_ms=200))
    started = time.monotonic()
    stream.cancel()
    assert time.monotonic() - started < 5
    assert stream.closed
    assert request.done
    assert not reader_threads()
    with pytest.raises(TransportError, match="closed"):
        stream.send("repeat_decoupled", repeat(1))
    stream.cancel()  # idempotent
    stream.close()


def test_leaving_with_by_an_exception_cancels(client: Client) -> None:
    def give_up() -> None:
        with client.stream() as stream:
            stream.send("repeat_decoupled", repeat(20, delay_ms=200))
            raise RuntimeError("caller gave up")

    started = time.monotonic()
    with pytest.raises(RuntimeError):
        give_up()
    assert time.monotonic() - started < 5
    assert not reader_threads()


def test_close_waits_for_requests_in_flight(client: Client) -> None:
    stream = client.stream()
    request = stream.send("repeat_decoupled", repeat(2, delay_ms=100))
    stream.close()
    assert request.done
    assert stream.pending == 0
    assert not reader_threads()
    # the responses nobody took were kept until close and are still readable
    assert idx(request.results()) == [0, 1]


def test_close_gives_up_after_its_timeout(client: Client) -> None:
    stream = client.stream()
    stream.send("repeat_decoupled", repeat(20, delay_ms=200))
    started = time.monotonic()
    stream.close(timeout=0.3)
    assert time.monotonic() - started < 5
    assert not reader_threads()


def test_stream_deadline(client: Client) -> None:
    with client.stream(timeout=0.5) as stream:
        request = stream.send("repeat_decoupled", repeat(10, delay_ms=200))
        with pytest.raises(DeadlineExceededError):
            request.results()
        with pytest.raises(DeadlineExceededError):
            stream.send("repeat_decoupled", repeat(1))


def test_an_infinite_timeout_is_no_deadline(client: Client) -> None:
    with client.stream(timeout=math.inf) as stream:
        assert len(stream.send("repeat_decoupled", repeat(2)).results(timeout=30)) == 2
    assert client.infer("simple", SIMPLE_INPUTS, timeout=math.inf).outputs


async def test_an_infinite_timeout_is_no_deadline_async(aclient: AsyncClient) -> None:
    async with aclient.stream(timeout=math.inf) as stream:
        request = await stream.send("repeat_decoupled", repeat(2))
        assert len(await request.results(timeout=30)) == 2
    assert (await aclient.infer("simple", SIMPLE_INPUTS, timeout=math.inf)).outputs


def test_closing_the_client_cancels_its_streams(grpc_url: str, grpc_transport: str) -> None:
    c = Client(grpc_url, grpc_transport=grpc_transport)
    stream = c.stream()
    stream.send("repeat_decoupled", repeat(20, delay_ms=200))
    c.close()
    assert stream.closed
    assert not reader_threads()


async def test_async_cancel_and_client_close(grpc_url: str, grpc_transport: str) -> None:
    async with AsyncClient(grpc_url, grpc_transport=grpc_transport) as c:
        stream = c.stream()
        request = await stream.send("repeat_decoupled", repeat(20, delay_ms=200))
        started = time.monotonic()
        await stream.cancel()
        assert time.monotonic() - started < 5
        assert request.done
        with pytest.raises(TransportError):
            await stream.send("repeat_decoupled", repeat(1))
        open_stream = c.stream()
        await open_stream.send("repeat_decoupled", repeat(20, delay_ms=200))
    assert open_stream.closed
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [t for t in tasks if not t.done()]


async def test_async_close_waits_and_its_timeout(aclient: AsyncClient) -> None:
    stream = aclient.stream()
    request = await stream.send("repeat_decoupled", repeat(2, delay_ms=100))
    await stream.aclose()
    assert idx(await request.results()) == [0, 1]
    slow = aclient.stream()
    await slow.send("repeat_decoupled", repeat(20, delay_ms=200))
    started = time.monotonic()
    await slow.aclose(timeout=0.3)
    assert time.monotonic() - started < 5
    assert slow.closed


# ----------------------------------------------------------------------- hook, shared memory


def test_wire_hook_sees_stream_messages(grpc_url: str, grpc_transport: str) -> None:
    seen: list[WireMessage] = []
    with (
        Client(grpc_url, wire_hook=seen.append, grpc_transport=grpc_transport) as c,
        c.stream(headers={"X-S": "1"}) as stream,
    ):
        stream.send("repeat_decoupled", repeat(2)).results()
    # The first send asks the server's metadata (once per client): is it Triton, to which
    # requests ask for the empty final response?
    unary = [m for m in seen if m.method == "unary"]
    assert [(m.direction, m.target) for m in unary] == [
        ("send", "/inference.GRPCInferenceService/ServerMetadata"),
        ("receive", "/inference.GRPCInferenceService/ServerMetadata"),
    ]
    assert ("x-s", "1") in unary[0].headers
    seen = [m for m in seen if m.method != "unary"]
    assert all((m.protocol, m.method) == ("grpc", "stream") for m in seen)
    assert seen[0].direction == "send"
    assert ("x-s", "1") in seen[0].headers
    assert [m.direction for m in seen[1:]] == ["send", "receive", "receive", "receive", "receive"]
    assert seen[-1].status == "OK"
    assert seen[-1].body == ()


def test_requests_to_triton_ask_for_the_empty_final_response(
    grpc_url: str, grpc_transport: str
) -> None:
    """Triton lists its ``parameters`` extension: stream requests ask it for the empty final
    response (decoupled requests end by it). The client asks the metadata once, for all its
    streams."""
    seen: list[WireMessage] = []
    with Client(grpc_url, wire_hook=seen.append, grpc_transport=grpc_transport) as c:
        for _ in range(2):
            with c.stream() as stream:
                assert idx(stream.send("repeat_decoupled", repeat(2)).results()) == [0, 1]
    metadata_calls = [m for m in seen if m.target.endswith("/ServerMetadata")]
    assert [m.direction for m in metadata_calls] == ["send", "receive"]
    requests = [
        generated().ModelInferRequest.FromString(bytes(memoryview(m.body[0]).cast("B")))
        for m in seen
        if m.method == "stream" and m.direction == "send" and m.body
    ]
    assert len(requests) == 2
    for request in requests:
        assert request.parameters["triton_enable_empty_final_response"].bool_param is True


def test_metadata_asked_by_the_user_is_not_asked_again(grpc_url: str, grpc_transport: str) -> None:
    """As `kserve-v2 stream` does: the server's metadata, then a stream that needs it."""
    seen: list[WireMessage] = []
    with Client(grpc_url, wire_hook=seen.append, grpc_transport=grpc_transport) as c:
        assert c.server_metadata().supports("parameters")
        with c.stream() as stream:
            result = stream.send("repeat_decoupled", repeat(2), parameters={"x": 1.5})
            assert idx(result.results()) == [0, 1]
    metadata_calls = [m for m in seen if m.target.endswith("/ServerMetadata")]
    assert [m.direction for m in metadata_calls] == ["send", "receive"]


def test_outputs_in_shared_memory_over_a_stream(client: Client) -> None:
    with SystemSharedMemoryRegion.create("grpc_stream_io", 64) as region:
        client.register_system_shared_memory(region.name, region.key, region.byte_size)
        try:
            with client.stream() as stream:
                request = stream.send(
                    "identity_int32",
                    {"INPUT0": np.arange(4, dtype=np.int32).reshape(2, 2)},
                    outputs=[RequestedOutput("OUTPUT0", shared_memory=region.placement(16))],
                )
                (result,) = request.results()
            assert result.output("OUTPUT0").data is None
            assert result.output("OUTPUT0").parameters["shared_memory_region"] == "grpc_stream_io"
            assert region.ndarray("INT32", (2, 2)).tolist() == [[0, 1], [2, 3]]
        finally:
            client.unregister_system_shared_memory(region.name)


# -------------------------------------------------- large messages, cancelling, many streams

# 4 MiB per request: far over HTTP/2's initial 64 KiB flow-control window, so sending waits
# for the server's WINDOW_UPDATEs, which the stream's reader takes in.
BIG = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)


def test_requests_larger_than_the_flow_control_window(client: Client) -> None:
    with client.stream() as stream:
        requests = [stream.send("identity_fp32", {"INPUT0": BIG + i}) for i in range(3)]
        for i, request in enumerate(requests):
            (result,) = request.results(timeout=60)
            assert np.array_equal(result.as_numpy("OUTPUT0"), BIG + i)


def test_large_requests_from_many_threads_on_one_stream(client: Client) -> None:
    """Messages from concurrent senders never interleave, even while waiting for the window."""
    with client.stream() as stream:

        def worker(n: int) -> bool:
            data = BIG[:512] + n
            (result,) = stream.send("identity_fp32", {"INPUT0": data}).results(timeout=60)
            return bool(np.array_equal(result.as_numpy("OUTPUT0"), data))

        with ThreadPoolExecutor(4) as pool:
            assert all(pool.map(worker, range(8)))


async def test_requests_larger_than_the_flow_control_window_async(aclient: AsyncClient) -> None:
    async with aclient.stream() as stream:
        requests = [await stream.send("identity_fp32", {"INPUT0": BIG + i}) for i in range(3)]
        for i, request in enumerate(requests):
            (result,) = await request.results(timeout=60)
            assert np.array_equal(result.as_numpy("OUTPUT0"), BIG + i)
        # Large requests of concurrent senders on one stream stay whole.
        many = [stream.send("identity_fp32", {"INPUT0": BIG[:256] + n}) for n in range(6)]
        for n, request in enumerate(await asyncio.gather(*many)):
            (result,) = await request.results(timeout=60)
            assert np.array_equal(result.as_numpy("OUTPUT0"), BIG[:256] + n)


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compressed_requests(client: Client, compression: str) -> None:
    with client.stream(compression=compression) as stream:
        data = BIG[:256]
        (result,) = stream.send("identity_fp32", {"INPUT0": data}).results(timeout=60)
        assert np.array_equal(result.as_numpy("OUTPUT0"), data)


def test_cancel_mid_stream_and_carry_on(client: Client) -> None:
    stream = client.stream()
    request = stream.send("repeat_decoupled", repeat(50, delay_ms=20))
    assert idx([next(iter(request))]) == [0]  # responses are flowing
    started = time.monotonic()
    stream.cancel()
    assert time.monotonic() - started < 5
    assert request.done
    assert stream.closed
    assert not reader_threads()
    with client.stream() as again:  # the client is unharmed
        assert idx(again.send("repeat_decoupled", repeat(2)).results(timeout=30)) == [0, 1]
    assert client.is_server_live()


def test_cancel_while_sending_large_requests(client: Client) -> None:
    stream = client.stream()
    outcome: list[BaseException | None] = []

    def sender() -> None:
        try:
            for _ in range(20):
                stream.send("identity_fp32", {"INPUT0": BIG})
        except (TransportError, DeadlineExceededError) as exc:  # cancelled under it
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=sender)
    thread.start()
    time.sleep(0.05)
    stream.cancel()
    thread.join(10)
    assert not thread.is_alive()
    assert len(outcome) == 1
    assert stream.closed
    assert not reader_threads()


async def test_cancel_mid_stream_and_carry_on_async(aclient: AsyncClient) -> None:
    stream = aclient.stream()
    request = await stream.send("repeat_decoupled", repeat(50, delay_ms=20))
    async for result in request:  # responses are flowing
        assert idx([result]) == [0]
        break
    started = time.monotonic()
    await stream.cancel()
    assert time.monotonic() - started < 5
    assert request.done
    assert stream.closed
    # The shared connection carries on: a new stream and a unary call on it still work.
    async with aclient.stream() as again:
        request = await again.send("repeat_decoupled", repeat(2))
        assert idx(await request.results(timeout=30)) == [0, 1]
    assert await aclient.is_server_live()


async def test_stream_deadline_async(aclient: AsyncClient) -> None:
    async with aclient.stream(timeout=0.5) as stream:
        request = await stream.send("repeat_decoupled", repeat(10, delay_ms=200))
        with pytest.raises(DeadlineExceededError):
            await request.results()
        with pytest.raises(DeadlineExceededError):
            await stream.send("repeat_decoupled", repeat(1))


async def test_many_concurrent_streams_on_one_async_client(
    aclient: AsyncClient, grpc_transport: str
) -> None:
    async def worker(n: int) -> list[list[int]]:
        async with aclient.stream() as stream:
            requests = [
                await stream.send("repeat_decoupled", {"IN": one(n), "REPEAT": one(3)})
                for _ in range(2)
            ]
            return [
                [int(r.as_numpy("OUT")[0]) for r in await request.results(timeout=60)]
                for request in requests
            ]

    answers = await asyncio.gather(*(worker(n) for n in range(40)))
    assert answers == [[[n] * 3, [n] * 3] for n in range(40)]
    if grpc_transport == "native":  # every stream was multiplexed on the one connection
        assert len(aclient._io._connections) == 1


@pytest.mark.parametrize("transport", ["native", "grpcio"])
def test_a_stream_without_a_server_fails_with_transport_error(transport: str) -> None:
    with (
        Client("grpc://127.0.0.1:1", grpc_transport=transport) as c,
        c.stream() as stream,
        pytest.raises(TransportError),
    ):
        stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)}).results(timeout=30)
    assert not reader_threads()


@pytest.mark.parametrize("transport", ["native", "grpcio"])
async def test_an_async_stream_without_a_server_fails_with_transport_error(transport: str) -> None:
    async def attempt(stream: Any) -> None:
        request = await stream.send("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)})
        await request.results(timeout=30)

    async with (
        AsyncClient("grpc://127.0.0.1:1", grpc_transport=transport) as c,
        c.stream() as stream,
    ):
        with pytest.raises(TransportError):
            await attempt(stream)


def test_no_reader_thread_survives_the_module() -> None:
    deadline = time.monotonic() + 5
    while reader_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not reader_threads(), [t.name for t in threading.enumerate()]


def test_a_consumer_that_falls_behind_holds_the_reader_back(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader stops reading while the responses not taken exceed READ_AHEAD (then the
    call's flow-control window holds the server back): with a bound of one byte it runs at
    most one response ahead of the consumer, and every response still arrives."""
    monkeypatch.setattr(routing, "READ_AHEAD", 1)
    with client.stream() as stream:
        request = stream.send("repeat_decoupled", repeat(200))
        seen = []
        for result in request:
            seen.append(result.as_numpy("IDX")[0])
            assert stream._router.buffered <= 1 + 4096  # one response of a few hundred bytes
        assert seen == list(range(200))


async def test_a_consumer_that_falls_behind_holds_the_reader_back_async(
    aclient: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routing, "READ_AHEAD", 1)
    async with aclient.stream() as stream:
        request = await stream.send("repeat_decoupled", repeat(200))
        seen = []
        async for result in request:
            seen.append(result.as_numpy("IDX")[0])
            assert stream._router.buffered <= 1 + 4096
        assert seen == list(range(200))
