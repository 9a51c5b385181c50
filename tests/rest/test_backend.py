"""The HTTP requests the client builds, without a server: targets, headers, timeouts."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from kserve_v2 import AsyncClient, InferInput, InferRequest, InvalidInputError
from kserve_v2.endpoint import parse_url
from kserve_v2.rest.backend import HTTPBackend
from kserve_v2.transport import HTTPRequest, HTTPResponse


def protocol(url: str, **options: object) -> HTTPBackend:
    return HTTPBackend(parse_url(url), **options)  # type: ignore[arg-type]


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
        http.infer(simple_request("1")).request.target,
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
    call = http.infer(simple_request(), query=[("a", "x y"), ("b", False)])
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
