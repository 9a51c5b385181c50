"""The HTTP client against the live Triton server, in all four set-ups of ``conftest.py``.

Every test that takes ``client`` or ``connect`` runs once per set-up: sync over the stdlib
transport, sync over httpx, async over asyncio, async over httpx. The wire hook (``client.seen``)
shows what actually travelled, so tests check the form of each message and not only the
decoded result.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from kserve_v2 import (
    AsyncClient,
    Client,
    DeadlineExceededError,
    InferInput,
    InvalidInputError,
    ModelMetadata,
    ProtocolError,
    RequestedOutput,
    ServerError,
    TensorMetadata,
    TransportError,
    WireMessage,
)
from kserve_v2.parameters import REQUEST_RESERVED
from kserve_v2.rest.codec import BINARY_REFUSED_HINT
from kserve_v2.rest.compression import decompress
from kserve_v2.transport import HTTPRequest
from tests.client.conftest import (
    ASYNC_KINDS,
    SYNC_KINDS,
    ClientUnderTest,
    connections_to,
    exchanges,
    joined_body,
    json_header,
    lower_headers,
    only_exchange,
)

Connect = Callable[..., ClientUnderTest]

#: The ``failing`` model's fixed error message.
FAILURE_MESSAGE = "kserve-v2 test failure: deliberate error"
#: Header and value the restricted-API server demands for inference, and for metadata.
AUTH = ("Authorization", "Bearer s3cret-t0ken")
TENANT = ("X-Tenant", "blue")


def simple_inputs(batch: int = 2) -> dict[str, npt.NDArray[np.int32]]:
    return {
        "INPUT0": np.arange(16 * batch, dtype=np.int32).reshape(batch, 16),
        "INPUT1": np.full((batch, 16), 3, dtype=np.int32),
    }


def int32_matrix() -> npt.NDArray[np.int32]:
    return np.arange(12, dtype=np.int32).reshape(3, 4)


# -- health and metadata -------------------------------------------------------------------------


def test_server_is_live_and_ready(client: ClientUnderTest) -> None:
    assert client.is_server_live() is True
    assert client.is_server_ready() is True
    assert [send.target for send, _ in exchanges(client.seen)] == [
        "/v2/health/live",
        "/v2/health/ready",
    ]


def test_model_readiness_of_loaded_versioned_and_unknown_models(client: ClientUnderTest) -> None:
    assert client.is_model_ready("simple") is True
    assert client.is_model_ready("simple", 1) is True
    assert client.is_model_ready("simple", "2") is False
    assert client.is_model_ready("no_such_model") is False
    assert [send.target for send, _ in exchanges(client.seen)] == [
        "/v2/models/simple/ready",
        "/v2/models/simple/versions/1/ready",
        "/v2/models/simple/versions/2/ready",
        "/v2/models/no_such_model/ready",
    ]


def test_server_metadata_and_supported_extensions(client: ClientUnderTest) -> None:
    metadata = client.server_metadata()
    assert metadata.name == "triton"
    assert metadata.version
    assert "binary_tensor_data" in metadata.extensions
    assert client.supports_extension("binary_tensor_data") is True
    assert client.supports_extension("no_such_extension") is False


@pytest.mark.parametrize("version", ["", 1, "1"])
def test_model_metadata_describes_the_model(client: ClientUnderTest, version: Any) -> None:
    int32_batch = (-1, 16)
    assert client.model_metadata("simple", version) == ModelMetadata(
        name="simple",
        platform="python",
        versions=("1",),
        inputs=(
            TensorMetadata("INPUT0", "INT32", int32_batch),
            TensorMetadata("INPUT1", "INT32", int32_batch),
        ),
        outputs=(
            TensorMetadata("OUTPUT0", "INT32", int32_batch),
            TensorMetadata("OUTPUT1", "INT32", int32_batch),
        ),
    )
    send, _ = only_exchange(client.seen)
    assert send.target == ("/v2/models/simple/versions/1" if version else "/v2/models/simple")


def test_model_metadata_of_unknown_model_or_version_is_not_found(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError) as unknown_model:
        client.model_metadata("no_such_model")
    assert unknown_model.value.http_status == 404
    assert unknown_model.value.message == "Request for unknown model: 'no_such_model' is not found"
    with pytest.raises(ServerError) as unknown_version:
        client.model_metadata("simple", 2)
    assert unknown_version.value.http_status == 404
    assert "'simple' version 2 is not found" in unknown_version.value.message


# -- inference ------------------------------------------------------------------------------------


def test_simple_model_adds_and_subtracts(client: ClientUnderTest) -> None:
    inputs = simple_inputs()
    result = client.infer("simple", inputs)
    assert (result.model_name, result.model_version) == ("simple", "1")
    total, difference = result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")
    assert total.dtype == np.int32
    assert total.shape == (2, 16)
    np.testing.assert_array_equal(total, inputs["INPUT0"] + inputs["INPUT1"])
    np.testing.assert_array_equal(difference, inputs["INPUT0"] - inputs["INPUT1"])


def test_infer_on_a_given_version(client: ClientUnderTest) -> None:
    result = client.infer("simple", simple_inputs(batch=1), version=1)
    assert result.model_version == "1"
    with pytest.raises(ServerError) as info:
        client.infer("simple", simple_inputs(batch=1), version=2)
    assert info.value.http_status == 404
    assert [send.target for send, _ in exchanges(client.seen)] == [
        "/v2/models/simple/versions/1/infer",
        "/v2/models/simple/versions/2/infer",
    ]


def test_bytes_reverse_model_reverses_every_element(client: ClientUnderTest) -> None:
    words = np.array([b"abc", b"\x00\xff", b"", "zü".encode()], dtype=np.object_)
    result = client.infer("bytes_reverse", {"INPUT0": words})
    assert result.as_numpy("OUTPUT0").tolist() == [w[::-1] for w in words.tolist()]


# -- every datatype, binary and JSON --------------------------------------------------------------

DATATYPES = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
    "BF16",
)
#: Triton refuses FP16 and BF16 as JSON (both ways), so they have no JSON round trip here.
JSON_DATATYPES = tuple(d for d in DATATYPES if d not in ("FP16", "BF16"))
_NUMPY = {
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
    "BYTES": np.object_,
    "BF16": np.float32,  # sent from float32 values exactly representable in bfloat16
}
#: Finite bfloat16 values: its largest, a small power of two, and fractions it holds exactly.
_BF16_FINITE = [3.3895313892515355e38, 2.0**-126, 1.0, -2.5, 0.15625, -0.0]


def sample(datatype: str, *, json_form: bool) -> npt.NDArray[Any]:
    """A 2x3 tensor of ``datatype`` with its extreme values.

    The binary form carries what JSON cannot: NaN, infinities, NUL bytes, non-UTF-8 bytes.
    """
    dtype = _NUMPY[datatype]
    if datatype == "BOOL":
        values: list[Any] = [True, False, True, False, False, True]
    elif datatype.startswith(("INT", "UINT")):
        info = np.iinfo(dtype)
        values = [info.min, info.max, 0, 1, int(info.max) - 1, int(info.min) + 2]
    elif datatype == "BF16":
        values = _BF16_FINITE if json_form else [np.nan, np.inf, -np.inf, *_BF16_FINITE[:3]]
    elif datatype.startswith("FP"):
        finfo = np.finfo(dtype)
        if json_form:
            values = [finfo.max, finfo.smallest_normal, -0.0, 1.5, -2.25, -1e-3]
        else:
            values = [np.nan, np.inf, -np.inf, -0.0, finfo.max, finfo.smallest_subnormal]
    else:  # BYTES
        if json_form:
            values = [b"", b"plain", "zü€".encode(), b"a\x00b", b" " * 3, b"x" * 300]
        else:
            values = [
                b"",
                b"\x00nul\x00",
                b"\xff\xfe\x80 not utf-8",
                "zü€".encode(),
                bytes(range(256)),
                b"plain",
            ]
    return np.array(values, dtype=dtype).reshape(2, 3)


def expected_numpy_dtype(datatype: str) -> np.dtype[Any]:
    if datatype == "BF16" and importlib.util.find_spec("ml_dtypes") is not None:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NUMPY[datatype])  # without ml_dtypes, BF16 comes back as float32


def assert_same_tensor(got: npt.NDArray[Any], sent: npt.NDArray[Any], datatype: str) -> None:
    """Same dtype, shape and elements; numbers compared bit for bit (NaN, -0.0 included)."""
    assert got.dtype == expected_numpy_dtype(datatype)
    assert got.shape == sent.shape
    if datatype == "BYTES":
        assert got.tolist() == sent.tolist()
    else:
        assert got.astype(sent.dtype).tobytes() == sent.tobytes()


def identity_infer(
    client: ClientUnderTest, datatype: str, sent: npt.NDArray[Any], **options: Any
) -> npt.NDArray[Any]:
    result = client.infer(
        f"identity_{datatype.lower()}", [InferInput("INPUT0", sent, datatype=datatype)], **options
    )
    assert result.output("OUTPUT0").datatype == datatype
    return result.as_numpy("OUTPUT0")


@pytest.mark.parametrize("datatype", DATATYPES)
def test_identity_round_trip_in_binary_form(client: ClientUnderTest, datatype: str) -> None:
    extremes = sample(datatype, json_form=False)
    empty = np.empty((0, 3), dtype=_NUMPY[datatype])
    for sent in (extremes, empty):
        assert_same_tensor(identity_infer(client, datatype, sent), sent, datatype)
    for (send, receive), sent in zip(exchanges(client.seen), (extremes, empty), strict=True):
        assert lower_headers(send)["content-type"] == "application/octet-stream"
        (sent_input,) = json_header(send)["inputs"]
        assert "data" not in sent_input
        assert "binary_data_size" in sent_input["parameters"]
        (received_output,) = json_header(receive)["outputs"]
        assert "data" not in received_output
        assert (received_output["parameters"]["binary_data_size"] == 0) == (sent.size == 0)


@pytest.mark.parametrize("datatype", JSON_DATATYPES)
def test_identity_round_trip_in_json_form(client: ClientUnderTest, datatype: str) -> None:
    extremes = sample(datatype, json_form=True)
    empty = np.empty((0, 3), dtype=_NUMPY[datatype])
    for sent in (extremes, empty):
        assert_same_tensor(identity_infer(client, datatype, sent, binary=False), sent, datatype)
    for (send, receive), sent in zip(exchanges(client.seen), (extremes, empty), strict=True):
        assert lower_headers(send)["content-type"] == "application/json"
        assert "inference-header-content-length" not in lower_headers(receive)
        (sent_input,) = json_header(send)["inputs"]
        assert len(sent_input["data"]) == sent.size
        assert "parameters" not in sent_input
        (received_output,) = json_header(receive)["outputs"]
        assert len(received_output["data"]) == sent.size


@pytest.mark.parametrize(
    ("datatype", "values", "complaint"),
    [
        ("FP16", [1.0, np.inf], "NaN and infinity"),
        ("BF16", [np.nan, 2.0], "NaN and infinity"),
        ("FP32", [1.0, np.nan], "NaN and infinity"),
        ("FP64", [np.inf, 1.0], "NaN and infinity"),
        ("BYTES", [b"ok", b"\xff\xfe"], "not valid UTF-8"),
    ],
)
def test_values_without_a_json_form_are_refused_before_sending(
    client: ClientUnderTest, datatype: str, values: list[Any], complaint: str
) -> None:
    data = np.array([values], dtype=_NUMPY[datatype])
    model = f"identity_{datatype.lower()}"
    with pytest.raises(InvalidInputError, match=complaint):
        client.infer(model, [InferInput("INPUT0", data, datatype=datatype, binary=False)])
    with pytest.raises(InvalidInputError, match=complaint):
        client.infer(model, [InferInput("INPUT0", data, datatype=datatype)], binary=False)
    assert client.seen == []


@pytest.mark.parametrize("datatype", ["FP16", "BF16"])
def test_half_precision_goes_as_json_numbers_when_asked_and_triton_refuses_them(
    client: ClientUnderTest, datatype: str
) -> None:
    """JSON carries FP16/BF16 as numbers (MLServer takes them); Triton refuses both ways, and
    that refusal is Triton's answer, reported as it comes."""
    sent = np.array([[1.0, -2.5, 0.15625]], dtype=_NUMPY[datatype])
    model = f"identity_{datatype.lower()}"
    tensor = InferInput("INPUT0", sent, datatype=datatype)
    with pytest.raises(ServerError) as info:
        client.infer(model, [tensor], binary=False)
    assert info.value.http_status == 400
    assert f"receiving {datatype} data via JSON is not supported" in info.value.message
    with pytest.raises(ServerError) as info:
        client.infer(
            model,
            [InferInput("INPUT0", sent, datatype=datatype, binary=True)],
            outputs=[RequestedOutput("OUTPUT0", binary=False)],
        )
    assert f"sending {datatype} data via JSON is not supported" in info.value.message
    result = client.infer(
        model,
        [InferInput("INPUT0", sent, datatype=datatype, binary=True)],
        binary=False,
        outputs=[RequestedOutput("OUTPUT0", binary=True)],
    )
    assert_same_tensor(result.as_numpy("OUTPUT0"), sent, datatype)
    sends = [send for send, _ in exchanges(client.seen)]
    # The refused binary request made the client ask the metadata, once, to see whether the
    # refusal should suggest binary=False (Triton advertises the extension: it does not).
    assert [send.target for send in sends].count("/v2") == 1
    assert BINARY_REFUSED_HINT not in info.value.message
    sends = [send for send in sends if send.target != "/v2"]
    (json_input,) = json_header(sends[0])["inputs"]
    assert json_input["data"] == [1.0, -2.5, 0.15625]
    assert "parameters" not in json_input
    (binary_input,) = json_header(sends[2])["inputs"]
    assert binary_input["parameters"]["binary_data_size"] == sent.size * 2


