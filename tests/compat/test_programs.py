"""tritonclient-style programs (``programs/``) against the live Triton, through
``kserve_v2.compat``, and through the real tritonclient where an environment has it.

Each program is written exactly as for tritonclient (``import tritonclient.grpc as
grpcclient``); the compat run changes nothing but those imports, which is the migration
the layer promises. Every program prints ``RESULT <json>`` last: the values a comparison
run must reproduce. The compat runs execute in this process (fast); the tritonclient runs
use an interpreter that has tritonclient (this one, or ``.venv-bench``'s, which
``scripts/bench.sh`` builds) and are skipped where there is none (``.venv`` never has it).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kserve_v2.testing import TritonServer

# The programs reach their server through request.getfixturevalue, which the automatic
# marking in tests/conftest.py cannot see: every test here talks to a live Triton.
pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = sorted((HERE / "programs").glob("*.py"))
_IMPORT = re.compile(r"^(\s*(?:import|from)\s+)tritonclient\b", re.MULTILINE)
# What the compat runs returned, for the comparison runs.
_COMPAT_RESULTS: dict[str, Any] = {}


def compat_source(source: str) -> str:
    """The program with its tritonclient imports pointing at kserve_v2.compat."""
    return _IMPORT.sub(r"\1kserve_v2.compat", source)


def _result(output: str, name: str) -> Any:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, f"{name} printed no RESULT line:\n{output[-2000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


@pytest.fixture(scope="module")
def explicit_triton(triton_factory: Any) -> Iterator[TritonServer]:
    """A server in explicit model-control mode with only ``simple`` loaded (fast to start),
    for the model-control programs."""
    server = triton_factory.start(model_control_mode="explicit", load_models=["simple"])
    yield server
    server.stop()


def _url(program: Path, server: TritonServer) -> str:
    if program.name.startswith("http_"):
        return server.http_url.split("://", 1)[1]
    return server.grpc_url


def _server(program: Path, request: pytest.FixtureRequest) -> TritonServer:
    name = "explicit_triton" if "model_control" in program.name else "triton"
    server: TritonServer = request.getfixturevalue(name)
    return server


def run_compat(program: Path, url: str) -> Any:
    source = compat_source(program.read_text(encoding="utf-8"))
    assert not _IMPORT.search(source)
    code = compile(source, str(program), "exec")
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [str(program), "-u", url]
    status: object = None
    try:
        with contextlib.redirect_stdout(out):
            try:
                exec(code, {"__name__": "__main__", "__file__": str(program)})
            except SystemExit as exc:
                status = exc.code
    finally:
        sys.argv = argv
    assert status in (None, 0), f"{program.name} exited with {status!r}:\n{out.getvalue()}"
    return _result(out.getvalue(), program.name)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_through_compat(program: Path, request: pytest.FixtureRequest) -> None:
    server = _server(program, request)
    _COMPAT_RESULTS[program.name] = run_compat(program, _url(program, server))


@functools.cache
def _tritonclient_python() -> str | None:
    """An interpreter that can import tritonclient (http and grpc), or None."""
    candidates = [sys.executable, str(ROOT / ".venv-bench" / "bin" / "python")]
    for python in candidates:
        if not Path(python).exists():
            continue
        probe = subprocess.run(
            [python, "-c", "import tritonclient.http, tritonclient.grpc"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return python
    return None


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_matches_tritonclient(program: Path, request: pytest.FixtureRequest) -> None:
    python = _tritonclient_python()
    if python is None:
        pytest.skip("no environment with tritonclient here (scripts/bench.sh builds .venv-bench)")
    server = _server(program, request)
    url = _url(program, server)
    ours = _COMPAT_RESULTS.get(program.name)
    if ours is None:
        ours = run_compat(program, url)
    done = subprocess.run(
        [python, str(program), "-u", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, f"tritonclient run failed:\n{done.stderr[-3000:]}"
    assert _result(done.stdout, program.name) == ours


def test_there_are_enough_programs() -> None:
    names = {p.stem for p in PROGRAMS}
    assert len(names) >= 20
    for feature in (
        "simple_infer",
        "async_infer",
        "aio",
        "stream",
        "sequence",
        "string",
        "shm",
        "model_control",
        "health_metadata",
        "keepalive",
        "image_client",
        "reuse_inputs",
    ):
        assert any(feature in name for name in names), feature
    assert {n.split("_")[0] for n in names} == {"http", "grpc"}
