"""Outcomes, skip reasons, known deviations and the exit status, against the stub server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kserve_v2.conformance import Outcome, RunResult, load_expected
from kserve_v2.conformance.runner import sections


def _by_id(result: RunResult) -> dict[str, tuple[str, str]]:
    return {r.case.id: (r.outcome, r.message) for r in result.results}


def test_each_outcome(stub_run: RunResult) -> None:
    got = _by_id(stub_run)
    assert got["stub.pass"][0] == Outcome.PASSED
    assert got["stub.fail-must"] == (Outcome.FAILED, "status: expected 200, got 400")
    assert got["stub.fail-should"][0] == Outcome.FAILED
    assert got["stub.error"][0] == Outcome.ERROR
    assert "RuntimeError: a bug in the case" in got["stub.error"][1]
    assert got["stub.skip-inside"] == (Outcome.SKIPPED, "cannot tell here")
    assert got["stub.deviation"][0] == Outcome.DEVIATION


def test_skip_reasons(stub_run: RunResult) -> None:
    got = _by_id(stub_run)
    assert got["stub.skip-model"][0] == Outcome.SKIPPED
    assert "model 'absent' is not ready" in got["stub.skip-model"][1]
    assert got["stub.skip-extension"] == (
        Outcome.SKIPPED,
        "the server does not advertise the 'trace' extension",
    )
    assert got["stub.skip-grpc"] == (Outcome.SKIPPED, "needs gRPC (--grpc not given)")


def test_an_advertised_extension_that_fails_says_so(stub_run: RunResult) -> None:
    outcome, message = _by_id(stub_run)["stub.advertised-broken"]
    assert outcome == Outcome.FAILED
    assert message.startswith("the server advertises 'binary_tensor_data', but: HTTP 400")


def test_known_deviations(stub_run: RunResult) -> None:
    deviation = next(r for r in stub_run.results if r.case.id == "stub.deviation")
    assert deviation.expected_deviation == "the stub refuses inference"
    assert not deviation.counts_as_failure
    assert stub_run.stale_deviations() == ["stub.stale"]


def test_counts_and_exit_status(stub_run: RunResult) -> None:
    assert stub_run.counts() == {
        Outcome.PASSED: 2,
        Outcome.FAILED: 3,
        Outcome.DEVIATION: 1,
        Outcome.ERROR: 1,
        Outcome.SKIPPED: 4,
    }
    assert [r.case.id for r in stub_run.must_failures()] == [
        "stub.fail-must",
        "stub.advertised-broken",
    ]
    assert stub_run.exit_status() == 1


def test_evidence_is_recorded(stub_run: RunResult) -> None:
    fail = next(r for r in stub_run.results if r.case.id == "stub.fail-must")
    assert len(fail.exchanges) == 1
    text = fail.evidence()
    assert ">> HTTP POST /v2/models/present/infer" in text
    assert "<< 400 Bad Request" in text
    assert '"error": "got 14 bytes"' in text
    binary = next(r for r in stub_run.results if r.case.id == "stub.advertised-broken")
    assert "inference-header-content-length: 13" in binary.evidence().lower()


def test_sections_group_by_document(stub_run: RunResult) -> None:
    table = sections(stub_run.results)
    assert list(table) == [
        "oip/inference_rest.md § Server Metadata",
        "oip/required_api.md § Health",
        "triton-extensions/extension_binary_data.md § Binary Tensor Request",
    ]
    row = table["oip/inference_rest.md § Server Metadata"]
    assert sum(row["outcomes"].values()) == 9
    assert row["must_failures"] == 1


def test_load_expected_shipped_and_files(tmp_path: Path) -> None:
    shipped = load_expected("triton-2.51")
    assert "Triton" in shipped.server
    assert "rest.stats.failures-counted" in shipped.deviations
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"server": "x", "deviations": {"a.b": "why"}}))
    assert load_expected(str(path)).deviations == {"a.b": "why"}
    assert load_expected(None).deviations == {}
    with pytest.raises(ValueError, match="no expected-deviations list 'nope'"):
        load_expected("nope")
    path.write_text(json.dumps({"deviations": ["a.b"]}))
    with pytest.raises(ValueError, match="must map case ids"):
        load_expected(str(path))


def test_shipped_deviations_name_real_cases() -> None:
    from importlib import resources

    from kserve_v2.conformance import all_cases

    ids = {c.id for c in all_cases()}
    folder = resources.files("kserve_v2.conformance") / "expected"
    names = sorted(
        p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json")
    )
    assert names == ["kserve-0.21", "mlserver-1.7", "triton-2.51"]
    for name in names:
        listed = load_expected(name)
        assert listed.server
        unknown = set(listed.deviations) - ids
        assert not unknown, (name, unknown)
