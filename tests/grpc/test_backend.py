"""kserve_v2.grpc without a server: codec, protocol calls, channel settings, error mapping,
extension conversions and the stream router.

protobuf's generated classes are the oracle of the byte layouts: requests we encode must parse
to what was asked for, responses they serialize must decode to what they hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2 import AsyncClient, Client, TLSOptions
from kserve_v2.arguments import build_infer_request
from kserve_v2.datatypes import Datatype, serialize
from kserve_v2.endpoint import parse_url
from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc import codec, extensions
from kserve_v2.grpc.backend import GRPCBackend, GRPCCall, metadata_items
from kserve_v2.grpc.config import DEFAULT_OPTIONS, Metadata, channel_config
from kserve_v2.grpc.routing import ask_empty_final, triton_server
from kserve_v2.grpc.status import status_of
from kserve_v2.interfaces import AsyncUnaryChannel, BytesLike, UnaryChannel
from kserve_v2.messages import InferRequest, InferResult, OutputTensor
from kserve_v2.options import GRPCKeepAlive
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
from kserve_v2.transport.grpcio import translate_rpc_error
from tests.strategies import BINARY_INFER_REQUESTS, INFER_RESULTS, assert_tensor_equal

grpc = pytest.importorskip("grpc")
pb = pytest.importorskip("kserve_v2.grpc._generated.grpc_service_pb2")
mc = pytest.importorskip("kserve_v2.grpc._generated.model_config_pb2")

# Property tests run on a small shared machine: no deadline, few examples.
FAST = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
ENDPOINT = parse_url("grpc://127.0.0.1:8001")
INFER = "/inference.GRPCInferenceService/ModelInfer"


# --------------------------------------------------------------------------- oracle helpers


def param_value(param: Any) -> Any:
    choice = param.WhichOneof("parameter_choice")
    return None if choice is None else getattr(param, choice)


def params_of(field: Any) -> dict[str, Any]:
    return {key: param_value(value) for key, value in field.items()}


def set_params(target: Any, params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        if isinstance(value, bool):
            target[key].bool_param = value
        elif isinstance(value, int):
            if value > 2**63 - 1:
                target[key].uint64_param = value
            else:
                target[key].int64_param = value
        elif isinstance(value, float):
            target[key].double_param = value
        else:
            target[key].string_param = value


def response_bytes(result: InferResult) -> bytes:
    """``result`` serialized by protobuf the way Triton sends it (raw contents for outputs
    with data, none for outputs in shared memory)."""
    message = pb.ModelInferResponse(
        model_name=result.model_name, model_version=result.model_version, id=result.id
    )
    set_params(message.parameters, result.parameters)
    for tensor in result.outputs:
        out = message.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        set_params(out.parameters, tensor.parameters)
        if tensor.data is not None:
            wire = serialize(tensor.data, Datatype.parse(tensor.datatype))
            message.raw_output_contents.append(bytes(wire))
    data: bytes = message.SerializeToString()
    return data


# ------------------------------------------------------------------------------ requests


@FAST
@given(BINARY_INFER_REQUESTS)
def test_encoded_request_parses_to_the_request(request_: InferRequest) -> None:
    message = pb.ModelInferRequest.FromString(codec.encode_infer_request(request_))
    assert message.model_name == request_.model_name
    assert message.id == request_.id
    assert params_of(message.parameters) == dict(request_.parameters)
    raw = []
    assert len(message.inputs) == len(request_.inputs)
    for tensor, got in zip(request_.inputs, message.inputs, strict=True):
        assert (got.name, got.datatype, tuple(got.shape)) == (
            tensor.name,
            tensor.datatype.value,
            tensor.shape,
        )
        want_params = dict(tensor.parameters)
        if tensor.shared_memory is not None:
            want_params.update(tensor.shared_memory.as_parameters())
        else:
            raw.append(bytes(tensor.wire_bytes()))
        assert params_of(got.parameters) == want_params
    assert list(message.raw_input_contents) == raw
    for output, got in zip(request_.outputs, message.outputs, strict=True):
        want = dict(output.parameters)
        if output.shared_memory is not None:
            want.update(output.shared_memory.as_parameters())
        if output.class_count:
            want["classification"] = output.class_count
        assert got.name == output.name
        assert params_of(got.parameters) == want


def test_request_tensor_data_is_referenced_until_the_join() -> None:
    x = np.arange(1 << 16, dtype=np.float32)
    parts = codec.encode_infer_request_parts(build_infer_request("m", {"x": x}))
    (raw,) = [part for part in parts if len(part) >= x.nbytes]
    assert np.shares_memory(np.frombuffer(raw, np.float32), x)


def test_sequence_and_schedule_parameters_reach_the_message() -> None:
    request = build_infer_request(
        "m",
        {"x": np.zeros(1, np.int32)},
        sequence_id=2**64 - 1,
        sequence_start=True,
        priority=3,
        timeout_us=100,
    )
    message = pb.ModelInferRequest.FromString(codec.encode_infer_request(request))
    assert message.parameters["sequence_id"].uint64_param == 2**64 - 1
    assert params_of(message.parameters) == {
        "sequence_id": 2**64 - 1,
        "sequence_start": True,
        "sequence_end": False,
        "priority": 3,
        "timeout": 100,
    }
    request = build_infer_request("m", {"x": np.zeros(1, np.int32)}, sequence_id="abc")
    message = pb.ModelInferRequest.FromString(codec.encode_infer_request(request))
    assert message.parameters["sequence_id"].string_param == "abc"


# ----------------------------------------------------------------------------- responses


@FAST
@given(INFER_RESULTS)
def test_response_decodes_to_what_protobuf_serialized(result: InferResult) -> None:
    decoded = codec.decode_infer_response(response_bytes(result))
    assert (decoded.model_name, decoded.model_version, decoded.id) == (
        result.model_name,
        result.model_version,
        result.id,
    )
    assert dict(decoded.parameters) == dict(result.parameters)
    assert len(decoded.outputs) == len(result.outputs)
    for want, got in zip(result.outputs, decoded.outputs, strict=True):
        assert (got.name, got.datatype, got.shape) == (want.name, want.datatype, want.shape)
        assert dict(got.parameters) == dict(want.parameters)
        if want.data is None:
            assert got.data is None
        else:
            assert got.data is not None
            assert_tensor_equal(got.data, want.data, Datatype.parse(want.datatype))


@FAST
@given(st.binary(max_size=200))
def test_response_decoding_is_total(data: bytes) -> None:
    """Any bytes either decode or raise ProtocolError: never another exception."""
    for decode in (codec.decode_infer_response, codec.decode_stream_response):
        with contextlib.suppress(ProtocolError):
            decode(data)


def test_numeric_outputs_are_views_on_the_received_bytes() -> None:
    x = np.arange(1024, dtype=np.float64)
    data = response_bytes(InferResult("m", outputs=(OutputTensor("y", "FP64", (1024,), x),)))
    y = codec.decode_infer_response(data).as_numpy("y")
    assert not y.flags.owndata
    assert not y.flags.writeable
    base: Any = y
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview)
    assert base.obj is data
    assert np.array_equal(y, x)


TYPED = {
    "BOOL": ("bool_contents", [True, False, True, True], np.bool_),
    "INT8": ("int_contents", [-128, 127, 0, 5], np.int8),
    "INT16": ("int_contents", [-32768, 32767, 0, 5], np.int16),
    "INT32": ("int_contents", [-(2**31), 2**31 - 1, 0, 5], np.int32),
    "INT64": ("int64_contents", [-(2**63), 2**63 - 1, 0, 5], np.int64),
    "UINT8": ("uint_contents", [0, 255, 1, 2], np.uint8),
    "UINT16": ("uint_contents", [0, 65535, 1, 2], np.uint16),
    "UINT32": ("uint_contents", [0, 2**32 - 1, 1, 2], np.uint32),
    "UINT64": ("uint64_contents", [0, 2**64 - 1, 1, 2], np.uint64),
    "FP32": ("fp32_contents", [0.5, -1.0, 3.25, 1e30], np.float32),
    "FP64": ("fp64_contents", [0.1, -1.0, math.pi, 1e300], np.float64),
    "BYTES": ("bytes_contents", [b"", b"a\x00", b"\xff", b"xyz"], object),
}


@pytest.mark.parametrize("datatype", list(TYPED))
def test_typed_contents_decode(datatype: str) -> None:
    field, values, dtype = TYPED[datatype]
    message = pb.ModelInferResponse(model_name="m")
    out = message.outputs.add(name="y", datatype=datatype, shape=[2, 2])
    getattr(out.contents, field).extend(values)
    y = codec.decode_infer_response(message.SerializeToString()).as_numpy("y")
    assert y.shape == (2, 2)
    expected = np.array(values, dtype=dtype).reshape(2, 2)
    if dtype is object:
        assert y.dtype == object
        assert list(y.flat) == values
    else:
        assert y.dtype == expected.dtype
        assert np.array_equal(y, expected)


@pytest.mark.parametrize(
    ("datatype", "field", "values", "shape", "problem"),
    [
        ("INT8", "int_contents", [300], [1], "out of range"),
        ("UINT16", "uint_contents", [70000], [1], "out of range"),
        ("INT32", "int_contents", [1, 2, 3], [2], "needs 2 element"),
        ("FP32", "fp64_contents", [1.0], [1], "fp64_contents"),
        ("FP16", "fp32_contents", [1.0], [1], "fp32_contents"),
        ("INT32", "int_contents", [], [3], "no data"),
    ],
)
def test_bad_typed_contents_are_protocol_errors(
    datatype: str, field: str, values: list[Any], shape: list[int], problem: str
) -> None:
    message = pb.ModelInferResponse(model_name="m")
    out = message.outputs.add(name="y", datatype=datatype, shape=shape)
    out.contents.SetInParent()
    getattr(out.contents, field).extend(values)
    with pytest.raises(ProtocolError, match=problem):
        codec.decode_infer_response(message.SerializeToString())


def test_raw_contents_pair_with_outputs_not_in_shared_memory() -> None:
    message = pb.ModelInferResponse(model_name="m")
    message.outputs.add(name="a", datatype="INT32", shape=[2])
    shm = message.outputs.add(name="b", datatype="FP32", shape=[4])
    set_params(shm.parameters, {"shared_memory_region": "r", "shared_memory_byte_size": 16})
    message.outputs.add(name="c", datatype="INT8", shape=[1])
    message.raw_output_contents.extend([np.array([1, 2], "<i4").tobytes(), b"\x07"])
    result = codec.decode_infer_response(message.SerializeToString())
    assert result.as_numpy("a").tolist() == [1, 2]
    assert result.output("b").data is None
    assert result.as_numpy("c").tolist() == [7]


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda m: m.raw_output_contents.append(b"\x00" * 4), "raw_output_contents"),
        (lambda m: setattr(m.outputs[0], "datatype", "FP8"), "unknown datatype"),
        (lambda m: m.outputs[0].shape.__setitem__(0, -2), "negative"),
        (lambda m: m.raw_output_contents.__setitem__(0, b"\x00" * 7), "needs 8 bytes"),
        (lambda m: m.raw_output_contents.__delitem__(0), "no data"),
    ],
)
def test_inconsistent_responses_are_protocol_errors(mutate: Any, problem: str) -> None:
    message = pb.ModelInferResponse(model_name="m")
    message.outputs.add(name="a", datatype="INT32", shape=[2])
    message.raw_output_contents.append(np.array([1, 2], "<i4").tobytes())
    mutate(message)
    with pytest.raises(ProtocolError, match=problem):
        codec.decode_infer_response(message.SerializeToString())


def test_stream_events() -> None:
    message = pb.ModelStreamInferResponse(error_message="boom")
    message.infer_response.id = "r1"
    event = codec.decode_stream_response(message.SerializeToString())
    assert (event.request_id, event.final, event.complete) == ("r1", None, True)
    assert isinstance(event.error, ServerError)
    assert event.error.message == "boom"

    message.infer_response.parameters["triton_final_response"].bool_param = False
    event = codec.decode_stream_response(message.SerializeToString())
    assert (event.final, event.complete, event.empty_final) == (False, False, False)

    message = pb.ModelStreamInferResponse()
    message.infer_response.id = "r2"
    message.infer_response.parameters["triton_final_response"].bool_param = True
    event = codec.decode_stream_response(message.SerializeToString())
    assert event.result is not None
    assert event.result.final is True
    assert event.empty_final
    assert event.complete

    event = codec.decode_stream_response(b"")
    assert (event.request_id, event.error, event.complete) == ("", None, True)


def _bare_response(rid: str = "r1", version: str = "", **params: bool) -> bytes:
    """A bare ``ModelInferResponse`` as MLServer streams it."""
    message = pb.ModelInferResponse(model_name="repeat_decoupled", model_version=version, id=rid)
    for key, value in params.items():
        message.parameters[key].bool_param = value
    message.outputs.add(name="IDX", datatype="INT32", shape=[1])
    message.raw_output_contents.append(np.array([1], "<i4").tobytes())
    return bytes(message.SerializeToString())


@pytest.mark.parametrize("version", ["", "2"])
def test_bare_infer_responses_on_a_stream_are_results_that_end_no_request(version: str) -> None:
    """MLServer's stream sends ModelInferResponse messages: read as a
    ModelStreamInferResponse, the model name would be an error and the version a response."""
    event = codec.decode_stream_response(_bare_response(version=version))
    assert event.bare
    assert event.error is None
    assert event.request_id == "r1"
    assert event.result is not None
    assert (event.result.model_name, event.result.model_version) == ("repeat_decoupled", version)
    assert event.result.as_numpy("IDX").tolist() == [1]
    assert (event.final, event.complete) == (None, False)  # its request ends with the stream
    flagged = codec.decode_stream_response(_bare_response(triton_final_response=True))
    assert (flagged.bare, flagged.final, flagged.complete) == (True, True, True)


def test_a_stream_message_of_neither_kind_is_a_protocol_error() -> None:
    broken = b"\x0a\x01m" + b"\x2a\x05\x0a\x03ab"  # outputs[0] runs past its end
    with pytest.raises(ProtocolError, match="not a ModelStreamInferResponse"):
        codec.decode_stream_response(broken)


def test_metadata_responses() -> None:
    data = pb.ServerMetadataResponse(
        name="triton", version="2.51.0", extensions=["sequence", "model_repository(x)"]
    ).SerializeToString()
    meta = codec.decode_server_metadata(data)
    assert meta.name == "triton"
    assert meta.supports("model_repository")
    message = pb.ModelMetadataResponse(name="m", versions=["1", "2"], platform="python")
    message.inputs.add(name="x", datatype="FP32", shape=[-1, 3])
    model = codec.decode_model_metadata(message.SerializeToString())
    assert model.versions == ("1", "2")
    assert model.inputs[0].shape == (-1, 3)
    assert codec.decode_model_ready(pb.ModelReadyResponse(ready=True).SerializeToString())
    assert not codec.decode_server_ready(b"")
    with pytest.raises(ProtocolError, match="ServerMetadataResponse"):
        codec.decode_server_metadata(b"\x0a\x05ab")


# ------------------------------------------------------------------------------ metadata


def test_metadata_keys_are_lower_cased() -> None:
    assert metadata_items({"Authorization": "Bearer x", "X-Id": "1"}) == [
        ("authorization", "Bearer x"),
        ("x-id", "1"),
    ]
    assert metadata_items([("a", "1"), ("A", "2")]) == [("a", "1"), ("a", "2")]


@pytest.mark.parametrize(
    "headers",
    [
        {"bad key": "v"},
        {"grpc-timeout": "1S"},
        {"data-bin": "v"},
        {"k": "caf\u00e9"},
        {"k": "a\nb"},
        {"k": 1},
        {"": "v"},
    ],
)
def test_invalid_metadata_is_refused(headers: Any) -> None:
    with pytest.raises(InvalidInputError):
        metadata_items(headers)


# ------------------------------------------------------------------------ protocol calls


class FakeChannel:
    """A :class:`UnaryChannel` that records unary calls; answers with ``reply`` or raises
    ``error``."""

    def __init__(self, reply: bytes = b"", error: BaseException | None = None) -> None:
        self.reply, self.error = reply, error
        self.calls: list[tuple[str, bytes | tuple[BytesLike, ...], dict[str, Any]]] = []

    def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes, Metadata]:
        options = {
            "timeout": timeout,
            "metadata": metadata,
            "compression": compression,
            "want_metadata": want_metadata,
        }
        self.calls.append((method, request, options))
        if self.error is not None:
            raise self.error
        return self.reply, (("server", "x"),) if want_metadata else ()


class FakeAsyncChannel:
    """The :class:`AsyncUnaryChannel` twin of :class:`FakeChannel`."""

    def __init__(self, reply: bytes = b"", error: BaseException | None = None) -> None:
        self.sync = FakeChannel(reply, error)

    async def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes, Metadata]:
        return self.sync.call_unary(
            method,
            request,
            timeout=timeout,
            metadata=metadata,
            compression=compression,
            want_metadata=want_metadata,
        )


if TYPE_CHECKING:  # the fakes keep the interfaces the calls run on
    _fakes: tuple[UnaryChannel, AsyncUnaryChannel] = (FakeChannel(), FakeAsyncChannel())


def test_calls_carry_method_metadata_deadline_and_compression() -> None:
    proto = GRPCBackend(ENDPOINT, headers={"X-Tenant": "a"}, timeout=7.0)
    call = proto.model_ready("simple", 2, headers={"X-Call": "b"})
    assert call.method == "/inference.GRPCInferenceService/ModelReady"
    assert isinstance(call.request, bytes)
    assert pb.ModelReadyRequest.FromString(call.request) == pb.ModelReadyRequest(
        name="simple", version="2"
    )
    assert call.metadata == (("x-tenant", "a"), ("x-call", "b"))
    assert call.timeout == 7.0
    assert proto.server_live(timeout=1.5).timeout == 1.5
    assert proto.server_live().compression is None  # the channel's default applies
    request = build_infer_request("m", {"x": [1]})
    assert proto.infer(request, compression="gzip").compression == "gzip"
    with pytest.raises(InvalidInputError, match="compression"):
        proto.infer(request, compression="br")
    with pytest.raises(InvalidInputError, match="HTTP only"):
        proto.infer(request, query={"a": "b"})


def test_infer_call_sends_the_codec_bytes_and_decodes_the_answer() -> None:
    proto = GRPCBackend(ENDPOINT, timeout=None)
    request = build_infer_request("identity", {"x": np.arange(3, dtype=np.int32)}, request_id="q")
    call = proto.infer(request, binary=False)  # binary has no meaning on gRPC
    # The message's buffers, not joined: the tensor is the caller's array itself.
    assert isinstance(call.request, tuple)
    assert b"".join(call.request) == codec.encode_infer_request(request)
    assert any(
        isinstance(part, memoryview) and part.obj is request.inputs[0].data for part in call.request
    ), call.request
    y = OutputTensor("y", "INT32", (3,), np.arange(3, dtype=np.int32))
    reply = response_bytes(InferResult("identity", "1", "q", outputs=(y,)))
    channel = FakeChannel(reply)
    result = call.run(channel, None)
    assert result.id == "q"
    assert result.as_numpy("y").tolist() == [0, 1, 2]
    assert channel.calls[0][0] == INFER
    assert channel.calls[0][2]["want_metadata"] is False


def test_wire_hook_sees_both_directions() -> None:
    seen: list[Any] = []
    proto = GRPCBackend(ENDPOINT, headers={"Authorization": "secret"})
    channel = FakeChannel(pb.ServerLiveResponse(live=True).SerializeToString())
    assert proto.server_live().run(channel, seen.append)
    send, receive = seen
    assert (send.direction, send.protocol, send.method, send.target) == (
        "send",
        "grpc",
        "unary",
        "/inference.GRPCInferenceService/ServerLive",
    )
    assert send.headers == (("authorization", "secret"),)
    assert (receive.direction, receive.status, receive.headers) == (
        "receive",
        "OK",
        (("server", "x"),),
    )
    assert receive.elapsed is not None
    assert receive.error is None


def test_server_errors_raise_but_health_checks_answer_false() -> None:
    error = ServerError("nope", grpc_code="NOT_FOUND")
    seen: list[Any] = []
    proto = GRPCBackend(ENDPOINT)
    with pytest.raises(ServerError):
        proto.model_metadata("m").run(FakeChannel(error=error), seen.append)
    assert seen[-1].status == "NOT_FOUND"
    assert seen[-1].error is error
    assert proto.model_ready("m").run(FakeChannel(error=error), None) is False
    transport = TransportError("refused")
    with pytest.raises(TransportError):
        proto.server_live().run(FakeChannel(error=transport), None)


async def test_async_calls_run_alike() -> None:
    seen: list[Any] = []
    proto = GRPCBackend(ENDPOINT)
    channel = FakeAsyncChannel(pb.ServerReadyResponse(ready=True).SerializeToString())
    assert await proto.server_ready().arun(channel, seen.append)
    assert [m.direction for m in seen] == ["send", "receive"]
    error_channel = FakeAsyncChannel(error=ServerError("x", grpc_code="INTERNAL"))
    assert await proto.server_ready().arun(error_channel, None) is False
    with pytest.raises(ServerError):
        await proto.log_settings().arun(error_channel, None)


def test_extension_requests() -> None:
    proto = GRPCBackend(ENDPOINT)
    load = pb.RepositoryModelLoadRequest.FromString(
        proto.load_model("m", config='{"backend":"python"}', files={"1/model.py": b"x"}).request
    )
    assert load.model_name == "m"
    assert params_of(load.parameters) == {"config": '{"backend":"python"}', "file:1/model.py": b"x"}
    unload = pb.RepositoryModelUnloadRequest.FromString(
        proto.unload_model("m", unload_dependents=True).request
    )
    assert params_of(unload.parameters) == {"unload_dependents": True}
    register = pb.SystemSharedMemoryRegisterRequest.FromString(
        proto.register_system_shared_memory("r", "/k", 64, offset=8).request
    )
    assert (register.name, register.key, register.byte_size, register.offset) == ("r", "/k", 64, 8)
    cuda = pb.CudaSharedMemoryRegisterRequest.FromString(
        proto.register_cuda_shared_memory("g", b"\x01" * 64, 1, 128).request
    )
    assert (cuda.raw_handle, cuda.device_id, cuda.byte_size) == (b"\x01" * 64, 1, 128)
    index = pb.RepositoryIndexRequest.FromString(proto.repository_index(ready_only=True).request)
    assert index.ready
    trace = pb.TraceSettingRequest.FromString(
        proto.update_trace_settings({"trace_rate": "5", "trace_level": None}, "m").request
    )
    assert trace.model_name == "m"
    assert {k: list(v.value) for k, v in trace.settings.items()} == {
        "trace_rate": ["5"],
        "trace_level": [],  # an empty value clears the setting, as JSON null does
    }
    assert pb.TraceSettingRequest.FromString(proto.trace_settings("m").request).settings == {}
    log = pb.LogSettingsRequest.FromString(
        proto.update_log_settings(
            {"log_info": False, "log_verbose_level": 2, "log_format": "ISO8601"}
        ).request
    )
    assert params_of(log.settings) == {
        "log_info": False,
        "log_verbose_level": 2,
        "log_format": "ISO8601",
    }
    with pytest.raises(InvalidInputError):
        proto.update_log_settings({"log_verbose_level": -1})
    with pytest.raises(InvalidInputError):
        proto.update_trace_settings({"trace_rate": object()})
    with pytest.raises(InvalidInputError, match="config"):
        proto.load_model("m", files={"1/model.py": b"x"})


# ------------------------------------------------------- parameters only Triton's proto carries

METADATA_RPC = "/inference.GRPCInferenceService/ServerMetadata"


class ScriptedChannel:
    """A sync and asyncio unary channel answering ServerMetadata with ``metadata`` (an
    exception is raised) and ModelInfer with a small result; it keeps the methods called."""

    def __init__(self, metadata: bytes | BaseException) -> None:
        self.metadata = metadata
        self.methods: list[str] = []

    def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes, Metadata]:
        self.methods.append(method)
        if method == METADATA_RPC:
            if isinstance(self.metadata, BaseException):
                raise self.metadata
            return self.metadata, ()
        return pb.ModelInferResponse(model_name="params_echo").SerializeToString(), ()


class AsyncScriptedChannel:
    def __init__(self, sync: ScriptedChannel) -> None:
        self.sync = sync

    async def call_unary(self, method: str, request: Any, **options: Any) -> tuple[bytes, Metadata]:
        return self.sync.call_unary(method, request, **options)


def _server(*extensions: str) -> bytes:
    message = pb.ServerMetadataResponse(name="srv", version="9", extensions=list(extensions))
    return bytes(message.SerializeToString())


TRITON = _server("binary_tensor_data", "parameters", "sequence")


def _request(**parameters: Any) -> InferRequest:
    return build_infer_request(
        "params_echo", {"INPUT0": np.array([1], np.int32)}, parameters=parameters
    )


def _run(call: Any, channel: ScriptedChannel, mode: str) -> InferResult:
    if mode == "sync":
        return call.run(channel, None)  # type: ignore[no-any-return]
    return asyncio.run(call.arun(AsyncScriptedChannel(channel), None))  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("value", [0.25, 2**63])
def test_a_triton_only_parameter_goes_to_a_server_that_takes_it(mode: str, value: Any) -> None:
    proto = GRPCBackend(ENDPOINT)
    channel = ScriptedChannel(TRITON)
    assert _run(proto.infer(_request(p=value)), channel, mode).model_name == "params_echo"
    assert channel.methods == [METADATA_RPC, INFER]
    # Known now: a plain call, nothing more asked
    call = proto.infer(_request(p=value))
    assert isinstance(call, GRPCCall)
    _run(call, channel, mode)
    assert channel.methods == [METADATA_RPC, INFER, INFER]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("metadata", "why", "asks_again"),
    [
        (
            _server("model_repository_extension"),
            "(srv 9) does not list Triton's 'parameters'",
            False,
        ),
        (ServerError("no", grpc_code="UNIMPLEMENTED"), "it gives no server metadata", False),
        (TransportError("refused"), "its metadata could not be read", True),
    ],
)
def test_a_triton_only_parameter_is_refused_by_other_servers(
    mode: str, metadata: bytes | BaseException, why: str, asks_again: bool
) -> None:
    """Refused, naming the parameter, rather than sent to a server that would drop it."""
    proto = GRPCBackend(ENDPOINT)
    channel = ScriptedChannel(metadata)
    with pytest.raises(InvalidInputError) as info:
        _run(proto.infer(_request(p=0.25)), channel, mode)
    message = info.value.message
    assert message.startswith("request parameter 'p' = 0.25 needs Triton's gRPC InferParameter")
    assert why in message
    assert "Send the value as a string, or over HTTP" in message
    assert channel.methods == [METADATA_RPC]  # nothing inferred
    if asks_again:  # the server did not answer: the next such call asks again
        with pytest.raises(InvalidInputError):
            _run(proto.infer(_request(p=0.5)), channel, mode)
        assert channel.methods == [METADATA_RPC, METADATA_RPC]
    else:  # known: refused when the call is built
        with pytest.raises(InvalidInputError):
            proto.infer(_request(p=0.5))
    # parameters the open protocol carries still go
    _run(proto.infer(_request(p=1, q="x", r=True, s=-(2**63))), channel, mode)
    assert channel.methods[-1] == INFER


_SCALED = [InferInput("INPUT0", np.ones(1, np.int32), parameters={"scale": 0.5})]
_PLAIN = [InferInput("INPUT0", np.ones(1, np.int32))]
_HUGE = [RequestedOutput("OUT", parameters={"t": 2**64 - 1})]


@pytest.mark.parametrize(
    ("inputs", "outputs", "found"),
    [
        (_SCALED, None, "input 'INPUT0' parameter 'scale' = 0.5"),
        (_PLAIN, _HUGE, "output 'OUT' parameter 't' = 18446744073709551615"),
    ],
)
def test_tensor_parameters_are_looked_at_too(inputs: Any, outputs: Any, found: str) -> None:
    proto = GRPCBackend(ENDPOINT)
    channel = ScriptedChannel(_server())
    request = build_infer_request("m", inputs, outputs=outputs)
    with pytest.raises(InvalidInputError, match=re.escape(found)):
        proto.infer(request).run(channel, None)  # type: ignore[arg-type]


def test_requests_without_such_parameters_ask_nothing() -> None:
    proto = GRPCBackend(ENDPOINT)
    call = proto.infer(_request(p=1, q="x", r=True))
    assert isinstance(call, GRPCCall)


@pytest.mark.parametrize(
    ("asked", "error_mode", "metadata", "known", "sent"),
    [
        (True, False, None, False, True),  # asked: always
        (True, True, None, False, True),
        (False, True, TRITON, True, False),  # Triton's error mode aborts on it (see stream.py)
        (False, False, TRITON, True, True),  # Triton: its decoupled requests end by it
        (False, False, _server(), True, False),  # another server would hand it to the model
        (False, False, None, True, False),  # a server without metadata: not Triton
        (False, False, None, False, True),  # unknown: as before, lest Triton's never end
    ],
)
def test_when_stream_requests_ask_for_the_empty_final_response(
    asked: bool, error_mode: bool, metadata: bytes | None, known: bool, sent: bool
) -> None:
    decided = ask_empty_final(asked, error_mode)
    if decided is None:
        server = None if metadata is None else codec.decode_server_metadata(metadata)
        decided = triton_server(server, known)
    assert decided is sent


# -------------------------------------------------------------------- extension results


def test_model_config_becomes_the_rest_json() -> None:
    config = mc.ModelConfig(name="m", backend="python", max_batch_size=8)
    tensor = config.input.add(name="x", data_type=mc.TYPE_FP32, dims=[-1, 16])
    tensor.reshape.shape.extend([16])
    config.version_policy.specific.versions.extend([1, 3])
    config.dynamic_batching.max_queue_delay_microseconds = 100
    config.parameters["k"].string_value = "v"
    data = pb.ModelConfigResponse(config=config).SerializeToString()
    rest = extensions.decode_model_config(data)
    assert rest["input"][0]["dims"] == [-1, 16]
    assert rest["input"][0]["reshape"] == {"shape": [16]}
    assert rest["input"][0]["data_type"] == "TYPE_FP32"
    assert rest["input"][0]["format"] == "FORMAT_NONE"  # defaults are printed, as Triton does
    assert rest["version_policy"] == {"specific": {"versions": [1, 3]}}
    assert rest["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert rest["parameters"] == {"k": {"string_value": "v"}}
    assert rest["output"] == []
    assert rest["max_batch_size"] == 8
    assert json.loads(json.dumps(rest)) == rest  # plain JSON values only


def test_statistics_and_status_become_rest_shapes() -> None:
    message = pb.ModelStatisticsResponse()
    stat = message.model_stats.add(name="m", version="1", inference_count=2**40)
    stat.inference_stats.success.count = 3
    stat.response_stats["0"].success.ns = 2**63 + 1
    rest = extensions.decode_model_statistics(message.SerializeToString())
    (model,) = rest["model_stats"]
    assert model["inference_count"] == 2**40
    assert model["last_inference"] == 0
    assert model["inference_stats"]["success"] == {"count": 3, "ns": 0}
    assert "fail" not in model["inference_stats"]  # unset sub-messages stay out, as in REST
    assert model["response_stats"]["0"]["success"]["ns"] == 2**63 + 1
    assert model["batch_stats"] == []
    assert model["memory_usage"] == []

    status = pb.SystemSharedMemoryStatusResponse()
    for name in ("b", "a"):
        status.regions[name].name = name
        status.regions[name].key = f"/{name}"
        status.regions[name].byte_size = 64
    assert extensions.decode_system_shm_status(status.SerializeToString()) == [
        {"name": "a", "key": "/a", "offset": 0, "byte_size": 64},
        {"name": "b", "key": "/b", "offset": 0, "byte_size": 64},
    ]
    cuda = pb.CudaSharedMemoryStatusResponse()
    cuda.regions["g"].name = "g"
    cuda.regions["g"].device_id = 1
    assert extensions.decode_cuda_shm_status(cuda.SerializeToString()) == [
        {"name": "g", "device_id": 1, "byte_size": 0}
    ]
    index = pb.RepositoryIndexResponse()
    index.models.add(name="m", version="1", state="UNAVAILABLE", reason="unloaded")
    (entry,) = extensions.decode_repository_index(index.SerializeToString())
    assert (entry.name, entry.state, entry.reason) == ("m", "UNAVAILABLE", "unloaded")


def test_trace_and_log_settings_become_rest_shapes() -> None:
    message = pb.TraceSettingResponse()
    for key, values in {
        "trace_level": ["TIMESTAMPS", "TENSORS"],
        "trace_rate": ["1000"],
        "trace_file": [],
        "trace_config": ["a", "b"],
    }.items():
        message.settings[key].value.extend(values)
    assert extensions.decode_trace_settings(message.SerializeToString()) == {
        "trace_level": ["TIMESTAMPS", "TENSORS"],
        "trace_rate": "1000",
        "trace_file": "",
        "trace_config": ["a", "b"],
    }
    log = pb.LogSettingsResponse()
    log.settings["log_info"].bool_param = True
    log.settings["log_verbose_level"].uint32_param = 0
    log.settings["log_file"].string_param = ""
    assert extensions.decode_log_settings(log.SerializeToString()) == {
        "log_info": True,
        "log_verbose_level": 0,
        "log_file": "",
    }
    # A map has no order on the wire: the settings come sorted, the same on every read.
    trace = extensions.decode_trace_settings(message.SerializeToString())
    assert list(trace) == sorted(trace)
    assert list(extensions.decode_log_settings(log.SerializeToString())) == [
        "log_file",
        "log_info",
        "log_verbose_level",
    ]
    log.settings["empty"].SetInParent()
    with pytest.raises(ProtocolError, match="empty"):
        extensions.decode_log_settings(log.SerializeToString())


# ----------------------------------------------------------------------- channel settings


def test_default_channel_options() -> None:
    config = channel_config(ENDPOINT)
    assert config.options == DEFAULT_OPTIONS
    assert dict(config.options) == {
        "grpc.max_send_message_length": -1,
        "grpc.max_receive_message_length": -1,
    }
    assert (config.target, config.secure, config.compression) == ("127.0.0.1:8001", False, None)


def test_options_add_to_the_defaults_and_replace_same_names() -> None:
    config = channel_config(
        ENDPOINT,
        keepalive=GRPCKeepAlive(time_ms=10_000, permit_without_calls=True),
        options={"grpc.max_receive_message_length": 1 << 20, "grpc.enable_retries": 0},
        compression="gzip",
    )
    assert dict(config.options) == {
        "grpc.max_send_message_length": -1,
        "grpc.max_receive_message_length": 1 << 20,
        "grpc.keepalive_time_ms": 10_000,
        "grpc.keepalive_timeout_ms": 20_000,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.max_pings_without_data": 2,
        "grpc.enable_retries": 0,
    }
    assert config.compression == "gzip"
    pairs = channel_config(ENDPOINT, options=[("grpc.primary_user_agent", "me")]).options
    assert pairs[-1] == ("grpc.primary_user_agent", "me")


def test_tls_settings(tmp_path: Any) -> None:
    from tests.transport.servers import make_certs

    ca = make_certs(tmp_path).ca_file
    pem = ca.read_bytes()
    secure = parse_url("grpcs://localhost:443")
    config = channel_config(
        secure, tls=TLSOptions(ca_file=str(ca), server_hostname="triton.internal")
    )
    assert config.secure
    assert config.root_certificates == pem
    assert ("grpc.ssl_target_name_override", "triton.internal") in config.options
    assert pem.decode() not in repr(config)
    credentials = grpc.ssl_channel_credentials()
    assert channel_config(secure, credentials=credentials).credentials is credentials


@pytest.mark.parametrize(
    ("url", "kwargs", "problem"),
    [
        ("grpcs://h:1", {"tls": TLSOptions(verify=False)}, "verify=False"),
        ("grpcs://h:1", {"tls": TLSOptions(cert_file="c.pem")}, "cert_file and key_file"),
        ("grpcs://h:1", {"tls": TLSOptions(ca_file="/no/such/ca.pem")}, "cannot read"),
        ("grpc://h:1", {"credentials": "creds"}, "grpcs://"),
        ("grpcs://h:1", {"credentials": "creds"}, "ChannelCredentials"),
        ("grpc://h:1", {"compression": "br"}, "compression"),
        ("grpc://h:1", {"options": {"": 1}}, "option names"),
        ("grpc://h:1", {"options": [("a", 1, 2)]}, "pairs"),
        ("grpc://h:1", {"keepalive": {"time_ms": 1}}, "GRPCKeepAlive"),
    ],
)
def test_bad_channel_settings(url: str, kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        channel_config(parse_url(url), **kwargs)


def test_channel_config_names_a_tls_file_that_is_not_pem(tmp_path: Any) -> None:
    # grpcio takes the files' bytes and would only log OpenSSL's complaint, then fail to
    # connect: the configuration says which file is wrong, for both transports.
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(InvalidInputError, match=r"TLS ca_file '.*ca\.pem' is not a PEM") as info:
        channel_config(parse_url("grpcs://h:1"), tls=TLSOptions(ca_file=str(garbage)))
    assert info.value.value == str(garbage)
    # Plain text: the files are not read (the URL is refused for them elsewhere).
    assert channel_config(parse_url("grpc://h:1")).root_certificates is None


def test_keepalive_values_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        GRPCKeepAlive(time_ms=-1)


# -------------------------------------------------------------------------- error mapping


class FakeRpcError(grpc.RpcError):  # type: ignore[misc]
    def __init__(self, code: Any, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> Any:
        return self._code

    def details(self) -> str:
        return self._details


ERROR_TABLE = [
    ("DEADLINE_EXCEEDED", "Deadline Exceeded", DeadlineExceededError),
    (
        "UNAVAILABLE",
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
        "Failed to connect to remote host: Connection refused",
        TransportError,
    ),
    ("UNAVAILABLE", "Ssl handshake failed: SSL_ERROR_SSL", TransportError),
    ("UNAVAILABLE", "Socket closed", TransportError),
    ("UNAVAILABLE", "This protocol is restricted, expecting header 'x'", ServerError),
    ("CANCELLED", "Channel closed!", TransportError),
    ("CANCELLED", "Locally cancelled by application!", TransportError),
    ("CANCELLED", "request cancelled by the model", ServerError),
    ("NOT_FOUND", "Request for unknown model: 'x' is not found", ServerError),
    ("INTERNAL", "kserve-v2 test failure: deliberate error", ServerError),
]


@pytest.mark.parametrize(("code", "details", "kind"), ERROR_TABLE)
def test_rpc_errors_are_translated(code: str, details: str, kind: type[KServeError]) -> None:
    exc = FakeRpcError(grpc.StatusCode[code], details)
    error = translate_rpc_error(exc, "grpc://h:1")
    assert type(error) is kind
    assert details in str(error)
    if isinstance(error, ServerError):
        assert (error.grpc_code, error.message) == (code, details)
    error.__cause__ = exc
    assert status_of(error) == code


@pytest.mark.parametrize("code", list(grpc.StatusCode))
def test_every_status_code_maps_into_the_error_tree(code: Any) -> None:
    error = translate_rpc_error(FakeRpcError(code, "x"))
    assert isinstance(error, KServeError)
    assert isinstance(error, ServerError | TransportError)


@pytest.mark.parametrize(
    ("details", "unprocessed"),
    [
        ("failed to connect to all addresses; last error: Connection refused", True),
        ("DNS resolution failed for nowhere:1", True),
        ("Ssl handshake failed: SSL_ERROR_SSL", True),
        ("Socket closed", False),  # may come after the request went out
        ("Connection reset by peer", False),
        ("GOAWAY received", False),
    ],
)
def test_unavailable_says_whether_the_call_reached_the_server(
    details: str, unprocessed: bool
) -> None:
    error = translate_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details))
    assert isinstance(error, TransportError)
    assert error.unprocessed is unprocessed


def test_deadline_errors_are_timeouts() -> None:
    error = translate_rpc_error(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    assert isinstance(error, TimeoutError)
    assert isinstance(error, TransportError)


# ----------------------------------------------------------------------- client plumbing


def test_grpc_clients_are_built_without_connecting() -> None:
    with Client("grpc://127.0.0.1:1", headers={"X-A": "b"}, request_compression="gzip") as c:
        assert c.protocol == "grpc"
        assert isinstance(c._proto, GRPCBackend)
        assert c._io.config.compression == "gzip"
    assert repr(c) == "Client('grpc://127.0.0.1:1')"


async def test_async_grpc_channel_opens_in_the_running_loop() -> None:
    async with AsyncClient("grpc://127.0.0.1:1", grpc_transport="grpcio") as c:
        assert c._io._channel is None
        with pytest.raises(TransportError):
            await c.is_server_live(timeout=2)
        assert c._io._channel is not None


@pytest.mark.parametrize(
    ("url", "kwargs", "problem"),
    [
        ("http://h:1", {"grpc_options": {"grpc.x": 1}}, "grpc:// and grpcs://"),
        ("http://h:1", {"grpc_keepalive": GRPCKeepAlive()}, "grpc:// and grpcs://"),
        ("grpc://h:1", {"transport": object()}, "transport="),
        ("grpc://h:1", {"accept_compression": "br"}, "accept_compression"),
        ("grpc://h:1", {"request_compression": "br"}, "request_compression"),
        ("grpc://h:1", {"tls": TLSOptions(ca_file="x")}, "plain-text"),
    ],
)
def test_client_option_checks(url: str, kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        Client(url, **kwargs)


def test_streams_need_grpc() -> None:
    with Client("http://127.0.0.1:1") as c, pytest.raises(InvalidInputError, match="grpc://"):
        c.stream()
    c = Client("grpc://127.0.0.1:1")
    c.close()
    with pytest.raises(TransportError, match="closed"):
        c.stream()


def test_send_validates_before_anything_is_queued() -> None:
    with Client("grpc://127.0.0.1:1") as c:
        with pytest.raises(InvalidInputError, match="timeout"):
            c.stream(timeout=0)
        with pytest.raises(InvalidInputError, match="compression"):
            c.stream(compression="br")
    with Client("grpc://127.0.0.1:1") as c, c.stream() as stream:
        with pytest.raises(InvalidInputError):
            stream.send("", {"x": [1]})
        with pytest.raises(InvalidInputError):
            stream.send("m", {"x": [1]}, sequence_start=True)
        assert stream.pending == 0


def test_shared_memory_inputs_send_no_raw_contents() -> None:
    placement = SharedMemoryPlacement("region", 64, offset=8)
    request = InferRequest(
        "m",
        (
            InferInput("a", np.ones(2, np.int32)),
            InferInput("b", datatype="FP32", shape=(16,), shared_memory=placement),
        ),
        (RequestedOutput("y", shared_memory=placement, class_count=2),),
    )
    message = pb.ModelInferRequest.FromString(codec.encode_infer_request(request))
    assert len(message.raw_input_contents) == 1
    assert params_of(message.inputs[1].parameters) == {
        "shared_memory_region": "region",
        "shared_memory_byte_size": 64,
        "shared_memory_offset": 8,
    }
    assert params_of(message.outputs[0].parameters)["classification"] == 2


IMPORT_WITHOUT_GRPC = """
import sys
sys.modules["grpc"] = None              # as if grpcio were not installed
sys.modules["google.protobuf"] = None   # ... nor protobuf
import kserve_v2, kserve_v2.grpc
kserve_v2.Client("http://127.0.0.1:1").close()
try:
    kserve_v2.Client("grpc://127.0.0.1:1", grpc_transport="grpcio")
