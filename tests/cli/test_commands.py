"""Every ``kserve-v2`` command against the live Triton, over HTTP and gRPC, with its output
parsed (JSON where the command has it, and the human form's key lines)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kserve_v2 import Client
from kserve_v2.shm import SystemSharedMemoryRegion
from kserve_v2.testing import TritonServer
from tests.cli.conftest import Runner

ROOT = Path(__file__).resolve().parents[2]
SIMPLE_IN0 = "INPUT0=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]"
SIMPLE_IN1 = "INPUT1=[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]"


# -- health, metadata, config, models, stats ----------------------------------------------------


def test_health(cli: Runner, server_url: str) -> None:
    result = cli("health", "simple", "--url", server_url, "--json")
    assert result.status == 0
    assert result.json() == {
        "url": server_url,
        "live": True,
        "ready": True,
        "model": "simple",
        "model_ready": True,
    }
    human = cli("health", "--url", server_url)
    assert human.status == 0
    assert "live:  yes" in human.out
    assert "ready: yes" in human.out


def test_health_of_a_missing_model_exits_1(cli: Runner, server_url: str) -> None:
    result = cli("health", "no_such_model", "--url", server_url)
    assert result.status == 1
    assert "model no_such_model ready: no" in result.out


def test_global_options_before_the_command(cli: Runner, server_url: str) -> None:
    result = cli("--url", server_url, "--json", "health")
    assert result.status == 0
    assert result.json()["live"] is True  # type: ignore[index]


def test_url_from_the_environment(
    cli: Runner, server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSERVE_V2_URL", server_url)
    result = cli("health", "--json")
    assert result.status == 0
    assert result.json()["url"] == server_url  # type: ignore[index]


def test_server_metadata(cli: Runner, server_url: str) -> None:
    data = cli("metadata", "--url", server_url, "--json").json()
    assert isinstance(data, dict)
    assert data["name"] == "triton"
    assert "binary_tensor_data" in data["extensions"]
    human = cli("metadata", "--url", server_url).out
    assert human.startswith("server triton ")
    assert "  model_repository\n" in human


def test_model_metadata(cli: Runner, server_url: str) -> None:
    data = cli("metadata", "simple", "--url", server_url, "--json").json()
    assert data == {
        "name": "simple",
        "platform": "python",
        "versions": ["1"],
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16]},
            {"name": "INPUT1", "datatype": "INT32", "shape": [-1, 16]},
        ],
        "outputs": [
            {"name": "OUTPUT0", "datatype": "INT32", "shape": [-1, 16]},
            {"name": "OUTPUT1", "datatype": "INT32", "shape": [-1, 16]},
        ],
    }
    rows = [
        line.split() for line in cli("metadata", "simple", "--url", server_url).out.splitlines()
    ]
    assert ["input", "INPUT0", "INT32", "[-1,", "16]"] in rows
    assert ["output", "OUTPUT1", "INT32", "[-1,", "16]"] in rows


def test_config(cli: Runner, server_url: str) -> None:
    data = cli("config", "simple", "--url", server_url, "--json").json()
    assert isinstance(data, dict)
    assert data["max_batch_size"] == 8
    assert [i["name"] for i in data["input"]] == ["INPUT0", "INPUT1"]
    human = cli("config", "simple", "--url", server_url).out
    assert json.loads(human)["name"] == "simple"  # the human form is JSON too


def test_models(cli: Runner, server_url: str) -> None:
    data = cli("models", "--url", server_url, "--json").json()
    assert isinstance(data, list)
    states = {m["name"]: m["state"] for m in data}
    assert states["simple"] == "READY"
    assert states["repeat_decoupled"] == "READY"
    lines = cli("models", "--url", server_url).out.splitlines()
    assert lines[0].split() == ["model", "version", "state", "reason"]
    assert ["simple", "1", "READY"] in [line.split() for line in lines]
    assert lines[-1] == f"{len(data)} model(s)"


def test_stats(cli: Runner, server_url: str, triton: TritonServer) -> None:
    with Client(triton.http_url) as client:
        before = client.model_statistics("identity_int16")["model_stats"][0]["inference_count"]
        client.infer("identity_int16", {"INPUT0": np.arange(4, dtype=np.int16).reshape(1, 4)})
    data = cli("stats", "identity_int16", "--url", server_url, "--json").json()
    assert isinstance(data, dict)
    (model,) = data["model_stats"]
    assert model["name"] == "identity_int16"
    assert model["inference_count"] >= before + 1
    rows = [line.split() for line in cli("stats", "--url", server_url).out.splitlines()]
    assert rows[0][:4] == ["model", "version", "inferences", "executions"]
    row = next(r for r in rows if r[0] == "identity_int16")
    assert int(row[2]) == model["inference_count"]


# -- shared memory, trace, log, metrics -----------------------------------------------------------


def test_shm_status(cli: Runner, server_url: str, triton: TritonServer) -> None:
    name = f"cli_status_{server_url[:4]}"
    with Client(triton.http_url) as client, SystemSharedMemoryRegion.create(name, 4096) as region:
        client.register_region(region)
        try:
            data = cli("shm", "status", "--url", server_url, "--json").json()
            human = cli("shm", "status", "--region", name, "--url", server_url).out
        finally:
            client.unregister_region(region)
    assert isinstance(data, dict)
    entry = next(r for r in data["system"] if r["name"] == name)
    assert entry["key"] == region.key
    assert int(entry["byte_size"]) == 4096
    row = next(line.split() for line in human.splitlines() if name in line)
    assert row == ["system", name, region.key, "0", "4096"]


def test_shm_status_of_a_missing_region(cli: Runner, server_url: str) -> None:
    result = cli("shm", "status", "--system", "--region", "no_such_region", "--url", server_url)
    assert result.status == 1
    assert "'no_such_region'" in result.err
    assert "hint: `kserve-v2 shm status` without --region lists the registered regions" in (
        result.err
    )


def test_trace_get_and_set(cli: Runner, server_url: str) -> None:
    data = cli("trace", "--url", server_url, "--json").json()
    assert isinstance(data, dict)
    assert "trace_rate" in data
    changed = cli("trace", "set", "trace_rate=7", "--model", "identity_int8", "--url", server_url)
    assert changed.status == 0
    assert "trace settings of identity_int8 (now in force)" in changed.out
    assert ["trace_rate", "7"] in [line.split() for line in changed.out.splitlines()]
    got = cli("trace", "get", "--model", "identity_int8", "--url", server_url, "--json").json()
    assert got["trace_rate"] == "7"  # type: ignore[index]
    reset = cli(
        "trace", "set", "trace_rate=null", "--model", "identity_int8", "--url", server_url, "--json"
    ).json()
    assert reset["trace_rate"] == data["trace_rate"]  # type: ignore[index]


def test_trace_help_examples_work(cli: Runner, server_url: str) -> None:
    from kserve_v2.cli import trace

    examples = [
        line.split("#")[0].split()[1:]
        for line in (trace.__doc__ or "").splitlines()
        if line.strip().startswith("kserve-v2 trace")
    ]
    assert examples
    for argv in examples:  # the last one puts the model's setting back
        result = cli(*argv, "--url", server_url)
        assert result.status == 0, (argv, result.err)


def test_log_get_and_set(cli: Runner, server_url: str) -> None:
    data = cli("log", "--url", server_url, "--json").json()
    assert isinstance(data, dict)
    assert data["log_info"] is True
    result = cli(
        "log", "set", f"log_verbose_level={data['log_verbose_level']}", "--url", server_url
    )
    assert result.status == 0
    assert "log settings (now in force)" in result.out
    assert ["log_verbose_level", str(data["log_verbose_level"])] in [
        line.split() for line in result.out.splitlines()
    ]


def test_settings_usage_errors(cli: Runner, server_url: str) -> None:
    assert cli("log", "set", "--url", server_url).status == 2
    result = cli("log", "set", "novalue", "--url", server_url)
    assert result.status == 2
    assert "set wants KEY=VALUE" in result.err


def test_metrics(cli: Runner, server_url: str, triton: TritonServer) -> None:
    with Client(triton.http_url) as client:
        client.infer("identity_int8", {"INPUT0": np.arange(4, dtype=np.int8).reshape(1, 4)})
    args = ("metrics", "--url", server_url, "--metrics-url", triton.metrics_url)
    data = cli(*args, "--filter", "nv_inference_count", "--json").json()
    assert isinstance(data, dict)
    samples = data["nv_inference_count"]["samples"]
    assert any(s["labels"]["model"] == "identity_int8" and s["value"] >= 1 for s in samples)
    human = cli(*args, "--filter", "nv_inference_count", "--label", "model=identity_int8").out
    rows = [line.split() for line in human.splitlines()]
    assert rows[1][0] == "nv_inference_count"
    assert rows[1][1] == 'model="identity_int8",version="1"'
    assert int(rows[1][2]) >= 1
    assert rows[-1][0] == "1"  # "1 sample(s) of 1 metric(s)"


def test_metrics_url_of_the_inference_port(cli: Runner, triton: TritonServer) -> None:
    result = cli("metrics", "--metrics-url", triton.http_url, "--url", triton.http_url)
    assert result.status == 1
    assert "(HTTP 404)" in result.err
    assert "hint: set --metrics-url to where the server serves metrics" in result.err


# -- infer ----------------------------------------------------------------------------------------


def _outputs(data: object) -> dict[str, object]:
    assert isinstance(data, dict)
    return {o["name"]: o for o in data["outputs"]}


def test_infer_literal_inputs(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "simple", "-i", SIMPLE_IN0, "-i", SIMPLE_IN1, "--url", server_url, "--json"
    )
    assert result.status == 0, result.err
    outputs = _outputs(result.json())
    assert outputs["OUTPUT0"] == {
        "name": "OUTPUT0",
        "datatype": "INT32",
        "shape": [1, 16],
        "data": [list(range(2, 18))],
    }
    assert outputs["OUTPUT1"]["data"] == [list(range(0, 16))]  # type: ignore[index]
    human = cli("infer", "simple", "-i", SIMPLE_IN0, "-i", SIMPLE_IN1, "--url", server_url).out
    lines = human.splitlines()
    assert lines[0] == "model simple version 1"
    assert lines[1] == "OUTPUT0  INT32  [1, 16]"
    assert lines[2].strip().startswith("[[ 2,  3,  4,")


def test_infer_generates_missing_inputs(cli: Runner, server_url: str) -> None:
    # INPUT1 generated from the metadata; a literal without the batch dimension gets it.
    result = cli(
        "infer", "simple", "-i", "INPUT0=[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]", "--seed", "3",
        "--url", server_url, "--json",
    )  # fmt: skip
    assert result.status == 0, result.err
    outputs = _outputs(result.json())
    sums, diffs = outputs["OUTPUT0"]["data"], outputs["OUTPUT1"]["data"]  # type: ignore[index]
    assert np.array(sums).shape == (1, 16)
    assert np.array_equal(np.array(sums), -np.array(diffs))  # INPUT0 is zero: sum = -diff
    again = cli("infer", "simple", "--seed", "3", "--url", server_url, "--json")
    assert again.status == 0


def test_infer_omit_leaves_an_input_out(cli: Runner, server_url: str) -> None:
    # simple's INPUT1 is required: the server's refusal shows the request went without it.
    result = cli("infer", "simple", "--omit", "INPUT1", "--url", server_url)
    assert result.status == 1, result.err
    assert "missing required input(s) ['INPUT1']" in result.err


def test_infer_shape_option_and_bytes(cli: Runner, server_url: str) -> None:
    result = cli("infer", "identity_bytes", "--shape", "INPUT0=2,3", "--url", server_url, "--json")
    (output,) = _outputs(result.json()).values()
    assert output["shape"] == [2, 3]  # type: ignore[index]
    assert all(v.startswith("text-") for row in output["data"] for v in row)  # type: ignore[index]
    text = cli("infer", "identity_bytes", "-i", 'INPUT0=[["héllo","x"]]', "--url", server_url)
    assert "[['héllo', 'x']]" in text.out


def test_infer_datatype_suffix_and_classification(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "classify", "-i", "INPUT0=[0.1,0.7,0.2]:FP32", "--output", "OUTPUT0:2",
        "--url", server_url, "--json",
    )  # fmt: skip
    (output,) = _outputs(result.json()).values()
    assert output["data"] == ["0.700000:1:dog", "0.200000:2:bird"]  # type: ignore[index]


def test_infer_files_stdin_and_save(
    cli: Runner, server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    out_dir = tmp_path / "out"
    result = cli(
        "infer", "identity_fp32", "-i", f"INPUT0=@{tmp_path / 'x.npy'}", "--save", str(out_dir),
        "--url", server_url,
    )  # fmt: skip
    assert result.status == 0, result.err
    assert f"saved {out_dir / 'OUTPUT0.npy'}" in result.out
    assert np.array_equal(np.load(out_dir / "OUTPUT0.npy"), x)
    (tmp_path / "x.json").write_text(json.dumps({"data": [1, 2, 3, 4], "shape": [2, 2]}))
    result = cli(
        "infer", "identity_int32", "-i", f"INPUT0=@{tmp_path / 'x.json'}", "--url", server_url,
        "--json",
    )  # fmt: skip
    assert _outputs(result.json())["OUTPUT0"]["data"] == [[1, 2], [3, 4]]  # type: ignore[index]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"[[7,8,9]]")))
    result = cli("infer", "identity_int32", "-i", "INPUT0=@-", "--url", server_url, "--json")
    assert _outputs(result.json())["OUTPUT0"]["data"] == [[7, 8, 9]]  # type: ignore[index]


def test_infer_shared_memory(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "simple", "-i", SIMPLE_IN0, "-i", SIMPLE_IN1, "--shm", "--url", server_url,
        "--json",
    )  # fmt: skip
    assert result.status == 0, result.err
    outputs = _outputs(result.json())
    assert outputs["OUTPUT0"]["data"] == [list(range(2, 18))]  # type: ignore[index]
    params = outputs["OUTPUT0"]["parameters"]  # type: ignore[index]
    assert params["shared_memory_region"].startswith("kserve_v2_cli_")
    status = cli("shm", "status", "--url", server_url, "--json").json()
    assert not [r for r in status["system"] if r["name"].startswith("kserve_v2_cli_")]  # type: ignore[index]


def test_infer_json_tensors_and_sequence(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "identity_int32", "-i", "INPUT0=[[5]]", "--json-data", "--dump",
        "--url", server_url, "--json",
    )  # fmt: skip
    assert _outputs(result.json())["OUTPUT0"]["data"] == [[5]]  # type: ignore[index]
    if server_url.startswith("http"):
        assert '"data": [5]' in result.err  # JSON tensors (flat) in the request body
        assert "binary INPUT0" not in result.err
    first = cli(
        "infer", "sequence_accumulate", "-i", "INPUT=[4]", "--sequence-id", "4242",
        "--sequence-start", "--url", server_url, "--json",
    )  # fmt: skip
    second = cli(
        "infer", "sequence_accumulate", "-i", "INPUT=[5]", "--sequence-id", "4242",
        "--sequence-end", "--url", server_url, "--json",
    )  # fmt: skip
    assert _outputs(first.json())["OUTPUT"]["data"] == [4]  # type: ignore[index]
    assert _outputs(second.json())["OUTPUT"]["data"] == [9]  # type: ignore[index]


def test_infer_parameters(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "params_echo", "-i", "INPUT0=[1]", "--param", "answer=42", "--param",
        "label=x", "--url", server_url, "--json",
    )  # fmt: skip
    (output,) = _outputs(result.json()).values()
    params = json.loads(output["data"][0])  # type: ignore[index]
    assert params["answer"] == 42
    assert params["label"] == "x"


def test_infer_dump(cli: Runner, server_url: str) -> None:
    result = cli(
        "infer", "simple", "-i", SIMPLE_IN0 + ":INT32", "-i", SIMPLE_IN1 + ":INT32",
        "--no-metadata", "--header", "Authorization=Bearer sekret", "--dump", "--url", server_url,
    )  # fmt: skip
    assert result.status == 0, result.err
    dump = result.err
    assert "sekret" not in dump
    assert "<redacted>" in dump
    assert "\x1b[" not in dump  # no colours when not on a terminal
    if server_url.startswith("http"):
        assert ">> POST /v2/models/simple/infer HTTP/1.1" in dump
        assert "<< HTTP/1.1 200 OK" in dump
        assert '"binary_data_size": 64' in dump
        assert "binary INPUT0 INT32 [1, 16] bytes 231..295 (64 B): [1 2 3 ... 14 15 16]" in dump
        assert "binary OUTPUT0 INT32 [1, 16] bytes" in dump
    else:
        assert ">> gRPC /inference.GRPCInferenceService/ModelInfer" in dump
        assert "<< gRPC /inference.GRPCInferenceService/ModelInfer OK" in dump
        assert 'model_name: "simple"' in dump
        assert "shape: [1, 16]" in dump
        assert "raw_input_contents[0] INPUT0 INT32 [1, 16] bytes" in dump
        assert "(64 B): [1 2 3 ... 14 15 16]" in dump
        assert "raw_output_contents[1] OUTPUT1 INT32 [1, 16]" in dump


def test_infer_on_a_decoupled_model_says_to_stream(cli: Runner, server_url: str) -> None:
    result = cli("infer", "repeat_decoupled", "-i", "REPEAT=[1]", "--url", server_url)
    assert result.status == 1
    assert "decoupled" in result.err
    assert "kserve-v2 stream MODEL" in result.err


# -- stream and generate --------------------------------------------------------------------------


def test_stream(cli: Runner, server_url: str) -> None:
    args = ("stream", "repeat_decoupled", "-i", "IN=[1,2,3]", "-i", "REPEAT=[3]")
    if server_url.startswith("http"):
        result = cli(*args, "--url", server_url)
        assert result.status == 2
        assert "streams are gRPC only" in result.err
        assert "grpc://" in result.err
        return
    responses = cli(*args, "--url", server_url, "--json").json_lines()
    assert [r["final"] for r in responses] == [False, False, False, True]  # type: ignore[index]
    assert [_outputs(r)["IDX"]["data"] for r in responses[:3]] == [[0], [1], [2]]  # type: ignore[index]
    assert responses[3]["outputs"] == []  # type: ignore[index]
    human = cli(*args, "--url", server_url).out
    assert human.count("not final") == 3
    assert "(empty final response)" in human
    assert human.splitlines()[-1] == "4 response(s) to 1 request(s)"


def test_stream_prints_an_error_response_in_its_place_and_goes_on(
    cli: Runner, triton: TritonServer
) -> None:
    args = ("stream", "repeat_decoupled", "-i", "IN=[1]", "-i", "REPEAT=[3]", "-i", "ERROR_AT=[1]")
    url = f"grpc://{triton.grpc_url}"
    result = cli(*args, "--url", url, "--json")
    assert result.status == 1
    lines = result.json_lines()
    assert [r.get("error", "") for r in lines] == [  # type: ignore[attr-defined]
        "",
        "kserve-v2 test failure: deliberate error",
        "",
        "",
    ]
    assert [_outputs(r)["IDX"]["data"] for r in (lines[0], lines[2])] == [[0], [2]]  # type: ignore[index]
    assert lines[3]["final"] is True  # type: ignore[index]
    human = cli(*args, "--url", url)
    assert human.status == 1
    assert "  kserve-v2 test failure: deliberate error" in human.out
    assert human.out.splitlines()[-1] == "4 response(s) to 1 request(s), 1 of them error(s)"


def test_stream_sequence(cli: Runner, triton: TritonServer) -> None:
    # gRPC only: streams are (the HTTP refusal is tested above)
    responses = cli(
        "stream", "sequence_accumulate", "-i", "INPUT=[2]", "--sequence-id", "777",
        "--repeat", "3", "--url", f"grpc://{triton.grpc_url}", "--json",
    ).json_lines()  # fmt: skip
    assert [_outputs(r)["OUTPUT"]["data"] for r in responses] == [[2], [4], [6]]  # type: ignore[index]


def test_generate(cli: Runner, server_url: str) -> None:
    result = cli("generate", "text_generate", "--text", "the quick brown fox", "--url", server_url)
    assert result.status == 0, result.err
    assert result.out == "the quick brown fox\n"
    assert "4 piece(s)" in result.err
    events = cli(
        "generate", "text_generate", "--text", "one two three", "-p", "max_tokens=2",
        "--url", server_url, "--json",
    ).json_lines()  # fmt: skip
    assert [e["text_output"] for e in events] == ["one", " two"]  # type: ignore[index]
    answer = cli(
        "generate", "text_echo", "--text", "hello there", "--no-stream", "--url", server_url,
        "--json",
    ).json()  # fmt: skip
    assert answer["text_output"] == "hello there"  # type: ignore[index]


def test_generate_over_grpc_without_streaming_prints_one_answer(
    cli: Runner, triton: TritonServer
) -> None:
    url = f"grpc://{triton.grpc_url}"
    result = cli(
        "generate", "text_generate", "--text", "one two three", "--no-stream", "--url", url
    )
    assert result.status == 0, result.err
    assert result.out == "one two three\n"
    assert "piece(s)" not in result.err  # the streaming footer
    answer = cli(
        "generate", "text_generate", "--text", "one two", "--no-stream", "--url", url, "--json"
    ).json()
    assert answer["text_output"] == "one two"  # type: ignore[index]
    assert len(answer["events"]) == 2  # type: ignore[index]


def test_generate_over_grpc_checks_a_field_against_its_input(
    cli: Runner, triton: TritonServer
) -> None:
    url = f"grpc://{triton.grpc_url}"
    result = cli("generate", "text_generate", "--text", "a b", "-p", "max_tokens=abc", "--url", url)
    assert result.status == 2  # the user's value, refused before it is sent
    assert "'max_tokens'" in result.err
    assert "'abc' is not a valid INT32 element" in result.err
    assert "Traceback" not in result.err


# -- load and unload (a server with explicit model control) --------------------------------------


@pytest.fixture(scope="module")
def explicit_server(triton_factory: object) -> TritonServer:
    server: TritonServer = triton_factory.start(  # type: ignore[attr-defined]
        model_control_mode="explicit", load_models=["identity_int8"], metrics=False
    )
    return server


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_and_unload(cli: Runner, explicit_server: TritonServer, protocol: str) -> None:
    url = explicit_server.http_url if protocol == "http" else f"grpc://{explicit_server.grpc_url}"
    result = cli("unload", "identity_int8", "--url", url)
    assert result.status == 0, result.err
    assert result.out == "unloaded identity_int8 (UNAVAILABLE)\n"
    models = cli("models", "--url", url, "--json").json()
    assert isinstance(models, list)
    states = {m["name"]: m["state"] for m in models}
    assert states["identity_int8"] == "UNAVAILABLE"  # unload waits until the unload is done
    loaded = cli("load", "identity_int8", "--url", url, "--json").json()
    assert loaded == {"model": "identity_int8", "loaded": True, "ready": True}
    assert cli("health", "identity_int8", "--url", url).status == 0


def test_load_without_explicit_model_control(cli: Runner, server_url: str) -> None:
    result = cli("load", "simple", "--url", server_url)
    assert result.status == 1
    assert "the server says: explicit model load / unload is not allowed" in result.err
    assert "--model-control-mode=explicit" in result.err


# -- errors ---------------------------------------------------------------------------------------


def test_wrong_protocol_hints(cli: Runner, triton: TritonServer) -> None:
    http_on_grpc_port = cli("health", "--url", f"http://{triton.grpc_url}", "--timeout", "5")
    assert http_on_grpc_port.status == 1
    assert f"this port speaks HTTP/2 (gRPC?) — did you mean grpc://{triton.grpc_url}?" in (
        http_on_grpc_port.err
    )
    grpc_on_http_port = cli(
        "health", "--url", triton.http_url.replace("http://", "grpc://"), "--timeout", "5"
    )
    assert grpc_on_http_port.status == 1
    assert f"did you mean {triton.http_url}?" in grpc_on_http_port.err


def test_errors_are_one_line_with_a_hint(cli: Runner, server_url: str) -> None:
    result = cli("metadata", "no_such_model", "--url", server_url)
    assert result.status == 1
    lines = result.err.splitlines()
    assert lines[0].startswith("kserve-v2 metadata: the server says: Request for unknown model")
    assert lines[0].endswith("(HTTP 404)" if server_url.startswith("http") else "(gRPC NOT_FOUND)")
    assert lines[1] == "  hint: `kserve-v2 models` lists the models the server has"
    assert "Traceback" not in result.err


def test_refused_connection(cli: Runner) -> None:
    result = cli("health", "--url", "http://127.0.0.1:9", "--timeout", "5")
    assert result.status == 1
    assert "cannot reach the server" in result.err
    assert "is the server running at http://127.0.0.1:9?" in result.err


def test_debug_shows_the_traceback(cli: Runner, server_url: str) -> None:
    from kserve_v2 import ServerError

    with pytest.raises(ServerError):
        cli("metadata", "no_such_model", "--url", server_url, "--debug")


def test_usage_errors(cli: Runner, server_url: str) -> None:
    result = cli("infer", "simple", "-i", "novalue", "--url", server_url)
    assert result.status == 2
    assert "--input wants NAME=VALUE" in result.err
    result = cli("infer", "simple", "-i", "NOPE=[1]", "--url", server_url)
    assert result.status == 2
    assert "model simple has no input NOPE (inputs: INPUT0, INPUT1)" in result.err
    assert cli("infer", "--url", server_url).status == 2  # argparse: MODEL missing


def test_infer_usage_errors_name_the_value(cli: Runner, server_url: str, tmp_path: Path) -> None:
    result = cli("infer", "simple", "-i", SIMPLE_IN0 + ":INT33", "--url", server_url)
    assert result.status == 2
    assert "--input INPUT0: unknown datatype 'INT33'" in result.err
    result = cli("infer", "identity_fp32", "--shape", "NOPE=1,2", "--url", server_url)
    assert result.status == 2
    assert "--shape NOPE: model identity_fp32 has no such input (inputs: INPUT0)" in result.err
    big, small = tmp_path / "big.npy", tmp_path / "small.npy"
    np.save(big, np.array([[1000, 2]], dtype=np.int64))
    np.save(small, np.array([[1, 2]], dtype=np.int64))
    result = cli("infer", "identity_int8", "-i", f"INPUT0=@{big}", "--url", server_url)
    assert result.status == 2
    assert "the int64 values do not all fit INT8" in result.err
    assert "hint: convert them to INT8 first" in result.err
    result = cli("infer", "identity_int8", "-i", f"INPUT0=@{small}:INT8", "--url", server_url)
    assert result.status == 0, result.err
    assert "OUTPUT0  INT8  [1, 2]" in result.out


# -- the real entry point -------------------------------------------------------------------------


def test_entry_point_in_a_subprocess(triton: TritonServer) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kserve_v2", "infer", "simple", "-i", SIMPLE_IN0, "-i",
         SIMPLE_IN1, "--url", f"grpc://{triton.grpc_url}", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _outputs(json.loads(proc.stdout))["OUTPUT0"]["data"] == [list(range(2, 18))]  # type: ignore[index]
    proc = subprocess.run(
        [sys.executable, "-m", "kserve_v2", "metadata", "nope", "--url", triton.http_url],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("kserve-v2 metadata: the server says:")