def test_mixed_json_and_binary_inputs_in_one_request(client: ClientUnderTest) -> None:
    inputs = simple_inputs()
    result = client.infer(
        "simple",
        [
            InferInput("INPUT0", inputs["INPUT0"], binary=True),
            InferInput("INPUT1", inputs["INPUT1"], binary=False),
        ],
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"])
    send, _ = only_exchange(client.seen)
    binary_input, json_input = json_header(send)["inputs"]
    assert binary_input["parameters"] == {"binary_data_size": inputs["INPUT0"].nbytes}
    assert "data" not in binary_input
    assert json_input["data"] == inputs["INPUT1"].ravel().tolist()
    assert "parameters" not in json_input


def test_requested_outputs_come_back_in_the_form_asked(client: ClientUnderTest) -> None:
    inputs = simple_inputs()
    result = client.infer(
        "simple",
        inputs,
        outputs=[RequestedOutput("OUTPUT0", binary=False), RequestedOutput("OUTPUT1", binary=True)],
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), inputs["INPUT0"] - inputs["INPUT1"])
    _, receive = only_exchange(client.seen)
    outputs = {entry["name"]: entry for entry in json_header(receive)["outputs"]}
    assert "data" in outputs["OUTPUT0"]
    assert "parameters" not in outputs["OUTPUT0"]
    assert outputs["OUTPUT1"]["parameters"] == {"binary_data_size": 2 * 16 * 4}


