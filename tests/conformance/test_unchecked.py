"""A run that cannot check the server fails loudly: a URL of the wrong protocol is a usage
error, and a server that does not answer (nothing listening, not a KServe v2 server) or a run in
which no case ran ends with exit status 3 and the reason on stderr."""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest

from kserve_v2.cli import main
from kserve_v2.conformance import Outcome, RunResult, Target, all_cases, run, select, to_json
from kserve_v2.conformance.report import render_html, render_markdown
from kserve_v2.conformance.runner import EXIT_UNCHECKED
from tests.conformance.stub import STUB_CASES
from tests.local_http import serving


@pytest.fixture
def closed_url() -> str:
    """An HTTP URL on loopback where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def plain_http_url(tmp_path: Path) -> Iterator[str]:
    """A web server that is no KServe v2 server (``python -m http.server``)."""
    (tmp_path / "index.html").write_text("<h1>hello</h1>")
    with serving(functools.partial(_QuietHandler, directory=str(tmp_path))) as url:
        yield url


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


# -- URLs of the wrong protocol -------------------------------------------------------------


def test_normalize_refuses_the_other_protocols_scheme() -> None:
    assert Target.normalize("localhost:8000", "http") == "http://localhost:8000"
    assert Target.normalize("https://h:1/base", "http") == "https://h:1/base"
    assert Target.normalize("GRPCS://h:1", "grpc") == "GRPCS://h:1"
    assert Target.normalize(None, "grpc") is None
    with pytest.raises(ValueError, match=r"--http grpc://h:1: .*http or https.*URL for --grpc"):
        Target.normalize("grpc://h:1", "http")
    with pytest.raises(ValueError, match=r"--grpc http://h:1: .*grpc or grpcs.*URL for --http"):
        Target.normalize("http://h:1", "grpc")
    with pytest.raises(ValueError, match="not 'ftp'"):
        Target.normalize("ftp://h:1", "http")


@pytest.mark.parametrize(
    "argv",
    [
        ["--http", "grpc://127.0.0.1:8001"],
        ["--grpc", "http://127.0.0.1:8000"],
        ["--http", "http://127.0.0.1:8000", "--grpc", "https://127.0.0.1:8001"],
    ],
)
def test_wrong_scheme_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", *argv]) == 2
    captured = capsys.readouterr()
    assert "the scheme must be" in captured.err
    assert captured.out == ""  # nothing ran


# -- servers that do not answer -------------------------------------------------------------


def test_nothing_listening_fails_with_the_reason(
    closed_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    status = main(["conformance", "--http", closed_url, "-q", "--report", str(report)])
    captured = capsys.readouterr()
    assert status == EXIT_UNCHECKED == 3
    assert "kserve-v2 conformance: the server could not be checked:" in captured.err
    assert f"HTTP {closed_url}: server metadata over http failed" in captured.err
    assert "Connection refused" in captured.err
    assert "no case ran: all" in captured.err
    summary = json.loads(report.read_text())["summary"]
    assert summary["exit_status"] == 3
    assert summary["passed"] == summary["failed"] == 0
    assert any("Connection refused" in line for line in summary["unchecked"])


def test_a_server_that_is_not_kserve_fails(
    plain_http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["conformance", "--http", plain_http_url, "-q"])
    err = capsys.readouterr().err
    assert status == 3
    assert f"HTTP {plain_http_url}: server metadata over http failed" in err
    assert "404" in err


def test_one_protocol_unreachable_fails_though_the_other_ran(
    stub_url: str, closed_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    grpc = closed_url.replace("http://", "grpc://")
    status = main(
        ["conformance", "--http", stub_url, "--grpc", grpc, "--only", "rest.health.live.*", "-q"]
    )
    captured = capsys.readouterr()
    assert status == 3
    assert "passed" in captured.out  # the HTTP cases ran
    assert f"gRPC {grpc}: server metadata over grpc failed" in captured.err
    assert "no case ran" not in captured.err


def test_no_case_ran_fails_with_the_first_skip_reason(
    stub_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["conformance", "--http", stub_url, "--only", "grpc.health.*", "-q"])
    err = capsys.readouterr().err
    assert status == 3
    assert "no case ran: all" in err
    assert "(the first, grpc.health." in err
    assert "--grpc not given" in err


def test_a_must_failure_outranks_unchecked(
    stub_url: str, closed_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    grpc = closed_url.replace("http://", "grpc://")
    argv = ["conformance", "--http", stub_url, "--grpc", grpc]
    status = main([*argv, "--only", "rest.health.ready.status-200", "-q"])
    captured = capsys.readouterr()
    assert status == 1  # the stub's ready endpoint answers 503: a MUST failure
    assert "could not be checked" in captured.err  # the reason is still shown


# -- the run's result and the reports ------------------------------------------------------


def test_run_result_unchecked(stub_run: RunResult, closed_url: str) -> None:
    assert stub_run.unchecked() == []
    assert stub_run.unreachable == {}
    result = run(STUB_CASES[:2], Target(http=closed_url))
    assert all(r.outcome == Outcome.SKIPPED for r in result.results)
    assert set(result.unreachable) == {"http"}
    lines = result.unchecked()
    assert lines[0].startswith(f"HTTP {closed_url}: server metadata over http failed")
    assert lines[1] == "no case ran: all 2 were skipped"
    assert result.exit_status() == 3
    data = to_json(result)
    assert data["summary"]["unchecked"] == lines
    assert data["summary"]["exit_status"] == 3
    assert f"- **Not checked**: HTTP {closed_url}" in render_markdown(result)
    assert '<p class="unchecked"><b>Not checked</b>: HTTP' in render_html(result)


def test_an_empty_selection_is_not_unchecked(stub_url: str) -> None:
    # (the command refuses an empty selection as a usage error before it runs)
    result = run([], Target(http=stub_url))
    assert result.unchecked() == []
    assert result.exit_status() == 0


def test_skips_alongside_cases_that_ran_are_fine(stub_url: str) -> None:
    cases = select(all_cases(), ["rest.health.live.status-200", "grpc.health.server-live"])
    result = run(cases, Target(http=stub_url))
    assert [r.outcome for r in result.results] == [Outcome.PASSED, Outcome.SKIPPED]
    assert result.unchecked() == []
    assert result.exit_status() == 0
