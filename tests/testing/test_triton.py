"""Tests of the Triton launcher (kserve_v2.testing.triton) and of the test model repository.

Everything talks raw HTTP with urllib (and raw gRPC frames where grpcio is present), so these
tests do not depend on the client library they help to test.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import ssl
import struct
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from kserve_v2.testing import (
    ENV_VAR,
    TritonEnvNotFoundError,
    TritonServer,
    TritonStartupError,
    find_triton_env,
    triton,
)

if TYPE_CHECKING:
    from kserve_v2.testing import TritonEnvironment
    from tests.conftest import TLSCerts, TritonFactory

MODELS_DIR = Path(__file__).resolve().parents[1] / "models"

# Never route 127.0.0.1 through an inherited http_proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

DATATYPES: dict[str, type[np.generic]] = {
    # wire datatype -> numpy dtype; BF16 and BYTES are handled apart
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
FAILURE_MESSAGE = "kserve-v2 test failure: deliberate error"


def request(
    url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, lower-cased headers, body) of one HTTP exchange; POST when there is a body."""
    req = urllib.request.Request(url, data=body, headers=dict(headers or {}))
    try:
        with _OPENER.open(req, timeout=30) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _lower(exc.headers), exc.read()


def _lower(headers: Any) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


def infer_json(server: TritonServer, model: str, payload: dict[str, Any]) -> tuple[int, Any]:
    status, _, body = request(
        f"{server.http_url}/v2/models/{model}/infer", json.dumps(payload).encode()
    )
    return status, json.loads(body)


def infer_binary(
    server: TritonServer, model: str, inputs: Sequence[tuple[dict[str, Any], bytes]]
) -> tuple[dict[str, Any], bytes]:
    """Infer with the binary-data extension both ways; returns (JSON header, binary tail)."""
    header = {
        "inputs": [{**meta, "parameters": {"binary_data_size": len(raw)}} for meta, raw in inputs],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }
    head = json.dumps(header).encode()
    status, headers, body = request(
        f"{server.http_url}/v2/models/{model}/infer",
        head + b"".join(raw for _, raw in inputs),
        {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(head)),
        },
    )
    assert status == 200, body
    if "inference-header-content-length" not in headers:
        # Triton 2.51 sends plain JSON when every binary output is empty (0 bytes), even though
        # binary data was asked for; the outputs still carry binary_data_size 0.
        assert headers["content-type"] == "application/json"
        return json.loads(body), b""
    size = int(headers["inference-header-content-length"])
    return json.loads(body[:size]), body[size:]


def sse_events(body: bytes) -> list[Any]:
    """The JSON objects of a text/event-stream body (one ``data:`` line per event here)."""
    return [
        json.loads(block.removeprefix(b"data: ")) for block in body.split(b"\n\n") if block.strip()
    ]


def pack_bytes(items: Sequence[bytes]) -> bytes:
    """BYTES tensor wire form: each element as a 4-byte little-endian length, then its bytes."""
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