def test_only_the_requested_outputs_are_returned(client: ClientUnderTest) -> None:
    inputs = simple_inputs()
    result = client.infer("simple", inputs, outputs=["OUTPUT1"])
    assert [tensor.name for tensor in result.outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), inputs["INPUT0"] - inputs["INPUT1"])


def test_large_binary_tensors_are_not_copied(client: ClientUnderTest) -> None:
    sent = np.arange(4 << 20, dtype=np.float32).reshape(2, -1)  # 16 MiB
    got = client.infer("identity_fp32", {"INPUT0": sent}).as_numpy("OUTPUT0")
    np.testing.assert_array_equal(got, sent)
    # The output is a view on the received body, not an array of its own.
    assert not got.flags.owndata
    owner = got
    while isinstance(owner, np.ndarray):
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    assert memoryview(owner).nbytes > sent.nbytes  # the whole body: JSON header and tensor
    # The input went out as a view of the caller's array.
    send, _ = only_exchange(client.seen)
    tensor_part = send.body[1]
    assert memoryview(tensor_part).nbytes == sent.nbytes
    assert np.shares_memory(np.frombuffer(tensor_part, dtype=np.uint8), sent)


@pytest.mark.parametrize("rows", [1, 4096], ids=["small", "4MiB"])
def test_results_are_writeable(client: ClientUnderTest, rows: int) -> None:
    """A result's arrays are views on the received body that the caller may write to (as on
    the native gRPC transport), whatever the body's size; httpx hands the body over as
    bytes, so on its transports they are read-only."""
    data = np.arange(rows * 256, dtype=np.float32).reshape(rows, 256)
    output = client.infer("identity_fp32", {"INPUT0": data}).as_numpy("OUTPUT0")
    assert not output.flags.owndata
    own_transport = not client.kind.endswith("httpx")
    assert output.flags.writeable is own_transport
    if own_transport:
        output += 1
        np.testing.assert_array_equal(output, data + 1)


