"""kserve_v2.locust against the live Triton: a headless single-process run, a distributed
run (one master, two worker processes), and the transports' behaviour under gevent.

Locust runs from its own environment, ``.venv-locust`` (``scripts/setup.sh`` builds it):
importing locust monkey-patches the whole process with gevent, so it is kept out of the test
environment and only ever runs here as subprocesses. Without ``.venv-locust`` the tests
skip, or fail under ``CI`` (as the Triton tests do).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kserve_v2.testing import TritonServer
from kserve_v2.testing.session import in_ci

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LOCUST_ENV = ROOT / ".venv-locust"
EXAMPLE = ROOT / "examples" / "locustfile.py"
COUNTING = HERE / "counting.py"
FAILING = HERE / "failing.py"
TIMEOUT = 120  # seconds any locust process may take (a run is a few seconds)


@pytest.fixture(scope="module")
def locust_python() -> Path:
    python = LOCUST_ENV / "bin" / "python"
    if not python.exists():
        message = "needs .venv-locust (bash scripts/setup.sh builds it)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return python


@pytest.fixture
def urls(triton: TritonServer) -> dict[str, str]:
    return {
        "KSERVE_HTTP_URL": triton.http_url,
        "KSERVE_GRPC_URL": f"grpc://{triton.grpc_url}",
    }


def _env(urls: dict[str, str], counts: Path) -> dict[str, str]:
    return {**os.environ, **urls, "KSERVE_LOCUST_COUNTS": str(counts), "PYTHONPATH": str(ROOT)}


def _locust(python: Path, *args: str) -> list[str]:
    return [str(python), "-m", "locust", "--skip-log-setup", *args]


def _stats(path: Path) -> dict[str, dict[str, Any]]:
    """The ``--json-file`` statistics by ``"<type> <name>"``."""
    entries = json.loads(path.read_text(encoding="utf-8"))
    return {f"{e['method']} {e['name']}": e for e in entries}


def _counts(directory: Path, role: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob(f"{role}-*.json"))]


def test_headless_single_process(locust_python: Path, urls: dict[str, str], tmp_path: Path) -> None:
    files = f"{EXAMPLE},{FAILING},{COUNTING}"
    done = subprocess.run(
        _locust(
            locust_python,
            "-f",
            files,
            "--headless",
            "-u",
            "3",
            "-r",
            "3",
            "-t",
            "3s",
            "--only-summary",
            "--json-file",
            str(tmp_path / "stats"),
        ),
        env=_env(urls, tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    # Exit status 1: the failing user's failures (Locust's --exit-code-on-error).
    assert done.returncode == 1, done.stderr[-3000:]
    stats = _stats(tmp_path / "stats.json")
    for key in ("http infer simple", "grpc infer simple"):
        assert stats[key]["num_requests"] > 0, key
        assert stats[key]["num_failures"] == 0, key
        assert stats[key]["total_content_length"] > 0, key  # bytes as received
    failing = stats["http infer failing"]
    assert failing["num_requests"] > 0
    assert failing["num_failures"] == failing["num_requests"]
    (local,) = _counts(tmp_path, "local")
    assert local["requests"] == {k: v["num_requests"] for k, v in stats.items()}
    assert any("kserve-v2 test failure: deliberate error" in m for m in local["messages"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_distributed_master_and_two_workers(
    locust_python: Path, urls: dict[str, str], tmp_path: Path
) -> None:
    port = str(_free_port())
    files = f"{EXAMPLE},{COUNTING}"
    env = _env(urls, tmp_path)
    master = subprocess.Popen(
        _locust(
            locust_python,
            "-f",
            files,
            "--master",
            "--headless",
            "--expect-workers",
            "2",
            "--expect-workers-max-wait",
            "60",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            port,
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "4s",
            "--only-summary",
            "--json-file",
            str(tmp_path / "stats"),
        ),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    workers = [
        subprocess.Popen(
            _locust(
                locust_python,
                "-f",
                files,
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                port,
            ),
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        _, master_err = master.communicate(timeout=TIMEOUT)
        worker_results = [w.communicate(timeout=TIMEOUT) for w in workers]
    finally:
        for process in (master, *workers):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert master.returncode == 0, master_err[-3000:]
    for worker, (_, err) in zip(workers, worker_results, strict=True):
        assert worker.returncode == 0, err[-3000:]

    stats = _stats(tmp_path / "stats.json")
    assert set(stats) == {"http infer simple", "grpc infer simple"}
    assert all(e["num_requests"] > 0 and e["num_failures"] == 0 for e in stats.values())
    reports = _counts(tmp_path, "worker")
    assert len(reports) == 2
    assert all(sum(r["requests"].values()) > 0 for r in reports)  # both workers worked
    total: Counter[str] = Counter()
    for report in reports:
        total.update(report["requests"])
        assert not report["failures"]
    assert dict(total) == {k: v["num_requests"] for k, v in stats.items()}


def test_default_transports_are_cooperative_under_gevent(
    locust_python: Path, urls: dict[str, str]
) -> None:
    done = subprocess.run(
        [
            str(locust_python),
            str(HERE / "cooperative.py"),
            urls["KSERVE_HTTP_URL"],
            urls["KSERVE_GRPC_URL"],
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"http": True, "grpc": True}


def test_the_test_environment_has_no_locust() -> None:
    # Importing locust would monkey-patch this process: it stays in .venv-locust.
    assert "locust" not in sys.modules
    assert "gevent" not in sys.modules
