"""pytest entry of the conformance suite: one test per case.

    pytest conformance --http URL --grpc URL [--expected FILE|NAME] [--only PATTERN]
                       [--conformance-report FILE.{json,md,html}] [--junitxml FILE]

A URL given that does not answer the server metadata request (nothing listening, not a KServe
v2 server) makes every test an error with the reason, rather than a skip. Without
``--http``/``--grpc`` a local Triton (``.venv-triton``, see ``scripts/setup.sh``) is
started on ``conformance/models`` and its known deviations (``triton-2.51``) apply; without that
environment the cases are skipped, except in CI (``CI`` set), where they fail.

A case that passes is a passed test; one the server fails is a failed test showing the request,
the response and the sentence; a known deviation is an xfail; a case that cannot run is a skip
with its reason; a listed deviation that passes fails, so the list stays true.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from kserve_v2.conformance import (
    CaseResult,
    ExpectedDeviations,
    RunResult,
    Session,
    Target,
    all_cases,
    load_expected,
    select,
    write_report,
)
from kserve_v2.testing import TritonServer
from kserve_v2.testing.session import RestartLog, in_ci

MODELS_DIR = Path(__file__).resolve().parent / "models"
LOCAL_EXPECTED = "triton-2.51"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "KServe v2 / OIP conformance suite")
    group.addoption("--http", metavar="URL", help="the server's HTTP/REST URL")
    group.addoption("--grpc", metavar="URL", help="the server's gRPC URL")
    group.addoption(
        "--expected",
        metavar="NAME|FILE",
        help="the server's known deviations (default: triton-2.51 for the local "
        "Triton, none otherwise)",
    )
    group.addoption(
        "--only",
        metavar="PATTERN",
        action="append",
        default=[],
        help="run only the cases whose id matches (glob or substring); repeatable",
    )
    group.addoption(
        "--conformance-report",
        metavar="FILE",
        action="append",
        default=[],
        help="also write a report (.json, .md, .html); repeatable",
    )
    group.addoption(
        "--local",
        action="store_true",
        default=None,
        help="the server shares this machine's memory (shared-memory cases)",
    )


def _given(config: pytest.Config) -> bool:
    return bool(config.getoption("--http") or config.getoption("--grpc"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conformance_case" in metafunc.fixturenames:
        cases = select(all_cases(), metafunc.config.getoption("--only"))
        metafunc.parametrize("conformance_case", cases, ids=[c.id for c in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _given(config):
        return
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            # The local Triton is a live server: `-m "not integration"` leaves these out.
            item.add_marker(pytest.mark.integration)


# Triton 2.51 (the local server) has a known race in its gRPC stream writer, fixed in later
# Tritons (see TritonServer.known_crash): a stream case can take the server down, and the case
# that fails then is not at fault. So a case run while the local server lies dead of it, or
# that fails as it dies, runs again on a restarted server, up to RESTART_ATTEMPTS times in
# all (test_conformance.py; kserve_v2.testing.session holds what tests/ shares of this).
_RESTARTS = RestartLog()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    _RESTARTS.summary(terminalreporter)


@dataclass
class SuiteRun:
    """The session's connection to the server and the results so far."""

    session: Session
    expected: ExpectedDeviations
    results: list[CaseResult] = field(default_factory=list)
    server: TritonServer | None = None

    def restart_if_crashed(self, case_id: str, wait: float = 0.0) -> bool:
        """Restart the local server if it died of Triton 2.51's known race."""
        server = self.server
        if server is None or (why := server.known_crash(wait)) is None:
            return False
        _RESTARTS.record(case_id, why, server.log_path)
        self.session.close()
        server.stop()
        server.start()
        self.session = Session(_local_target(server))
        return True


def _local_target(server: TritonServer) -> Target:
    return Target(http=server.http_url, grpc=f"grpc://{server.grpc_url}", local=True)


@pytest.fixture(scope="session")
def conformance_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SuiteRun]:
    config = request.config
    started = datetime.now(timezone.utc)
    server = None
    if _given(config):
        try:
            target = Target(
                http=Target.normalize(config.getoption("--http"), "http"),
                grpc=Target.normalize(config.getoption("--grpc"), "grpc"),
                local=config.getoption("--local"),
            )
        except ValueError as exc:  # a grpc:// URL given to --http, ...
            pytest.fail(str(exc), pytrace=False)
        expected_name = config.getoption("--expected")
    else:
        from kserve_v2.testing import TritonEnvNotFoundError, find_triton_env

        try:
            env = find_triton_env()
        except TritonEnvNotFoundError as exc:
            message = f"no --http/--grpc given and no local Triton to start: {exc}"
            if in_ci():
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        log = tmp_path_factory.mktemp("conformance-triton") / "tritonserver.log"
        server = TritonServer(
            MODELS_DIR, env=env.root, model_control_mode="explicit", load_models=["*"], log_file=log
        )
        server.start()
        target = _local_target(server)
        expected_name = config.getoption("--expected") or LOCAL_EXPECTED
    try:
        run = SuiteRun(Session(target), load_expected(expected_name), server=server)
        # A URL that does not answer (nothing listening, not a KServe v2 server) would skip
        # every case of its protocol: an error of every test instead, with the reason.
        problems = [
            f"{protocol}: {problem}"
            for protocol in run.session.protocols()
            if (problem := run.session.metadata_problem(protocol))
        ]
        if problems:
            run.session.close()
            pytest.fail("the server could not be checked: " + "; ".join(problems), pytrace=False)
        try:
            yield run
        finally:
            run.session.close()
        reports = config.getoption("--conformance-report")
        if reports:
            result = RunResult(
                run.session.target,
                run.results,
                started,
                (datetime.now(timezone.utc) - started).total_seconds(),
                {p: run.session.server_metadata(p) for p in run.session.protocols()},
                run.expected,
            )
            for path in reports:
                write_report(result, path)
    finally:
        if server is not None:
            server.stop()
