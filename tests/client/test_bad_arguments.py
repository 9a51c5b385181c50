"""Every bad argument of every public client method is refused before anything is sent, alike
on both protocols and in both clients.

The checks live once, in :mod:`kserve_v2.arguments`; this table holds the two backends (and
the clients above them) to them. Each client runs over I/O that fails the test if it is used
at all: over HTTP a :class:`~kserve_v2.interfaces.Transport` passed as ``transport=``, over
gRPC a unary channel put where the client's channel goes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from kserve_v2 import AsyncClient, Client, InvalidInputError
from kserve_v2.endpoint import parse_url
from kserve_v2.grpc.config import channel_config
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.shm import SystemSharedMemoryRegion

CLIENT_KINDS = ("http-sync", "http-async", "grpc-sync", "grpc-async")


class Sent(AssertionError):
    """Raised by the I/O fakes: something was sent although an argument was bad."""


class FailingTransport:
    """A sync and async HTTP transport that fails the test when a request reaches it."""

    def __init__(self) -> None:
        self.requests: list[HTTPRequest] = []

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        self.requests.append(request)
        raise Sent(f"{request.method} {request.target} was sent")

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        return self.handle_request(request)

    def stream(self, request: HTTPRequest) -> Any:
        return self.handle_request(request)

    def astream(self, request: HTTPRequest) -> Any:
        return self.handle_request(request)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class FailingChannel:
    """A sync gRPC channel (unary calls and streams) that fails the test when used."""

    config = channel_config(parse_url("grpc://127.0.0.1:1"))

    def __init__(self) -> None:
        self.calls: list[str] = []

    def call_unary(self, method: str, request: Any, **options: Any) -> Any:
        self.calls.append(method)
        raise Sent(f"{method} was called")

    def open_stream(self, method: str, **options: Any) -> Any:
        return self.call_unary(method, b"")

    def close(self) -> None:
        pass


class FailingAsyncChannel(FailingChannel):
    async def call_unary(self, method: str, request: Any, **options: Any) -> Any:  # type: ignore[override]
        return FailingChannel.call_unary(self, method, request)

    async def aclose(self) -> None:
        pass


class Case(NamedTuple):
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    protocols: tuple[str, ...] = ("http", "grpc")


REGION = object()  # stands for the SystemSharedMemoryRegion fixture in the table below

# A valid call of every public method; the bad arguments below are applied to these.
VALID: dict[str, tuple[tuple[Any, ...], tuple[str, ...]]] = {
    "is_server_live": ((), ("http", "grpc")),
    "is_server_ready": ((), ("http", "grpc")),
    "is_model_ready": (("m",), ("http", "grpc")),
    "server_metadata": ((), ("http", "grpc")),
    "model_metadata": (("m",), ("http", "grpc")),
    "supports_extension": (("sequence",), ("http", "grpc")),
    "infer": (("m", {"x": [1]}), ("http", "grpc")),
    "model_config": (("m",), ("http", "grpc")),
    "model_statistics": ((), ("http", "grpc")),
    "repository_index": ((), ("http", "grpc")),
    "load_model": (("m",), ("http", "grpc")),
    "unload_model": (("m",), ("http", "grpc")),
    "system_shared_memory_status": ((), ("http", "grpc")),
    "register_system_shared_memory": (("r", "/k", 64), ("http", "grpc")),
    "unregister_system_shared_memory": ((), ("http", "grpc")),
    "cuda_shared_memory_status": ((), ("http", "grpc")),
    "register_cuda_shared_memory": (("r", bytes(64), 0, 64), ("http", "grpc")),
    "unregister_cuda_shared_memory": ((), ("http", "grpc")),
    "register_region": ((REGION,), ("http", "grpc")),
    "unregister_region": ((REGION,), ("http", "grpc")),
    "trace_settings": ((), ("http", "grpc")),
    "update_trace_settings": (({"trace_rate": 1},), ("http", "grpc")),
    "log_settings": ((), ("http", "grpc")),
    "update_log_settings": (({"log_info": True},), ("http", "grpc")),
    "generate": (("m", {"text_input": "x"}), ("http",)),
    "generate_stream": (("m", {"text_input": "x"}), ("http",)),
    "metrics": ((), ("http", "grpc")),
    "stream": ((), ("grpc",)),
}

# Bad per-call options: every method takes them.
BAD_OPTIONS: list[dict[str, Any]] = [
    {"timeout": 0},
    {"timeout": -1.5},
    {"timeout": True},
    {"timeout": "1"},
    {"timeout": float("nan")},
    {"headers": 5},
    {"headers": "x-a: b"},
    {"headers": [("x-a",)]},
    {"headers": {"x-a": 1}},
    {"headers": {1: "b"}},
]

# Bad arguments of particular methods: (method, args replacing the valid ones or None to keep
# them, extra keyword arguments).
BAD_ARGUMENTS: list[tuple[str, tuple[Any, ...] | None, dict[str, Any]]] = [
    # model names and versions
    *[
        (method, (model, *rest), {})
        for method, rest in (
            ("is_model_ready", ()),
            ("model_metadata", ()),
            ("model_config", ()),
            ("load_model", ()),
            ("unload_model", ()),
            ("infer", ({"x": [1]},)),
            ("generate", ({},)),
            ("generate_stream", ({},)),
        )
        for model in ("", 5, None)
    ],
    *[
        (method, None, {"version": version})
        for method in (
            "is_model_ready",
            "model_metadata",
            "model_config",
            "infer",
            "generate",
            "generate_stream",
        )
        for version in (1.5, -1, True, None, ["1"])
    ],
    ("model_statistics", ("m",), {"version": 1.5}),
    ("model_statistics", (), {"version": "1"}),  # a version without a model
    ("model_statistics", (), {"version": 1}),
    ("model_statistics", (5,), {}),
    ("trace_settings", (5,), {}),
    ("update_trace_settings", ({"trace_rate": 1}, None), {}),
    # model repository
    ("repository_index", None, {"ready_only": "yes"}),
    ("repository_index", None, {"ready_only": 1}),
    ("repository_index", None, {"ready_only": None}),
    ("unload_model", None, {"unload_dependents": "yes"}),
    ("unload_model", None, {"unload_dependents": 1}),
    ("load_model", None, {"config": 5}),
    ("load_model", None, {"files": {"1/model.py": b"x"}}),  # files need a config
    ("load_model", None, {"config": "{}", "files": {"../model.py": b"x"}}),
    ("load_model", None, {"config": "{}", "files": {"1/model.py": "text"}}),
    # shared memory
    ("register_system_shared_memory", ("", "/k", 64), {}),
    ("register_system_shared_memory", (5, "/k", 64), {}),
    ("register_system_shared_memory", ("r", "k", 64), {}),
    ("register_system_shared_memory", ("r", 5, 64), {}),
    ("register_system_shared_memory", ("r", "/k", -1), {}),
    ("register_system_shared_memory", ("r", "/k", 0), {}),
    ("register_system_shared_memory", ("r", "/k", "64"), {}),
    ("register_system_shared_memory", ("r", "/k", 6.4), {}),
    ("register_system_shared_memory", ("r", "/k", True), {}),
    ("register_system_shared_memory", None, {"offset": -1}),
    ("register_system_shared_memory", None, {"offset": 1.5}),
    ("register_system_shared_memory", None, {"offset": True}),
    ("register_cuda_shared_memory", ("", bytes(64), 0, 64), {}),
    ("register_cuda_shared_memory", ("r", bytes(63), 0, 64), {}),
    ("register_cuda_shared_memory", ("r", "handle", 0, 64), {}),
    ("register_cuda_shared_memory", ("r", bytes(64), -1, 64), {}),
    ("register_cuda_shared_memory", ("r", bytes(64), "0", 64), {}),
    ("register_cuda_shared_memory", ("r", bytes(64), 0, -1), {}),
    ("register_cuda_shared_memory", ("r", bytes(64), 0, 1.5), {}),
    *[
        (method, (region,), {})
        for method in (
            "system_shared_memory_status",
            "unregister_system_shared_memory",
            "cuda_shared_memory_status",
            "unregister_cuda_shared_memory",
        )
        for region in (5, None, b"r")
    ],
    ("register_region", (object(),), {}),
    ("unregister_region", ("r",), {}),
    # settings
    ("update_trace_settings", (5,), {}),
    ("update_trace_settings", ([("trace_rate", "1")],), {}),
    ("update_trace_settings", ({"trace_rate": 1.5},), {}),
    ("update_trace_settings", ({"trace_rate": True},), {}),
    ("update_trace_settings", ({"": "1"},), {}),
    ("update_log_settings", (5,), {}),
    ("update_log_settings", ({"log_verbose_level": -1},), {}),
    ("update_log_settings", ({"log_verbose_level": 2**32},), {}),
    ("update_log_settings", ({"log_info": None},), {}),
    # infer
    ("infer", ("m", 5), {}),
    ("infer", ("m", [5]), {}),
    ("infer", None, {"outputs": [5]}),
    ("infer", None, {"request_id": 5}),
    ("infer", None, {"parameters": 5}),
    ("infer", None, {"parameters": {"sequence_id": 1}}),  # reserved
    ("infer", None, {"allow_reserved": "yes"}),
    ("infer", None, {"priority": -1}),
    ("infer", None, {"priority": True}),
    ("infer", None, {"priority": "1"}),
    ("infer", None, {"priority": 2**64}),
    ("infer", None, {"timeout_us": -1}),
    ("infer", None, {"timeout_us": 1.5}),
    ("infer", None, {"sequence_id": True}),
    ("infer", None, {"sequence_id": -1}),
    ("infer", None, {"sequence_id": 1.5}),
    ("infer", None, {"sequence_start": True}),  # without a sequence_id
    ("infer", None, {"sequence_end": True}),
    ("infer", None, {"sequence_id": 1, "sequence_start": "yes"}),
    ("infer", None, {"sequence_id": 1, "sequence_end": 1}),
    ("infer", None, {"compression": "br"}),
    ("infer", None, {"compression": ""}),
    ("infer", None, {"compression": "GZIP"}),
    ("infer", None, {"binary": "yes"}),
    ("infer", None, {"query": 5}),
    ("infer", None, {"query": [("a",)]}),
    # HTTP-only extensions
    ("generate", ("m", 5), {}),
    ("generate_stream", ("m", [1]), {}),
    ("metrics", ("ftp://host/metrics",), {}),
    ("metrics", (5,), {}),
    # streams
    ("stream", None, {"compression": "br"}),
]


def _cases() -> list[Any]:
    cases = []
    for method, (args, protocols) in VALID.items():
        cases += [Case(method, args, bad, protocols) for bad in BAD_OPTIONS]
    for method, args, kwargs in BAD_ARGUMENTS:
        valid_args, protocols = VALID[method]
        cases.append(Case(method, valid_args if args is None else args, kwargs, protocols))
    return [
        pytest.param(kind, case, id=f"{kind}-{case.method}-{case.args}-{case.kwargs}")
        for case in cases
        for kind in CLIENT_KINDS
        if kind.split("-")[0] in case.protocols
    ]


@pytest.fixture(scope="module")
def region() -> Iterator[SystemSharedMemoryRegion]:
    with SystemSharedMemoryRegion.create("bad_arguments", 64) as region:
        yield region


async def open_client(kind: str) -> tuple[Client | AsyncClient, FailingTransport | FailingChannel]:
    io: FailingTransport | FailingChannel
    if kind.startswith("http"):
        io = FailingTransport()
        cls = Client if kind == "http-sync" else AsyncClient
        return cls("http://127.0.0.1:1", transport=io), io  # type: ignore[arg-type]
    if kind == "grpc-sync":
        client = Client("grpc://127.0.0.1:1")
        client._io.close()
        io = FailingChannel()
    else:
        aclient = AsyncClient("grpc://127.0.0.1:1")
        await aclient._io.aclose()
        io, client = FailingAsyncChannel(), aclient  # type: ignore[assignment]
    client._io = io  # type: ignore[assignment]
    return client, io


async def call(
    client: Client | AsyncClient, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``client.method(*args, **kwargs)``, awaited when the method is a coroutine."""
    result = getattr(client, method)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


@pytest.mark.parametrize(("kind", "case"), _cases())
async def test_bad_argument_is_refused_before_anything_is_sent(
    kind: str, case: Case, region: SystemSharedMemoryRegion
) -> None:
    client, io = await open_client(kind)
    args = tuple(region if arg is REGION else arg for arg in case.args)
    try:
        with pytest.raises(InvalidInputError):
            await call(client, case.method, args, case.kwargs)
    finally:
        if isinstance(client, AsyncClient):
            await client.aclose()
        else:
            client.close()
    assert (io.requests if isinstance(io, FailingTransport) else io.calls) == []


def test_every_public_method_is_in_the_table() -> None:
    for cls in (Client, AsyncClient):
        public = {
            name
            for name, member in vars(cls).items()
            if not name.startswith("_") and callable(member)
        }
        assert public - {"close", "aclose"} == set(VALID), cls
