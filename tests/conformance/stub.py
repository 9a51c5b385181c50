"""A stub OIP server (stdlib HTTP, a handful of fixed answers) and hand-made cases of every
outcome: what the runner, report and CLI tests look at. (The real suite against the real
server is ``conformance/``: ``pytest conformance``.) The fixtures are imported by the
conftest.py of tests/conformance and tests/cli."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kserve_v2.conformance import (
    Case,
    Context,
    ExpectedDeviations,
    Level,
    RunResult,
    Spec,
    Target,
    run,
)
from kserve_v2.conformance.spec import BINARY, OIP_REST, REQUIRED_API
from tests.local_http import JSONHandler, serving

EXTENSIONS = ["binary_tensor_data"]


class _Handler(JSONHandler):
    def do_GET(self) -> None:
        if self.path == "/v2":
            body = {"name": "stub", "version": "0.0", "extensions": EXTENSIONS}
            self._send(200, json.dumps(body).encode())
        elif self.path == "/v2/health/live":
            self._send(200)
        elif self.path == "/v2/health/ready":
            self._send(503, b'{"error":"not ready"}')  # a MUST failure for the CLI test
        elif self.path == "/v2/models/present/ready":
            self._send(200)
        elif self.path.startswith("/v2/models/"):
            self._send(404, b'{"error":"unknown model"}')
        else:
            self._send(404, b'{"error":"no such path"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._send(400, json.dumps({"error": f"got {len(body)} bytes"}).encode())


@pytest.fixture(scope="session")
def stub_url() -> Iterator[str]:
    with serving(_Handler) as url:
        yield url


SPEC = Spec(
    OIP_REST,
    "Server Metadata",
    "The server metadata endpoint provides information about the server.",
)


def _pass(ctx: Context) -> None:
    ctx.equal(ctx.rest("GET", "v2").status, 200, "status")


def _fail(ctx: Context) -> None:
    response = ctx.rest("POST", "v2/models/present/infer", json_body={"inputs": []})
    ctx.equal(response.status, 200, "status")


def _error(ctx: Context) -> None:
    raise RuntimeError("a bug in the case")


def _skip_inside(ctx: Context) -> None:
    ctx.skip("cannot tell here")


def _binary_fail(ctx: Context) -> None:
    head = b'{"inputs":[]}'
    response = ctx.rest_infer("present", head, [b"\x01\x00\x00\x00"])
    ctx.check(response.status == 200, f"HTTP {response.status}")


#: (id, run, level, protocols, extension, models): one of each outcome the runner knows.
STUB_CASES = [
    Case("stub.pass", "passes", SPEC, Level.MUST, ("http",), _pass),
    Case("stub.fail-must", "fails a MUST", SPEC, Level.MUST, ("http",), _fail),
    Case("stub.fail-should", "fails a SHOULD", SPEC, Level.SHOULD, ("http",), _fail),
    Case("stub.error", "breaks", SPEC, Level.PRACTICE, ("http",), _error),
    Case("stub.skip-inside", "skips itself", SPEC, Level.MAY, ("http",), _skip_inside),
    Case(
        "stub.skip-model",
        "needs a missing model",
        SPEC,
        Level.MUST,
        ("http",),
        _pass,
        models=("absent",),
    ),
    Case(
        "stub.skip-extension",
        "needs trace",
        Spec(REQUIRED_API, "Health", "The HTTP response body should be empty."),
        Level.MUST,
        ("http",),
        _pass,
        extension="trace",
    ),
    Case("stub.skip-grpc", "needs gRPC", SPEC, Level.MUST, ("grpc",), _pass),
    Case("stub.deviation", "a known deviation", SPEC, Level.MUST, ("http",), _fail),
    Case("stub.stale", "listed, but passes", SPEC, Level.SHOULD, ("http",), _pass),
    Case(
        "stub.advertised-broken",
        "binary data refused",
        Spec(
            BINARY,
            "Binary Tensor Request",
            "All tensor data types are representable as binary data in the native size of the data "
            "type.",
        ),
        Level.MUST,
        ("http",),
        _binary_fail,
        extension="binary_tensor_data",
        models=("present",),
    ),
]

EXPECTED = ExpectedDeviations(
    "stub server", "stub-list", {"stub.deviation": "the stub refuses inference", "stub.stale": "x"}
)


@pytest.fixture(scope="session")
def stub_run(stub_url: str) -> RunResult:
    return run(STUB_CASES, Target(http=stub_url), expected=EXPECTED)
