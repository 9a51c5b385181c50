"""The client against Triton, KServe and MLServer: the same tests on every server, protocol
(HTTP, gRPC) and client (sync, async); see ``conftest.py`` for the servers and what each lacks.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kserve_v2 import InferInput, InvalidInputError, RequestedOutput, ServerError, WireMessage
from kserve_v2.datatypes import Datatype, numpy_dtype
from kserve_v2.rest.codec import BINARY_REFUSED_HINT
from tests.interop.conftest import ClientUnderTest, Peer

# Values of each datatype that every form can carry (finite, UTF-8), extremes included.
SAMPLES: dict[str, list[list[Any]]] = {
    "BOOL": [[True, False, True], [False, False, True]],
    "UINT8": [[0, 1, 255], [7, 128, 254]],
    "UINT16": [[0, 1, 65535], [7, 32768, 2]],
    "UINT32": [[0, 1, 2**32 - 1], [7, 2**31, 2]],
    "UINT64": [[0, 1, 2**64 - 1], [7, 2**63, 2]],
    "INT8": [[-128, 0, 127], [-1, 1, 2]],
    "INT16": [[-(2**15), 0, 2**15 - 1], [-1, 1, 2]],
    "INT32": [[-(2**31), 0, 2**31 - 1], [-1, 1, 2]],
    "INT64": [[-(2**63), 0, 2**63 - 1], [-1, 1, 2]],
    "FP16": [[1.5, -2.0, 65504.0], [0.0, -0.0999755859375, 6.103515625e-05]],
    "FP32": [[1.5, -2.0, 3.4028234663852886e38], [0.0, 0.10000000149011612, -1.0e-30]],
    "FP64": [[1.5, -2.0, 1.7976931348623157e308], [0.0, 0.1, -5e-324]],
    "BF16": [[1.5, -2.0, 0.10009765625], [0.0, 3.00405527047391e38, -1.0]],
    "BYTES": [[b"", b"a", "日本".encode()], [b"x y", b"\x01\x02", b"longer text"]],
}


def sample(datatype: str) -> np.ndarray:
    values = SAMPLES[datatype]
    if datatype == "BYTES":
        out = np.empty((2, 3), dtype=object)
        out[:] = values
        return out
    if datatype == "BF16":  # values bfloat16 holds exactly, as float32
        return np.array(values, np.float32)
    return np.array(values, dtype=numpy_dtype(Datatype(datatype)))


def simple_inputs(offset: int = 0) -> dict[str, np.ndarray]:
    return {
        "INPUT0": np.arange(offset, offset + 16, dtype=np.int32).reshape(1, 16),
        "INPUT1": np.full((1, 16), 3, dtype=np.int32),
    }


def assert_same_tensor(got: np.ndarray, sent: np.ndarray, datatype: str) -> None:
    assert got.shape == sent.shape
    if datatype == "BYTES":
        assert got.dtype == object
        assert got.tolist() == sent.tolist()
    elif datatype == "BF16":
        np.testing.assert_array_equal(got.astype(np.float32), sent)
    else:
        assert got.dtype == sent.dtype
        np.testing.assert_array_equal(got, sent)


# -- health and metadata -----------------------------------------------------------------------


def test_health(client: ClientUnderTest) -> None:
    assert client.is_server_live() is True
    assert client.is_server_ready() is True
    assert client.is_model_ready("simple") is True
    assert client.is_model_ready("no_such_model") is False


def test_server_metadata(client: ClientUnderTest, peer: Peer) -> None:
    metadata = client.server_metadata()
    assert metadata.name == peer.name
    assert metadata.version == peer.version
    assert metadata.supports("binary_tensor_data") is peer.advertises_binary


def test_model_metadata(client: ClientUnderTest) -> None:
    metadata = client.model_metadata("simple")
    assert metadata.name == "simple"
    assert [(t.name, t.datatype, t.shape) for t in metadata.inputs] == [
        ("INPUT0", "INT32", (-1, 16)),
        ("INPUT1", "INT32", (-1, 16)),
    ]
    assert [(t.name, t.datatype, t.shape) for t in metadata.outputs] == [
        ("OUTPUT0", "INT32", (-1, 16)),
        ("OUTPUT1", "INT32", (-1, 16)),
    ]


def test_model_metadata_of_an_unknown_model(client: ClientUnderTest, protocol: str) -> None:
    with pytest.raises(ServerError) as info:
        client.model_metadata("no_such_model")
    assert "no_such_model" in info.value.message
    if protocol == "http":
        assert info.value.http_status in (400, 404)
    else:
        assert info.value.grpc_code in ("NOT_FOUND", "UNAVAILABLE", "INVALID_ARGUMENT")


# -- tensors of every datatype -----------------------------------------------------------------

DATATYPES = (*SAMPLES,)


def _identity(client: ClientUnderTest, datatype: str, form: str) -> np.ndarray:
    sent = sample(datatype)
    options: dict[str, Any] = {}
    if form == "tensor-json":
        inputs: Any = [InferInput("INPUT0", sent, datatype=datatype, binary=False)]
        options["outputs"] = [RequestedOutput("OUTPUT0", binary=False)]
    else:
        inputs = [InferInput("INPUT0", sent, datatype=datatype)]
        if form != "default":
            options["binary"] = form == "binary"
    result = client.infer(f"identity_{datatype.lower()}", inputs, **options)
    assert [o.name for o in result.outputs] == ["OUTPUT0"]
    return result.as_numpy("OUTPUT0")


@pytest.mark.parametrize("protocol", ["http"])
@pytest.mark.parametrize("form", ["default", "binary", "json", "tensor-json"])
@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_in_every_http_form(
    client: ClientUnderTest, peer: Peer, datatype: str, form: str
) -> None:
    """``default``: the client's choice (binary where the server advertises the extension,
    JSON elsewhere); ``binary``/``json``: ``binary=True``/``False`` for the call;
    ``tensor-json``: ``InferInput(binary=False)`` and ``RequestedOutput(binary=False)``."""
    if datatype not in peer.datatypes:
        pytest.skip(f"{peer.name} has no {datatype}")
    if form == "binary":
        peer.skip_unless("binary_extension")
    sent = sample(datatype)
    half = datatype in ("FP16", "BF16")
    as_json = form in ("json", "tensor-json") or (form == "default" and not peer.advertises_binary)
    if as_json and half and not peer.json_half_precision:
        # The server's refusal, reported as it comes (KServe takes FP16 in binary form only,
        # which it does not advertise: binary=True is the caller's to give).
        with pytest.raises(ServerError) as info:
            _identity(client, datatype, form)
        assert info.value.http_status == 400
        assert f"{datatype} data via JSON is not supported" in info.value.message
        return
    assert_same_tensor(_identity(client, datatype, form), sent, datatype)


@pytest.mark.parametrize("protocol", ["http"])
def test_the_default_form_is_learned_once_from_the_server(connect: Any, peer: Peer) -> None:
    """With ``binary`` left to the client, the first inferences (here eight at once) ask the
    server's metadata once, then every request is binary where the server advertises the
    extension and JSON elsewhere; later calls ask nothing more."""
    seen: list[WireMessage] = []
    client = connect(wire_hook=seen.append)
    requests = [simple_inputs(i) for i in range(8)]
    client.concurrently(
        [lambda inputs=inputs: client.client.infer("simple", inputs) for inputs in requests]
    )
    client.infer("simple", simple_inputs())
    sends = [m for m in seen if m.direction == "send"]
    assert [m.target for m in sends].count("/v2") == 1
    infers = [m for m in sends if m.target.endswith("/infer")]
    assert len(infers) == 9
    for message in infers:
        assert (len(message.body) > 1) is peer.advertises_binary  # binary parts follow the JSON
        content_type = dict(message.headers)["Content-Type"]
        assert content_type == (
            "application/octet-stream" if peer.advertises_binary else "application/json"
        )


@pytest.mark.parametrize("protocol", ["grpc"])
@pytest.mark.parametrize("datatype", DATATYPES)
def test_every_datatype_over_grpc(client: ClientUnderTest, peer: Peer, datatype: str) -> None:
    if datatype not in peer.datatypes:
        pytest.skip(f"{peer.name} has no {datatype}")
    sent = sample(datatype)
    assert_same_tensor(_identity(client, datatype, "default"), sent, datatype)


def test_requested_outputs(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    inputs = simple_inputs()
    result = client.infer("simple", inputs, outputs=["OUTPUT1"])
    assert [o.name for o in result.outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), inputs["INPUT0"] - inputs["INPUT1"])
    result = client.infer("simple", inputs)
    assert sorted(o.name for o in result.outputs) == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"])


def test_request_id_comes_back(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    result = client.infer("simple", simple_inputs(), request_id="my-id-7")
    assert result.id == "my-id-7"
    assert result.model_name == "simple"


# -- parameters ---------------------------------------------------------------------------------

PARAMETERS = {"bool": True, "int": -(2**40), "str": "héllo", "float": 0.25}


@pytest.mark.parametrize("kind", PARAMETERS)
def test_parameters_of_every_type_reach_the_model(
    client: ClientUnderTest, peer: Peer, protocol: str, kind: str
) -> None:
    """The model receives each parameter with its value and type; where the server returns
    them (``params_echo`` as response parameters), they come back the same. Over gRPC a float
    needs Triton's ``double_param``: to another server it is refused before it is sent, naming
    the parameter, rather than dropped by the server."""
    value = PARAMETERS[kind]
    inputs = {"INPUT0": np.array([1], np.int32)}
    if kind == "float" and protocol == "grpc" and peer.name != "triton":
        with pytest.raises(InvalidInputError) as info:
            client.infer("params_echo", inputs, parameters={"p": value})
        assert "request parameter 'p' = 0.25" in info.value.message
        assert "as a string" in info.value.message
        return
    result = client.infer("params_echo", inputs, parameters={"p": value})
    received = json.loads(result.as_numpy("PARAMS")[0])
    assert received.get("p") == value
    assert type(received.get("p")) is type(value)
    if peer.response_parameters:
        assert result.parameters.get("p") == value
        assert type(result.parameters.get("p")) is type(value)


# -- errors -------------------------------------------------------------------------------------


def _assert_clean_message(error: ServerError) -> None:
    """The server's words: no raw JSON body, no control characters, bounded."""
    message = error.message
    assert not message.lstrip().startswith(("{", "[{", '["')), message  # no raw JSON
    assert not any(ord(c) < 32 and c not in "\n\t" for c in message), message
    assert len(message) < 2200


