"""The ``kserve-v2`` command: fast help, the conformance subcommand's options, exit statuses,
output and reports (against the stub server of tests/conformance)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kserve_v2.cli import COMMANDS, build_parser, main
from kserve_v2.cli.conformance import Progress
from kserve_v2.conformance import CaseResult, Outcome
from tests.conformance.stub import STUB_CASES

ROOT = Path(__file__).resolve().parents[2]


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from kserve_v2.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = [m for m in ('kserve_v2.conformance', 'kserve_v2.conformance.cases', "
        "'google.protobuf', 'grpc', 'httpx', 'kserve_v2.transport.stdlib') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out
    assert main([]) == 2  # no command: help, usage error


def test_module_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kserve_v2", "conformance", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "--http URL" in proc.stdout
    assert "--report FILE" in proc.stdout
    assert "kserve-v2 conformance --list" in proc.stdout  # the examples


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--list", "--only", "rest.binary.*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].endswith(" cases")
    assert int(lines[-1].split()[0]) >= 40
    assert all(line.startswith("rest.binary.") for line in lines[:-1])
    assert main(["conformance", "--list"]) == 0
    assert int(capsys.readouterr().out.splitlines()[-1].split()[0]) >= 200


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance"]) == 2
    assert "give --http URL and/or --grpc URL" in capsys.readouterr().err
    assert main(["conformance", "--http", "x:1", "--only", "no.such.case*"]) == 2
    assert main(["conformance", "--http", "x:1", "--report", "r.txt"]) == 2
    assert main(["conformance", "--http", "x:1", "--expected", "nope"]) == 2
    assert main(["conformance", "--http", "x:1", "--header", "novalue"]) == 2
    assert "--header wants NAME=VALUE, not 'novalue'" in capsys.readouterr().err


def test_run_against_a_server(
    stub_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "r.json"
    status = main(
        [
            "conformance",
            "--http",
            stub_url,
            "--only",
            "rest.health.*.status-200",
            "--report",
            str(report),
            "--header",
            "X-Test=1",
        ]
    )
    out = capsys.readouterr().out
    assert status == 1  # the stub's ready endpoint answers 503: a MUST failure
    assert "FAILED rest.health.ready.status-200 [MUST]" in out
    assert "> A 200 status code indicates true and a 4xx status code indicates false." in out
    assert ">> HTTP GET /v2/health/ready" in out
    assert "<< 503 Service Unavailable" in out
    assert "X-Test: 1" in out
    assert "oip/required_api.md § Health" in out  # the summary by section
    assert "1 MUST failure(s)" in out
    data = json.loads(report.read_text())
    assert data["summary"]["failed"] == 1
    assert data["summary"]["exit_status"] == 1


def test_known_deviation_makes_exit_zero(
    stub_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = tmp_path / "stub.json"
    expected.write_text(
        json.dumps(
            {
                "server": "stub",
                "deviations": {"rest.health.ready.status-200": "the stub is never ready"},
            }
        )
    )
    status = main(
        [
            "conformance",
            "--http",
            stub_url,
            "--only",
            "rest.health.ready.status-200",
            "--expected",
            str(expected),
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "rest.health.ready.status-200 [MUST]: the stub is never ready" in out
    assert "0 MUST failure(s)" in out


def test_progress_without_a_terminal() -> None:
    stream = io.StringIO()
    progress = Progress(stream)
    result = CaseResult(STUB_CASES[0], Outcome.PASSED)
    for done in range(1, 21):
        progress(done, 20, result)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "conformance: 2/20 cases (10%)"
    assert lines[-1] == "conformance: 20/20 cases (100%)"
    assert len(lines) == 10
    quiet = io.StringIO()
    Progress(quiet, enabled=False)(1, 1, result)
    assert quiet.getvalue() == ""


def test_parser_is_built_from_the_command_table() -> None:
    parser = build_parser()
    args = parser.parse_args(["conformance", "--http", "h:1", "--only", "a", "--only", "b"])
    assert args.only == ["a", "b"]
    assert args.http == "h:1"
    assert args.timeout == 30.0
