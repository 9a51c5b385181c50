"""Retries (``Client(..., retry=RetryPolicy(...))``) on both clients and both protocols, over
scripted transports and channels: each attempt takes the next outcome of a script.

Time is a fake clock that only the client's backoff sleeps move, so the tests count attempts,
read the backoffs slept and the timeout each attempt got, and never wait.
"""

from __future__ import annotations

import inspect
import random
from typing import Any

import numpy as np
import pytest

from kserve_v2 import AsyncClient, Client, RetryPolicy
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.interfaces import HTTPRequest, HTTPResponse

pb = pytest.importorskip("kserve_v2.grpc._generated.grpc_service_pb2")

KINDS = ("http-sync", "http-async", "grpc-sync", "grpc-async")

# Script outcomes, the same for both protocols (each transport turns them into its own).
OK = "ok"
REFUSED = "refused"  # connect failed: the server certainly did not get the request
LOST = "lost"  # the connection broke after the request went out: it may have run
BUSY = "busy"  # HTTP 503 / gRPC UNAVAILABLE from the server
WAIT_5 = "wait-5"  # BUSY, and the server asks for 5 s (Retry-After / grpc-retry-pushback-ms)
WAIT_60 = "wait-60"  # BUSY, asking for 60 s: more than RetryPolicy.max_retry_after
MISSING = "missing"  # HTTP 404 / gRPC NOT_FOUND: an answer that asking again will not change
TIMEOUT = "timeout"  # the attempt's timeout expired
CONNECT_TIMEOUT = "connect-timeout"  # the connect timed out: nothing was sent
MALFORMED = "malformed"  # a broken answer (ProtocolError)

INPUTS = {"x": np.array([1], dtype=np.int32)}
NO_JITTER = {"jitter": False, "initial_backoff": 0.1, "multiplier": 2.0, "max_backoff": 10.0}


def _transport_error(outcome: str) -> TransportError | None:
    if outcome == REFUSED:
        return TransportError("cannot connect: Connection refused", unprocessed=True)
    if outcome == LOST:
        return TransportError("connection lost while receiving the response")
    if outcome == TIMEOUT:
        return DeadlineExceededError("request timed out")
    if outcome == CONNECT_TIMEOUT:
        return DeadlineExceededError("timed out connecting", unprocessed=True)
    if outcome == MALFORMED:
        return ProtocolError("the response was cut short")
    return None


class Script:
    """The outcomes still to come, and what each attempt asked: (what, timeout)."""

    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = list(outcomes)
        self.attempts: list[tuple[str, float | None]] = []

    def next(self, what: str, timeout: float | None) -> str:
        self.attempts.append((what, timeout))
        assert self.outcomes, f"attempt {len(self.attempts)} ({what}) was not expected"
        outcome = self.outcomes.pop(0)
        error = _transport_error(outcome)
        if error is not None:
            raise error
        return outcome

    @property
    def count(self) -> int:
        return len(self.attempts)

    @property
    def timeouts(self) -> list[float | None]:
        return [timeout for _, timeout in self.attempts]


class ScriptedTransport:
    """A sync and async HTTP transport that answers from a script."""

    def __init__(self, script: Script) -> None:
        self.script = script

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        outcome = self.script.next(f"{request.method} {request.target}", request.timeout)
        if outcome == BUSY:
            return HTTPResponse(503, {"content-type": "application/json"}, b'{"error":"busy"}')
        if outcome in (WAIT_5, WAIT_60):
            headers = {"content-type": "application/json", "retry-after": outcome[5:]}
            return HTTPResponse(503, headers, b'{"error":"busy"}')
        if outcome == MISSING:
            return HTTPResponse(404, {"content-type": "application/json"}, b'{"error":"no"}')
        if request.target.endswith("/infer"):
            body = b'{"model_name":"m","outputs":[]}'
        elif request.target == "/v2":
            body = b'{"name":"triton","version":"2","extensions":[]}'
        else:
            body = b""
        return HTTPResponse(200, {"content-type": "application/json"}, body)

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        return self.handle_request(request)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class ScriptedChannel:
    """A sync gRPC channel (unary calls only) that answers from a script."""

    def __init__(self, script: Script) -> None:
        self.script = script

    def call_unary(
        self, method: str, request: Any, *, timeout: float | None = None, **options: Any
    ) -> tuple[bytes, tuple[()]]:
        outcome = self.script.next(method, timeout)
        if outcome == BUSY:
            raise ServerError("busy", grpc_code="UNAVAILABLE")
        if outcome in (WAIT_5, WAIT_60):  # as the transports read grpc-retry-pushback-ms
            raise ServerError("busy", grpc_code="UNAVAILABLE", retry_after=float(outcome[5:]))
        if outcome == MISSING:
            raise ServerError("no", grpc_code="NOT_FOUND")
        if method.endswith("/ModelInfer"):
            return pb.ModelInferResponse(model_name="m").SerializeToString(), ()
        if method.endswith("/ServerMetadata"):
            return pb.ServerMetadataResponse(name="triton", version="2").SerializeToString(), ()
        return b"", ()

    def close(self) -> None:
        pass