# -- request id and parameters --------------------------------------------------------------------


def test_request_id_is_echoed(client: ClientUnderTest) -> None:
    result = client.infer("identity_int32", {"INPUT0": int32_matrix()}, request_id="req-42 zü")
    assert result.id == "req-42 zü"
    assert client.infer("identity_int32", {"INPUT0": int32_matrix()}).id == ""
    first, second = (json_header(send) for send, _ in exchanges(client.seen))
    assert first["id"] == "req-42 zü"
    assert "id" not in second


def test_custom_request_parameters_reach_the_model(client: ClientUnderTest) -> None:
    parameters = {"text": "hello zü", "count": 7, "large": 2**53 + 1, "ratio": 0.25, "on": True}
    result = client.infer("params_echo", {}, parameters=parameters)
    (echoed,) = result.as_numpy("PARAMS").tolist()
    # The model sees exactly the custom parameters: binary_data_output is Triton's own.
    assert json.loads(echoed) == parameters
    send, _ = only_exchange(client.seen)
    assert json_header(send)["parameters"] == {**parameters, "binary_data_output": True}


def test_reserved_parameter_names_are_refused_before_sending(client: ClientUnderTest) -> None:
    for name in [*sorted(REQUEST_RESERVED), "triton_anything"]:
        with pytest.raises(InvalidInputError, match=name):
            client.infer("params_echo", {}, parameters={name: 1})
    assert client.seen == []