def _group_members(pgid: int) -> list[int]:
    """Pids of live processes in process group ``pgid`` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _model_names() -> list[str]:
    return sorted(path.name for path in MODELS_DIR.iterdir() if (path / "config.pbtxt").is_file())


# -- server environment discovery (no server needed) ---------------------------------------------


def test_missing_env_explains_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(TritonEnvNotFoundError, match=r"scripts/setup\.sh"):
        find_triton_env(tmp_path / "nothing-here")


def test_env_var_is_used_and_not_second_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "wrong"))
    with pytest.raises(TritonEnvNotFoundError, match="wrong"):
        find_triton_env()


def test_env_with_numpy_2_is_refused(tmp_path: Path) -> None:
    # Just the layout _inspect_env looks at, with numpy 2 where numpy<2 is needed.
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    server = site / "pytriton" / "tritonserver"
    for path in (
        server / "bin" / "tritonserver",
        server / "backends" / "python" / "libtriton_python.so",
        server / "python_backend_stubs" / "3.11" / "triton_python_backend_stub",
        tmp_path / "bin" / "python3",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    (site / "nvidia_pytriton.libs").mkdir()
    (site / "numpy-2.1.0.dist-info").mkdir()
    with pytest.raises(TritonEnvNotFoundError, match=r"numpy<2"):
        find_triton_env(tmp_path)


def test_options_are_checked_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="explicit"):
        TritonServer(MODELS_DIR, load_models=["simple"])
    with pytest.raises(ValueError, match="model_control_mode"):
        TritonServer(MODELS_DIR, model_control_mode="sometimes")
    with pytest.raises(ValueError, match="grpc_server_cert"):
        TritonServer(MODELS_DIR, grpc_use_ssl=True)
    with pytest.raises(ValueError, match="not a directory"):
        TritonServer(MODELS_DIR / "no-such-repository")


# -- the shared server ---------------------------------------------------------------------------


def test_server_is_live_and_ready(triton: TritonServer) -> None:
    assert triton.http_url == f"http://127.0.0.1:{triton.http_port}"
    assert triton.grpc_url == f"127.0.0.1:{triton.grpc_port}"
    assert len({triton.http_port, triton.grpc_port, triton.metrics_port}) == 3
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert request(triton.http_url + path)[0] == 200
    status, _, body = request(triton.http_url + "/v2")
    assert status == 200
    assert json.loads(body)["name"] == "triton"
    status, _, body = request(triton.metrics_url)
    assert status == 200
    assert b"nv_inference_request_success" in body
    assert triton.log_path.is_file()
    assert "Started HTTPService" in triton.read_log()


def test_grpc_endpoint_answers(triton: TritonServer) -> None:
    grpc = pytest.importorskip("grpc")
    with grpc.insecure_channel(triton.grpc_url) as channel:
        # No generated stubs needed: an empty ServerReadyRequest is b"", and the response
        # {ready: true} is field 1, varint 1.
        ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady")
        assert ready(b"", timeout=10) == b"\x08\x01"


def test_every_model_is_ready(triton: TritonServer) -> None:
    status, _, body = request(f"{triton.http_url}/v2/repository/index", b"{}")
    assert status == 200
    index = {entry["name"]: entry.get("state") for entry in json.loads(body)}
    assert index == dict.fromkeys(_model_names(), "READY")
    for name in index:
        assert request(f"{triton.http_url}/v2/models/{name}/ready")[0] == 200, name


def test_simple(triton: TritonServer) -> None:
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    status, body = infer_json(
        triton,
        "simple",
        {
            "inputs": [
                {"name": "INPUT0", "datatype": "INT32", "shape": [2, 16], "data": a.tolist()},
                {"name": "INPUT1", "datatype": "INT32", "shape": [2, 16], "data": b.tolist()},
            ]
        },
    )
    assert status == 200, body
    outputs = {out["name"]: out for out in body["outputs"]}
    assert outputs["OUTPUT0"]["shape"] == [2, 16]
    assert outputs["OUTPUT0"]["data"] == (a + b).ravel().tolist()
    assert outputs["OUTPUT1"]["data"] == (a - b).ravel().tolist()


def _sample(datatype: str) -> np.ndarray[Any, Any]:
    # Non-zero values (some True for BOOL): a server env with numpy 2 would echo zeros.
    values = (np.arange(1, 7) % 2 == 1) if datatype == "BOOL" else np.arange(1, 7)
    return values.astype(DATATYPES[datatype]).reshape(2, 3)


@pytest.mark.parametrize("datatype", sorted(DATATYPES))
def test_identity_binary(triton: TritonServer, datatype: str) -> None:
    data = _sample(datatype)
    header, tail = infer_binary(
        triton,
        f"identity_{datatype.lower()}",
        [({"name": "INPUT0", "datatype": datatype, "shape": [2, 3]}, data.tobytes())],
    )
    [output] = header["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("OUTPUT0", datatype, [2, 3])
    assert tail == data.tobytes()


@pytest.mark.parametrize("datatype", sorted(set(DATATYPES) - {"FP16"}))
def test_identity_json(triton: TritonServer, datatype: str) -> None:
    data = _sample(datatype)
    status, body = infer_json(
        triton,
        f"identity_{datatype.lower()}",
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": datatype,
                    "shape": [2, 3],
                    "data": data.ravel().tolist(),
                }
            ]
        },
    )
    assert status == 200, body
    [output] = body["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("OUTPUT0", datatype, [2, 3])
    assert output["data"] == data.ravel().tolist()


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_is_binary_only(triton: TritonServer, datatype: str) -> None:
    # Triton 2.51 refuses FP16 and BF16 tensors in JSON "data", inputs and outputs alike.
    status, body = infer_json(
        triton,
        f"identity_{datatype.lower()}",
        {"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": [1, 1], "data": [1.0]}]},
    )
    assert status == 400
    assert f"receiving {datatype} data via JSON is not supported" in body["error"]
    # Binary input, output left to its JSON default: refused as well.
    head = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": datatype,
                    "shape": [1, 1],
                    "parameters": {"binary_data_size": 2},
                }
            ]
        }
    ).encode()
    status, _, raw = request(
        f"{triton.http_url}/v2/models/identity_{datatype.lower()}/infer",
        head + b"\x00\x3c",
        {"Inference-Header-Content-Length": str(len(head))},
    )
    assert status == 400
    assert f"sending {datatype} data via JSON is not supported" in json.loads(raw)["error"]


def test_identity_bytes_json(triton: TritonServer) -> None:
    status, body = infer_json(
        triton,
        "identity_bytes",
        {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 2], "data": ["a", "é"]}]},
    )
    assert status == 200, body
    assert body["outputs"][0]["data"] == ["a", "é"]


def test_identity_fp32_binary(triton: TritonServer) -> None:
    data = np.array([[1.5, -2.0, 3.25], [1e30, -0.0, np.inf]], dtype=np.float32)
    header, tail = infer_binary(
        triton,
        "identity_fp32",
        [({"name": "INPUT0", "datatype": "FP32", "shape": [2, 3]}, data.tobytes())],
    )
    [output] = header["outputs"]
    assert output["parameters"]["binary_data_size"] == data.nbytes
    assert output["shape"] == [2, 3]
    assert tail == data.tobytes()


def test_identity_bytes_binary(triton: TritonServer) -> None:
    items = [b"a\x00b", b"", "é".encode(), b"\xff\xfe"]
    raw = pack_bytes(items)
    header, tail = infer_binary(
        triton, "identity_bytes", [({"name": "INPUT0", "datatype": "BYTES", "shape": [2, 2]}, raw)]
    )
    assert header["outputs"][0]["shape"] == [2, 2]
    assert tail == raw


def test_identity_bf16_binary(triton: TritonServer) -> None:
    # BF16 = the upper half of an FP32; Triton accepts it only as binary data, not in JSON.
    values = np.array([[1.5, -2.0], [0.0, 3.0e38]], dtype=np.float32)
    raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    header, tail = infer_binary(
        triton, "identity_bf16", [({"name": "INPUT0", "datatype": "BF16", "shape": [2, 2]}, raw)]
    )
    assert (header["outputs"][0]["datatype"], header["outputs"][0]["shape"]) == ("BF16", [2, 2])
    assert tail == raw


@pytest.mark.parametrize(
    ("model", "datatype"),
    [("identity_fp32", "FP32"), ("identity_bytes", "BYTES"), ("identity_bf16", "BF16")],
)
@pytest.mark.parametrize("shape", [[0, 3], [2, 0]])
def test_identity_zero_size(
    triton: TritonServer, model: str, datatype: str, shape: list[int]
) -> None:
    header, tail = infer_binary(
        triton, model, [({"name": "INPUT0", "datatype": datatype, "shape": shape}, b"")]
    )
    [output] = header["outputs"]
    assert (output["shape"], output["parameters"]["binary_data_size"]) == (shape, 0)
    assert tail == b""


def test_identity_rank_is_two(triton: TritonServer) -> None:
    status, body = infer_json(
        triton,
        "identity_int32",
        {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [3], "data": [1, 2, 3]}]},
    )
    assert status == 400
    assert "unexpected shape" in body["error"]


def test_bytes_reverse(triton: TritonServer) -> None:
    raw = pack_bytes([b"abc", b"", b"\x00\xff"])
    header, tail = infer_binary(
        triton, "bytes_reverse", [({"name": "INPUT0", "datatype": "BYTES", "shape": [3]}, raw)]
    )
    assert header["outputs"][0]["shape"] == [3]
    assert tail == pack_bytes([b"cba", b"", b"\xff\x00"])


def test_failing(triton: TritonServer) -> None:
    status, body = infer_json(
        triton,
        "failing",
        {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [1]}]},
    )
    # The Python backend's TritonError defaults to INTERNAL, which Triton maps to HTTP 500.
    assert (status, body) == (500, {"error": FAILURE_MESSAGE})


def test_slow(triton: TritonServer) -> None:
    started = time.monotonic()
    status, body = infer_json(
        triton,
        "slow",
        {"inputs": [{"name": "DELAY_MS", "datatype": "FP32", "shape": [1], "data": [200]}]},
    )
    assert time.monotonic() - started >= 0.2
    assert status == 200, body
    assert body["outputs"][0]["data"] == [200.0]


def test_repeat_decoupled(triton: TritonServer) -> None:
    url = f"{triton.http_url}/v2/models/repeat_decoupled"
    # The REST infer endpoint refuses decoupled models; the generate extension streams them.
    status, body = infer_json(
        triton,
        "repeat_decoupled",
        {
            "inputs": [
                {"name": "IN", "datatype": "INT32", "shape": [2], "data": [4, 5]},
                {"name": "REPEAT", "datatype": "INT32", "shape": [1], "data": [3]},
            ]
        },
    )
    assert status == 501
    assert "decoupled" in body["error"]

    status, headers, body = request(
        f"{url}/generate_stream", json.dumps({"IN": [4, 5], "REPEAT": 3}).encode()
    )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert [(event["IDX"], event["OUT"]) for event in events] == [(i, [4, 5]) for i in range(3)]

    request_body = json.dumps({"IN": [1], "REPEAT": 3, "ERROR_AT": 1, "DELAY_MS": 1.0})
    events = sse_events(request(f"{url}/generate_stream", request_body.encode())[2])
    assert events[1] == {"error": FAILURE_MESSAGE}
    assert [event.get("IDX") for event in events] == [0, None, 2]

    # REPEAT 0: no data response at all, only the final flag.
    status, _, body = request(f"{url}/generate_stream", b'{"IN": [1], "REPEAT": 0}')
    assert (status, sse_events(body)) == (200, [])


@pytest.mark.parametrize("model", ["sequence_accumulate", "sequence_accumulate_string"])
def test_sequences_accumulate_independently(triton: TritonServer, model: str) -> None:
    rng = random.Random()
    if model == "sequence_accumulate":
        ids: list[int | str] = [rng.randrange(1, 2**63), rng.randrange(1, 2**63)]
    else:
        ids = [f"seq-{rng.random()}", f"seq-{rng.random()}"]
    steps = [(1, True, False), (10, False, False), (100, False, True)]
    results: dict[int | str, list[int]] = {seq: [] for seq in ids}
    for value, start, end in steps:
        for factor, seq in enumerate(ids, start=1):  # interleaved on purpose
            status, body = infer_json(
                triton,
                model,
                {
                    "inputs": [
                        {
                            "name": "INPUT",
                            "datatype": "INT32",
                            "shape": [1],
                            "data": [value * factor],
                        }
                    ],
                    "parameters": {
                        "sequence_id": seq,
                        "sequence_start": start,
                        "sequence_end": end,
                    },
                },
            )
            assert status == 200, body
            results[seq].append(body["outputs"][0]["data"][0])
    assert results == {ids[0]: [1, 11, 111], ids[1]: [2, 22, 222]}


def test_classify(triton: TritonServer) -> None:
    labels = (MODELS_DIR / "classify" / "labels.txt").read_text().split()
    scores = [0.1, 0.5, 0.2, 0.9] + [0.0] * 7 + [5.0]  # index 11 has no label
    status, body = infer_json(
        triton,
        "classify",
        {
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [12], "data": scores}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
        },
    )
    assert status == 200, body
    [output] = body["outputs"]
    assert (output["datatype"], output["shape"]) == ("BYTES", [2])
    assert output["data"] == ["5.000000:11", f"0.900000:3:{labels[3]}"]


def test_text_generate_stream(triton: TritonServer) -> None:
    url = f"{triton.http_url}/v2/models/text_generate/generate_stream"
    status, _, body = request(
        url, json.dumps({"id": "7", "text_input": "hello big world"}).encode()
    )
    assert status == 200
    events = sse_events(body)
    assert [event["text_output"] for event in events] == ["hello", " big", " world"]
    assert {event["id"] for event in events} == {"7"}
    # A "parameters" entry named like an optional input becomes that input.
    capped = json.dumps({"text_input": "a b c", "parameters": {"max_tokens": 2}})
    assert [e["text_output"] for e in sse_events(request(url, capped.encode())[2])] == ["a", " b"]


def test_text_generate_non_streaming_needs_one_response(triton: TritonServer) -> None:
    url = f"{triton.http_url}/v2/models/text_generate/generate"
    status, _, body = request(url, json.dumps({"text_input": "one two"}).encode())
    # Triton 2.51 answers 200 with an error object when a decoupled model sends 2+ responses.
    assert status == 200
    assert "exactly 1 response" in json.loads(body)["error"]
    status, _, body = request(url, json.dumps({"text_input": "one"}).encode())
    assert (status, json.loads(body)["text_output"]) == (200, "one")


def test_text_echo_generate(triton: TritonServer) -> None:
    url = f"{triton.http_url}/v2/models/text_echo/generate"
    status, headers, body = request(
        url, json.dumps({"id": "1", "text_input": "hi there "}).encode()
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "id": "1",
        "model_name": "text_echo",
        "model_version": "1",
        "text_output": "hi there ",
    }
    capped = json.dumps({"text_input": "a b c", "max_tokens": 1}).encode()
    assert json.loads(request(url, capped)[2])["text_output"] == "a"


def test_params_echo(triton: TritonServer) -> None:
    parameters = {"flag": True, "count": 3, "ratio": 0.5, "name": "x"}
    status, body = infer_json(
        triton,
        "params_echo",
        {
            "parameters": parameters,
            "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [1]}],
        },
    )
    assert status == 200, body
    [output] = body["outputs"]
    assert (output["name"], output["datatype"], output["shape"]) == ("PARAMS", "BYTES", [1])
    assert json.loads(output["data"][0]) == parameters


# -- more servers --------------------------------------------------------------------------------


def test_two_servers_at_once_and_stop_cleans_up(triton: TritonServer) -> None:
    with TritonServer(
        MODELS_DIR, model_control_mode="explicit", load_models=["identity_int8"]
    ) as second:
        ports = {triton.http_port, triton.grpc_port, triton.metrics_port}
        assert ports.isdisjoint({second.http_port, second.grpc_port, second.metrics_port})
        assert second.log_path.parent != triton.log_path.parent
        assert request(second.http_url + "/v2/models/identity_int8/ready")[0] == 200
        assert request(second.http_url + "/v2/models/simple/ready")[0] == 400  # not loaded
        assert second.startup_seconds is not None
        pid, temp_dir = second.pid, second.log_path.parent
        stubs = [member for member in _group_members(pid) if member != pid]
        assert stubs, "the loaded Python model should have a stub process"
    # Every process of the second server is gone, its directory too; the first is untouched.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _group_members(pid) == []
    assert not temp_dir.exists()
    assert not second.is_running()
    second.stop()  # idempotent
    assert request(triton.http_url + "/v2/health/ready")[0] == 200


def test_sigkill_after_grace_period(triton_factory: TritonFactory) -> None:
    server = triton_factory.start(
        model_control_mode="explicit", load_models=["identity_int8"], stop_grace=0.0
    )
    pid = server.pid
    stubs = [member for member in _group_members(pid) if member != pid]
    shm_regions = list(Path("/dev/shm").glob(f"{server._shm_prefix}*"))
    assert stubs
    assert shm_regions
    os.kill(pid, signal.SIGSTOP)  # a server that ignores SIGTERM, as far as stop() can tell
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _group_members(pid) == []  # the stubs were killed with it
    assert not any(region.exists() for region in shm_regions)  # and their regions removed


def test_known_crash_is_this_start_of_the_race_only(
    triton_factory: TritonFactory, tmp_path: Path
) -> None:
    """known_crash names Triton 2.51's gRPC stream race from the log of the server's current
    start: not a segfault of another cause, not the race in an earlier start's log."""
    log = tmp_path / "tritonserver.log"
    # An earlier start that died of the race, in the same (appended-to) log file.
    log.write_text(
        "$ tritonserver --earlier-start\n"
        "E1201 HandleCancellation called even when the context was not cancelled for ...\n"
        "Signal (11) received.\n"
        "ASSERTION FAILED: !byte_buffer->Valid()\n"
    )
    repository = tmp_path / "empty-repository"
    repository.mkdir()
    server = triton_factory.start(repository, log_file=log)
    assert server.known_crash() is None
    os.kill(server.pid, signal.SIGSEGV)  # Triton's handler logs "Signal (11) received."
    server.wait(timeout=60)
    assert "Signal (11) received." in server.read_log().rpartition("\n$ ")[2]
    assert server.known_crash(wait=0.2) is None  # a segfault alone is no known race
    with log.open("a") as file:  # what the race's segfault logs before it
        file.write("E1201 HandleCancellation called even when the context was not cancelled\n")
    assert "segfaulted" in (server.known_crash() or "")
    server.stop()
    server.start()
    assert server.known_crash() is None  # a new start, a new log section
    with log.open("a") as file:
        file.write("tritonserver: ... ASSERTION FAILED: !byte_buffer->Valid()\n")
    assert "aborted" in (server.known_crash() or "")
    server.stop()
    server.start()
    with log.open("a") as file:  # the race's segfault at its known site, without the line
        file.write(RACE_SEGFAULT_BACKTRACE)
    assert "segfaulted at its site" in (server.known_crash() or "")