class AsyncScriptedChannel(ScriptedChannel):
    async def call_unary(  # type: ignore[override]
        self, method: str, request: Any, **options: Any
    ) -> tuple[bytes, tuple[()]]:
        return ScriptedChannel.call_unary(self, method, request, **options)

    async def aclose(self) -> None:
        pass


class FakeClock:
    """The clients' monotonic clock and backoff sleep: only the sleeps move it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    import kserve_v2.client.aio as aio
    import kserve_v2.client.sync as sync

    fake = FakeClock()
    for module in (aio, sync):
        monkeypatch.setattr(module, "time", fake)
    monkeypatch.setattr(sync, "sleep", fake.sleep)
    monkeypatch.setattr(aio, "async_sleep", fake.async_sleep)
    return fake


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Opened:
    """A client of one kind over a scripted transport or channel."""

    def __init__(self, kind: str, outcomes: list[str], **options: Any) -> None:
        self.script = Script(outcomes)
        self.kind = kind
        cls = Client if kind.endswith("sync") else AsyncClient
        if kind.startswith("http"):
            options.setdefault("binary", False)  # no metadata probe before the first infer
            self.client: Any = cls(
                "http://server:8000", transport=ScriptedTransport(self.script), **options
            )
        else:
            self.client = cls("grpc://server:8001", **options)
            channel = ScriptedChannel if cls is Client else AsyncScriptedChannel
            # The default channel has opened nothing yet: replace it.
            self.client._io = channel(self.script)

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, method)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result


def open_client(kind: str, outcomes: list[str], **options: Any) -> Opened:
    return Opened(kind, outcomes, **options)


# -- idempotent calls --------------------------------------------------------------------------


async def test_idempotent_call_is_retried_until_it_succeeds(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [REFUSED, BUSY, LOST, OK], retry=RetryPolicy(attempts=4, **NO_JITTER))
    metadata = await c.call("server_metadata")
    assert metadata.name == "triton"
    assert c.script.count == 4
    assert clock.slept == pytest.approx([0.1, 0.2, 0.4])


async def test_attempts_bound_the_tries(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [BUSY] * 5, retry=RetryPolicy(attempts=3, **NO_JITTER))
    with pytest.raises(ServerError) as info:
        await c.call("server_metadata")
    assert info.value.http_status == 503 or info.value.grpc_code == "UNAVAILABLE"
    assert c.script.count == 3
    assert clock.slept == pytest.approx([0.1, 0.2])


async def test_backoff_is_capped(kind: str, clock: FakeClock) -> None:
    policy = RetryPolicy(attempts=5, jitter=False, initial_backoff=1, multiplier=3, max_backoff=4)
    c = open_client(kind, [LOST] * 4 + [OK], retry=policy, timeout=None)
    await c.call("server_metadata")
    assert clock.slept == pytest.approx([1.0, 3.0, 4.0, 4.0])


async def test_the_servers_wait_replaces_the_backoff(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [BUSY, WAIT_5, BUSY, OK], retry=RetryPolicy(attempts=4, **NO_JITTER))
    await c.call("server_metadata")
    assert clock.slept == pytest.approx([0.1, 5.0, 0.4])


async def test_a_wait_over_max_retry_after_is_not_waited(kind: str, clock: FakeClock) -> None:
    policy = RetryPolicy(attempts=4, max_retry_after=30, **NO_JITTER)
    c = open_client(kind, [BUSY, WAIT_60, OK], retry=policy)
    with pytest.raises(ServerError) as info:
        await c.call("server_metadata")
    assert info.value.retry_after == 60.0
    assert c.script.count == 2
    assert clock.slept == pytest.approx([0.1])


async def test_a_wait_past_the_calls_timeout_is_not_waited(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [WAIT_5, OK], retry=RetryPolicy(**NO_JITTER), timeout=3.0)
    with pytest.raises(ServerError):
        await c.call("server_metadata")
    assert (c.script.count, clock.slept) == (1, [])


async def test_full_jitter_draws_from_the_given_random(kind: str, clock: FakeClock) -> None:
    policy = RetryPolicy(attempts=4, initial_backoff=0.5, random=random.Random(7).random)
    c = open_client(kind, [LOST, LOST, LOST, OK], retry=policy)
    await c.call("server_metadata")
    draws = random.Random(7)
    assert clock.slept == pytest.approx(
        [0.5 * draws.random(), 1.0 * draws.random(), 2.0 * draws.random()]
    )


@pytest.mark.parametrize("outcome", [MISSING, MALFORMED, TIMEOUT])
async def test_final_failures_are_not_retried(kind: str, clock: FakeClock, outcome: str) -> None:
    c = open_client(kind, [outcome, OK], retry=RetryPolicy(**NO_JITTER))
    with pytest.raises((ServerError, ProtocolError, DeadlineExceededError)):
        await c.call("server_metadata")
    assert c.script.count == 1
    assert clock.slept == []


async def test_a_connect_timeout_is_retried_within_the_deadline(
    kind: str, clock: FakeClock
) -> None:
    c = open_client(kind, [CONNECT_TIMEOUT, OK], retry=RetryPolicy(**NO_JITTER))
    assert (await c.call("server_metadata")).name == "triton"
    assert c.script.count == 2


async def test_no_policy_no_retry(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [REFUSED, OK])
    with pytest.raises(TransportError):
        await c.call("server_metadata")
    assert c.script.count == 1


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("is_server_ready", ()),
        ("model_metadata", ("m",)),
        ("model_config", ("m",)),
        ("model_statistics", ("m",)),
        ("repository_index", ()),
        ("system_shared_memory_status", ()),
        ("log_settings", ()),
    ],
)
async def test_every_read_is_retried(
    kind: str, clock: FakeClock, method: str, args: tuple[Any, ...]
) -> None:
    c = open_client(kind, [REFUSED, REFUSED], retry=RetryPolicy(attempts=2, **NO_JITTER))
    with pytest.raises(TransportError):
        await c.call(method, *args)
    assert c.script.count == 2


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("load_model", ("m",)),
        ("unload_model", ("m",)),
        ("register_system_shared_memory", ("r", "/key", 64)),
        ("update_log_settings", ({"log_info": True},)),
    ],
)
async def test_writes_are_never_retried(
    kind: str, clock: FakeClock, method: str, args: tuple[Any, ...]
) -> None:
    c = open_client(kind, [REFUSED, OK], retry=RetryPolicy(infer="idempotent", **NO_JITTER))
    with pytest.raises(TransportError):
        await c.call(method, *args)
    assert c.script.count == 1


# -- infer -------------------------------------------------------------------------------------


async def test_infer_is_not_retried_by_default(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [REFUSED, OK], retry=RetryPolicy(**NO_JITTER))
    with pytest.raises(TransportError):
        await c.call("infer", "m", INPUTS)
    assert c.script.count == 1


@pytest.mark.parametrize(
    ("outcomes", "tries", "succeeds"),
    [
        ([REFUSED, CONNECT_TIMEOUT, OK], 3, True),  # never reached the server: sent again
        ([LOST, OK], 1, False),  # may have run: not sent again
        ([BUSY, OK], 1, False),
        ([REFUSED, LOST, OK], 2, False),
    ],
)
async def test_infer_unprocessed_resends_only_what_never_arrived(
    kind: str, clock: FakeClock, outcomes: list[str], tries: int, succeeds: bool
) -> None:
    c = open_client(kind, outcomes, retry=RetryPolicy(infer="unprocessed", **NO_JITTER))
    if succeeds:
        assert (await c.call("infer", "m", INPUTS)).model_name == "m"
    else:
        with pytest.raises((TransportError, ServerError)):
            await c.call("infer", "m", INPUTS)
    assert c.script.count == tries


async def test_infer_idempotent_resends_like_a_read(kind: str, clock: FakeClock) -> None:
    c = open_client(
        kind, [REFUSED, LOST, BUSY, OK], retry=RetryPolicy(attempts=4, infer="idempotent")
    )
    assert (await c.call("infer", "m", INPUTS)).model_name == "m"
    assert c.script.count == 4


async def test_infer_retry_argument_overrides_the_policy(kind: str, clock: FakeClock) -> None:
    # No policy on the client: RetryPolicy()'s settings (3 attempts).
    c = open_client(kind, [LOST, BUSY, LOST, OK])
    with pytest.raises(TransportError):
        await c.call("infer", "m", INPUTS, retry="idempotent")
    assert c.script.count == 3
    # A policy that retries infer, turned off for one call.
    c = open_client(kind, [REFUSED, OK], retry=RetryPolicy(infer="unprocessed"))
    with pytest.raises(TransportError):
        await c.call("infer", "m", INPUTS, retry="never")
    assert c.script.count == 1


async def test_infer_retry_argument_is_checked_before_sending(kind: str, clock: FakeClock) -> None:
    c = open_client(kind, [OK])
    with pytest.raises(InvalidInputError, match="retry must be one of"):
        await c.call("infer", "m", INPUTS, retry=True)
    assert c.script.count == 0


# -- the call's timeout ------------------------------------------------------------------------


async def test_attempts_share_the_calls_timeout(kind: str, clock: FakeClock) -> None:
    # 1 s in all: the first try gets 1 s, the second what the 0.4 s backoff left; the next
    # backoff (0.8 s) would end past the timeout, so the second failure is raised at once.
    policy = RetryPolicy(attempts=5, jitter=False, initial_backoff=0.4, multiplier=2)
    c = open_client(kind, [REFUSED] * 5, retry=policy)
    with pytest.raises(TransportError, match="refused"):
        await c.call("server_metadata", timeout=1.0)
    assert c.script.timeouts == pytest.approx([1.0, 0.6])
    assert clock.slept == pytest.approx([0.4])


async def test_the_clients_timeout_is_shared_too(kind: str, clock: FakeClock) -> None:
    policy = RetryPolicy(attempts=5, jitter=False, initial_backoff=1.0, multiplier=1)
    c = open_client(kind, [LOST] * 5, retry=policy, timeout=2.5)
    with pytest.raises(TransportError):
        await c.call("server_metadata")
    assert c.script.timeouts == pytest.approx([2.5, 1.5, 0.5])


async def test_no_timeout_means_attempts_alone_bound_the_tries(kind: str, clock: FakeClock) -> None:
    policy = RetryPolicy(attempts=3, jitter=False, initial_backoff=100.0, max_backoff=100.0)
    c = open_client(kind, [LOST, LOST, OK], retry=policy, timeout=None)
    await c.call("server_metadata")
    assert c.script.timeouts == [None, None, None]
    assert clock.slept == pytest.approx([100.0, 100.0])


async def test_closing_during_the_backoff_ends_the_call(
    kind: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kserve_v2.client.aio as aio
    import kserve_v2.client.sync as sync

    c = open_client(kind, [LOST, OK], retry=RetryPolicy(**NO_JITTER))

    def sleep_then_close(seconds: float) -> None:
        clock.sleep(seconds)
        if isinstance(c.client, Client):
            c.client.close()
        else:
            c.client._closed = True  # what aclose() does first

    async def async_sleep_then_close(seconds: float) -> None:
        sleep_then_close(seconds)

    monkeypatch.setattr(sync, "sleep", sleep_then_close)
    monkeypatch.setattr(aio, "async_sleep", async_sleep_then_close)
    with pytest.raises(TransportError, match="closed"):
        await c.call("server_metadata")
    assert c.script.count == 1


def test_retry_must_be_a_policy() -> None:
    with pytest.raises(InvalidInputError, match="RetryPolicy"):
        Client("http://server:8000", retry=3)  # type: ignore[arg-type]
