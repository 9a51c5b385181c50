"""Triton's extensions over HTTP: requests without a server, then the live server.

The live tests take ``client``/``connect`` from ``conftest.py`` and so run in each HTTP set-up
(sync and async, stdlib/asyncio and httpx transports), unless a test narrows ``kind``. Model
loading runs on a second server in explicit model-control mode, started once for this module.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kserve_v2 import (
    AsyncClient,
    Client,
    InvalidInputError,
    ProtocolError,
    RepositoryModel,
    RequestedOutput,
    ServerError,
    WireMessage,
)
from kserve_v2.arguments import log_settings_update, normalize_load_request, trace_settings_update
from kserve_v2.client.aio import AsyncGenerateStream
from kserve_v2.client.sync import GenerateStream
from kserve_v2.endpoint import parse_url
from kserve_v2.extensions import Classification, parse_classification
from kserve_v2.interfaces import HTTPRequest, HTTPResponse
from kserve_v2.rest.backend import HTTPBackend
from tests.client.conftest import ASYNC_KINDS, ClientUnderTest, exchanges, joined_body, json_header

Connect = Callable[..., ClientUnderTest]
MODELS_DIR = Path(__file__).resolve().parent.parent / "models"


def protocol(url: str = "http://localhost:8000") -> HTTPBackend:
    return HTTPBackend(parse_url(url))


def body_json(request: HTTPRequest) -> Any:
    return json.loads(b"".join(bytes(part) for part in request.body))


# =============================================================================================
# requests, without a server
# =============================================================================================

# (case, call on an HTTPBackend, method, target, JSON body or None for an empty body)
REQUESTS: list[tuple[str, Callable[[HTTPBackend], Any], str, str, Any]] = [
    ("config", lambda p: p.model_config("m"), "GET", "/v2/models/m/config", None),
    (
        "config of a version",
        lambda p: p.model_config("m", "2"),
        "GET",
        "/v2/models/m/versions/2/config",
        None,
    ),
    ("stats of all", lambda p: p.model_statistics(), "GET", "/v2/models/stats", None),
    ("stats of one", lambda p: p.model_statistics("m"), "GET", "/v2/models/m/stats", None),
    (
        "stats of a version",
        lambda p: p.model_statistics("m", "3"),
        "GET",
        "/v2/models/m/versions/3/stats",
        None,
    ),
    ("index", lambda p: p.repository_index(), "POST", "/v2/repository/index", {}),
    (
        "index of ready models",
        lambda p: p.repository_index(ready_only=True),
        "POST",
        "/v2/repository/index",
        {"ready": True},
    ),
    ("load", lambda p: p.load_model("m"), "POST", "/v2/repository/models/m/load", None),
    (
        "load with config and files",
        lambda p: p.load_model("m", config='{"backend":"python"}', files={"1/model.py": b"\x00"}),
        "POST",
        "/v2/repository/models/m/load",
        {"parameters": {"config": '{"backend":"python"}', "file:1/model.py": "AA=="}},
    ),
    ("unload", lambda p: p.unload_model("m"), "POST", "/v2/repository/models/m/unload", None),
    (
        "unload with dependents",
        lambda p: p.unload_model("m", unload_dependents=True),
        "POST",
        "/v2/repository/models/m/unload",
        {"parameters": {"unload_dependents": True}},
    ),
    (
        "system shm status",
        lambda p: p.system_shared_memory_status(),
        "GET",
        "/v2/systemsharedmemory/status",
        None,
    ),
    (
        "system shm status of a region",
        lambda p: p.system_shared_memory_status("r 1"),
        "GET",
        "/v2/systemsharedmemory/region/r%201/status",
        None,
    ),
    (
        "system shm register",
        lambda p: p.register_system_shared_memory("r", "/key", 64, offset=8),
        "POST",
        "/v2/systemsharedmemory/region/r/register",
        {"key": "/key", "offset": 8, "byte_size": 64},
    ),
    (
        "system shm unregister all",
        lambda p: p.unregister_system_shared_memory(),
        "POST",
        "/v2/systemsharedmemory/unregister",
        None,
    ),
    (
        "system shm unregister one",
        lambda p: p.unregister_system_shared_memory("r"),
        "POST",
        "/v2/systemsharedmemory/region/r/unregister",
        None,
    ),
    (
        "cuda shm status",
        lambda p: p.cuda_shared_memory_status(),
        "GET",
        "/v2/cudasharedmemory/status",
        None,
    ),
    (
        "cuda shm register",
        lambda p: p.register_cuda_shared_memory("g", bytes(range(64)), 1, 4096),
        "POST",
        "/v2/cudasharedmemory/region/g/register",
        {
            "raw_handle": {"b64": base64.b64encode(bytes(range(64))).decode()},
            "device_id": 1,
            "byte_size": 4096,
        },
    ),
    (
        "cuda shm unregister one",
        lambda p: p.unregister_cuda_shared_memory("g"),
        "POST",
        "/v2/cudasharedmemory/region/g/unregister",
        None,
    ),
    ("global trace", lambda p: p.trace_settings(), "GET", "/v2/trace/setting", None),
    ("model trace", lambda p: p.trace_settings("m"), "GET", "/v2/models/m/trace/setting", None),
    (
        "trace update",
        lambda p: p.update_trace_settings({"trace_rate": 5, "trace_level": "TIMESTAMPS"}, "m"),
        "POST",
        "/v2/models/m/trace/setting",
        {"trace_rate": "5", "trace_level": ["TIMESTAMPS"]},
    ),
    ("log", lambda p: p.log_settings(), "GET", "/v2/logging", None),
    (
        "log update",
        lambda p: p.update_log_settings({"log_verbose_level": 1}),
        "POST",
        "/v2/logging",
        {"log_verbose_level": 1},
    ),
    (
        "generate",
        lambda p: p.generate("m", {"text_input": "hi"}, "1"),
        "POST",
        "/v2/models/m/versions/1/generate",
        {"text_input": "hi"},
    ),
    (
        "generate_stream",
        lambda p: p.generate_stream("m", {"text_input": "hi"}),
        "POST",
        "/v2/models/m/generate_stream",
        {"text_input": "hi"},
    ),
]


@pytest.mark.parametrize(
    ("make", "method", "target", "body"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS]
)
def test_extension_requests(
    make: Callable[[HTTPBackend], Any], method: str, target: str, body: Any
) -> None:
    request: HTTPRequest = make(protocol()).request
    assert (request.method, request.target) == (method, target)
    if body is None:
        assert request.content_length == 0
    else:
        assert body_json(request) == body
        assert ("Content-Type", "application/json") in request.headers


def test_cuda_register_body_is_golden() -> None:
    # The exact bytes Triton's REST handler receives; no GPU needed to check them.
    call = protocol().register_cuda_shared_memory("gpu0", b"\x01" * 64, 0, 1024)
    assert b"".join(bytes(p) for p in call.request.body) == (
        b'{"raw_handle":{"b64":"' + base64.b64encode(b"\x01" * 64) + b'"},'
        b'"device_id":0,"byte_size":1024}'
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.register_system_shared_memory("", "/k", 8), "region name"),
        (lambda p: p.register_system_shared_memory("r", "no-slash", 8), "must start with '/'"),
        (lambda p: p.register_system_shared_memory("r", "/k", 0), "byte_size"),
        (lambda p: p.register_system_shared_memory("r", "/k", 8, offset=-1), "offset"),
        (lambda p: p.register_cuda_shared_memory("g", b"short", 0, 8), "64 bytes"),
        (lambda p: p.register_cuda_shared_memory("g", bytes(64), -1, 8), "device_id"),
        (lambda p: p.model_statistics("", "1"), "needs a model"),
        (lambda p: p.unload_model("m", unload_dependents="yes"), "bool"),
        (lambda p: p.generate("m", "text"), "mapping"),
        (lambda p: p.load_model("m", files={"1/model.py": b""}), "need a config"),
        (lambda p: p.update_trace_settings({"trace_rate": 0.5}), "trace_rate"),
        (lambda p: p.update_log_settings({"log_info": None}), "log_info"),
    ],
)
def test_bad_arguments_are_refused_before_sending(
    make: Callable[[HTTPBackend], Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        make(protocol())


def test_load_request_normalisation() -> None:
    assert normalize_load_request(None, None) == (None, {})
    assert normalize_load_request({"a": [1]}, {"file:1/m.py": bytearray(b"x")}) == (
        '{"a":[1]}',
        {"file:1/m.py": b"x"},
    )
    for bad in ("/abs/model.py", "1/../x", "", "1//x", "file:"):
        with pytest.raises(InvalidInputError, match="relative path"):
            normalize_load_request("{}", {bad: b""})
    with pytest.raises(InvalidInputError, match="bytes"):
        normalize_load_request("{}", {"1/m.py": "text"})
    with pytest.raises(InvalidInputError, match="JSON"):
        normalize_load_request({"x": math.nan}, None)


def test_trace_and_log_setting_normalisation() -> None:
    assert trace_settings_update(
        {"trace_rate": 10, "trace_count": None, "trace_level": ("TIMESTAMPS", "TENSORS")}
    ) == {"trace_rate": "10", "trace_count": None, "trace_level": ["TIMESTAMPS", "TENSORS"]}
    with pytest.raises(InvalidInputError):
        trace_settings_update({"trace_rate": True})
    assert log_settings_update({"log_format": "ISO8601"}) == {"log_format": "ISO8601"}


# -- classification strings -------------------------------------------------------------------

# (case, values, rows)
CLASSIFICATIONS: list[tuple[str, Any, list[list[Classification]]]] = [
    (
        "labelled and unlabelled",
        ["8.000000:11", "3.000000:4:horse"],
        [[Classification(8.0, 11), Classification(3.0, 4, "horse")]],
    ),
    ("bytes", np.array([b"0.5:1:dog"], dtype=object), [[Classification(0.5, 1, "dog")]]),
    ("label with colons", ["1:0:a:b"], [[Classification(1.0, 0, "a:b")]]),
    ("empty label", ["1:0:"], [[Classification(1.0, 0, "")]]),
    (
        "batched rows",
        np.array([[b"32:15", b"30:14"], [b"2:1", b"1:0"]], dtype=object),
        [
            [Classification(32.0, 15), Classification(30.0, 14)],
            [Classification(2.0, 1), Classification(1.0, 0)],
        ],
    ),
    ("scalar", "1e-3:7", [[Classification(0.001, 7)]]),
    ("no entries", np.empty((2, 0), dtype=object), [[], []]),
]


@pytest.mark.parametrize(
    ("values", "rows"), [c[1:] for c in CLASSIFICATIONS], ids=[c[0] for c in CLASSIFICATIONS]
)
def test_parse_classification(values: Any, rows: list[list[Classification]]) -> None:
    assert parse_classification(values) == rows


@pytest.mark.parametrize("bad", ["0.5", "x:1", "0.5:one", "0.5:-1", b"\xff:1", 3])
def test_parse_classification_refuses_malformed_entries(bad: Any) -> None:
    with pytest.raises(ProtocolError, match="classification"):
        parse_classification(np.array([bad], dtype=object))


# -- generate_stream over a scripted transport ------------------------------------------------


class ScriptedResponse:
    """A streamed response handing out the given pieces."""

    def __init__(self, status: int, headers: dict[str, str], pieces: list[bytes]) -> None:
        self.status = status
        self.headers = headers
        self.reason = ""
        self.pieces = pieces
        self.handed_out = 0

    def iter_bytes(self) -> Iterator[bytes]:
        for piece in self.pieces:
            self.handed_out += 1
            yield piece

    def read(self) -> bytes:
        return b"".join(self.iter_bytes())

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for piece in self.iter_bytes():
            await asyncio.sleep(0)
            yield piece

    async def aread(self) -> bytes:
        return self.read()


class ScriptedTransport:
    """Sync and async transport whose streams answer with one scripted response."""

    def __init__(self, status: int, pieces: list[bytes], content_type: str) -> None:
        self.response = ScriptedResponse(status, {"content-type": content_type}, pieces)
        self.requests: list[HTTPRequest] = []
        self.released = 0

    @contextmanager
    def stream(self, request: HTTPRequest) -> Iterator[ScriptedResponse]:
        self.requests.append(request)
        try:
            yield self.response
        finally:
            self.released += 1

    @asynccontextmanager
    async def astream(self, request: HTTPRequest) -> AsyncIterator[ScriptedResponse]:
        with self.stream(request) as response:
            yield response

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        raise AssertionError("a stream was expected")

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


SSE = "text/event-stream; charset=utf-8"
EVENT_PIECES = [b'data: {"text_output":"a', b'"}\n\nda', b'ta: {"text_output":" b"}\r\n\r\n']


def scripted(
    status: int, pieces: list[bytes], content_type: str = SSE, **options: Any
) -> tuple[Client, ScriptedTransport]:
    transport = ScriptedTransport(status, pieces, content_type)
    return Client("http://server:8000", transport=transport, **options), transport  # type: ignore[arg-type]


def test_events_are_parsed_across_pieces() -> None:
    client, transport = scripted(200, EVENT_PIECES)
    stream = client.generate_stream("m", {"text_input": "a b"})
    assert isinstance(stream, GenerateStream)
    assert transport.requests == []  # nothing is sent before iteration starts
    assert list(stream) == [{"text_output": "a"}, {"text_output": " b"}]
    assert transport.requests[0].target == "/v2/models/m/generate_stream"
    assert transport.released == 1


def test_early_stop_closes_the_response_without_reading_the_rest() -> None:
    client, transport = scripted(200, [*EVENT_PIECES, b'data: {"x": 1}\n\n'])
    with client.generate_stream("m", {}) as stream:
        assert next(stream) == {"text_output": "a"}
    assert transport.released == 1
    assert transport.response.handed_out == 2


def test_error_event_mid_stream_raises_server_error() -> None:
    pieces = [b'data: {"text_output":"a"}\n\n', b'data: {"error":"model blew up"}\n\n']
    client, _ = scripted(200, pieces)
    stream = client.generate_stream("m", {})
    assert next(stream) == {"text_output": "a"}
    with pytest.raises(ServerError, match="model blew up") as info:
        next(stream)
    assert info.value.http_status == 200


def test_sse_error_event_type_raises_server_error() -> None:
    client, _ = scripted(200, [b"event: error\ndata: overloaded\n\n"])
    with pytest.raises(ServerError, match="overloaded"):
        list(client.generate_stream("m", {}))


def test_stream_cut_in_the_middle_of_an_event_is_a_protocol_error() -> None:
    client, _ = scripted(200, [b'data: {"text_output":"a"}\n\ndata: {"text_'])
    stream = client.generate_stream("m", {})
    assert next(stream) == {"text_output": "a"}
    with pytest.raises(ProtocolError, match="middle of an event"):
        next(stream)


def test_error_before_the_stream_starts_is_a_server_error() -> None:
    client, _ = scripted(400, [b'{"error":"missing input"}'], "application/json")
    with pytest.raises(ServerError, match="missing input") as info:
        list(client.generate_stream("m", {}))
    assert info.value.http_status == 400


def test_event_that_is_not_a_json_object_is_a_protocol_error() -> None:
    client, _ = scripted(200, [b"data: [1, 2]\n\n"])
    with pytest.raises(ProtocolError, match="JSON object"):
        list(client.generate_stream("m", {}))


def test_wire_hook_sees_the_stream() -> None:
    seen: list[WireMessage] = []
    client, _ = scripted(200, EVENT_PIECES, wire_hook=seen.append)
    list(client.generate_stream("m", {"text_input": "a b"}))
    send, receive = seen
    assert (send.direction, receive.direction, receive.status) == ("send", "receive", 200)
    assert b"".join(bytes(p) for p in receive.body) == b"".join(EVENT_PIECES)


def test_stream_holds_its_concurrency_slot_until_it_ends() -> None:
    client, transport = scripted(200, [*EVENT_PIECES, b'data: {"x": 1}\n\n'], max_concurrency=1)
    with client:
        with client.generate_stream("m", {}) as stream:
            assert next(stream) == {"text_output": "a"}
            assert client._limit is not None
            assert not client._limit.acquire(blocking=False)  # the stream holds the only slot
        assert transport.released == 1
        # The slot came back: another call can run.
        assert list(client.generate_stream("m", {}))[-1] == {"x": 1}


async def test_async_stream_over_a_scripted_transport() -> None:
    transport = ScriptedTransport(200, [*EVENT_PIECES, b'data: {"x": 1}\n\n'], SSE)
    async with AsyncClient("http://server:8000", transport=transport, max_concurrency=1) as client:  # type: ignore[arg-type]
        stream = client.generate_stream("m", {})
        assert isinstance(stream, AsyncGenerateStream)
        async with stream:
            assert await stream.__anext__() == {"text_output": "a"}
        assert transport.released == 1
        # The concurrency slot came back: another call can run.
        assert [e async for e in client.generate_stream("m", {})][-1] == {"x": 1}


def test_metrics_default_url_is_the_servers_host_on_port_8002() -> None:
    assert protocol("http://10.1.2.3:8000/base").metrics().request.target == (
        "http://10.1.2.3:8002/metrics"
    )
    assert protocol("https://[::1]:443").metrics().request.target == "http://[::1]:8002/metrics"
    assert protocol().metrics("localhost:9000").request.target == "http://localhost:9000/metrics"
    assert protocol().metrics("https://gw/m?x=1").request.target == "https://gw/m?x=1"
    with pytest.raises(InvalidInputError, match="metrics URL"):
        protocol().metrics("ftp://host/metrics")


def test_metrics_do_not_carry_the_clients_default_headers() -> None:
    proto = HTTPBackend(parse_url("localhost:8000"), headers={"Authorization": "Bearer x"})
    assert proto.metrics().request.headers == []
    assert proto.metrics(headers={"X-A": "1"}).request.headers == [("X-A", "1")]


def test_generate_over_grpc_is_refused() -> None:
    # Refused before any I/O (nothing listens on port 1), and with the native transport (the
    # default) a gRPC client needs neither grpcio nor protobuf for it.
    with Client("grpc://127.0.0.1:1") as client:
        with pytest.raises(InvalidInputError, match="generate is an HTTP-only extension"):
            client.generate("m", {})
        with pytest.raises(InvalidInputError, match="HTTP-only"):
            client.generate_stream("m", {})


# =============================================================================================
# the live server
# =============================================================================================


def drain(
    client: ClientUnderTest, stream: GenerateStream | AsyncGenerateStream, limit: int = 0
) -> list[dict[str, Any]]:
    """The events of a stream (at most ``limit`` when given), closing it at the end."""
    if isinstance(stream, GenerateStream):
        out = []
        with stream:
            for event in stream:
                out.append(event)
                if len(out) == limit:
                    break
        return out
    assert isinstance(stream, AsyncGenerateStream)

    async def run() -> list[dict[str, Any]]:
        out = []
        async with stream:
            async for event in stream:
                out.append(event)
                if len(out) == limit:
                    break
        return out

    return client._loop.run_until_complete(run())  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "extension",
    [
        "model_repository",
        "model_repository(unload_dependents)",
        "model_configuration",
        "statistics",
        "trace",
        "logging",
        "system_shared_memory",
        "cuda_shared_memory",
        "classification",
        "sequence",
        "schedule_policy",
        "binary_tensor_data",
        "parameters",
    ],
)
def test_supports_extension(client: ClientUnderTest, extension: str) -> None:
    assert client.supports_extension(extension) is True


def test_unknown_extension_is_not_supported(client: ClientUnderTest) -> None:
    assert client.supports_extension("teleportation") is False
    assert client.supports_extension("model_repository(teleport)") is False


def test_model_config(client: ClientUnderTest) -> None:
    config = client.model_config("simple")
    assert config["name"] == "simple"
    assert config["max_batch_size"] == 8
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
    assert client.model_config("classify", 1)["output"][0]["label_filename"] == "labels.txt"
    with pytest.raises(ServerError, match="nope") as info:
        client.model_config("nope")
    assert info.value.http_status in (400, 404)
    assert [s.target for s, _ in exchanges(client.seen)][:2] == [
        "/v2/models/simple/config",
        "/v2/models/classify/versions/1/config",
    ]


def test_statistics_count_inferences(client: ClientUnderTest) -> None:
    def stats() -> dict[str, Any]:
        (entry,) = client.model_statistics("identity_int8", "1")["model_stats"]
        return entry

    before = stats()
    for _ in range(3):
        client.infer("identity_int8", {"INPUT0": np.ones((1, 2), np.int8)})
    # Triton records statistics just after sending the response: let the last one land.
    deadline = time.monotonic() + 5
    after = stats()
    while after["inference_count"] < before["inference_count"] + 3:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
        after = stats()
    assert after["inference_count"] == before["inference_count"] + 3
    success = after["inference_stats"]["success"]
    assert success["count"] == before["inference_stats"]["success"]["count"] + 3
    assert success["ns"] > before["inference_stats"]["success"]["ns"]
    assert after["last_inference"] >= before["last_inference"]
    everything = client.model_statistics()["model_stats"]
    assert {"simple", "identity_int8", "classify"} <= {s["name"] for s in everything}
    assert client.model_statistics("identity_int8")["model_stats"][0]["version"] == "1"
    with pytest.raises(ServerError, match="nope"):
        client.model_statistics("nope")


def test_repository_index_of_the_session_server(client: ClientUnderTest) -> None:
    index = client.repository_index()
    assert RepositoryModel("simple", "1", "READY", "") in index
    assert {m.name for m in client.repository_index(ready_only=True)} == {m.name for m in index}
    assert json_header(client.seen[2]) == {"ready": True}


def test_load_is_refused_without_explicit_model_control(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError, match="not allowed"):
        client.load_model("simple")


def test_trace_settings_global_and_per_model(client: ClientUnderTest) -> None:
    glob = client.trace_settings()
    assert glob["trace_level"] == ["OFF"]
    assert set(glob) >= {"trace_rate", "trace_count", "log_frequency", "trace_mode"}
    try:
        updated = client.update_trace_settings({"trace_rate": 250}, "simple")
        assert updated["trace_rate"] == "250"
        assert client.trace_settings("simple")["trace_rate"] == "250"
        assert client.trace_settings("classify")["trace_rate"] == glob["trace_rate"]
        assert client.update_trace_settings({"log_frequency": 7})["log_frequency"] == "7"
    finally:
        reset = client.update_trace_settings({"trace_rate": None}, "simple")
        client.update_trace_settings({"log_frequency": glob["log_frequency"]})
    assert reset["trace_rate"] == glob["trace_rate"]
    assert client.trace_settings() == glob
    with pytest.raises(ServerError, match="trace file"):
        client.update_trace_settings({"trace_file": "/tmp/elsewhere.json"})


def test_log_settings(client: ClientUnderTest) -> None:
    original = client.log_settings()
    assert original["log_verbose_level"] == 0
    assert isinstance(original["log_info"], bool)
    try:
        updated = client.update_log_settings({"log_verbose_level": 1, "log_info": True})
        assert updated["log_verbose_level"] == 1
        assert client.log_settings()["log_verbose_level"] == 1
    finally:
        client.update_log_settings({"log_verbose_level": original["log_verbose_level"]})
    assert client.log_settings() == original
    with pytest.raises(ServerError):
        client.update_log_settings({"log_verbose_level": "loud"})


def test_classification_with_labels(client: ClientUnderTest) -> None:
    scores = np.array([0.1, 0.5, 0.25, 0.0, 3.0, 0, 0, 0, 0, 0, 7.0, 8.0], np.float32)
    result = client.infer(
        "classify", {"INPUT0": scores}, outputs=[RequestedOutput("OUTPUT0", class_count=4)]
    )
    assert result.output("OUTPUT0").datatype == "BYTES"
    (row,) = parse_classification(result.as_numpy("OUTPUT0"))
    # Indices 10 and 11 are past the 10-line label file: no label.
    assert row == [
        Classification(8.0, 11),
        Classification(7.0, 10),
        Classification(3.0, 4, "horse"),
        Classification(0.5, 1, "dog"),
    ]


def test_classification_of_a_batch_in_json_form(client: ClientUnderTest) -> None:
    inputs = {
        "INPUT0": np.array([[1, 9, 3] + [0] * 13, [5, 0, 6] + [0] * 13], np.int32),
        "INPUT1": np.zeros((2, 16), np.int32),
    }
    result = client.infer(
        "simple", inputs, outputs=[RequestedOutput("OUTPUT0", class_count=2, binary=False)]
    )
    rows = parse_classification(result.as_numpy("OUTPUT0"))
    assert [[(c.index, c.score) for c in row] for row in rows] == [
        [(1, 9.0), (2, 3.0)],
        [(2, 6.0), (0, 5.0)],
    ]


@pytest.mark.parametrize(
    ("model", "ids"),
    [
        ("sequence_accumulate", (101, 2**64 - 1)),
        ("sequence_accumulate_string", ("seq-a", "seq-b")),
        ("sequence_accumulate_string", (7, 8)),
    ],
)
def test_interleaved_sequences(client: ClientUnderTest, model: str, ids: tuple[Any, Any]) -> None:
    a, b = ids
    steps = [(a, 1), (b, 10), (a, 2), (b, 20), (a, 3), (b, 30)]
    totals = []
    for i, (sequence_id, value) in enumerate(steps):
        result = client.infer(
            model,
            {"INPUT": np.array([value], np.int32)},
            sequence_id=sequence_id,
            sequence_start=i < 2,
            sequence_end=i >= 4,
        )
        totals.append(int(result.as_numpy("OUTPUT")[0]))
    assert totals == [1, 10, 3, 30, 6, 60]
    first = json_header(client.seen[0])["parameters"]
    assert first == {
        "sequence_id": a,
        "sequence_start": True,
        "sequence_end": False,
        "binary_data_output": True,
    }


def test_sequence_errors_carry_the_servers_message(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError, match="correlation ID"):
        client.infer("sequence_accumulate", {"INPUT": np.array([1], np.int32)})
    with pytest.raises(ServerError, match="START flag"):
        client.infer("sequence_accumulate", {"INPUT": np.array([1], np.int32)}, sequence_id=4242)


def test_priority_and_timeout_reach_the_server(client: ClientUnderTest) -> None:
    result = client.infer("params_echo", {}, priority=1, timeout_us=5_000_000)
    assert json_header(client.seen[0])["parameters"] == {
        "priority": 1,
        "timeout": 5_000_000,
        "binary_data_output": True,
    }
    # Triton took both as its own scheduling parameters: the model sees neither.
    assert json.loads(result.as_numpy("PARAMS")[0]) == {}
    # And it parses them: a value of the wrong type is the server's error, naming the field.
    for name in ("priority", "timeout"):
        with pytest.raises(ServerError, match=f"Unable to parse '{name}'"):
            client.infer("params_echo", {}, parameters={name: "high"}, allow_reserved=True)


def test_generate(client: ClientUnderTest) -> None:
    answer = client.generate("text_echo", {"text_input": "one two three", "id": "42"})
    assert answer == {
        "id": "42",
        "model_name": "text_echo",
        "model_version": "1",
        "text_output": "one two three",
    }
    assert (
        client.generate("text_echo", {"text_input": "a b c", "max_tokens": 2}, version=1)[
            "text_output"
        ]
        == "a b"
    )
    send, _ = exchanges(client.seen)[0]
    assert send.target == "/v2/models/text_echo/generate"
    assert json.loads(joined_body(send)) == {"text_input": "one two three", "id": "42"}


def test_generate_errors(client: ClientUnderTest) -> None:
    # A decoupled model: Triton answers 200 with an error object.
    with pytest.raises(ServerError, match="exactly 1 response"):
        client.generate("text_generate", {"text_input": "a b"})
    with pytest.raises(ServerError, match="text_input") as info:
        client.generate("text_echo", {"wrong": "x"})
    assert info.value.http_status == 400


def test_generate_stream(client: ClientUnderTest) -> None:
    text = "the quick  brown fox"
    events = drain(client, client.generate_stream("text_generate", {"text_input": text}))
    assert [e["text_output"] for e in events] == ["the", " quick", "  brown", " fox"]
    assert all(e["model_name"] == "text_generate" for e in events)
    joined = "".join(e["text_output"] for e in events)
    assert joined == client.generate("text_echo", {"text_input": text})["text_output"]
    send = client.seen[0]
    assert send.target == "/v2/models/text_generate/generate_stream"


def test_generate_stream_stopped_early(client: ClientUnderTest) -> None:
    words = " ".join(f"w{i}" for i in range(200))
    events = drain(client, client.generate_stream("text_generate", {"text_input": words}), 2)
    assert [e["text_output"] for e in events] == ["w0", " w1"]
    # The client stays usable, and so does the model.
    assert client.is_server_ready()
    again = drain(client, client.generate_stream("text_generate", {"text_input": "x y"}))
    assert [e["text_output"] for e in again] == ["x", " y"]


def test_generate_stream_error_event(client: ClientUnderTest) -> None:
    payload = {"IN": [4, 5], "REPEAT": 3, "ERROR_AT": 1}
    seen: list[dict[str, Any]] = []
    stream = client.generate_stream("repeat_decoupled", payload)
    with pytest.raises(ServerError, match="deliberate error") as info:
        seen.extend(drain(client, stream))
    assert info.value.http_status == 200


def test_generate_stream_error_event_after_a_response(client: ClientUnderTest) -> None:
    payload = {"IN": [4, 5], "REPEAT": 3, "ERROR_AT": 1}
    stream = client.generate_stream("repeat_decoupled", payload)
    assert drain(client, stream, 1) == [
        {"IDX": 0, "OUT": [4, 5], "model_name": "repeat_decoupled", "model_version": "1"}
    ]


def test_generate_stream_request_error(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError, match="text_input") as info:
        drain(client, client.generate_stream("text_generate", {"nope": "x"}))
    assert info.value.http_status == 400


def test_generate_stream_delivers_events_as_they_come(client: ClientUnderTest) -> None:
    # Three responses 0.4 s apart: the first must arrive long before the stream ends.
    payload = {"IN": [1], "REPEAT": 3, "DELAY_MS": 400.0}
    started = time.perf_counter()
    stream = client.generate_stream("repeat_decoupled", payload)
    arrivals: list[float] = []

    if isinstance(stream, GenerateStream):
        for _ in stream:
            arrivals.append(time.perf_counter() - started)
    else:

        async def run() -> None:
            async for _ in stream:
                arrivals.append(time.perf_counter() - started)

        client._loop.run_until_complete(run())  # type: ignore[union-attr]
    assert len(arrivals) == 3
    assert arrivals[0] < arrivals[2] - 0.5


def test_metrics(client: ClientUnderTest, triton: Any) -> None:
    def successes() -> float:
        families = client.metrics(triton.metrics_url)
        return families["nv_inference_request_success"].value(model="bytes_reverse", version="1")

    before = successes()
    client.infer("bytes_reverse", {"INPUT0": np.array([b"ab"], dtype=object)})
    deadline = time.monotonic() + 10
    while successes() < before + 1:  # counters are updated when the request completes
        assert time.monotonic() < deadline, "the success counter did not move"
        time.sleep(0.05)
    families = client.metrics(triton.metrics_url)
    assert families["nv_inference_request_success"].type == "counter"
    assert families["nv_cpu_utilization"].type == "gauge"
    assert families["nv_inference_count"].help


def test_metrics_of_a_server_without_metrics_is_a_transport_error(
    client: ClientUnderTest, triton: Any
) -> None:
    from kserve_v2 import TransportError

    with pytest.raises(TransportError):
        client.metrics(f"http://127.0.0.1:{_closed_port()}/metrics", timeout=5)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- model control on a server in explicit mode --------------------------------------------------

IDENTITY_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
}
ENSEMBLE_CONFIG = {
    "platform": "ensemble",
    "max_batch_size": 0,
    "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
    "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1, -1]}],
    "ensemble_scheduling": {
        "step": [
            {
                "model_name": "identity_fp32",
                "model_version": -1,
                "input_map": {"INPUT0": "X"},
                "output_map": {"OUTPUT0": "Y"},
            }
        ]
    },
}
EXPLICIT_KINDS = ["sync-stdlib", ASYNC_KINDS[0]]


@pytest.fixture(scope="module")
def explicit_triton(triton_factory: Any) -> Any:
    """A server in explicit model-control mode with only ``simple`` loaded at start."""
    server = triton_factory.start(model_control_mode="explicit", load_models=["simple"])
    yield server
    server.stop()


def wait_ready(client: ClientUnderTest, model: str, ready: bool = True) -> None:
    deadline = time.monotonic() + 30
    while client.is_model_ready(model) is not ready:
        assert time.monotonic() < deadline, f"{model} ready={not ready} after 30 s"
        time.sleep(0.1)


def index_entry(client: ClientUnderTest, model: str) -> RepositoryModel:
    return next(m for m in client.repository_index() if m.name == model)


@pytest.mark.parametrize("kind", EXPLICIT_KINDS)
def test_load_and_unload(connect: Connect, explicit_triton: Any) -> None:
    client = connect(explicit_triton.http_url)
    assert client.repository_index(ready_only=True) == [RepositoryModel("simple", "1", "READY")]
    assert "identity_int8" in {m.name for m in client.repository_index()}
    client.load_model("identity_int8")
    assert client.is_model_ready("identity_int8")
    client.unload_model("identity_int8")
    # Unloading finishes in the background: the index says UNLOADING for a while.
    deadline = time.monotonic() + 30
    while (entry := index_entry(client, "identity_int8")).state != "UNAVAILABLE":
        assert entry.state == "UNLOADING"
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert entry.reason == "unloaded"
    assert not client.is_model_ready("identity_int8")
    with pytest.raises(ServerError, match="failed to load 'no_such_model'"):
        client.load_model("no_such_model")


@pytest.mark.parametrize("kind", EXPLICIT_KINDS)
def test_load_with_a_config_override(connect: Connect, explicit_triton: Any) -> None:
    client = connect(explicit_triton.http_url)
    config = client.model_config("simple")
    try:
        client.load_model("simple", config={**config, "max_batch_size": 2})
        assert client.model_config("simple")["max_batch_size"] == 2
        with pytest.raises(ServerError, match="batch"):
            client.infer(
                "simple",
                {"INPUT0": np.zeros((4, 16), np.int32), "INPUT1": np.zeros((4, 16), np.int32)},
            )
    finally:
        client.load_model("simple", config=json.dumps(config))
    assert client.model_config("simple")["max_batch_size"] == 8
    with pytest.raises(ServerError, match="simple"):
        client.load_model("simple", config="{not json")


@pytest.mark.parametrize("kind", EXPLICIT_KINDS)
def test_load_from_files_in_the_request(connect: Connect, explicit_triton: Any) -> None:
    client = connect(explicit_triton.http_url, record=True)
    code = (MODELS_DIR / "identity_fp32" / "1" / "model.py").read_bytes()
    name = f"uploaded_{client.kind.replace('-', '_')}"
    client.load_model(name, config={**IDENTITY_CONFIG, "name": name}, files={"1/model.py": code})
    try:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(client.infer(name, {"INPUT0": x}).as_numpy("OUTPUT0"), x)
        body = json.loads(joined_body(client.seen[0]))
        assert base64.b64decode(body["parameters"]["file:1/model.py"]) == code
        assert json.loads(body["parameters"]["config"])["name"] == name
    finally:
        client.unload_model(name)
    wait_ready(client, name, False)


@pytest.mark.parametrize("kind", EXPLICIT_KINDS)
@pytest.mark.parametrize("dependents", [False, True])
def test_unload_dependents(connect: Connect, explicit_triton: Any, dependents: bool) -> None:
    client = connect(explicit_triton.http_url)
    # An ensemble made from files in the request: its version directory must exist.
    client.load_model("ens", config=ENSEMBLE_CONFIG, files={"1/.keep": b""})
    try:
        assert client.is_model_ready("identity_fp32")  # loaded along with the ensemble
        x = np.ones((1, 2), np.float32)
        np.testing.assert_array_equal(client.infer("ens", {"X": x}).as_numpy("Y"), x)
        client.unload_model("ens", unload_dependents=dependents)
        wait_ready(client, "ens", False)
        if dependents:
            wait_ready(client, "identity_fp32", False)
        else:
            time.sleep(0.5)
            assert client.is_model_ready("identity_fp32")
    finally:
        client.unload_model("identity_fp32")
        wait_ready(client, "identity_fp32", False)


def test_metrics_of_a_grpc_client(triton: Any) -> None:
    # A gRPC client has no HTTP connection to reuse: it fetches over a one-off transport.
    with Client(f"grpc://{triton.grpc_url}") as client:
        families = client.metrics(triton.metrics_url)
    assert families["nv_inference_count"].type == "counter"


async def test_metrics_of_an_async_grpc_client(triton: Any) -> None:
    async with AsyncClient(f"grpc://{triton.grpc_url}") as client:
        families = await client.metrics(triton.metrics_url)
        with pytest.raises(InvalidInputError, match="HTTP-only"):
            await client.generate("text_echo", {"text_input": "x"})
    assert families["nv_inference_count"].type == "counter"


# =============================================================================================
# query parameters on every call, live
# =============================================================================================

#: What every call below adds to its URL, and how it must look on the request line.
QUERY = {"probe": "q 1", "flag": True}
QUERY_STRING = "?probe=q+1&flag=true"


def test_every_method_puts_the_query_on_the_wire(client: ClientUnderTest, triton: Any) -> None:
    """Triton ignores query parameters it does not know, so each call is answered as usual;
    the wire hook shows the query string on every request line."""
    from kserve_v2.shm import SystemSharedMemoryRegion

    q = {"query": QUERY}
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    assert client.is_server_live(**q)
    assert client.is_server_ready(**q)
    assert client.is_model_ready("identity_fp32", **q)
    assert client.server_metadata(**q).name == "triton"
    assert client.model_metadata("identity_fp32", **q).name == "identity_fp32"
    assert client.supports_extension("statistics", **q)
    result = client.infer("identity_fp32", {"INPUT0": x}, **q)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
    assert client.model_config("identity_fp32", **q)["name"] == "identity_fp32"
    assert client.model_statistics("identity_fp32", **q)["model_stats"]
    assert client.repository_index(**q)
    with pytest.raises(ServerError):  # the session server is not in explicit mode
        client.load_model("no_such_model", **q)
    with pytest.raises(ServerError):
        client.unload_model("no_such_model", **q)
    with SystemSharedMemoryRegion.create(f"q-{client.kind}", 4096) as region:
        client.register_region(region, **q)
        assert client.system_shared_memory_status(region.name, **q)[0]["name"] == region.name
        client.unregister_region(region, **q)
        client.register_system_shared_memory("q-raw", region.key, 64, **q)
        client.unregister_system_shared_memory("q-raw", **q)
    with pytest.raises(ServerError):  # no CUDA in the test server
        client.register_cuda_shared_memory("q-gpu", bytes(64), 0, 64, **q)
    client.cuda_shared_memory_status(**q)
    client.unregister_cuda_shared_memory("q-none", **q)
    trace = client.trace_settings("identity_fp32", **q)
    client.update_trace_settings({"log_frequency": trace["log_frequency"]}, **q)
    log = client.log_settings(**q)
    client.update_log_settings({"log_verbose_level": log["log_verbose_level"]}, **q)
    assert client.generate("text_echo", {"text_input": "a b"}, **q)["text_output"] == "a b"
    events = drain(client, client.generate_stream("text_generate", {"text_input": "a b"}, **q))
    assert [e["text_output"] for e in events] == ["a", " b"]
    assert client.metrics(triton.metrics_url, **q)
    targets = [send.target for send, _ in exchanges(client.seen)]
    assert len(targets) >= 26
    assert all(target.endswith(QUERY_STRING) for target in targets), targets
