"""The CLI's stream commands on each server that serves ``ModelStreamInfer`` (Triton,
MLServer): they end when the server's answer does, whether or not the server marks each
request's final response (MLServer marks none: its stream ends after the client's sending
side does), and within ``--timeout``."""

from __future__ import annotations

import json

import pytest

from kserve_v2.cli import main
from tests.interop.conftest import Peer


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_stream_command_ends_with_the_servers_answer(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.skip_unless("streaming")
    status, out, err = _run(
        capsys,
        "stream", "repeat_decoupled", "-i", "IN=[1,2]", "-i", "REPEAT=[2]",
        "--url", peer.grpc_url, "--timeout", "20", "--json",
    )  # fmt: skip
    assert status == 0, err
    responses = [json.loads(line) for line in out.splitlines()]
    data = [r for r in responses if r["outputs"]]
    assert [o["data"] for r in data for o in r["outputs"] if o["name"] == "IDX"] == [[0], [1]]
    # Triton's empty final response marks the end; MLServer marks none.
    assert [r["final"] for r in responses] == (
        [False, False, True] if peer.name == "triton" else [False, False]
    )


def test_perf_streaming_needs_a_server_that_marks_final_responses(
    peer: Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    peer.skip_unless("streaming")
    if peer.name == "triton":
        pytest.skip("Triton marks them: tests/cli/test_perf.py streams")
    status, _, err = _run(
        capsys,
        "perf", "repeat_decoupled", "-i", "IN=[1]", "-i", "REPEAT=[2]", "--streaming",
        "--url", peer.grpc_url, "--timeout", "20",
    )  # fmt: skip
    assert status == 2
    assert "--streaming needs a server that marks each request's final response" in err
