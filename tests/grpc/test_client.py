"""Client and AsyncClient over gRPC against the live Triton server: the core protocol, every
datatype, errors, deadlines, metadata, compression, the Triton extensions, and copy counts."""

from __future__ import annotations

import gc
import json
import socket
import time
import tracemalloc
from collections.abc import Iterator
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
    RequestedOutput,
    ServerError,
    TransportError,
    WireMessage,
)
from kserve_v2.arguments import build_infer_request
from kserve_v2.datatypes import Datatype, bf16_bits_to_float32, float32_to_bf16_bits
from kserve_v2.grpc import codec
from kserve_v2.shm import SystemSharedMemoryRegion
from kserve_v2.testing import TritonServer
from tests.client.conftest import REUSE_SHAPES, reuse_data, reuse_one_input
from tests.grpc.conftest import GRPC_TRANSPORTS, make_repository, rest_json
from tests.strategies import assert_tensor_equal

pytestmark = pytest.mark.filterwarnings("error")

FAILURE = "kserve-v2 test failure: deliberate error"
RNG = np.random.default_rng(7)


def sample(datatype: Datatype, shape: tuple[int, ...] = (2, 3)) -> npt.NDArray[Any]:
    """Data for ``identity_<dt>``, extremes and special values included."""
    count = int(np.prod(shape))
    if datatype is Datatype.BOOL:
        return RNG.integers(0, 2, count).astype(bool).reshape(shape)
    if datatype is Datatype.BYTES:
        values = [b"", b"\x00abc", "h\u00e9llo".encode(), b"\xff\xfe", b"x" * 300, b"end"]
        return np.array((values * count)[:count], dtype=object).reshape(shape)
    if datatype in (Datatype.FP16, Datatype.FP32, Datatype.FP64, Datatype.BF16):
        name = (
            "float32"
            if datatype is Datatype.BF16
            else datatype.value.lower().replace("fp", "float")
        )
        dtype = np.dtype(name)
        values = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 65504.0] * count, dtype=dtype)
        return values[:count].reshape(shape)
    dtype = np.dtype(datatype.value.lower())
    info = np.iinfo(dtype)
    values = np.array([info.min, info.max, 0, 1, info.max // 3, info.min // 2] * count, dtype)
    return values[:count].reshape(shape)


def bf16_rounded(data: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """What BF16 holds of float32 ``data`` (rounded to the nearest, ties to even)."""
    return bf16_bits_to_float32(float32_to_bf16_bits(data))


# ---------------------------------------------------------------------------- health, metadata


def test_health_and_metadata(client: Client) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("simple")
    assert client.is_model_ready("simple", 1)
    assert not client.is_model_ready("no_such_model")
    meta = client.server_metadata()
    assert meta.name == "triton"
    assert meta.supports("sequence")
    assert client.supports_extension("model_repository")
    model = client.model_metadata("simple")
    assert (model.name, model.platform, model.versions) == ("simple", "python", ("1",))
    assert [(t.name, t.datatype, t.shape) for t in model.inputs] == [
        ("INPUT0", "INT32", (-1, 16)),
        ("INPUT1", "INT32", (-1, 16)),
    ]


async def test_health_and_metadata_async(aclient: AsyncClient) -> None:
    assert await aclient.is_server_live()
    assert await aclient.is_server_ready()
    assert await aclient.is_model_ready("simple")
    assert not await aclient.is_model_ready("no_such_model")
    assert (await aclient.server_metadata()).name == "triton"
    model = await aclient.model_metadata("identity_fp32", "1")
    assert model.outputs[0].datatype == "FP32"


def test_metadata_equals_the_http_answers(client: Client, triton: TritonServer) -> None:
    with Client(triton.http_url) as http:
        assert client.server_metadata() == http.server_metadata()
        for model in ("simple", "identity_bytes", "repeat_decoupled"):
            assert client.model_metadata(model) == http.model_metadata(model)


# ---------------------------------------------------------------------------------- inference


def test_simple_infer(client: Client) -> None:
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    result = client.infer("simple", {"INPUT0": a, "INPUT1": b}, request_id="req-42")
    assert (result.model_name, result.model_version, result.id) == ("simple", "1", "req-42")
    assert np.array_equal(result.as_numpy("OUTPUT0"), a + b)
    assert np.array_equal(result.as_numpy("OUTPUT1"), a - b)
    only = client.infer("simple", {"INPUT0": a, "INPUT1": b}, outputs=["OUTPUT1"])
    assert [t.name for t in only.outputs] == ["OUTPUT1"]


def _arrays_of_one_form() -> list[npt.NDArray[Any]]:
    """[2, 3] INT32 arrays with other values and memory layouts (one form: they reuse one
    request's framing)."""
    base = np.arange(6, dtype=np.int32).reshape(2, 3)
    strided = np.repeat(base * 5, 2, axis=-1)[..., ::2]
    return [base, base * -3, np.asfortranarray(base + 100), strided, base.astype(">i4")]


def test_requests_of_one_form_carry_their_own_values(client: Client) -> None:
    """The first request of a form is built and encoded in full, the later ones reuse its
    framing around their own arrays: each result must be its own request's."""
    for _ in range(2):
        for data in _arrays_of_one_form():
            result = client.infer("identity_int32", {"INPUT0": data}, outputs=["OUTPUT0"])
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


async def test_requests_of_one_form_carry_their_own_values_async(aclient: AsyncClient) -> None:
    for _ in range(2):
        for data in _arrays_of_one_form():
            result = await aclient.infer("identity_int32", {"INPUT0": data})
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_only_the_plain_call_takes_the_form_path(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any argument beyond model, inputs, outputs, version (and the call's headers, timeout
    and compression) goes through the full path, which is what applies it."""
    seen: list[str] = []
    proto = client._proto
    original = proto.infer_arrays

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(proto, "infer_arrays", spy)
    data = {"INPUT0": np.ones((1, 2), np.int32)}
    assert client.infer("identity_int32", data, timeout=30, headers={"a": "b"}).id == ""
    assert client.infer("identity_int32", data, request_id="r-1").id == "r-1"
    assert client.infer("identity_int32", data, parameters={"p": 1}).id == ""
    assert seen == ["identity_int32"]


@pytest.mark.parametrize("rows", [1, 1024], ids=["small", "1MiB"])
def test_results_are_writeable_on_the_native_transport(
    client: Client, grpc_transport: str, rows: int
) -> None:
    """As over HTTP, a result's arrays are views on the received message that the caller may
    write to, whatever the message's size (a small one arrives in one read, a large one in
    many); grpcio hands its messages over as bytes, so its arrays are read-only."""
    data = np.arange(rows * 256, dtype=np.float32).reshape(rows, 256)
    output = client.infer("identity_fp32", {"INPUT0": data}).as_numpy("OUTPUT0")
    assert not output.flags.owndata  # a view, not a copy
    assert output.flags.writeable is (grpc_transport == "native")
    if grpc_transport == "native":
        output += 1
        np.testing.assert_array_equal(output, data + 1)


async def test_results_are_writeable_on_the_native_transport_async(
    aclient: AsyncClient, grpc_transport: str
) -> None:
    result = await aclient.infer("identity_fp32", {"INPUT0": np.ones((1, 4), np.float32)})
    assert result.as_numpy("OUTPUT0").flags.writeable is (grpc_transport == "native")


@pytest.mark.parametrize("datatype", list(Datatype), ids=lambda d: d.value)
def test_every_datatype_round_trips(client: Client, datatype: Datatype) -> None:
    data = sample(datatype)
    tensor = InferInput("INPUT0", data, datatype=datatype)
    result = client.infer(f"identity_{datatype.value.lower()}", [tensor])
    output = result.output("OUTPUT0")
    assert (output.datatype, output.shape) == (datatype.value, data.shape)
    expected = bf16_rounded(data) if datatype is Datatype.BF16 else data
    assert_tensor_equal(result.as_numpy("OUTPUT0"), expected, datatype)


@pytest.mark.parametrize("datatype", list(Datatype), ids=lambda d: d.value)
async def test_every_datatype_round_trips_async(aclient: AsyncClient, datatype: Datatype) -> None:
    data = sample(datatype, (3, 1))
    result = await aclient.infer(
        f"identity_{datatype.value.lower()}", [InferInput("INPUT0", data, datatype=datatype)]
    )
    if datatype is Datatype.BF16:
        data = bf16_rounded(data)
    assert_tensor_equal(result.as_numpy("OUTPUT0"), data, datatype)


def test_zero_size_and_strings(client: Client) -> None:
    empty = np.zeros((0, 4), np.float32)
    assert client.infer("identity_fp32", {"INPUT0": empty}).as_numpy("OUTPUT0").shape == (0, 4)
    text = client.infer("identity_bytes", {"INPUT0": [["a", "b\u00e9"]]})
    assert text.as_str("OUTPUT0").tolist() == [["a", "b\u00e9"]]
    reversed_ = client.infer("bytes_reverse", {"INPUT0": ["abc", ""]})
    assert reversed_.as_numpy("OUTPUT0").tolist() == [b"cba", b""]


def test_parameters_reach_the_model(client: Client) -> None:
    params = {"alpha": 1, "beta": "x y", "gamma": True, "delta": 0.5, "low": -(2**63)}
    result = client.infer("params_echo", {"INPUT0": np.zeros(1, np.int32)}, parameters=params)
    seen = json.loads(result.as_numpy("PARAMS")[0])
    assert {k: seen[k] for k in params} == params
    # Triton 2.51 takes no uint64_param (integers above int64), not even for sequence_id, which
    # HTTP carries up to 2**64-1: the refusals are its own (the README says so).
    with pytest.raises(ServerError, match="invalid value type for 'big' parameter"):
        client.infer("params_echo", {"INPUT0": np.zeros(1, np.int32)}, parameters={"big": 2**63})
    with pytest.raises(ServerError, match="'sequence_id' parameter, expected int64_param"):
        client.infer(
            "sequence_accumulate",
            {"INPUT": np.array([1], np.int32)},
            sequence_id=2**63,
            sequence_start=True,
            sequence_end=True,
        )


def test_classification(client: Client) -> None:
    scores = np.array([0.1, 0.7, 0.2], np.float32)
    result = client.infer(
        "classify", {"INPUT0": scores}, outputs=[RequestedOutput("OUTPUT0", class_count=2)]
    )
    top = [entry.decode().split(":")[:2] for entry in result.as_numpy("OUTPUT0").tolist()]
    assert [index for _, index in top] == ["1", "2"]


def test_same_request_same_result_over_http_and_grpc(client: Client, triton: TritonServer) -> None:
    pair = {
        "INPUT0": np.arange(32, dtype=np.int32).reshape(2, 16),
        "INPUT1": np.full((2, 16), 3, np.int32),
    }
    requests = [
        ("simple", pair, {}),
        ("identity_bytes", {"INPUT0": np.array([[b"x", b"\x00y"]], dtype=object)}, {}),
        ("identity_fp16", {"INPUT0": np.array([[1.5, -2.0]], np.float16)}, {}),
        ("params_echo", {"INPUT0": np.zeros(1, np.int32)}, {"k": "v", "n": 3}),
    ]
    with Client(triton.http_url) as http:
        for model, inputs, params in requests:
            by_grpc = client.infer(model, inputs, request_id="same", parameters=params)
            by_http = http.infer(model, inputs, request_id="same", parameters=params)
            assert (by_grpc.model_name, by_grpc.model_version, by_grpc.id) == (
                by_http.model_name,
                by_http.model_version,
                by_http.id,
            )
            assert [(t.name, t.datatype, t.shape) for t in by_grpc.outputs] == [
                (t.name, t.datatype, t.shape) for t in by_http.outputs
            ]
            for tensor in by_http.outputs:
                got, want = by_grpc.as_numpy(tensor.name), by_http.as_numpy(tensor.name)
                assert got.dtype == want.dtype
                if model == "params_echo":  # JSON text: the key order is the server's choice
                    assert json.loads(got[0]) == json.loads(want[0])
                else:
                    assert np.array_equal(got, want)


# ------------------------------------------------------------------------------------ errors


def test_errors_carry_the_servers_message(client: Client) -> None:
    with pytest.raises(ServerError) as info:
        client.infer("no_such_model", {"INPUT0": np.zeros((1, 1), np.int32)})
    assert info.value.grpc_code == "NOT_FOUND"
    assert "unknown model" in info.value.message
    with pytest.raises(ServerError) as info:
        client.infer("identity_int32", {"INPUT0": np.zeros((1, 1), np.float32)})
    assert info.value.grpc_code == "INVALID_ARGUMENT"
    assert "data-type is 'FP32'" in info.value.message
    with pytest.raises(ServerError) as info:
        client.infer("identity_int32", {"INPUT0": np.zeros(3, np.int32)})
    assert info.value.grpc_code == "INVALID_ARGUMENT"
    assert "unexpected shape" in info.value.message
    with pytest.raises(ServerError) as info:
        client.infer("failing", {"INPUT0": np.zeros(3, np.int32)})
    assert info.value.message == FAILURE
    assert info.value.http_status is None
    with pytest.raises(ServerError, match="unknown model"):
        client.model_metadata("no_such_model")


async def test_errors_async(aclient: AsyncClient) -> None:
    with pytest.raises(ServerError) as info:
        await aclient.infer("failing", {"INPUT0": np.zeros(3, np.int32)})
    assert (info.value.grpc_code, info.value.message) == ("INTERNAL", FAILURE)
    with pytest.raises(ServerError) as info:
        await aclient.model_config("no_such_model")
    assert info.value.grpc_code == "NOT_FOUND"


def test_deadline(client: Client, grpc_transport: str) -> None:
    delay = {"DELAY_MS": np.array([1000], np.float32)}
    with pytest.raises(DeadlineExceededError) as info:
        client.infer("slow", delay, timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    if grpc_transport == "grpcio":
        assert isinstance(info.value.__cause__, Exception)  # the grpc.RpcError, kept
    fast = client.infer("slow", {"DELAY_MS": np.array([1], np.float32)}, timeout=30)
    assert fast.as_numpy("OUTPUT0").tolist() == [1.0]


@pytest.mark.parametrize("transport", GRPC_TRANSPORTS)
async def test_deadline_async(grpc_url: str, transport: str) -> None:
    async with AsyncClient(grpc_url, timeout=0.2, grpc_transport=transport) as c:
        with pytest.raises(DeadlineExceededError):
            await c.infer("slow", {"DELAY_MS": np.array([1000], np.float32)})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_a_transport_error() -> None:
    with Client(f"grpc://127.0.0.1:{free_port()}", timeout=5) as c:
        with pytest.raises(TransportError) as info:
            c.server_metadata()
        assert not isinstance(info.value, DeadlineExceededError)
        assert "Connection refused" in str(info.value)


def test_closed_client_refuses_calls(grpc_url: str) -> None:
    c = Client(grpc_url)
    c.close()
    c.close()
    with pytest.raises(TransportError, match="closed"):
        c.is_server_live()


# ---------------------------------------------------------------- wire hook, compression


def test_wire_hook_sees_grpc_messages(grpc_url: str) -> None:
    seen: list[WireMessage] = []
    with Client(grpc_url, wire_hook=seen.append, headers={"X-Trace": "abc"}) as c:
        c.infer("identity_int8", {"INPUT0": np.ones((1, 2), np.int8)}, headers={"X-Call": "1"})
        with pytest.raises(ServerError):
            c.infer("no_such_model", {"INPUT0": np.ones((1, 2), np.int8)})
    send, receive, failed_send, failed = seen
    assert (send.protocol, send.direction, send.target) == (
        "grpc",
        "send",
        "/inference.GRPCInferenceService/ModelInfer",
    )
    assert ("x-trace", "abc") in send.headers
    assert ("x-call", "1") in send.headers
    assert codec.decode_infer_response(receive.body[0]).id == ""
    assert receive.status == "OK"
    assert failed_send.direction == "send"
    assert (failed.status, type(failed.error)) == ("NOT_FOUND", ServerError)


@pytest.mark.parametrize("compression", ["gzip", "deflate"])
def test_compression(grpc_url: str, compression: str) -> None:
    data = np.zeros((512, 512), np.float32)  # compresses well
    with Client(grpc_url, request_compression=compression) as c:
        assert np.array_equal(c.infer("identity_fp32", {"INPUT0": data}).as_numpy("OUTPUT0"), data)
        other = "deflate" if compression == "gzip" else "gzip"
        result = c.infer("identity_fp32", {"INPUT0": data[:2]}, compression=other)
        assert result.as_numpy("OUTPUT0").shape == (2, 512)


async def test_compression_async(grpc_url: str) -> None:
    async with AsyncClient(grpc_url, request_compression="gzip") as c:
        result = await c.infer("identity_fp32", {"INPUT0": np.ones((64, 64), np.float32)})
        assert result.as_numpy("OUTPUT0").sum() == 64 * 64


def test_grpc_options_reach_the_channel(grpc_url: str) -> None:
    with Client(grpc_url, grpc_options={"grpc.max_receive_message_length": 1024}) as c:
        c.infer("identity_fp32", {"INPUT0": np.ones((1, 4), np.float32)})
        with pytest.raises(ServerError) as info:
            c.infer("identity_fp32", {"INPUT0": np.ones((64, 64), np.float32)})
        assert info.value.grpc_code == "RESOURCE_EXHAUSTED"


def test_max_response_size_limits_messages(grpc_url: str, grpc_transport: str) -> None:
    small, large = np.ones((1, 4), np.float32), np.ones((64, 64), np.float32)
    with Client(grpc_url, grpc_transport=grpc_transport, max_response_size=1024) as c:
        c.infer("identity_fp32", {"INPUT0": small})
        with pytest.raises(ServerError) as info:
            c.infer("identity_fp32", {"INPUT0": large})
        assert info.value.grpc_code == "RESOURCE_EXHAUSTED"
    # An explicit grpc option wins over max_response_size.
    options = {"grpc.max_receive_message_length": 1 << 20}
    with Client(
        grpc_url, grpc_transport=grpc_transport, max_response_size=1024, grpc_options=options
    ) as c:
        assert np.array_equal(
            c.infer("identity_fp32", {"INPUT0": large}).as_numpy("OUTPUT0"), large
        )


# -------------------------------------------------------------- restricted protocols, repo


@pytest.fixture(scope="module")
def admin_server(
    triton_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TritonServer]:
    """Explicit model control, ``identity_int32`` loaded; inference and the repository API
    need the header ``triton-grpc-protocol-admin-key: secret``."""
    repository = make_repository(
        tmp_path_factory.mktemp("admin-repo"), "identity_int32", "identity_fp32"
    )
    server = triton_factory.start(
        repository,
        model_control_mode="explicit",
        load_models=["identity_int32"],
        grpc_restricted_protocol=["inference,model-repository:admin-key=secret"],
    )
    yield server
    server.stop()


ADMIN = {"triton-grpc-protocol-admin-key": "secret"}


def test_metadata_headers_are_sent(admin_server: TritonServer) -> None:
    url = f"grpc://{admin_server.grpc_url}"
    data = {"INPUT0": np.ones((1, 2), np.int32)}
    with Client(url) as c:
        with pytest.raises(ServerError, match="admin-key") as info:
            c.infer("identity_int32", data)
        assert info.value.grpc_code is not None
        assert c.infer("identity_int32", data, headers=ADMIN).as_numpy("OUTPUT0").sum() == 2
        assert c.is_server_live()  # health is not restricted
    with Client(url, headers={"Triton-GRPC-Protocol-Admin-Key": "secret"}) as c:
        assert c.infer("identity_int32", data).as_numpy("OUTPUT0").sum() == 2


async def test_metadata_headers_are_sent_async(admin_server: TritonServer) -> None:
    async with AsyncClient(f"grpc://{admin_server.grpc_url}", headers=ADMIN) as c:
        result = await c.infer("identity_int32", {"INPUT0": np.ones((1, 2), np.int32)})
        assert result.as_numpy("OUTPUT0").sum() == 2


def test_load_and_unload(admin_server: TritonServer) -> None:
    with Client(f"grpc://{admin_server.grpc_url}", headers=ADMIN) as c:
        states = {m.name: m.state for m in c.repository_index()}
        assert states["identity_int32"] == "READY"
        assert states["identity_fp32"] != "READY"
        assert [m.name for m in c.repository_index(ready_only=True)] == ["identity_int32"]
        c.load_model("identity_fp32")
        assert c.is_model_ready("identity_fp32")
        result = c.infer("identity_fp32", {"INPUT0": np.ones((1, 3), np.float32)})
        assert result.as_numpy("OUTPUT0").shape == (1, 3)
        config = c.model_config("identity_fp32")
        config["max_batch_size"] = 0
        c.load_model("identity_fp32", config=config)  # a reload with a given configuration
        assert c.is_model_ready("identity_fp32")
        c.unload_model("identity_fp32")
        assert not c.is_model_ready("identity_fp32")
        with pytest.raises(ServerError, match="failed to load"):
            c.load_model("no_such_model")
    with Client(f"grpc://{admin_server.grpc_url}") as c, pytest.raises(ServerError):
        c.unload_model("identity_int32")  # no admin header: refused


async def test_load_and_unload_async(admin_server: TritonServer) -> None:
    async with AsyncClient(f"grpc://{admin_server.grpc_url}", headers=ADMIN) as c:
        await c.load_model("identity_fp32")
        assert await c.is_model_ready("identity_fp32")
        await c.unload_model("identity_fp32")
        assert not await c.is_model_ready("identity_fp32")


# ------------------------------------------------------------------------ Triton extensions


@pytest.mark.parametrize(
    "model", ["simple", "sequence_accumulate", "repeat_decoupled", "classify", "identity_bf16"]
)
def test_model_config_equals_the_rest_json(
    client: Client, triton: TritonServer, model: str
) -> None:
    assert client.model_config(model) == rest_json(triton, f"/v2/models/{model}/config")


async def test_model_config_async(aclient: AsyncClient, triton: TritonServer) -> None:
    assert await aclient.model_config("simple", 1) == rest_json(
        triton, "/v2/models/simple/versions/1/config"
    )


def test_statistics_equal_the_rest_json(client: Client, triton: TritonServer) -> None:
    client.infer("text_echo", {"text_input": ["hello"]})
    # Triton records an inference's statistics just after sending its response, so the two
    # reads are compared once the counts have settled (bounded: a real mismatch still fails).
    deadline = time.monotonic() + 5
    while True:
        stats = client.model_statistics("text_echo")
        rest = rest_json(triton, "/v2/models/text_echo/stats")
        if stats == rest or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert stats == rest
    (model,) = stats["model_stats"]
    assert model["inference_count"] >= 1
    assert isinstance(model["inference_stats"]["success"]["ns"], int)
    everything = client.model_statistics()
    assert {"simple", "text_echo"} <= {m["name"] for m in everything["model_stats"]}
    assert client.model_statistics("text_echo", "1") == stats


def test_repository_index(client: Client, triton: TritonServer) -> None:
    index = client.repository_index()
    rest = rest_json(triton, "/v2/repository/index", b"{}")
    assert [(m.name, m.version, m.state) for m in index] == [
        (m["name"], m.get("version", ""), m["state"]) for m in rest
    ]
    assert all(m.state == "READY" for m in index)


def test_log_settings(client: Client, triton: TritonServer) -> None:
    settings = client.log_settings()
    assert settings == rest_json(triton, "/v2/logging")
    assert settings["log_verbose_level"] == 0
    try:
        updated = client.update_log_settings({"log_verbose_level": 1})
        assert updated["log_verbose_level"] == 1
        assert updated == rest_json(triton, "/v2/logging")
    finally:
        assert client.update_log_settings({"log_verbose_level": 0}) == settings


def test_trace_settings(client: Client, triton: TritonServer) -> None:
    settings = client.trace_settings()
    assert settings == rest_json(triton, "/v2/trace/setting")
    assert settings["trace_level"] == ["OFF"]
    try:
        updated = client.update_trace_settings({"trace_rate": 50}, model="simple")
        assert updated["trace_rate"] == "50"
        assert client.trace_settings("simple") == rest_json(
            triton, "/v2/models/simple/trace/setting"
        )
    finally:
        reset = client.update_trace_settings({"trace_rate": None}, model="simple")
    assert reset["trace_rate"] == settings["trace_rate"]
    assert client.trace_settings() == settings


async def test_settings_async(aclient: AsyncClient, triton: TritonServer) -> None:
    assert await aclient.log_settings() == rest_json(triton, "/v2/logging")
    assert await aclient.trace_settings() == rest_json(triton, "/v2/trace/setting")


def test_system_shared_memory(client: Client, triton: TritonServer) -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    with SystemSharedMemoryRegion.create("grpc_io", 256) as region:
        client.register_system_shared_memory(region.name, region.key, region.byte_size)
        try:
            status = client.system_shared_memory_status()
            assert status == rest_json(triton, "/v2/systemsharedmemory/status")
            assert {"name": "grpc_io", "key": region.key, "offset": 0, "byte_size": 256} in status
            assert client.system_shared_memory_status("grpc_io") == [
                {"name": "grpc_io", "key": region.key, "offset": 0, "byte_size": 256}
            ]
            n = region.write(x)
            inputs = [
                InferInput(
                    "INPUT0", datatype="FP32", shape=x.shape, shared_memory=region.placement(n)
                ),
            ]
            outputs = [
                RequestedOutput("OUTPUT0", shared_memory=region.placement(n, offset=128)),
            ]
            result = client.infer("identity_fp32", inputs, outputs=outputs)
            tensor = result.output("OUTPUT0")
            assert tensor.data is None
            with Client(triton.http_url) as http:
                over_http = http.infer("identity_fp32", inputs, outputs=outputs)
            assert tensor == over_http.output("OUTPUT0")  # parameters included
            assert np.array_equal(region.ndarray("FP32", (4, 4), offset=128), x)
            # Outputs in and out of shared memory in one response.
            mixed = client.infer(
                "simple",
                {"INPUT0": np.ones((1, 16), np.int32), "INPUT1": np.ones((1, 16), np.int32)},
                outputs=[
                    RequestedOutput("OUTPUT0", shared_memory=region.placement(64, offset=0)),
                    "OUTPUT1",
                ],
            )
            assert mixed.output("OUTPUT0").data is None
            assert mixed.as_numpy("OUTPUT1").tolist() == [[0] * 16]
            assert region.ndarray("INT32", (1, 16)).tolist() == [[2] * 16]
        finally:
            client.unregister_system_shared_memory("grpc_io")
        assert client.system_shared_memory_status() == []
    with pytest.raises(ServerError):
        client.system_shared_memory_status("grpc_io")


def test_cuda_shared_memory_status(client: Client, triton: TritonServer) -> None:
    assert client.cuda_shared_memory_status() == rest_json(triton, "/v2/cudasharedmemory/status")
    client.unregister_cuda_shared_memory()  # nothing registered: not an error


# ------------------------------------------------------------------------------ copy counts

MIB = 1 << 20


def received_message(array: npt.NDArray[Any]) -> bytes | bytearray:
    """The received message that ``array`` is a view of (fails if it owns a copy): grpcio's
    bytes, or the native transport's receive buffer."""
    base: Any = array
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview)
    assert isinstance(base.obj, bytes | bytearray)
    return base.obj


def test_copy_counts_of_a_64_mib_tensor(client: Client) -> None:
    """Request: the tensor is copied once, when the message is joined into one buffer.
    Response: decoding makes no copy; outputs are views on the received message."""
    x = RNG.random((4096, 4096), dtype=np.float32)  # 64 MiB
    request = build_infer_request("identity_fp32", {"INPUT0": x})
    result = client.infer("identity_fp32", list(request.inputs), timeout=300)
    y = result.as_numpy("OUTPUT0")
    assert np.array_equal(y, x)
    received = received_message(y)
    tracemalloc.start()
    try:
        data = codec.encode_infer_request(request)
        _, encode_peak = tracemalloc.get_traced_memory()
        del data
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        again = codec.decode_infer_response(received).as_numpy("OUTPUT0")
        _, decode_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0.99 * x.nbytes < encode_peak < 1.05 * x.nbytes  # exactly one copy
    assert decode_peak - before < 0.001 * x.nbytes  # none
    assert received_message(again) is received


def test_results_are_freed_without_the_cyclic_collector(client: Client) -> None:
    """A unary call leaves no reference cycle behind: large responses are freed when the
    caller drops them, not whenever the garbage collector next runs."""
    x = np.ones((1, 1 << 18), np.float32)  # 1 MiB, several DATA frames
    client.infer("identity_fp32", {"INPUT0": x})  # connection set up
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            client.infer("identity_fp32", {"INPUT0": x}).as_numpy("OUTPUT0")
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_invalid_input_is_refused_before_sending(client: Client) -> None:
    with pytest.raises(InvalidInputError):
        client.infer("identity_fp32", {"INPUT0": np.ones(2, np.float32)}, headers={"a b": "c"})
    with pytest.raises(InvalidInputError, match="HTTP"):
        client.infer("identity_fp32", {"INPUT0": np.ones((1, 1), np.float32)}, query={"a": "b"})


# -- query parameters: HTTP only --------------------------------------------------------------

#: Calls of the gRPC client with ``query=``: each is refused before anything is sent.
QUERY_CALLS = {
    "is_server_live": lambda c, q: c.is_server_live(query=q),
    "model_metadata": lambda c, q: c.model_metadata("identity_fp32", query=q),
    "model_config": lambda c, q: c.model_config("identity_fp32", query=q),
    "repository_index": lambda c, q: c.repository_index(query=q),
    "system_shared_memory_status": lambda c, q: c.system_shared_memory_status(query=q),
    "update_log_settings": lambda c, q: c.update_log_settings({"log_info": True}, query=q),
}


def test_query_is_refused_over_grpc(grpc_url: str, grpc_transport: str, triton: Any) -> None:
    seen: list[WireMessage] = []
    with Client(grpc_url, grpc_transport=grpc_transport, wire_hook=seen.append) as client:
        for name, call in QUERY_CALLS.items():
            with pytest.raises(InvalidInputError, match="HTTP only") as info:
                call(client, {"a": "b"})
            assert isinstance(info.value, ValueError), name
        assert seen == []
        assert client.model_config("identity_fp32", query=None)["name"] == "identity_fp32"
        # Metrics come over HTTP whatever the client's protocol: the query goes with them.
        assert client.metrics(triton.metrics_url, query={"a": "b"})
    assert seen[-1].target == f"{triton.metrics_url}?a=b"


async def test_query_is_refused_over_grpc_async(
    grpc_url: str, grpc_transport: str, triton: Any
) -> None:
    seen: list[WireMessage] = []
    async with AsyncClient(
        grpc_url, grpc_transport=grpc_transport, wire_hook=seen.append
    ) as client:
        for call in QUERY_CALLS.values():
            with pytest.raises(InvalidInputError, match="HTTP only"):
                await call(client, {"a": "b"})
        assert seen == []
        assert await client.metrics(triton.metrics_url, query={"a": "b"})
    assert seen[-1].target == f"{triton.metrics_url}?a=b"


# -- one input reused across calls ----------------------------------------------------------------


def test_one_input_reused_across_calls_and_placements(client: Client) -> None:
    assert reuse_one_input(client, "reuse-grpc-sync") == 2 * len(REUSE_SHAPES)


async def test_one_input_reused_across_calls_and_placements_async(aclient: AsyncClient) -> None:
    x = InferInput("INPUT0", np.zeros((1, 1), np.float32))
    with SystemSharedMemoryRegion.create("reuse-grpc-async", 4096) as region:
        await aclient.register_region(region)
        try:
            for step, shape in enumerate(REUSE_SHAPES):
                data = reuse_data(step, shape)
                x.set_data(data)
                out = (await aclient.infer("identity_fp32", [x])).as_numpy("OUTPUT0")
                np.testing.assert_array_equal(out, data)
                placed = reuse_data(step + 100, shape[::-1])
                x.set_shared_memory(region.placement(region.write(placed)), shape=placed.shape)
                out = (await aclient.infer("identity_fp32", [x])).as_numpy("OUTPUT0")
                np.testing.assert_array_equal(out, placed)
        finally:
            await aclient.unregister_region(region)
