"""The HTTP requests the client builds, without a server: targets, headers, timeouts."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from typing import Any

import numpy as np
import pytest

from kserve_v2 import (
    AsyncClient,
    Client,
    DeadlineExceededError,
    InferInput,
    InferRequest,
    InferResult,
    InvalidInputError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.endpoint import parse_url
from kserve_v2.rest import codec
from kserve_v2.rest.backend import HTTPBackend, HTTPCall
from kserve_v2.transport import HTTPRequest, HTTPResponse


def protocol(url: str, **options: object) -> HTTPBackend:
    return HTTPBackend(parse_url(url), **options)  # type: ignore[arg-type]


def plain(call: object) -> HTTPCall[InferResult]:
    """An inference call that is one plain exchange (JSON, or a server known to take binary)."""
    assert isinstance(call, HTTPCall)
    return call


def simple_request(version: str = "") -> InferRequest:
    tensor = InferInput("INPUT0", np.zeros((1, 16), dtype=np.int32))
    return InferRequest("simple", (tensor,), model_version=version)


@pytest.mark.parametrize(
    ("url", "prefix"),
    [
        ("http://gw:8000", ""),
        ("http://gw:8000/", ""),
        ("http://gw:8000/serving/ns/model", "/serving/ns/model"),
        ("http://gw:8000/serving/ns/model/", "/serving/ns/model"),
        ("https://gw/my%20gateway", "/my%20gateway"),  # encoded once, not "%2520"
    ],
)
def test_base_path_prefixes_every_target(url: str, prefix: str) -> None:
    http = protocol(url)
    assert [
        http.server_live().request.target,
        http.server_ready().request.target,
        http.server_metadata().request.target,
        http.model_ready("simple", "1").request.target,
        http.model_metadata("simple").request.target,
        plain(http.infer(simple_request("1"), binary=False)).request.target,
    ] == [
        f"{prefix}/v2/health/live",
        f"{prefix}/v2/health/ready",
        f"{prefix}/v2",
        f"{prefix}/v2/models/simple/versions/1/ready",
        f"{prefix}/v2/models/simple",
        f"{prefix}/v2/models/simple/versions/1/infer",
    ]


def test_base_path_survives_printing_the_url() -> None:
    endpoint = parse_url("http://gw:8000/my%20gateway/")
    assert str(endpoint) == "http://gw:8000/my%20gateway"
    assert parse_url(str(endpoint)) == endpoint


def test_query_of_a_call_follows_the_prefixed_path() -> None:
    http = protocol("http://gw:8000/base")
    call = plain(http.infer(simple_request(), query=[("a", "x y"), ("b", False)], binary=False))
    assert call.request.target == "/base/v2/models/simple/infer?a=x+y&b=false"


def test_call_headers_follow_the_client_headers() -> None:
    http = protocol(
        "http://gw:8000", headers={"Authorization": "Bearer t"}, accept_compression="gzip"
    )
    request = http.server_live(headers=[("X-Call", "1")]).request
    assert list(request.headers) == [
        ("Accept-Encoding", "gzip"),
        ("Authorization", "Bearer t"),
        ("X-Call", "1"),
    ]


@pytest.mark.parametrize(
    "headers",
    [{"X-Bad": "a\r\nInjected: yes"}, {"X-Bad:": "a"}, {"X-Bad": 1}, [("X\nBad", "a")]],
)
def test_headers_that_could_split_the_request_are_refused(headers: object) -> None:
    http = protocol("http://gw:8000")
    with pytest.raises(InvalidInputError):
        http.server_live(headers=headers)


def test_call_timeout_overrides_the_client_default() -> None:
    http = protocol("http://gw:8000", timeout=5.0)
    assert http.server_live().request.timeout == 5.0
    assert http.server_live(timeout=0.5).request.timeout == 0.5


@pytest.mark.parametrize("encoding", ["br", "GZIP ", ""])
def test_unknown_compressions_are_refused(encoding: str) -> None:
    with pytest.raises(InvalidInputError):
        protocol("http://gw:8000", request_compression=encoding)
    with pytest.raises(InvalidInputError):
        protocol("http://gw:8000").infer(simple_request(), compression=encoding)


class RecordingTransport:
    """An async transport that keeps the requests and answers each with a small JSON result."""

    def __init__(self) -> None:
        self.requests: list[HTTPRequest] = []

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        self.requests.append(request)
        output = {"name": "OUTPUT0", "datatype": "INT32", "shape": [1], "data": [7]}
        body = json.dumps({"model_name": "simple", "outputs": [output]}).encode()
        return HTTPResponse(200, {"content-type": "application/json"}, body)

    async def aclose(self) -> None:
        pass


async def test_async_infer_sends_the_call_options_or_else_the_client_defaults() -> None:
    # With and without per-call options, AsyncClient.infer sends what the client and the
    # call ask for.
    transport = RecordingTransport()
    inputs = {"INPUT0": np.zeros((1, 16), dtype=np.int32)}
    async with AsyncClient(
        "http://gw:8000/base",
        transport=transport,  # type: ignore[arg-type]
        headers={"Authorization": "Bearer t"},
        timeout=5.0,
        binary=True,
    ) as client:
        assert (await client.infer("simple", inputs)).as_numpy("OUTPUT0").tolist() == [7]
        await client.infer(
            "simple",
            inputs,
            headers=[("X-Call", "1")],
            query=[("a", "b")],
            timeout=0.5,
            binary=False,
            compression="gzip",
        )
    plain, custom = transport.requests
    assert (plain.target, plain.timeout) == ("/base/v2/models/simple/infer", 5.0)
    assert plain.headers == [
        ("Authorization", "Bearer t"),
        ("Content-Type", "application/octet-stream"),
        ("Inference-Header-Content-Length", plain.headers[2][1]),
    ]
    assert (custom.target, custom.timeout) == ("/base/v2/models/simple/infer?a=b", 0.5)
    assert custom.headers == [
        ("Authorization", "Bearer t"),
        ("Content-Type", "application/json"),
        ("X-Call", "1"),
        ("Content-Encoding", "gzip"),
    ]
    sent = json.loads(gzip.decompress(b"".join(bytes(part) for part in custom.body)))
    assert sent["inputs"][0]["data"] == [0] * 16  # binary=False: the tensor as JSON


# -- the binary/JSON default: learned from the server's metadata --------------------------------

_RESULT = json.dumps(
    {
        "model_name": "simple",
        "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [1], "data": [7]}],
    }
).encode()


def _metadata(*extensions: str) -> HTTPResponse:
    body = json.dumps({"name": "srv", "version": "1", "extensions": list(extensions)}).encode()
    return HTTPResponse(200, {"content-type": "application/json"}, body)


class ScriptedServer:
    """A transport, sync and async, answering ``GET /v2`` with ``metadata`` (a response, or an
    exception to raise) and inferences with ``infer`` (default: a small JSON result); it keeps
    every request."""

    def __init__(
        self,
        metadata: HTTPResponse | Exception,
        infer: HTTPResponse | None = None,
    ) -> None:
        self.metadata = metadata
        self.infer = infer or HTTPResponse(200, {"content-type": "application/json"}, _RESULT)
        self.requests: list[HTTPRequest] = []

    def answer(self, request: HTTPRequest) -> HTTPResponse:
        self.requests.append(request)
        if request.target == "/v2":
            if isinstance(self.metadata, Exception):
                raise self.metadata
            return self.metadata
        return self.infer

    def handle_request(self, request: HTTPRequest) -> HTTPResponse:
        return self.answer(request)

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse:
        await asyncio.sleep(0)  # let other tasks run into the same first call
        return self.answer(request)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def targets(self) -> list[str]:
        return [r.target for r in self.requests]

    def binary_bodies(self) -> list[bool]:
        """For each inference sent: whether its body carries binary tensors."""
        return [
            dict(r.headers).get("Content-Type") == codec.BINARY_TYPE
            for r in self.requests
            if r.target.endswith("/infer")
        ]


INPUTS = {"INPUT0": np.zeros((1, 16), dtype=np.int32)}
INFER = "/v2/models/simple/infer"


def _infer_twice(server: ScriptedServer, mode: str, **options: Any) -> None:
    if mode == "sync":
        with Client("http://gw:8000", transport=server, **options) as client:  # type: ignore[arg-type]
            client.infer("simple", INPUTS)
            client.infer("simple", INPUTS)
        return

    async def run() -> None:
        async with AsyncClient("http://gw:8000", transport=server, **options) as client:  # type: ignore[arg-type]
            await client.infer("simple", INPUTS)
            await client.infer("simple", INPUTS)

    asyncio.run(run())


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("extensions", "binary"), [(("binary_tensor_data", "parameters"), True), ((), False)]
)
def test_the_default_is_binary_where_the_server_advertises_it(
    mode: str, extensions: tuple[str, ...], binary: bool
) -> None:
    server = ScriptedServer(_metadata(*extensions))
    _infer_twice(server, mode)
    assert server.targets() == ["/v2", INFER, INFER]  # asked once, on the first call
    assert server.binary_bodies() == [binary, binary]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_first_call_to_a_binary_server_never_builds_a_json_body(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A JSON body costs a Python object per element (a 64 MiB tensor: ~1 GiB), so the first
    # call, which does not yet know which body it will send, must not build it before it knows.
    def no_json(*args: object) -> None:
        raise AssertionError("a JSON body was built")

    monkeypatch.setattr(codec, "to_json_data", no_json)
    server = ScriptedServer(_metadata("binary_tensor_data"))
    _infer_twice(server, mode)
    assert server.binary_bodies() == [True, True]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("binary", [True, False])
def test_a_client_choice_asks_nothing(mode: str, binary: bool) -> None:
    server = ScriptedServer(_metadata())
    _infer_twice(server, mode, binary=binary)
    assert server.targets() == [INFER, INFER]
    assert server.binary_bodies() == [binary, binary]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        (HTTPResponse(404, {}, b'{"error": "not found"}'), True),  # it will not say more
        (ProtocolError("malformed"), True),  # nor say it better
        (HTTPResponse(503, {}, b"starting"), False),  # it may, later
        (TransportError("connection refused"), False),  # it did not answer
        (DeadlineExceededError("timed out"), False),
    ],
)
def test_a_server_that_will_not_say_gets_json_and_the_infer_goes_on(
    mode: str, answer: HTTPResponse | Exception, kept: bool
) -> None:
    server = ScriptedServer(answer)
    _infer_twice(server, mode)
    asked_again = [] if kept else ["/v2"]
    assert server.targets() == ["/v2", INFER, *asked_again, INFER]
    assert server.binary_bodies() == [False, False]


def test_concurrent_first_calls_ask_once_sync() -> None:
    server = ScriptedServer(_metadata("binary_tensor_data"))
    barrier = threading.Barrier(8)
    with Client("http://gw:8000", transport=server) as client:  # type: ignore[arg-type]

        def infer() -> None:
            barrier.wait()
            client.infer("simple", INPUTS)

        threads = [threading.Thread(target=infer) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert server.targets().count("/v2") == 1
    assert server.binary_bodies() == [True] * 8


@pytest.mark.parametrize(
    ("metadata", "asks"),
    [(_metadata("binary_tensor_data"), 1), (TransportError("refused"), 1)],
)
def test_concurrent_first_calls_ask_once_async(
    metadata: HTTPResponse | Exception, asks: int
) -> None:
    """Tasks that waited while the one asking failed do not ask again (each would wait out
    the same timeout); the next call does."""
    server = ScriptedServer(metadata)

    async def run() -> None:
        async with AsyncClient("http://gw:8000", transport=server) as client:  # type: ignore[arg-type]
            await asyncio.gather(*(client.infer("simple", INPUTS) for _ in range(8)))

    asyncio.run(run())
    assert server.targets().count("/v2") == asks
    assert len(server.binary_bodies()) == 8


def test_a_bad_argument_of_the_first_call_is_refused_when_it_is_built() -> None:
    http = protocol("http://gw:8000")
    with pytest.raises(InvalidInputError):
        http.infer(simple_request(), headers={"X-Bad": "a\r\nb"})
    with pytest.raises(InvalidInputError):
        http.infer(simple_request(), compression="br")


_REFUSAL = HTTPResponse(422, {"content-type": "application/json"}, b'{"detail": "bad body"}')


def _refused(server: ScriptedServer, mode: str) -> ServerError:
    """The error of one binary inference by a new ``binary=True`` client."""
    try:
        if mode == "sync":
            with Client("http://gw:8000", transport=server, binary=True) as client:  # type: ignore[arg-type]
                client.infer("simple", INPUTS)
        else:

            async def run() -> None:
                async with AsyncClient("http://gw:8000", transport=server, binary=True) as client:  # type: ignore[arg-type]
                    await client.infer("simple", INPUTS)

            asyncio.run(run())
    except ServerError as exc:
        return exc
    raise AssertionError("the inference was not refused")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("metadata", "hint"),
    [(_metadata(), True), (_metadata("binary_tensor_data"), False), (TransportError("x"), False)],
)
def test_a_refused_binary_request_says_the_server_may_lack_the_extension(
    mode: str, metadata: HTTPResponse | Exception, hint: bool
) -> None:
    """A binary request refused by a server not known to take binary tensors: the metadata is
    asked (once) and, if it does not list the extension, the error says so."""
    server = ScriptedServer(metadata, infer=_REFUSAL)
    errors = [_refused(server, mode), _refused(server, mode)]
    for error in errors:
        assert error.http_status == 422
        assert error.message.startswith("bad body")
        assert (codec.BINARY_REFUSED_HINT in error.message) is hint
    # each client asked once, after its refusal
    assert server.targets() == [INFER, "/v2", INFER, "/v2"]


def test_the_hint_is_asked_for_once_and_only_for_binary_refusals() -> None:
    server = ScriptedServer(_metadata(), infer=_REFUSAL)
    with Client("http://gw:8000", transport=server) as client:  # type: ignore[arg-type]
        for binary in (True, True, False):
            with pytest.raises(ServerError) as info:
                client.infer("simple", INPUTS, binary=binary)
            assert (codec.BINARY_REFUSED_HINT in info.value.message) is binary
    assert server.targets() == [INFER, "/v2", INFER, INFER]


def test_a_binary_success_shows_the_server_takes_binary() -> None:
    """A server that takes binary tensors without advertising them (KServe): once a binary
    request succeeded, binary calls are plain calls and a refusal gets no hint."""
    http = protocol("http://gw:8000", binary=True)
    server = ScriptedServer(_metadata())
    first = http.infer(simple_request())
    assert not isinstance(first, HTTPCall)  # not known yet: a success teaches it
    first.run(server, None)  # type: ignore[arg-type]
    assert isinstance(http.infer(simple_request()), HTTPCall)
    server.infer = _REFUSAL
    with pytest.raises(ServerError) as info:
        http.infer(simple_request()).run(server, None)  # type: ignore[arg-type]
    assert codec.BINARY_REFUSED_HINT not in info.value.message
    assert server.targets() == [INFER, INFER]


def test_the_default_does_not_apply_to_grpc() -> None:
    with pytest.raises(InvalidInputError):
        Client("grpc://127.0.0.1:1", binary="yes")  # type: ignore[arg-type]
    Client("grpc://127.0.0.1:1", binary=None).close()