# What Triton 2.51 printed when the race segfaulted it without logging the cancellation
# (2026-12-02, 40 streams on one connection; paths shortened).
RACE_SEGFAULT_BACKTRACE = """Signal (11) received.
 0# 0x000055A19823452D in /venv/pytriton/tritonserver/bin/tritonserver
 1# 0x00007F365085A050 in /lib/x86_64-linux-gnu/libc.so.6
 2# 0x000055A1982A397E in /venv/pytriton/tritonserver/bin/tritonserver
 3# 0x000055A19828E88B in /venv/pytriton/tritonserver/bin/tritonserver
 4# 0x00007F36506D44A3 in /lib/x86_64-linux-gnu/libstdc++.so.6
"""


def test_the_race_segfault_site_is_told_by_offsets_not_addresses() -> None:
    """Another load address moves every frame alike; another faulting frame is not the race."""
    assert triton._known_segfault_site(RACE_SEGFAULT_BACKTRACE)
    moved = RACE_SEGFAULT_BACKTRACE.replace("55A19823452D", "563000C2452D").replace(
        "55A1982A397E", "563000C9397E"
    )
    assert triton._known_segfault_site(moved)
    elsewhere = RACE_SEGFAULT_BACKTRACE.replace("55A1982A397E", "55A1982A3980")
    assert not triton._known_segfault_site(elsewhere)