# -- compression ----------------------------------------------------------------------------------

#: What a body compressed with each coding starts with (gzip magic; zlib's CMF byte).
_MAGIC = {"gzip": b"\x1f\x8b", "deflate": b"\x78"}


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("chosen_by", ["client default", "call"])
def test_request_body_is_compressed(connect: Connect, encoding: str, chosen_by: str) -> None:
    by_client = chosen_by == "client default"
    client = connect(record=True, request_compression=encoding if by_client else None)
    sent = np.zeros((64, 64), dtype=np.int32)
    result = client.infer(
        "identity_int32", {"INPUT0": sent}, compression=None if by_client else encoding
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), sent)
    send, _ = only_exchange(client.seen)
    assert lower_headers(send)["content-encoding"] == encoding
    body = joined_body(send)
    assert body.startswith(_MAGIC[encoding])
    assert len(body) < sent.nbytes // 10
    head_length = int(lower_headers(send)["inference-header-content-length"])
    assert len(decompress(body, encoding)) == head_length + sent.nbytes


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_max_response_size_refuses_larger_responses(connect: Connect, encoding: str | None) -> None:
    sent = np.zeros((256, 1024), dtype=np.int32)  # 1 MiB; gzip makes it about 1 KiB
    tight = connect(max_response_size=512 << 10, accept_compression=encoding)
    # Compressed, the body is small on the wire: the limit applies to it decompressed.
    with pytest.raises(ProtocolError, match="max_response_size"):
        tight.infer("identity_int32", {"INPUT0": sent})
    # The client goes on working (the refused connection is not reused half-read).
    assert tight.is_server_live()
    roomy = connect(max_response_size=2 << 20, accept_compression=encoding)
    result = roomy.infer("identity_int32", {"INPUT0": sent})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), sent)


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_max_response_size_is_for_the_default_transport(triton: Any, client_class: type) -> None:
    # Refused before the transport is used (or anything opened).
    with pytest.raises(InvalidInputError, match="give it to the transport"):
        client_class(triton.http_url, transport=object(), max_response_size=1 << 20)
    with pytest.raises(InvalidInputError, match="max_response_size"):
        client_class(triton.http_url, max_response_size=0)


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
def test_response_is_compressed_only_when_asked(connect: Connect, encoding: str | None) -> None:
    client = connect(record=True, accept_compression=encoding)
    sent = np.zeros((64, 64), dtype=np.int32)
    result = client.infer("identity_int32", {"INPUT0": sent})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), sent)
    send, receive = only_exchange(client.seen)
    assert lower_headers(send).get("accept-encoding") == encoding
    # The hook sees the headers as received and the body already decompressed.
    assert lower_headers(receive).get("content-encoding") == encoding
    assert receive.body_length > sent.nbytes