def test_unknown_model(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("no_such_model", simple_inputs())
    error = info.value
    assert "no_such_model" in error.message
    _assert_clean_message(error)
    assert BINARY_REFUSED_HINT not in error.message  # JSON, or a server that advertises binary
    if protocol == "http":
        assert error.http_status == 404
    else:
        assert error.grpc_code == "NOT_FOUND"


def test_wrong_shape(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    inputs = {name: array[:, :8] for name, array in simple_inputs().items()}
    with pytest.raises(ServerError) as info:
        client.infer("simple", inputs)
    error = info.value
    assert "shape" in error.message
    assert "INPUT" in error.message
    _assert_clean_message(error)
    assert BINARY_REFUSED_HINT not in error.message  # JSON, or a server that advertises binary
    if protocol == "http":
        assert error.http_status == 400
    else:
        assert error.grpc_code == "INVALID_ARGUMENT"


def test_wrong_datatype(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    inputs = simple_inputs()
    inputs["INPUT0"] = inputs["INPUT0"].astype(np.float32)
    with pytest.raises(ServerError) as info:
        client.infer("simple", inputs)
    error = info.value
    assert "INT32" in error.message
    assert "FP32" in error.message
    _assert_clean_message(error)
    assert BINARY_REFUSED_HINT not in error.message  # JSON, or a server that advertises binary
    if protocol == "http":
        assert error.http_status == 400
    else:
        assert error.grpc_code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("protocol", ["http"])
@pytest.mark.parametrize("datatype", ["INT32", "UINT64", "BYTES", "FP16"])
def test_a_refused_binary_request_gives_a_clean_message(
    client: ClientUnderTest, peer: Peer, datatype: str
) -> None:
    """A server without the binary extension refuses a binary request (MLServer: FastAPI's 422
    echoing the body, or a text/plain 500): the message is short and quotes no tensor bytes."""
    if peer.binary_extension:
        pytest.skip(f"{peer.name} implements the binary extension")
    with pytest.raises(ServerError) as info:
        _identity(client, datatype, "binary")
    error = info.value
    assert error.http_status in (400, 415, 422, 500)
    _assert_clean_message(error)
    assert "binary_data_size" not in error.message  # the echoed request's JSON header
    assert len(error.message) < 300


@pytest.mark.parametrize("protocol", ["http"])
def test_a_refused_binary_request_suggests_json(client: ClientUnderTest, peer: Peer) -> None:
    if peer.binary_extension:
        pytest.skip(f"{peer.name} implements the binary extension")
    with pytest.raises(ServerError) as info:
        _identity(client, "INT32", "binary")
    assert BINARY_REFUSED_HINT in info.value.message


# -- connections --------------------------------------------------------------------------------


def _connections_to(port: int) -> int:
    """TCP sockets this process holds open to ``port`` on the loopback (Linux ``/proc``)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if path.exists():
            for line in path.read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                    count += 1
    return count


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_keep_alive_across_calls_and_errors(
    client: ClientUnderTest, peer: Peer, protocol: str
) -> None:
    """Several calls on one client, an error among them, go over one connection at a time."""
    for round_ in range(3):
        inputs = simple_inputs(round_)
        result = client.infer("simple", inputs)
        np.testing.assert_array_equal(
            result.as_numpy("OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"]
        )
        with pytest.raises(ServerError):
            client.infer("no_such_model", inputs)
        assert client.is_model_ready("simple")
    port = int(peer.url(protocol).rsplit(":", 1)[1])
    assert _connections_to(port) == 1


def test_concurrent_inferences(client: ClientUnderTest, peer: Peer, protocol: str) -> None:
    requests = [simple_inputs(i * 16) for i in range(32)]
    results = client.concurrently(
        [lambda inputs=inputs: client.client.infer("simple", inputs) for inputs in requests]
    )
    for inputs, result in zip(requests, results, strict=True):
        np.testing.assert_array_equal(
            result.as_numpy("OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"]
        )
        np.testing.assert_array_equal(
            result.as_numpy("OUTPUT1"), inputs["INPUT0"] - inputs["INPUT1"]
        )


@pytest.mark.parametrize("direction", ["request", "response", "both"])
def test_gzip(connect: Any, peer: Peer, protocol: str, direction: str) -> None:
    """``request_compression`` compresses request bodies (gRPC: messages);
    ``accept_compression`` lets the server compress its answers (HTTP only)."""
    if protocol == "grpc" and direction != "request":
        pytest.skip("gRPC clients always accept compressed answers; the server chooses")
    if protocol == "http" and direction != "response":
        peer.skip_unless("gzip_requests")
    options: dict[str, Any] = {}
    if direction in ("request", "both"):
        options["request_compression"] = "gzip"
    if direction in ("response", "both"):
        options["accept_compression"] = "gzip"
    client = connect(**options)
    inputs = {
        "INPUT0": np.zeros((8, 16), np.int32),  # large and repetitive enough to compress
        "INPUT1": np.tile(np.arange(16, dtype=np.int32), (8, 1)),
    }
    result = client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), -inputs["INPUT1"])