def test_startup_failure_reports_the_log(
    tmp_path: Path, triton_env: TritonEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "repository" / "broken"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'output [ { name: "OUT", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
    )
    (model / "1" / "model.py").write_text(
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        "        raise RuntimeError('kserve-v2 broken on purpose')\n"
    )
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))  # where mkdtemp creates
    server = TritonServer(tmp_path / "repository", env=triton_env.root)
    with pytest.raises(TritonStartupError, match="kserve-v2 broken on purpose") as info:
        server.start()
    assert "exited with status" in str(info.value)
    assert "kserve-v2 broken on purpose" in info.value.log_tail
    assert not server.is_running()
    assert list(private_tmp.iterdir()) == []  # its temporary directory is gone


def test_explicit_mode_restricted_api_and_mutual_tls(
    triton_factory: TritonFactory, tls_certs: TLSCerts
) -> None:
    server = triton_factory.start(
        model_control_mode="explicit",
        load_models=["simple"],
        http_restricted_api=["model-repository:admin-key=secret"],
        grpc_use_ssl=True,
        grpc_use_ssl_mutual=True,
        grpc_server_cert=tls_certs.server_cert,
        grpc_server_key=tls_certs.server_key,
        grpc_root_cert=tls_certs.ca_cert,
    )
    index_url = f"{server.http_url}/v2/repository/index"
    status, _, body = request(index_url, b"{}")
    assert status == 403
    assert "admin-key" in json.loads(body)["error"]
    status, _, body = request(index_url, b"{}", {"admin-key": "secret"})
    assert status == 200
    loaded = {entry["name"] for entry in json.loads(body) if entry.get("state") == "READY"}
    assert loaded == {"simple"}
    load_url = f"{server.http_url}/v2/repository/models/identity_int8/load"
    assert request(load_url, b"{}", {"admin-key": "secret"})[0] == 200
    assert request(f"{server.http_url}/v2/models/identity_int8/ready")[0] == 200

    # gRPC speaks TLS and wants a client certificate signed by the CA.
    context = ssl.create_default_context(cafile=str(tls_certs.ca_cert))
    context.set_alpn_protocols(["h2"])
    context.load_cert_chain(str(tls_certs.client_cert), str(tls_certs.client_key))
    with (
        socket.create_connection(("127.0.0.1", server.grpc_port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.selected_alpn_protocol() == "h2"
    grpc = pytest.importorskip("grpc")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls_certs.ca_cert.read_bytes(),
        private_key=tls_certs.client_key.read_bytes(),
        certificate_chain=tls_certs.client_cert.read_bytes(),
    )
    options = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(server.grpc_url, credentials, options) as channel:
        ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady")
        assert ready(b"", timeout=10) == b"\x08\x01"
    anonymous = grpc.ssl_channel_credentials(root_certificates=tls_certs.ca_cert.read_bytes())
    with grpc.secure_channel(server.grpc_url, anonymous, options) as channel:
        ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady")
        with pytest.raises(grpc.RpcError):
            ready(b"", timeout=10)


def test_port_taken_between_probe_and_bind_is_retried(
    triton_env: TritonEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kserve_v2.testing.triton as launcher

    probe = launcher.free_ports
    calls: list[list[int]] = []
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()

        def racy_ports(count: int) -> list[int]:
            ports = probe(count)
            if not calls:
                ports[0] = squatter.getsockname()[1]  # someone took the HTTP port
            calls.append(ports)
            return ports

        monkeypatch.setattr(launcher, "free_ports", racy_ports)
        with TritonServer(MODELS_DIR, env=triton_env.root, model_control_mode="explicit") as server:
            assert len(calls) == 2
            assert server.http_port == calls[1][0]
            log = server.read_log()
    assert re.search("already in use", log)