# -- timeouts and connection failures -------------------------------------------------------------

#: How long the ``slow`` model sleeps when a test wants a timeout, in milliseconds.
_SLOW_MS = 600.0


def slow_input(milliseconds: float) -> dict[str, npt.NDArray[np.float32]]:
    return {"DELAY_MS": np.array([milliseconds], dtype=np.float32)}


def test_per_call_timeout_expires_and_the_client_stays_usable(client: ClientUnderTest) -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.infer("slow", slow_input(_SLOW_MS), timeout=0.15)
    assert time.monotonic() - started < _SLOW_MS / 1000  # it did not wait for the answer
    _, receive = client.seen
    assert isinstance(receive.error, DeadlineExceededError)
    assert receive.status is None
    assert client.is_server_live() is True
    result = client.infer("identity_int32", {"INPUT0": int32_matrix()})
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), int32_matrix())


def test_client_default_timeout_expires_unless_the_call_gives_more(connect: Connect) -> None:
    client = connect(timeout=0.15)
    with pytest.raises(DeadlineExceededError):
        client.infer("slow", slow_input(_SLOW_MS))
    # Waits behind the timed-out request (the model has one instance), within its own timeout.
    result = client.infer("slow", slow_input(300), timeout=30)
    assert result.as_numpy("OUTPUT0").tolist() == [300.0]


