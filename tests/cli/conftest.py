"""Fixtures of the CLI tests: the stub server of tests/conformance, the session Triton's URL
for each protocol, and a runner of ``kserve-v2`` in this process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kserve_v2.cli import main
from kserve_v2.testing import TritonServer
from tests.conformance.stub import stub_url

__all__ = ["CLIResult", "cli", "server_url", "stub_url"]


@dataclass
class CLIResult:
    """A ``kserve-v2`` run: exit status and what it wrote."""

    status: int
    out: str
    err: str

    def json(self) -> object:
        import json

        return json.loads(self.out)

    def json_lines(self) -> list[object]:
        import json

        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


Runner = Callable[..., CLIResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Runner:
    """``cli("health", "--url", url)``: runs ``kserve_v2.cli.main`` here, returns a
    :class:`CLIResult` (argparse's own exits become statuses too)."""

    def run(*argv: str) -> CLIResult:
        capsys.readouterr()  # drop what came before
        try:
            status = main(list(argv))
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return CLIResult(status, captured.out, captured.err)

    return run


@pytest.fixture(params=["http", "grpc"])
def server_url(request: pytest.FixtureRequest, triton: TritonServer) -> str:
    """The session server's URL, once per protocol."""
    if request.param == "http":
        return triton.http_url
    return f"grpc://{triton.grpc_url}"
