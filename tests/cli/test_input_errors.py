"""Mistakes of the user, every command alike: one line naming what is wrong, exit 2 (the
server's failures exit 1; conformance's unchecked server 3). TLS files that are not PEM, and
captured bodies that are not of the kind asked (decode --request / --response)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kserve_v2.messages import InferResult, OutputTensor
from kserve_v2.rest import codec as rest_codec
from tests.cli.conftest import CLIResult, Runner
from tests.conftest import TLSCerts

#: Nothing listens there: a command that got as far as connecting would exit 1.
NOWHERE = "http://127.0.0.1:9"
GRPC_NOWHERE = "grpc://127.0.0.1:9"


def _assert_one_line(result: CLIResult, command: str, message: str) -> None:
    """The error is one line (and maybe a hint), names ``message``, and no traceback."""
    lines = result.err.splitlines()
    assert lines, result
    assert lines[0].startswith(f"kserve-v2 {command}: "), result.err
    assert message in lines[0], result.err
    assert all(line.startswith("  hint: ") for line in lines[1:]), result.err
    assert "Traceback" not in result.err
    assert "broke the protocol" not in result.err


# (argv, what the error line says); {tmp} is a directory holding garbage.pem, and whose
# "missing" and "no" entries do not exist.
USAGE_ERRORS = [
    # --input values: malformed, an unknown datatype, a value the datatype cannot hold, a
    # missing file; values that make no tensor
    (("infer", "m", "-i", "novalue"), "--input wants NAME=VALUE"),
    (("infer", "m", "--no-metadata", "-i", "X=[1]:INT33"), "unknown datatype 'INT33'"),
    (
        ("infer", "m", "--no-metadata", "-i", "X=[1.5]:INT32"),
        "tensor 'X': float value 1.5 is not a valid INT32 element",
    ),
    (("infer", "m", "-i", "X=@{tmp}/missing.npy"), "--input X: cannot read"),
    (("infer", "m", "--no-metadata", "-i", "X=[1]", "--shm-output-size", "0"), "must be positive"),
    (("infer", "m", "--no-metadata", "-i", "X=[1]", "--save", "{tmp}/garbage.pem/out"), "--save"),
    (("infer", "m", "--no-metadata", "-i", "X=[1]", "--omit", "Y"), "--no-metadata makes none"),
    (("encode", "-i", "X=[[1],[2,3]]"), "input 'X': cannot make a tensor of this data"),
    (("encode", "-i", "X=[1]", "--shape", "X=5"), "shape [5] needs 5 element(s), data has 1"),
    (("encode", "-i", "X=[1]", "--body", "{tmp}/no/b.bin"), "--body: cannot write"),
    (
        ("stream", "m", "--url", GRPC_NOWHERE, "--no-metadata", "-i", "X=[1.5]:INT32"),
        "float value 1.5 is not a valid INT32 element",
    ),
    (("stream", "m", "--url", NOWHERE), "streams are gRPC only"),
    (("generate", "m", "--text", "a", "-p", "novalue"), "--param wants KEY=VALUE"),
    # URLs: an unknown scheme, a port that is not a number, no host
    (("infer", "m", "--url", "ftp://host"), "unsupported URL scheme 'ftp'"),
    (("generate", "m", "--text", "a", "--url", "ftp://host"), "unsupported URL scheme"),
    (("health", "--url", "http://host:abc"), "invalid port in server URL"),
    (("unload", "m", "--url", "localhost:abc"), "invalid port in server URL"),
    (("metadata", "--url", "grpc://"), "has no host"),
    (("metrics", "--metrics-url", "ftp://host"), "metrics URL 'ftp://host' must be http://"),
    # TLS options: missing files, conflicting with the URL or with each other
    (("stats", "--url", "https://127.0.0.1:9", "--cert-file", "{tmp}/missing.pem"), "no such"),
    (("shm", "status", "--key-file", "{tmp}/garbage.pem"), "--key-file needs --cert-file"),
    (("models", "--ca-file", "{tmp}/garbage.pem"), "TLS options given for a plain-text URL"),
    (("log", "--url", "grpcs://127.0.0.1:9", "--insecure"), "--insecure works with https://"),
    # settings and model control
    (("trace", "set", "novalue"), "set wants KEY=VALUE"),
    (("log", "get", "x=1"), "settings are given with `set KEY=VALUE ...`"),
    (("load", "m", "--config", "@{tmp}/missing.json"), "--config: cannot read"),
    (("load", "m", "--config", "{{"), "--config is not valid JSON"),
    (("load", "m", "--file", "novalue"), "--file wants PATH=LOCAL"),
    (("load", "m", "--config", "{{}}", "--file", "1/a={tmp}/missing"), "--file 1/a: cannot read"),
    # offline files
    (("decode", "{tmp}/missing.bin"), "cannot read"),
    (("decode", "{tmp}"), "cannot read"),
    (("decode", "{tmp}/garbage.pem"), "the body is not all JSON"),
    # perf: refused before the sweep, whose results a bad path would lose
    (("perf", "m", "--csv", "{tmp}/no/x.csv"), "--csv: cannot write"),
    (("perf", "m", "--output-shared-memory-size", "-1"), "must be >= 0, got -1"),
    (("perf", "m", "--dump"), "--dump does not go with perf"),
    # conformance: its own statuses keep 2 for usage errors
    (("conformance", "--http", NOWHERE, "--header", "novalue"), "--header wants NAME=VALUE"),
    (("conformance", "--http", "http://host:abc"), "--http http://host:abc: Port"),
    (("conformance", "--grpc", "grpc://"), "--grpc grpc://: no host"),
    (("conformance", "--http", NOWHERE, "--report", "{tmp}/no/r.json"), "--report: cannot"),
    (("conformance", "--http", GRPC_NOWHERE), "the scheme must be http or https"),
]


def _case_id(value: object) -> str | None:
    return " ".join(value)[:60] if isinstance(value, tuple) else None


@pytest.mark.parametrize(("argv", "message"), USAGE_ERRORS, ids=_case_id)
def test_usage_errors_exit_2_with_one_line(
    cli: Runner,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    message: str,
) -> None:
    monkeypatch.setenv("KSERVE_V2_URL", NOWHERE)  # where --url is not given
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    args = [a.format(tmp=tmp_path) for a in argv]
    result = cli(*args)  # none gets as far as connecting
    assert result.status == 2, (args, result.err)
    _assert_one_line(result, argv[0], message.format(tmp=tmp_path))


def test_failures_that_are_not_the_users_keep_their_status(cli: Runner) -> None:
    refused = cli("health", "--url", NOWHERE, "--timeout", "5")
    assert refused.status == 1
    _assert_one_line(refused, "health", "cannot reach the server")
    unchecked = cli("conformance", "--http", NOWHERE, "--only", "rest.health.live*", "-q")
    assert unchecked.status == 3  # documented: the server could not be checked


def test_the_servers_refusals_exit_1_and_bad_values_2(cli: Runner, server_url: str) -> None:
    # The model's metadata makes INPUT0 INT32: a value it cannot hold is the user's mistake.
    bad_value = cli("infer", "simple", "-i", "INPUT0=[[1.5]]", "--url", server_url)
    assert bad_value.status == 2, bad_value.err
    _assert_one_line(bad_value, "infer", "float value 1.5 is not a valid INT32 element")
    refused = cli("infer", "simple", "-o", "NOPE", "--url", server_url)
    assert refused.status == 1, refused.err
    _assert_one_line(refused, "infer", "the server says: ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--omit", "NOPE"), "--omit NOPE: model simple has no such input (inputs: INPUT0, INPUT"),
        (("--omit", "INPUT1", "-i", "INPUT1=[[1]]"), "--omit INPUT1: also given to --input"),
        (("--omit", "INPUT1", "--shape", "INPUT1=1,16"), "--omit INPUT1: also given to --shape"),
    ],
    ids=_case_id,
)
def test_omit_names_a_model_input_no_other_option_gives(
    cli: Runner, server_url: str, argv: tuple[str, ...], message: str
) -> None:
    result = cli("infer", "simple", *argv, "--url", server_url)
    assert result.status == 2, result.err
    _assert_one_line(result, "infer", message)


# -- TLS files that are not PEM -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1:9", "grpcs://127.0.0.1:9", "grpcs://127.0.0.1:9 grpcio"],
)
@pytest.mark.parametrize(
    ("options", "culprit", "message"),
    [
        ({"--ca-file": "garbage"}, "garbage", "--ca-file '{}' is not a PEM certificate"),
        ({"--ca-file": "empty"}, "empty", "--ca-file '{}' is not a PEM certificate"),
        (
            {"--cert-file": "garbage", "--key-file": "client_key"},
            "garbage",
            "--cert-file '{}' is not a PEM certificate",
        ),
        (
            {"--cert-file": "client_cert", "--key-file": "garbage"},
            "garbage",
            "--key-file '{}' is not a PEM private key",
        ),
        (
            {"--cert-file": "client_cert", "--key-file": "empty"},
            "empty",
            "--key-file '{}' is not a PEM private key",
        ),
    ],
)
def test_tls_files_that_are_not_pem(
    cli: Runner,
    tls_certs: TLSCerts,
    tmp_path: Path,
    url: str,
    options: dict[str, str],
    culprit: str,
    message: str,
) -> None:
    (tmp_path / "garbage").write_text("-----BEGIN NOTHING-----\nnot base64\n")
    (tmp_path / "empty").write_bytes(b"")

    def path(name: str) -> str:
        given = getattr(tls_certs, name, None)
        return str(given if given is not None else tmp_path / name)

    argv = ["health", "--url", url.split()[0], "--timeout", "5"]
    if url.endswith("grpcio"):
        argv += ["--grpc-transport", "grpcio"]
    for option, name in options.items():
        argv += [option, path(name)]
    result = cli(*argv)
    assert result.status == 2, result.err
    _assert_one_line(result, "health", message.format(path(culprit)))
    assert "PEM lib" not in result.err
    assert "_ssl.c" not in result.err


# -- decode: a body of the other kind --------------------------------------------------------------


def _response_body() -> tuple[bytes, int]:
    result = InferResult(
        "m", "1", outputs=(OutputTensor("Y", "INT32", (2,), np.array([1, 2], np.int32)),)
    )
    body = rest_codec.encode_infer_response(result)
    return body.join(), int(dict(body.headers)[rest_codec.HEADER_LENGTH])


def test_decode_request_given_a_response(cli: Runner, tmp_path: Path) -> None:
    data, header_length = _response_body()
    saved = tmp_path / "response.http"
    saved.write_bytes(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        + f"{rest_codec.HEADER_LENGTH}: {header_length}\r\n".encode()
        + f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    body = tmp_path / "response.bin"
    body.write_bytes(data)
    as_json = tmp_path / "response.json"
    as_json.write_text('{"model_name": "m", "outputs": [{"name": "Y", "datatype": "INT32", '
                       '"shape": [1], "data": [7]}]}')  # fmt: skip
    for argv in (
        (str(saved), "--request"),
        (str(body), "--request", "--header-length", str(header_length)),
        (str(as_json), "--request"),
    ):
        result = cli("decode", *argv)
        assert result.status == 2, result.err
        _assert_one_line(
            result,
            "decode",
            f"{argv[0]} does not decode as an inference request: it has no 'inputs' field, "
            "and an 'outputs' field",
        )
        assert "hint: it decodes as an inference response: it may be a captured response " in (
            result.err
        )
        assert cli("decode", *argv[:1], *argv[2:]).status == 0  # without --request: it is one


def test_decode_response_given_a_request(cli: Runner, tmp_path: Path) -> None:
    body = tmp_path / "request.bin"
    encoded = cli("encode", "-i", "X=[1,2]:INT32", "--body", str(body), "--json").json()
    header_length = str(encoded["header_length"])  # type: ignore[index]
    as_json = tmp_path / "request.json"
    assert cli("encode", "-i", "X=[1,2]:INT32", "--json-data", "--body", str(as_json)).status == 0
    for argv in (
        (str(body), "--response", "--header-length", header_length),
        (str(as_json), "--response"),
    ):
        result = cli("decode", *argv)
        assert result.status == 2, result.err
        _assert_one_line(
            result,
            "decode",
            f"{argv[0]} does not decode as an inference response: it has an 'inputs' field "
            "and no 'outputs'",
        )
        assert "hint: it decodes as an inference request" in result.err


def test_decode_of_a_body_that_is_neither(cli: Runner, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"inputs": [{"name": "X"}]}')
    result = cli("decode", str(broken))
    assert result.status == 2
    _assert_one_line(
        result,
        "decode",
        "broken.json does not decode as an inference request: inputs[0] ('X'): field "
        "'datatype' must be a string",
    )
    assert "hint" not in result.err  # nor as a response: no guess offered
