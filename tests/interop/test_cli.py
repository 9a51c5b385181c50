"""The CLI on each server.

* Its stream commands, on each server that serves ``ModelStreamInfer`` (Triton, MLServer):
  they end when the server's answer does, whether or not the server marks each request's
  final response (MLServer marks none: its stream ends after the client's sending side does),
  and within ``--timeout``.
* ``infer --omit``: KServe and MLServer publish no model configuration, so nothing tells the
  CLI which inputs are optional; ``--omit`` leaves one out instead of generating it.
"""

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


def _request_dump(dump: str) -> str:
    """The dump of the inference request (``--dump`` writes to stderr), up to its answer."""
    lines = dump.splitlines()
    start = next(
        i
        for i, line in enumerate(lines)
        if line.startswith(">> ") and (line.endswith("/ModelInfer") or "/infer " in line)
    )
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("<< "))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_leaves_out_the_inputs_omit_names(
    peer: Peer, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = peer.url(protocol)
    # params_echo's INPUT0 is optional (its answer does not depend on it).
    status, out, err = _run(
        capsys, "infer", "params_echo", "--omit", "INPUT0", "--url", url, "--dump", "--json"
    )
    assert status == 0, err
    assert [o["name"] for o in json.loads(out)["outputs"]] == ["PARAMS"]
    assert "INPUT0" not in _request_dump(err)
    # Without it the input is generated from the metadata, on a server without a model
    # configuration (Triton's marks it optional and the CLI leaves it out by itself).
    status, out, err = _run(capsys, "infer", "params_echo", "--url", url, "--dump", "--json")
    assert status == 0, err
    assert ("INPUT0" in _request_dump(err)) is (peer.name != "triton")