except kserve_v2.MissingDependencyError as exc:
    print(exc)
# The native transport needs neither to be built; protobuf when a message needs it.
from kserve_v2.grpc import codec
kserve_v2.Client("grpc://127.0.0.1:1").close()
try:
    codec.decode_server_live(b"")
except kserve_v2.MissingDependencyError as exc:
    print(exc)
"""


def test_kserve_v2_imports_without_grpcio() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_WITHOUT_GRPC],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out
    assert "'grpcio' package: pip install 'kserve-v2[grpc]'" in lines[0], out
    assert "'protobuf' package: pip install 'kserve-v2[grpc]'" in lines[1], out


# -- infer_arrays: the common call, through its request's form ---------------------------------


def test_infer_arrays_sends_what_infer_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call of a form takes the full path; later ones only serialize their arrays,
    and send what the full path would have, with the call's own metadata and deadline."""
    codec.REQUEST_FORMS.clear()
    proto = GRPCBackend(ENDPOINT, headers={"X-Tenant": "a"}, timeout=7.0)
    first = {"x": np.arange(6, dtype=np.int32).reshape(2, 3), "y": np.ones(2, ">f8")}
    call = proto.infer_arrays("m", first, ["z"], 2, timeout=3.0, compression="gzip")
    assert isinstance(call, GRPCCall)
    reference = proto.infer(
        build_infer_request("m", first, outputs=["z"], version=2), timeout=3.0, compression="gzip"
    )
    assert isinstance(reference, GRPCCall)
    assert call == reference
    built = []
    monkeypatch.setattr("kserve_v2.grpc.backend.build_infer_request", built.append)
    second = {"x": np.asfortranarray(first["x"] * 7), "y": np.array([0.5, -2.0], ">f8")}
    again = proto.infer_arrays("m", second, ["z"], 2, headers={"k": "v"})
    assert isinstance(again, GRPCCall)
    assert not built
    monkeypatch.undo()
    expected = proto.infer(
        build_infer_request("m", second, outputs=["z"], version=2), headers={"k": "v"}
    )
    assert isinstance(expected, GRPCCall)
    assert b"".join(again.request) == b"".join(expected.request)  # type: ignore[arg-type]
    assert (again.method, again.metadata, again.timeout, again.decode) == (
        expected.method,
        expected.metadata,
        expected.timeout,
        expected.decode,
    )


def test_infer_arrays_fails_like_infer_and_learns_nothing() -> None:
    codec.REQUEST_FORMS.clear()
    proto = GRPCBackend(ENDPOINT)
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="name") as failed:
            proto.infer_arrays("m", {"": np.zeros(2, np.int32)}, None, "")
        with pytest.raises(InvalidInputError) as reference:
            build_infer_request("m", {"": np.zeros(2, np.int32)})
        assert str(failed.value) == str(reference.value)
    assert not codec.REQUEST_FORMS._forms


def test_infer_arrays_leaves_other_calls_to_infer() -> None:
    proto = GRPCBackend(ENDPOINT)
    assert proto.infer_arrays("m", [InferInput("x", np.zeros(2))], None, "") is None
    assert proto.infer_arrays("m", {"x": [1, 2]}, None, "") is None
    assert proto.infer_arrays("m", {"x": np.zeros(2)}, [RequestedOutput("y")], "") is None
