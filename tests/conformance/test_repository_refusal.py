"""The model-repository cases skip when the server refuses every load and unload because of how
it was started (Triton without ``--model-control-mode=explicit`` answers HTTP 503 / gRPC
UNAVAILABLE "explicit model load / unload is not allowed if polling is enabled"), and only
then: any other answer is judged as before."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kserve_v2.conformance import Outcome, Target, all_cases, run, select
from kserve_v2.conformance.cases.management import (
    LOAD_UNLOAD_REFUSED,
    load_unload_refusal,
)
from kserve_v2.conformance.context import RestResponse, RpcError
from kserve_v2.testing import TritonServer
from tests.local_http import JSONHandler, serving

TRITON_REFUSAL = "explicit model load / unload is not allowed if polling is enabled"

#: the cases that load or unload, over REST
REST_CASES = [
    "rest.repository.load-unload",
    "rest.repository.load.reload",
    "rest.repository.load.unknown",
    "rest.repository.load.unknown.status-4xx",
    "rest.repository.load.files-without-config",
    "rest.repository.unload.dependents",
]


def _rest(status: int, body: object) -> RestResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return RestResponse(status, {"content-type": "application/json"}, raw)


def test_the_refusal_is_recognised_only_as_triton_answers_it() -> None:
    assert load_unload_refusal(_rest(503, {"error": TRITON_REFUSAL})) == TRITON_REFUSAL
    assert load_unload_refusal(RpcError("UNAVAILABLE", TRITON_REFUSAL)) == TRITON_REFUSAL
    # another status or code with the same words: judged as usual
    assert load_unload_refusal(_rest(400, {"error": TRITON_REFUSAL})) is None
    assert load_unload_refusal(_rest(500, {"error": TRITON_REFUSAL})) is None
    assert load_unload_refusal(RpcError("INVALID_ARGUMENT", TRITON_REFUSAL)) is None
    # the same status or code with another message: a real failure
    assert load_unload_refusal(_rest(503, {"error": "failed to load 'x': out of memory"})) is None
    assert load_unload_refusal(RpcError("UNAVAILABLE", "failed to connect")) is None
    # not an error object, or not an error at all
    assert load_unload_refusal(_rest(503, TRITON_REFUSAL.encode())) is None
    assert load_unload_refusal(_rest(503, [TRITON_REFUSAL])) is None
    assert load_unload_refusal(_rest(200, {})) is None
    assert load_unload_refusal(object()) is None


# -- the cases against a stub server -------------------------------------------------------


class _RepositoryHandler(JSONHandler):
    """Advertises the model repository extension and answers every load and unload with
    ``answer`` (status, body)."""

    answer: tuple[int, bytes] = (200, b"")

    def do_GET(self) -> None:
        if self.path == "/v2":
            extensions = ["model_repository", "model_repository(unload_dependents)"]
            body = {"name": "stub", "version": "0", "extensions": extensions}
            self._send(200, json.dumps(body).encode())
        elif self.path == "/v2/models/identity_uint8/ready":
            self._send(200)
        else:
            self._send(404, b'{"error":"unknown model"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith(("/load", "/unload")):
            self._send(*type(self).answer)
        else:
            self._send(404, b'{"error":"no such path"}')


@pytest.fixture
def repository_stub() -> Iterator[tuple[str, type[_RepositoryHandler]]]:
    handler = type("Handler", (_RepositoryHandler,), {})
    with serving(handler) as url:
        yield url, handler


def _outcomes(url: str) -> dict[str, tuple[str, str]]:
    result = run(select(all_cases(), REST_CASES), Target(http=url))
    assert sorted(r.case.id for r in result.results) == sorted(REST_CASES)
    return {r.case.id: (r.outcome, r.message) for r in result.results}


def test_the_refusal_skips_every_load_and_unload_case(
    repository_stub: tuple[str, type[_RepositoryHandler]],
) -> None:
    url, handler = repository_stub
    handler.answer = (503, json.dumps({"error": TRITON_REFUSAL}).encode())
    for case_id, (outcome, message) in _outcomes(url).items():
        assert outcome == Outcome.SKIPPED, (case_id, message)
        assert message.startswith(LOAD_UNLOAD_REFUSED)
        assert TRITON_REFUSAL in message


def test_another_503_is_still_a_failure(
    repository_stub: tuple[str, type[_RepositoryHandler]],
) -> None:
    url, handler = repository_stub
    handler.answer = (503, b'{"error":"failed to load: out of memory"}')
    outcomes = _outcomes(url)
    for case_id in ("rest.repository.load-unload", "rest.repository.unload.dependents"):
        outcome, message = outcomes[case_id]
        assert outcome == Outcome.FAILED
        assert "expected 200, got 503" in message
    assert outcomes["rest.repository.load.unknown.status-4xx"][0] == Outcome.FAILED
    assert outcomes["rest.repository.load.unknown"][0] == Outcome.PASSED  # an error object


def test_the_words_with_another_status_are_still_a_failure(
    repository_stub: tuple[str, type[_RepositoryHandler]],
) -> None:
    url, handler = repository_stub
    handler.answer = (400, json.dumps({"error": TRITON_REFUSAL}).encode())
    outcomes = _outcomes(url)
    assert outcomes["rest.repository.load-unload"][0] == Outcome.FAILED
    assert outcomes["rest.repository.load.reload"][0] == Outcome.FAILED


# -- against Triton in its default model-control mode ------------------------------------


def test_triton_in_its_default_mode_skips_them(triton: TritonServer) -> None:
    """The session server runs in Triton's default mode ("none"): the repository index cases
    run, the load and unload cases over REST and gRPC skip with the server's message."""
    cases = select(all_cases(), ["*.repository.*"])
    target = Target(http=triton.http_url, grpc=f"grpc://{triton.grpc_url}")
    result = run(cases, target)
    by_id = {r.case.id: r for r in result.results}
    for case_id in [*REST_CASES, "grpc.repository.load-unload", "grpc.repository.load.unknown"]:
        assert by_id[case_id].outcome == Outcome.SKIPPED, (case_id, by_id[case_id].message)
        assert TRITON_REFUSAL in by_id[case_id].message
    assert by_id["rest.repository.index"].outcome == Outcome.PASSED
    assert by_id["grpc.repository.index"].outcome == Outcome.PASSED
    assert result.must_failures() == []
    assert result.unchecked() == []
