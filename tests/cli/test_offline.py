"""The CLI's pieces that need no server: input parsing, ranges, histograms, the dump's
formatting of HTTP bodies and gRPC messages, saved HTTP messages, encode/decode, and what
``--help`` imports."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kserve_v2 import InferInput, InferRequest, InvalidInputError, RequestedOutput, ServerError
from kserve_v2.cli import COMMANDS, _tensors
from kserve_v2.cli._common import CLIError, describe_error, parse_headers
from kserve_v2.cli._httpmsg import parse_http_message
from kserve_v2.cli.dump import (
    DumpPrinter,
    describe_body,
    describe_grpc_message,
    field_spans,
    pretty_json,
)
from kserve_v2.cli.perf import parse_range
from kserve_v2.cli.perf.histogram import LatencyHistogram
from kserve_v2.cli.perf.report import histogram_text
from kserve_v2.hooks import WireMessage
from kserve_v2.messages import InferResult, ModelMetadata, OutputTensor, TensorMetadata
from kserve_v2.rest import codec as rest_codec
from tests.cli.conftest import Runner
from tests.local_http import JSONHandler, serving

ROOT = Path(__file__).resolve().parents[2]


# -- --input and friends --------------------------------------------------------------------------


def test_parse_input_forms(tmp_path: Path) -> None:
    spec = _tensors.parse_input("X=[[1,2],[3,4]]:FP16")
    assert (spec.name, spec.value, spec.datatype) == ("X", [[1, 2], [3, 4]], "FP16")
    assert _tensors.parse_input("T=hello world").value == ["hello world"]  # text: BYTES
    assert _tensors.parse_input("T=a:b").value == ["a:b"]  # not a datatype suffix
    assert _tensors.parse_input("N=3.5").value == 3.5
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.uint16))
    loaded = _tensors.parse_input(f"A=@{tmp_path / 'a.npy'}").value
    assert loaded.dtype == np.uint16
    (tmp_path / "b.json").write_text('{"data": [1, 2], "datatype": "int8", "shape": [2, 1]}')
    spec = _tensors.parse_input(f"B=@{tmp_path / 'b.json'}")
    assert (spec.value, spec.datatype, spec.shape) == ([1, 2], "INT8", (2, 1))
    import io

    stdin = io.BytesIO(b"[1, 2, 3]")
    assert _tensors.parse_input("C=@-", stdin=stdin).value == [1, 2, 3]
    with pytest.raises(CLIError, match="NAME=VALUE"):
        _tensors.parse_input("novalue")
    with pytest.raises(CLIError, match="cannot read"):
        _tensors.parse_input(f"D=@{tmp_path / 'missing.npy'}")


def test_build_inputs_uses_the_metadata() -> None:
    metadata = ModelMetadata(
        "m",
        inputs=(
            TensorMetadata("A", "INT32", (-1, 3)),
            TensorMetadata("B", "FP32", (-1, -1)),
            TensorMetadata("C", "BYTES", (2,)),
        ),
    )
    specs = [_tensors.parse_input("A=[1,2,3]")]
    inputs = _tensors.build_inputs(specs, metadata, shapes={"B": (2, 5)}, seed=1)
    by_name = {i.name: i for i in inputs}
    assert by_name["A"].datatype.value == "INT32"  # the model's, not JSON's INT64
    assert by_name["A"].shape == (1, 3)  # the batch dimension added
    assert by_name["B"].shape == (2, 5)
    assert by_name["B"].data is not None
    assert by_name["B"].data.dtype == np.float32
    assert by_name["C"].shape == (2,)
    again = _tensors.build_inputs(specs, metadata, shapes={"B": (2, 5)}, seed=1)
    assert np.array_equal(again[1].data, inputs[1].data)  # type: ignore[arg-type]
    skipped = _tensors.build_inputs(specs, metadata, skip=["B", "C"])
    assert [i.name for i in skipped] == ["A"]
    with pytest.raises(CLIError, match="do not all fit INT32"):
        _tensors.build_inputs(
            [_tensors.InputSpec("A", np.array([1.5, 2, 3]))], metadata, skip=["B", "C"]
        )
    with pytest.raises(CLIError, match="model m has no input Z"):
        _tensors.build_inputs([_tensors.parse_input("Z=[1]")], metadata)
    # Text that is not JSON is one string: for a numeric input, the error says how to write it.
    with pytest.raises(CLIError, match="'A': str value '1,2,3' is not a valid INT32") as info:
        _tensors.build_inputs([_tensors.parse_input("A=1,2,3")], metadata, skip=["B", "C"])
    assert "--input 'A=[[1,2,3]]'" in info.value.hint
    with pytest.raises(InvalidInputError, match=r"'A': float value 1\.5"):  # JSON, no hint
        _tensors.build_inputs([_tensors.parse_input("A=[1.5]")], metadata, skip=["B", "C"])
    (text,) = _tensors.build_inputs([_tensors.parse_input("C=hi")], metadata, skip=["A", "B"])
    assert text.data is not None
    assert text.data.tolist() == [b"hi"]


def test_outputs_shapes_and_headers() -> None:
    outputs = _tensors.parse_outputs(["OUT", "PROBS:3", "a:b"])
    assert [(o.name, o.class_count) for o in outputs] == [("OUT", 0), ("PROBS", 3), ("a:b", 0)]
    assert _tensors.parse_shapes(["X=1,16", "Y=2x3"]) == {"X": (1, 16), "Y": (2, 3)}
    with pytest.raises(CLIError):
        _tensors.parse_shapes(["X=a"])
    assert parse_headers(["A=1", "B: two", "C=x=y"]) == [("A", "1"), ("B", "two"), ("C", "x=y")]
    with pytest.raises(CLIError):
        parse_headers(["=x"])


def test_parse_range() -> None:
    assert parse_range("1:32:x2", "c", integer=True) == [1, 2, 4, 8, 16, 32]
    assert parse_range("1:8:3", "c", integer=True) == [1, 4, 7, 8]  # END always measured
    assert parse_range("1:3", "c", integer=True) == [1, 2, 3]
    assert parse_range("1,4,16", "c", integer=True) == [1, 4, 16]
    assert parse_range("50:100:25", "r", integer=False) == [50.0, 75.0, 100.0]
    with pytest.raises(CLIError):
        parse_range("1:2:3:4", "c", integer=True)


# -- histograms -----------------------------------------------------------------------------------


def test_histograms_merge_exactly_and_percentiles_are_close() -> None:
    rng = random.Random(7)
    samples = [int(rng.lognormvariate(13, 0.6)) for _ in range(20_000)]
    parts = [LatencyHistogram() for _ in range(4)]
    whole = LatencyHistogram()
    for i, ns in enumerate(samples):
        parts[i % 4].record(ns)
        whole.record(ns)
    merged = LatencyHistogram.merged(parts)
    assert merged.buckets == whole.buckets
    assert (merged.count, merged.total, merged.min, merged.max) == (
        whole.count, whole.total, whole.min, whole.max,
    )  # fmt: skip
    exact = sorted(samples)
    for p in (50, 90, 95, 99):
        true = exact[max(0, int(len(exact) * p / 100 + 0.5) - 1)]
        assert abs(merged.percentile(p) - true) / true < 0.025  # one bucket: 2**(1/32) - 1
    assert merged.mean() == sum(samples) / len(samples)
    assert LatencyHistogram.from_dict(json.loads(json.dumps(merged.to_dict()))).buckets == (
        merged.buckets
    )
    text = histogram_text(merged, bins=10)
    assert sum(int(line.rsplit("| ", 1)[1]) for line in text.splitlines()) == len(samples)


def test_empty_histogram() -> None:
    h = LatencyHistogram()
    assert (h.percentile(99), h.mean()) == (0.0, 0.0)
    assert histogram_text(h) == "(no requests)"


# -- the dump -------------------------------------------------------------------------------------


def test_pretty_json_elides_long_arrays() -> None:
    text = pretty_json({"a": list(range(40)), "b": [[1, 2], [3, 4]], "c": [{"x": 1}]})
    assert '"a": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, … (40 values)]' in text
    assert '"b": [[1,2],[3,4]]' in text
    assert '"x": 1' in text


def _request() -> InferRequest:
    return InferRequest(
        "simple",
        (
            InferInput("INPUT0", np.arange(16, dtype=np.int32).reshape(1, 16)),
            InferInput("TEXT", np.array([b"hello", b"x"], dtype=object)),
        ),
        (RequestedOutput("OUTPUT0"),),
    )


def test_describe_http_body_binary_sections() -> None:
    body = rest_codec.encode_infer_request(_request())
    headers = dict(body.headers)
    length = int(headers[rest_codec.HEADER_LENGTH])
    lines = describe_body(body.join(), headers)
    assert lines[0] == f"JSON header: bytes 0..{length}; binary part: bytes {length}..{body.length}"
    assert (
        f"binary INPUT0 INT32 [1, 16] bytes {length}..{length + 64} (64 B): [0 1 2 ... 13 14 15]"
        in lines
    )
    text_line = next(line for line in lines if line.startswith("binary TEXT"))
    assert text_line.endswith("(14 B): hex 05000000 68656c6c 6f010000 0078")
    assert describe_body(b'{"live": true}', {"content-type": "application/json"}) == [
        "{",
        '  "live": true',
        "}",
    ]


def test_describe_grpc_message_raw_contents() -> None:
    pytest.importorskip("google.protobuf")
    from kserve_v2.grpc import codec as grpc_codec

    data = grpc_codec.encode_infer_request(_request())
    lines = describe_grpc_message("/inference.GRPCInferenceService/ModelInfer", "send", data)
    assert lines[0] == f"# ModelInferRequest, {len(data)} B"
    assert 'model_name: "simple"' in lines
    assert "  shape: [1, 16]" in lines
    spans = field_spans(data, 0, len(data), 7)  # raw_input_contents
    assert len(spans) == 2
    assert data[spans[0][0] : spans[0][1]] == np.arange(16, dtype="<i4").tobytes()
    assert (
        f"raw_input_contents[0] INPUT0 INT32 [1, 16] bytes {spans[0][0]}..{spans[0][1]} (64 B): "
        "[0 1 2 ... 13 14 15]"
    ) in lines
    unknown = describe_grpc_message("/x.Y/Z", "send", b"\x01\x02")
    assert unknown == ["2 B: hex 0102"]


def test_dump_printer_colours_and_redaction() -> None:
    import io

    stream = io.StringIO()
    printer = DumpPrinter(stream, color=True)
    printer(
        WireMessage("send", "http", "GET", "/v2/health/live", (("Authorization", "Bearer x"),), ())
    )
    printer(WireMessage("receive", "http", "GET", "/v2/health/live", (), (), 200, 0.001))
    out = stream.getvalue()
    assert "\x1b[1;36m>> GET /v2/health/live HTTP/1.1\x1b[0m" in out
    assert "<redacted>" in out
    assert "Bearer x" not in out
    assert "HTTP/1.1 200 OK" in out


# -- saved HTTP messages, encode and decode -------------------------------------------------------


def test_parse_http_message_chunked_and_continue() -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nInference-Header-Content-Length: 2\r\n"
        b"\r\n3\r\n{}a\r\n0\r\n\r\n"
    )
    message = parse_http_message(raw)
    assert message.first_line == "HTTP/1.1 200 OK"
    assert message.headers["inference-header-content-length"] == "2"
    assert message.body == b"{}a"
    assert not message.is_request


def test_encode_then_decode(cli: Runner, tmp_path: Path) -> None:
    body = tmp_path / "body.bin"
    result = cli(
        "encode", "-i", "INPUT0=[[1,2,3]]:INT32", "-i", 'TEXT=["a","bc"]', "-o", "OUTPUT0:2",
        "--model", "m", "--body", str(body), "--json",
    )  # fmt: skip
    assert result.status == 0, result.err
    info = result.json()
    assert isinstance(info, dict)
    assert info["content_length"] == body.stat().st_size
    assert f"-H 'Inference-Header-Content-Length: {info['header_length']}'" in info["curl"]
    assert info["curl"].endswith("/v2/models/m/infer")
    decoded = cli("decode", str(body), "--header-length", str(info["header_length"]), "--json")
    data = decoded.json()
    assert isinstance(data, dict)
    assert data["kind"] == "request"
    assert data["inputs"] == [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 3], "data": [[1, 2, 3]]},
        {"name": "TEXT", "datatype": "BYTES", "shape": [2], "data": ["a", "bc"]},
    ]
    assert data["header"]["outputs"] == [
        {"name": "OUTPUT0", "parameters": {"classification": 2, "binary_data": True}}
    ]
    human = cli("decode", str(body), "--header-length", str(info["header_length"])).out
    assert (
        human.splitlines()[0]
        == f"request body ({info['content_length']} B, JSON header {info['header_length']} B)"
    )
    assert "INPUT0  INT32  [1, 3]" in human
    missing = cli("decode", str(body))
    assert missing.status == 2
    assert "give --header-length" in missing.err


def test_decode_a_saved_response(cli: Runner, tmp_path: Path) -> None:
    result = InferResult(
        "m", "1", outputs=(OutputTensor("Y", "FP32", (2,), np.array([1.5, 2], np.float32)),)
    )
    body = rest_codec.encode_infer_response(result)
    head = "".join(f"{k}: {v}\r\n" for k, v in body.headers)
    saved = tmp_path / "response.http"
    saved.write_bytes(
        f"HTTP/1.1 200 OK\r\n{head}Content-Length: {body.length}\r\n\r\n".encode() + body.join()
    )
    data = cli("decode", str(saved), "--json").json()
    assert isinstance(data, dict)
    assert data["kind"] == "response"
    assert data["http"]["first_line"] == "HTTP/1.1 200 OK"
    assert data["outputs"] == [{"name": "Y", "datatype": "FP32", "shape": [2], "data": [1.5, 2.0]}]
    human = cli("decode", str(saved)).out
    assert "binary Y FP32 [2] bytes" in human
    assert "Y  FP32  [2]" in human


def test_encode_refuses_a_terminal(cli: Runner) -> None:
    assert cli("encode").status == 2  # no inputs


# -- help and imports -----------------------------------------------------------------------------


def test_every_command_has_help(cli: Runner) -> None:
    for name in COMMANDS:
        result = cli(name, "--help")
        assert result.status == 0, name
        assert result.out.startswith("usage: kserve-v2 " + name), name
    top = cli("--help")
    for name in COMMANDS:
        assert f"    {name}" in top.out


def test_help_imports_only_the_chosen_command() -> None:
    code = (
        "import sys\n"
        "from kserve_v2.cli import main\n"
        "try:\n"
        "    main(['infer', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "mods = [m for m in sys.modules if m.startswith('kserve_v2.cli.')]\n"
        "heavy = [m for m in ('google.protobuf', 'grpc', 'httpx', 'kserve_v2.cli.perf',\n"
        "    'kserve_v2.cli.dump', 'kserve_v2.conformance') if m in sys.modules]\n"
        "print(sorted(mods), heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    modules, heavy = proc.stderr.strip().rsplit("] [", 1)
    assert heavy == "]"
    assert "kserve_v2.cli.infer" in modules
    assert "kserve_v2.cli.health" not in modules


def test_describe_error_for_plain_exceptions() -> None:
    assert describe_error(FileNotFoundError(2, "No such file", "x.npy"), "http://h") == (
        "No such file: x.npy",
        "",
    )
    assert describe_error(ValueError("boom"), "http://h") == ("ValueError: boom", "")


def test_pyproject_names_the_entry_point() -> None:
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+)
    assert '\nkserve-v2 = "kserve_v2.cli:main"\n' in text
    assert "\ncli = [" in text  # the optional extra: rich, matplotlib


# -- what a usage error or a server's refusal says ----------------------------------------------


class _BareHandler(JSONHandler):
    """A server that is no KServe v2 one: 404 for health, no extensions, 400 for POST."""

    def do_GET(self) -> None:
        if self.path == "/v2":
            self._send(200, b'{"name": "bare", "version": "0", "extensions": []}')
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(400, b'{"error": "cannot parse the body"}')


@pytest.fixture
def bare_url() -> Iterator[str]:
    with serving(_BareHandler) as url:
        yield url


MODELS_HINT = "`kserve-v2 models` lists the models the server has"
EXTENSION_HINT = "this server may not implement that extension (see `kserve-v2 metadata`)"


def test_not_found_hints_fit_the_command() -> None:
    unknown = ServerError("Request for unknown model: 'nope' is not found", http_status=404)
    plain = ServerError("Not Found", http_status=404)
    region = ServerError("Unable to find system shared memory region: 'r'", http_status=404)

    def hint(exc: ServerError, command: str, model: str = "") -> str:
        return describe_error(exc, "http://h", command=command, model=model)[1]

    assert hint(unknown, "metadata", "nope") == MODELS_HINT
    assert hint(unknown, "config", "nope") == MODELS_HINT
    assert hint(plain, "infer", "m") == MODELS_HINT  # v2/models/m/infer: about the model
    assert hint(plain, "models") == EXTENSION_HINT  # never the command that just failed
    for command in ("config", "stats", "trace", "log", "shm", "generate", "load"):
        assert hint(plain, command, "m" if command != "shm" else "") == EXTENSION_HINT
    assert (
        hint(region, "shm")
        == "`kserve-v2 shm status` without --region lists the registered regions"
    )
    assert hint(region, "infer", "m") == "`kserve-v2 shm status` lists the registered regions"
    assert "--metrics-url" in hint(plain, "metrics")
    grpc = ServerError("Unable to find system shared memory region: 'r'", grpc_code="NOT_FOUND")
    assert "shm status" in hint(grpc, "shm")


def test_extension_endpoints_missing_over_http(cli: Runner, stub_url: str) -> None:
    for argv in (("trace", "get"), ("log",), ("shm", "status"), ("stats",)):
        result = cli(*argv, "--url", stub_url)
        assert result.status == 1, argv
        assert "(HTTP 404)" in result.err, argv
        assert f"hint: {EXTENSION_HINT}" in result.err, argv
    config = cli("config", "nope", "--url", stub_url)
    assert f"hint: {MODELS_HINT}" in config.err  # the stub's 404 says "unknown model"
    metrics = cli("metrics", "--metrics-url", f"{stub_url}/metrics", "--url", stub_url)
    assert metrics.status == 1
    assert "hint: set --metrics-url to where the server serves metrics" in metrics.err
    assert MODELS_HINT not in metrics.err


def test_refused_metrics_point_at_metrics_url(cli: Runner) -> None:
    result = cli("metrics", "--metrics-url", "http://127.0.0.1:9/metrics", "--timeout", "5")
    assert result.status == 1
    assert "cannot reach the server" in result.err
    assert "hint: set --metrics-url to where the server serves metrics" in result.err
    assert "--url" not in result.err


def test_unknown_datatype_suffix(tmp_path: Path) -> None:
    with pytest.raises(CLIError, match="--input INPUT0: unknown datatype 'INT33'"):
        _tensors.parse_input("INPUT0=[[1,2,3]]:INT33")
    assert _tensors.parse_input("T=hello:WORLD").value == ["hello:WORLD"]  # text, not JSON
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.int64))
    spec = _tensors.parse_input(f"X=@{tmp_path / 'x.npy'}:INT8")
    assert (spec.datatype, spec.value.tolist()) == ("INT8", [0, 1, 2])
    with pytest.raises(CLIError, match="unknown datatype 'INT33'"):
        _tensors.parse_input(f"X=@{tmp_path / 'x.npy'}:INT33")
    odd = tmp_path / "odd.json:INT8"  # a file whose own name ends like a suffix
    odd.write_text("[1, 2]")
    assert _tensors.parse_input(f"X=@{odd}").datatype is None
    with pytest.raises(CLIError, match="cannot read"):
        _tensors.parse_input(f"X=@{tmp_path / 'missing.npy'}:INT8")


def test_shape_and_values_that_do_not_fit() -> None:
    metadata = ModelMetadata("m", inputs=(TensorMetadata("INPUT0", "INT8", (-1, -1)),))
    with pytest.raises(
        CLIError, match=r"--shape NOPE: model m has no such input \(inputs: INPUT0\)"
    ):
        _tensors.build_inputs([], metadata, shapes={"NOPE": (1, 2)})
    with pytest.raises(CLIError, match="--shape NOPE: no --input of that name"):
        _tensors.build_inputs([_tensors.parse_input("X=[1]")], None, shapes={"NOPE": (1,)})
    big = _tensors.InputSpec("INPUT0", np.array([[1000]], dtype=np.int64))
    with pytest.raises(CLIError, match="the int64 values do not all fit INT8") as caught:
        _tensors.build_inputs([big], metadata)
    assert caught.value.hint == "convert them to INT8 first"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--measurement-interval", "0", "--measurement-interval must be positive, got 0"),
        ("--percentile", "150", "--percentile must be 1 to 100, got 150"),
        ("--stability", "-5", "--stability must be a percentage >= 0, got -5"),
        ("--max-trials", "0", "--max-trials must be at least 1, got 0"),
        ("--measurement-request-count", "0", "--measurement-request-count must be at least 1"),
    ],
)
def test_perf_measurement_options_out_of_range(
    cli: Runner, option: str, value: str, message: str
) -> None:
    result = cli("perf", "simple", option, value, "--url", "http://127.0.0.1:9")
    assert result.status == 2
    assert message in result.err
    assert "cannot reach" not in result.err  # refused before the server is asked


def test_binary_refused_names_the_cli_option(cli: Runner, bare_url: str) -> None:
    result = cli(
        "infer", "m", "--binary", "--no-metadata", "-i", "X=[1,2]:INT32", "--url", bare_url
    )
    assert result.status == 1
    assert "binary=False" not in result.err
    assert "cannot parse the body (HTTP 400)" in result.err
    assert "hint: this server may not support binary tensors: try --json-data" in result.err


def test_health_says_what_the_server_answered(cli: Runner, bare_url: str) -> None:
    result = cli("health", "--url", bare_url)
    assert result.status == 1
    assert "live:  no (the server answered HTTP 404)" in result.out
    data = cli("health", "--url", bare_url, "--json").json()
    assert isinstance(data, dict)
    assert (data["live"], data["live_status"]) == (False, 404)


def test_health_json_of_an_unreachable_server(cli: Runner) -> None:
    # Like every command's --json: the error goes to stderr, stdout stays empty, exit 1.
    result = cli("health", "--url", "http://127.0.0.1:9", "--timeout", "5", "--json")
    assert result.status == 1
    assert result.out == ""
    assert "cannot reach the server" in result.err


def test_connection_option_usage_errors(cli: Runner, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.pem"
    for argv, message in (
        (("--ca-file", str(missing)), f"--ca-file: no such file {missing}"),
        (("--key-file", str(missing)), "--key-file needs --cert-file"),
        (("--timeout", "0"), "argument --timeout: wants a positive number of seconds, not '0'"),
        (("--timeout", "-1"), "argument --timeout: wants a positive number of seconds, not '-1'"),
    ):
        result = cli("health", "--url", "https://127.0.0.1:9", *argv)
        assert result.status == 2, argv
        assert message in result.err, argv
    result = cli("conformance", "--http", "http://127.0.0.1:9", "--timeout", "0")
    assert result.status == 2
    assert "argument --timeout: wants a positive number of seconds" in result.err


def test_decode_refuses_what_is_not_a_body(cli: Runner, tmp_path: Path) -> None:
    body = tmp_path / "body.bin"
    assert cli("encode", "-i", "X=[1,2]:INT32", "--body", str(body)).status == 0
    size = body.stat().st_size
    too_long = cli("decode", str(body), "--header-length", "99999")
    assert too_long.status == 2
    assert f"--header-length 99999 is larger than the body ({size} bytes)" in too_long.err
    negative = cli("decode", str(body), "--header-length", "-1")
    assert negative.status == 2
    assert "--header-length must be >= 0, got -1" in negative.err
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert f"{empty} is empty" in cli("decode", str(empty)).err
    dump = tmp_path / "dump.txt"
    dump.write_text(">> POST /v2/models/simple/infer HTTP/1.1\n   content-type: application/json\n")
    result = cli("decode", str(dump))
    assert result.status == 2
    assert "looks like --dump output, which is not a body" in result.err
    assert "hint:" in result.err


def test_encode_to_stdout_suggests_a_pipe() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kserve_v2", "encode", "-i", "X=[1,2]:INT32"],
        capture_output=True, cwd=ROOT, timeout=120, check=True,
    )  # fmt: skip
    assert proc.stdout  # the body
    err = proc.stderr.decode()
    assert "| curl " in err
    assert "--data-binary @- " in err
    assert "body.bin" not in err
    help_text = subprocess.run(
        [sys.executable, "-m", "kserve_v2", "encode", "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "generated" not in help_text
    assert "--seed" not in help_text