def test_an_infinite_timeout_is_no_deadline(connect: Connect) -> None:
    client = connect(timeout=math.inf)
    result = client.infer("identity_int32", {"INPUT0": int32_matrix()}, timeout=math.inf)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), int32_matrix())


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connection_refused_is_a_transport_error(connect: Connect) -> None:
    client = connect(url=f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(TransportError) as info:
        client.is_server_live()
    assert not isinstance(info.value, DeadlineExceededError)


@pytest.fixture
def unaccepting_port() -> Iterator[int]:
    """A port whose listen queue is full: new connections hang in the TCP handshake."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_connect_timeout_is_kept_when_the_server_does_not_accept(
    connect: Connect, unaccepting_port: int
) -> None:
    client = connect(url=f"http://127.0.0.1:{unaccepting_port}", connect_timeout=0.3, timeout=30)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        client.is_server_live()
    assert time.monotonic() - started < 5


# -- errors reported by the server ----------------------------------------------------------------


def test_unknown_model_is_not_found_with_the_servers_message(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("no_such_model", {"INPUT0": int32_matrix()})
    assert info.value.http_status == 404
    assert info.value.message == "Request for unknown model: 'no_such_model' is not found"
    assert str(info.value) == f"[HTTP 404] {info.value.message}"


def test_wrong_datatype_is_a_bad_request_naming_both_datatypes(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("identity_int32", {"INPUT0": int32_matrix().astype(np.int64)})
    assert info.value.http_status == 400
    assert "data-type is 'INT64', but model 'identity_int32' expects 'INT32'" in (
        info.value.message
    )


def test_wrong_shape_is_a_bad_request(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("identity_int32", {"INPUT0": np.arange(3, dtype=np.int32)})
    assert info.value.http_status == 400
    assert "unexpected shape for input 'INPUT0'" in info.value.message


def test_model_failure_reports_the_models_message(client: ClientUnderTest) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("failing", {"INPUT0": np.arange(3, dtype=np.int32)})
    assert info.value.http_status == 500
    assert info.value.message == FAILURE_MESSAGE
    assert json.loads(info.value.body or b"") == {"error": FAILURE_MESSAGE}
    # The connection the error came on is still good for the next request.
    assert client.infer("simple", simple_inputs()).model_name == "simple"


# -- headers against --http-restricted-api --------------------------------------------------------


@pytest.fixture(scope="module")
def restricted_triton(triton_factory: Any) -> Any:
    """A server that wants ``AUTH`` for inference and ``TENANT`` for metadata."""
    return triton_factory.start(
        model_control_mode="explicit",
        load_models=["simple"],
        http_restricted_api=[
            f"inference:{AUTH[0].lower()}={AUTH[1]}",
            f"metadata:{TENANT[0].lower()}={TENANT[1]}",
        ],
    )


def test_restricted_apis_refuse_requests_without_their_header(
    connect: Connect, restricted_triton: Any
) -> None:
    client = connect(url=restricted_triton.http_url)
    with pytest.raises(ServerError) as inference:
        client.infer("simple", simple_inputs())
    assert inference.value.http_status == 403
    assert "expecting header 'authorization'" in inference.value.message
    with pytest.raises(ServerError) as metadata:
        client.server_metadata(headers={TENANT[0]: "red"})
    assert metadata.value.http_status == 403
    assert client.is_server_live() is True  # health is not restricted


def test_client_headers_reach_the_server(connect: Connect, restricted_triton: Any) -> None:
    client = connect(url=restricted_triton.http_url, headers=dict([AUTH, TENANT]))
    assert client.infer("simple", simple_inputs()).model_name == "simple"
    assert client.server_metadata().name == "triton"


def test_call_headers_reach_the_server_next_to_the_client_headers(
    connect: Connect, restricted_triton: Any
) -> None:
    client = connect(url=restricted_triton.http_url, headers=[AUTH])
    assert client.server_metadata(headers=[TENANT]).name == "triton"
    assert client.model_metadata("simple", headers={TENANT[0]: TENANT[1]}).name == "simple"
    assert client.infer("simple", simple_inputs(), headers=[TENANT]).model_name == "simple"


def test_verbose_output_redacts_the_credentials_it_sends(
    connect: Connect, restricted_triton: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    client = connect(url=restricted_triton.http_url, headers=[AUTH], verbose=True)
    # The server accepts the request, so the real credentials went out on the wire.
    assert client.infer("simple", simple_inputs()).model_name == "simple"
    printed = capsys.readouterr().err
    assert AUTH[1] not in printed
    assert "s3cret" not in printed
    assert f"{AUTH[0]}: <redacted>" in printed
    sent_line = printed.index(">> HTTP POST /v2/models/simple/infer")
    received_line = printed.index("<< HTTP POST /v2/models/simple/infer -> 200")
    assert sent_line < received_line


# -- the wire hook, base paths and query parameters -----------------------------------------------


def test_wire_hook_sees_every_message_in_order(connect: Connect) -> None:
    client = connect(record=True, headers=[AUTH])
    client.is_server_live()
    client.infer("simple", simple_inputs())
    with pytest.raises(ServerError):
        client.infer("failing", {"INPUT0": np.arange(3, dtype=np.int32)})
    pairs = exchanges(client.seen)
    assert [(send.method, send.target) for send, _ in pairs] == [
        ("GET", "/v2/health/live"),
        ("POST", "/v2/models/simple/infer"),
        ("POST", "/v2/models/failing/infer"),
    ]
    assert [receive.status for _, receive in pairs] == [200, 200, 500]
    for send, receive in pairs:
        assert (send.protocol, receive.protocol) == ("http", "http")
        assert (send.target, send.method) == (receive.target, receive.method)
        assert send.status is None
        assert send.elapsed is None
        assert receive.elapsed is not None
        assert receive.elapsed > 0
        assert receive.error is None
        # The hook is the caller's own: it sees the credentials as sent.
        assert lower_headers(send)["authorization"] == AUTH[1]
    assert pairs[1][1].body_length > 2 * 2 * 16 * 4


def test_base_path_prefixes_every_target(connect: Connect, triton: Any) -> None:
    client = connect(url=f"{triton.http_url}/some/prefix/", record=True)
    assert client.is_server_live() is False  # Triton has no such route
    with pytest.raises(ServerError) as info:
        client.server_metadata()
    assert info.value.http_status in (400, 404)
    with pytest.raises(ServerError):
        client.infer("simple", simple_inputs(), version=1)
    assert [send.target for send, _ in exchanges(client.seen)] == [
        "/some/prefix/v2/health/live",
        "/some/prefix/v2",
        "/some/prefix/v2/models/simple/versions/1/infer",
    ]


def test_query_parameters_of_a_call_reach_the_wire(client: ClientUnderTest) -> None:
    result = client.infer(
        "identity_int32", {"INPUT0": int32_matrix()}, query={"tag": "a b&c", "flag": True}
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), int32_matrix())
    send, receive = only_exchange(client.seen)
    assert send.target == "/v2/models/identity_int32/infer?tag=a+b%26c&flag=true"
    assert receive.status == 200


# -- sharing one client ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_one_client_shared_by_eight_threads(connect: Connect) -> None:
    client = connect(pool_size=4)  # fewer connections than threads: some wait for one
    ramp = np.arange(16, dtype=np.int32).reshape(1, 16)

    def run(thread: int) -> int:
        correct = 0
        for i in range(50):
            base = np.full((1, 16), thread * 1000 + i, dtype=np.int32)
            result = client.infer(
                "simple", {"INPUT0": base, "INPUT1": ramp}, request_id=f"{thread}/{i}"
            )
            correct += (
                result.id == f"{thread}/{i}"
                and np.array_equal(result.as_numpy("OUTPUT0"), base + ramp)
                and np.array_equal(result.as_numpy("OUTPUT1"), base - ramp)
            )
        return correct

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(run, range(8))) == [50] * 8


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_max_concurrency_caps_the_requests_in_flight(connect: Connect) -> None:
    in_flight = peak = 0

    def count(message: WireMessage) -> None:
        nonlocal in_flight, peak
        in_flight += 1 if message.direction == "send" else -1
        peak = max(peak, in_flight)

    client = connect(wire_hook=count, max_concurrency=4)
    calls = [
        lambda i=i: client.client.infer("slow", slow_input(5), request_id=str(i)) for i in range(64)
    ]
    results = client.gather(calls)
    assert sorted(int(result.id) for result in results) == list(range(64))
    assert peak == 4
    assert in_flight == 0


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_max_concurrency_caps_the_requests_in_flight_from_threads(connect: Connect) -> None:
    lock = threading.Lock()
    in_flight = peak = 0

    def count(message: WireMessage) -> None:  # called by each sending thread
        nonlocal in_flight, peak
        with lock:
            in_flight += 1 if message.direction == "send" else -1
            peak = max(peak, in_flight)

    client = connect(wire_hook=count, max_concurrency=4)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(
            pool.map(lambda i: client.infer("slow", slow_input(5), request_id=str(i)), range(64))
        )
    assert [int(result.id) for result in results] == list(range(64))
    assert 1 <= peak <= 4  # 16 threads, at most 4 requests on the wire at once
    assert in_flight == 0


# -- closing --------------------------------------------------------------------------------------


def _resource_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_closing_releases_every_connection_without_warnings(kind: str, triton: Any) -> None:
    gc.collect()
    before = connections_to(triton.http_port)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = ClientUnderTest(kind, triton.http_url)
        try:
            client.is_server_live()
            client.infer("simple", simple_inputs())
            assert connections_to(triton.http_port) > before
            client.close()  # leaves the client's and the transport's context managers
            assert connections_to(triton.http_port) == before
            with pytest.raises(TransportError, match="closed"):
                client.is_server_live()
        finally:
            client.shutdown()
        del client
        gc.collect()
    assert _resource_warnings(caught) == []


@pytest.mark.parametrize("kind", ["sync-httpx", "async-httpx"])
def test_a_closed_client_refuses_calls_while_its_transport_stays_open(
    connect: Connect,
) -> None:
    client = connect()
    client.run(client.client.aclose() if client.is_async else client.client.close())
    with pytest.raises(TransportError, match="client is closed"):
        client.is_server_live()
    live = HTTPRequest("GET", "/v2/health/live")
    handle = (
        client.transport.handle_async_request
        if client.is_async
        else (client.transport.handle_request)
    )
    assert client.run(handle(live)).status == 200


def test_an_unclosed_client_is_caught_by_the_resource_warning_check(triton: Any) -> None:
    """The control of the test above: leaking a connection does raise a ResourceWarning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = ClientUnderTest("sync-stdlib", triton.http_url)
        client.is_server_live()
        del client
        gc.collect()
    assert any("unclosed" in message for message in _resource_warnings(caught))
