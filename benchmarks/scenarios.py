"""The benchmark scenarios and their targets, shared by ``run.py`` and ``workers.py``.

Kept free of heavy imports: the workers import this module before the one client library they
measure, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "CLIENTS",
    "MIB",
    "SCENARIOS",
    "Scenario",
    "Target",
    "scenario_by_name",
]

MIB = 1 << 20

#: The two clients compared, in the order each round runs them.
CLIENTS = ("kserve-v2", "tritonclient")


@dataclass(frozen=True)
class Target:
    """A goal for the ratio kserve-v2 / tritonclient of one metric: ``ratio <op> bound``."""

    metric: str
    op: str  # "<=" or ">="
    bound: float

    def met(self, ratio: float) -> bool:
        return ratio <= self.bound if self.op == "<=" else ratio >= self.bound

    def __str__(self) -> str:
        return f"{'≤' if self.op == '<=' else '≥'} {self.bound:g}x"


@dataclass(frozen=True)
class Scenario:
    """One workload, run the same way by both clients.

    ``kind``: ``small`` (model ``simple``, two [1,16] INT32 inputs, both outputs binary),
    ``identity`` (model ``identity_fp32``, one [1, tensor_bytes/4] FP32 tensor in and out,
    binary) or ``stream`` (model ``repeat_decoupled``, ``stream_repeat`` responses per request
    over one gRPC stream). ``shared_memory`` (``identity`` only): the input and the output
    travel through two system shared-memory regions registered once per worker instead of
    over the socket. ``concurrency`` > 1 runs that many requests in flight with the
    asyncio clients; 1 runs the synchronous clients one request after the other, unless
    ``asyncio`` (the asyncio clients, one request after the other: ``AsyncClient.stream()``
    against ``tritonclient.grpc.aio``'s ``stream_infer``). ``loop``: the event loop of the
    asyncio clients, ``"asyncio"`` or ``"uvloop"`` (the same for both clients).
    ``requests`` / ``quick_requests``: timed operations per worker (requests, or streamed
    requests for ``stream``), full run / ``--quick``; ``warmup``: untimed ones before them.
    """

    name: str
    protocol: str  # "http" or "grpc"
    kind: str  # "small", "identity" or "stream"
    description: str
    requests: int
    quick_requests: int
    warmup: int
    concurrency: int = 1
    tensor_bytes: int = 0
    stream_repeat: int = 0
    shared_memory: bool = False
    asyncio: bool = False
    loop: str = "asyncio"
    targets: tuple[Target, ...] = ()

    @property
    def is_async(self) -> bool:
        """Whether the asyncio clients run it."""
        return self.concurrency > 1 or self.asyncio

    @property
    def model(self) -> str:
        return {"small": "simple", "identity": "identity_fp32", "stream": "repeat_decoupled"}[
            self.kind
        ]

    @property
    def unit(self) -> str:
        """What one timed unit is: a request, or one streamed response."""
        return "response" if self.kind == "stream" else "request"

    @property
    def large(self) -> bool:
        """Whether transfer rate and memory are the point (large tensors)."""
        return self.kind == "identity" and self.tensor_bytes >= MIB


def _identity(protocol: str, mib: int, targets: tuple[Target, ...] = ()) -> Scenario:
    # Fewer requests for bigger tensors: the server (a Python-backend copy) dominates the wall
    # time, and a few round trips already give a stable client CPU per request.
    requests, quick = {1: (200, 10), 16: (30, 3), 64: (10, 2)}[mib]
    return Scenario(
        name=f"{protocol}-identity-{mib}mib",
        protocol=protocol,
        kind="identity",
        description=f"FP32 identity, {mib} MiB in and out, "
        + ("binary" if protocol == "http" else "raw contents")
        + ", sequential",
        requests=requests,
        quick_requests=quick,
        warmup=2 if mib > 1 else 10,
        tensor_bytes=mib * MIB,
        targets=targets,
    )


def _on_uvloop(scenario: Scenario) -> Scenario:
    """The same asyncio scenario on uvloop (both clients), named ``<name>-uvloop``."""
    return replace(
        scenario,
        name=f"{scenario.name}-uvloop",
        description=f"{scenario.description}, on uvloop",
        loop="uvloop",
    )


def _shm_identity(protocol: str, mib: int) -> Scenario:
    # No targets: the issue asks for the side-by-side numbers only. Without the tensor on the
    # socket a 16 MiB round trip takes ~10 ms, so more requests than _identity's fit.
    return Scenario(
        name=f"{protocol}-shm-{mib}mib",
        protocol=protocol,
        kind="identity",
        description=f"FP32 identity, {mib} MiB in and out through system shared memory, sequential",
        requests=200,
        quick_requests=5,
        warmup=5,
        tensor_bytes=mib * MIB,
        shared_memory=True,
    )


_HTTP_ASYNC_16 = Scenario(
    name="http-async-16",
    protocol="http",
    kind="small",
    description="`simple`, two [1,16] INT32, binary, 16 in flight (asyncio clients)",
    requests=4000,
    quick_requests=200,
    warmup=64,
    concurrency=16,
    targets=(Target("cpu_us", "<=", 0.5),),
)
_GRPC_ASYNC_16 = Scenario(
    name="grpc-async-16",
    protocol="grpc",
    kind="small",
    description="`simple`, two [1,16] INT32, 16 in flight (asyncio clients)",
    requests=4000,
    quick_requests=200,
    warmup=64,
    concurrency=16,
    targets=(Target("cpu_us", "<=", 0.5),),
)
_GRPC_STREAM_ASYNC = Scenario(
    name="grpc-stream-async",
    protocol="grpc",
    kind="stream",
    description="`repeat_decoupled`, 1000 responses per request over one stream "
    "(asyncio clients: `AsyncClient.stream()`, tritonclient.grpc.aio's `stream_infer`)",
    requests=5,
    quick_requests=1,
    warmup=1,
    stream_repeat=1000,
    asyncio=True,
    targets=(Target("units_per_s", ">=", 1.5),),
)


SCENARIOS: tuple[Scenario, ...] = (
    # -- HTTP/REST (issue 3) -------------------------------------------------------------------
    Scenario(
        name="http-small",
        protocol="http",
        kind="small",
        description="`simple`, two [1,16] INT32, binary, sequential (sync clients)",
        requests=2000,
        quick_requests=100,
        warmup=100,
        targets=(Target("cpu_us", "<=", 0.6),),
    ),
    _HTTP_ASYNC_16,
    _on_uvloop(_HTTP_ASYNC_16),
    _identity("http", 1),
    _identity("http", 16),
    _identity("http", 64, (Target("cpu_us", "<=", 0.5), Target("peak_rss_mib", "<=", 0.7))),
    # -- gRPC (issue 4) ------------------------------------------------------------------------
    Scenario(
        name="grpc-small",
        protocol="grpc",
        kind="small",
        description="`simple`, two [1,16] INT32, sequential (sync clients)",
        requests=2000,
        quick_requests=100,
        warmup=100,
        targets=(Target("cpu_us", "<=", 0.8),),
    ),
    _GRPC_ASYNC_16,
    _on_uvloop(_GRPC_ASYNC_16),
    _identity("grpc", 1),
    _identity("grpc", 16),
    _identity("grpc", 64, (Target("cpu_us", "<=", 0.6), Target("peak_rss_mib", "<=", 0.7))),
    Scenario(
        name="grpc-stream",
        protocol="grpc",
        kind="stream",
        description="`repeat_decoupled`, 1000 responses per request over one stream",
        requests=5,
        quick_requests=1,
        warmup=1,
        stream_repeat=1000,
        targets=(Target("units_per_s", ">=", 1.5),),
    ),
    _GRPC_STREAM_ASYNC,
    _on_uvloop(_GRPC_STREAM_ASYNC),
    # -- system shared memory, both protocols ------------------------------------------------
    _shm_identity("http", 16),
    _shm_identity("grpc", 16),
)


def scenario_by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    known = ", ".join(s.name for s in SCENARIOS)
    raise KeyError(f"unknown scenario {name!r} (known: {known})")
