"""The contract: :class:`MetadataProbe` (what it keeps, what it asks again, who asks), and
the per-call keywords every backend takes (``query``)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kserve_v2.backend import Backend, MetadataProbe
from kserve_v2.endpoint import parse_url
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.hooks import WireHook
from kserve_v2.messages import InferRequest, ServerMetadata
from kserve_v2.tensors import InferInput

METADATA = ServerMetadata(name="srv", version="1", extensions=("parameters",))


class ScriptedCall:
    """A metadata call that answers with each of ``answers`` in turn (an error is raised)."""

    def __init__(self, answers: list[ServerMetadata | KServeError]) -> None:
        self.answers = answers
        self.runs = 0

    def _next(self) -> ServerMetadata:
        answer = self.answers[min(self.runs, len(self.answers) - 1)]
        self.runs += 1
        if isinstance(answer, KServeError):
            raise answer
        return answer

    def run(self, io: Any, hook: WireHook | None, /) -> ServerMetadata:
        return self._next()

    async def arun(self, io: Any, hook: WireHook | None, /) -> ServerMetadata:
        await asyncio.sleep(0)  # others may queue meanwhile
        return self._next()


@pytest.mark.parametrize(
    ("error", "kept"),
    [
        (ServerError("not found", http_status=404), True),
        (ServerError("forbidden", http_status=403), True),
        (ServerError("no such method", grpc_code="UNIMPLEMENTED"), True),
        (ProtocolError("not JSON"), True),
        (ServerError("starting", http_status=503), False),
        (ServerError("busy", http_status=429), False),
        (ServerError("down", grpc_code="UNAVAILABLE"), False),
        (TransportError("connection refused"), False),
        (DeadlineExceededError("timed out"), False),
    ],
)
def test_an_error_answer_is_kept_unless_it_may_pass(error: KServeError, kept: bool) -> None:
    probe = MetadataProbe()
    call = ScriptedCall([error, METADATA])
    assert probe.get(lambda: call, None, None) is None
    assert probe.known is kept
    assert probe.get(lambda: call, None, None) is (None if kept else METADATA)
    assert call.runs == (1 if kept else 2)
    assert probe.known


def test_the_metadata_is_asked_once() -> None:
    probe = MetadataProbe()
    call = ScriptedCall([METADATA])
    for _ in range(3):
        assert probe.get(lambda: call, None, None) is METADATA
    assert call.runs == 1


def test_metadata_the_user_asked_for_is_remembered_unless_known() -> None:
    probe = MetadataProbe()
    assert probe.remember(METADATA) is METADATA
    call = ScriptedCall([ServerMetadata("other", "2")])
    assert probe.get(lambda: call, None, None) is METADATA
    assert call.runs == 0
    assert probe.remember(ServerMetadata("other", "2")) == ServerMetadata("other", "2")
    assert probe.metadata is METADATA  # what decisions were made on stays


def test_a_bad_argument_is_raised() -> None:
    probe = MetadataProbe()
    with pytest.raises(InvalidInputError):
        probe.get(lambda: ScriptedCall([InvalidInputError("bad header")]), None, None)
    assert not probe.known


@pytest.mark.parametrize("first", [METADATA, TransportError("refused")])
def test_tasks_that_waited_do_not_ask_again(first: ServerMetadata | KServeError) -> None:
    probe = MetadataProbe()
    call = ScriptedCall([first, METADATA])

    async def run() -> list[ServerMetadata | None]:
        return list(await asyncio.gather(*(probe.aget(lambda: call, None, None) for _ in range(5))))

    answers = asyncio.run(run())
    assert call.runs == 1
    assert answers == [first if isinstance(first, ServerMetadata) else None] * 5
    assert asyncio.run(probe.aget(lambda: call, None, None)) is METADATA  # the next need asks


# -- query parameters: every call of the contract takes them ------------------------------------

#: One call of each contract method, with arguments valid for both backends; the keywords
#: ``headers``, ``query`` and ``timeout`` are added by the tests.
CONTRACT_CALLS: dict[str, Callable[..., Any]] = {
    "server_live": lambda b, **kw: b.server_live(**kw),
    "server_ready": lambda b, **kw: b.server_ready(**kw),
    "model_ready": lambda b, **kw: b.model_ready("m", "1", **kw),
    "server_metadata": lambda b, **kw: b.server_metadata(**kw),
    "model_metadata": lambda b, **kw: b.model_metadata("m", **kw),
    "infer": lambda b, **kw: b.infer(
        InferRequest("m", (InferInput("x", np.ones(2, np.int32)),)), binary=False, **kw
    ),
    "model_config": lambda b, **kw: b.model_config("m", **kw),
    "model_statistics": lambda b, **kw: b.model_statistics("m", **kw),
    "repository_index": lambda b, **kw: b.repository_index(ready_only=True, **kw),
    "load_model": lambda b, **kw: b.load_model("m", config="{}", **kw),
    "unload_model": lambda b, **kw: b.unload_model("m", **kw),
    "system_shared_memory_status": lambda b, **kw: b.system_shared_memory_status("r", **kw),
    "register_system_shared_memory": lambda b, **kw: b.register_system_shared_memory(
        "r", "/k", 64, **kw
    ),
    "unregister_system_shared_memory": lambda b, **kw: b.unregister_system_shared_memory(**kw),
    "cuda_shared_memory_status": lambda b, **kw: b.cuda_shared_memory_status(**kw),
    "register_cuda_shared_memory": lambda b, **kw: b.register_cuda_shared_memory(
        "g", bytes(64), 0, 64, **kw
    ),
    "unregister_cuda_shared_memory": lambda b, **kw: b.unregister_cuda_shared_memory("g", **kw),
    "trace_settings": lambda b, **kw: b.trace_settings("m", **kw),
    "update_trace_settings": lambda b, **kw: b.update_trace_settings({"trace_rate": 2}, **kw),
    "log_settings": lambda b, **kw: b.log_settings(**kw),
    "update_log_settings": lambda b, **kw: b.update_log_settings({"log_info": True}, **kw),
}
#: The HTTP backend's own calls (HTTP-only extensions), beyond the contract.
HTTP_ONLY_CALLS: dict[str, Callable[..., Any]] = {
    "generate": lambda b, **kw: b.generate("m", {"text_input": "hi"}, **kw),
    "generate_stream": lambda b, **kw: b.generate_stream("m", {"text_input": "hi"}, **kw),
    "metrics": lambda b, **kw: b.metrics(**kw),
}
QUERY = {"tag": "a b&c", "flag": True}


# infer()'s shortcut for the plain call, which has no query (None where a backend has none;
# tests/grpc/test_backend.py checks that the gRPC one sends what infer() would).
SHORTCUTS = {"infer_arrays"}


def test_the_table_covers_the_contract() -> None:
    methods = {
        name
        for name, member in vars(Backend).items()
        if callable(member) and not name.startswith("_")
    }
    assert methods == set(CONTRACT_CALLS) | SHORTCUTS
    methods -= SHORTCUTS
    for name in methods:
        assert "query" in inspect.signature(getattr(Backend, name)).parameters, name


def http_backend() -> Any:
    from kserve_v2.rest.backend import HTTPBackend

    return HTTPBackend(parse_url("http://gw:8000/base"))


def grpc_backend() -> Any:
    pytest.importorskip("google.protobuf")
    from kserve_v2.grpc.backend import GRPCBackend

    return GRPCBackend(parse_url("grpc://gw:8001"))


@pytest.mark.parametrize("name", [*CONTRACT_CALLS, *HTTP_ONLY_CALLS])
def test_http_calls_put_the_query_on_the_target(name: str) -> None:
    make = {**CONTRACT_CALLS, **HTTP_ONLY_CALLS}[name]
    backend = http_backend()
    plain = make(backend, headers={"x": "1"}, timeout=5).request.target
    assert "?" not in plain
    target = make(backend, headers={"x": "1"}, query=QUERY, timeout=5).request.target
    assert target == f"{plain}?tag=a+b%26c&flag=true"
    with pytest.raises(InvalidInputError, match="query"):
        make(backend, query=5)


def test_metrics_query_follows_the_query_of_its_url() -> None:
    call = http_backend().metrics("http://m:9/metrics?a=1", query=[("b", "2")])
    assert call.request.target == "http://m:9/metrics?a=1&b=2"


@pytest.mark.parametrize("name", CONTRACT_CALLS)
def test_grpc_calls_refuse_a_query(name: str) -> None:
    make = CONTRACT_CALLS[name]
    backend = grpc_backend()
    make(backend, headers={"x": "1"}, query=None, timeout=5)  # None is the default, fine
    with pytest.raises(InvalidInputError, match="HTTP only") as info:
        make(backend, query={"a": "b"})
    assert info.value.value == {"a": "b"}
    assert isinstance(info.value, ValueError)
