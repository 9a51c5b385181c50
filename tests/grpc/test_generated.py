"""The committed gRPC stubs: in sync with protos/, and with the names/numbers Triton uses."""

from __future__ import annotations

import glob
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATED = REPO_ROOT / "kserve_v2" / "grpc" / "_generated"

pytest.importorskip("google.protobuf", reason="the 'grpc' extra (protobuf) is not installed")


def _load_gen_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_kserve_v2_gen_protos", REPO_ROOT / "scripts" / "gen_protos.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_protos = _load_gen_script()


def _generated_files(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir()) if p.is_file()}


def test_committed_stubs_match_protos(tmp_path: Path) -> None:
    """Regenerating from protos/ with the pinned generator reproduces the committed files."""
    if gen_protos.protoc_command() is None:
        pytest.skip(gen_protos.missing_tools_message())
    gen_protos.generate(tmp_path)
    fresh = _generated_files(tmp_path)
    committed = _generated_files(GENERATED)
    assert sorted(committed) == sorted(fresh), "generated file set differs"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, (
        f"kserve_v2/grpc/_generated is out of date with protos/ ({', '.join(stale)}): "
        "run `python scripts/gen_protos.py` and commit the result"
    )


def test_generator_is_recorded() -> None:
    from kserve_v2.grpc import _generated

    assert f"grpcio-tools=={gen_protos.PINNED_GRPCIO_TOOLS}" == _generated.GENERATOR


# ---------------------------------------------------------------------------- descriptors

GRPC_INFERENCE_RPCS = [
    # (name, request, response, client streaming, server streaming)
    ("ServerLive", "ServerLiveRequest", "ServerLiveResponse", False, False),
    ("ServerReady", "ServerReadyRequest", "ServerReadyResponse", False, False),
    ("ModelReady", "ModelReadyRequest", "ModelReadyResponse", False, False),
    ("ServerMetadata", "ServerMetadataRequest", "ServerMetadataResponse", False, False),
    ("ModelMetadata", "ModelMetadataRequest", "ModelMetadataResponse", False, False),
    ("ModelInfer", "ModelInferRequest", "ModelInferResponse", False, False),
    ("ModelStreamInfer", "ModelInferRequest", "ModelStreamInferResponse", True, True),
    ("ModelConfig", "ModelConfigRequest", "ModelConfigResponse", False, False),
    ("ModelStatistics", "ModelStatisticsRequest", "ModelStatisticsResponse", False, False),
    ("RepositoryIndex", "RepositoryIndexRequest", "RepositoryIndexResponse", False, False),
    (
        "RepositoryModelLoad",
        "RepositoryModelLoadRequest",
        "RepositoryModelLoadResponse",
        False,
        False,
    ),
    (
        "RepositoryModelUnload",
        "RepositoryModelUnloadRequest",
        "RepositoryModelUnloadResponse",
        False,
        False,
    ),
    (
        "SystemSharedMemoryStatus",
        "SystemSharedMemoryStatusRequest",
        "SystemSharedMemoryStatusResponse",
        False,
        False,
    ),
    (
        "SystemSharedMemoryRegister",
        "SystemSharedMemoryRegisterRequest",
        "SystemSharedMemoryRegisterResponse",
        False,
        False,
    ),
    (
        "SystemSharedMemoryUnregister",
        "SystemSharedMemoryUnregisterRequest",
        "SystemSharedMemoryUnregisterResponse",
        False,
        False,
    ),
    (
        "CudaSharedMemoryStatus",
        "CudaSharedMemoryStatusRequest",
        "CudaSharedMemoryStatusResponse",
        False,
        False,
    ),
    (
        "CudaSharedMemoryRegister",
        "CudaSharedMemoryRegisterRequest",
        "CudaSharedMemoryRegisterResponse",
        False,
        False,
    ),
    (
        "CudaSharedMemoryUnregister",
        "CudaSharedMemoryUnregisterRequest",
        "CudaSharedMemoryUnregisterResponse",
        False,
        False,
    ),
    ("TraceSetting", "TraceSettingRequest", "TraceSettingResponse", False, False),
    ("LogSettings", "LogSettingsRequest", "LogSettingsResponse", False, False),
]


def _methods(service: Any, package: str) -> list[tuple[str, str, str, bool, bool]]:
    prefix = f"{package}."
    return [
        (
            m.name,
            m.input_type.full_name.removeprefix(prefix),
            m.output_type.full_name.removeprefix(prefix),
            m.client_streaming,
            m.server_streaming,
        )
        for m in service.methods
    ]


def test_inference_service_rpcs() -> None:
    from kserve_v2.grpc._generated import grpc_service_pb2

    service = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert service.full_name == "inference.GRPCInferenceService"
    assert _methods(service, "inference") == GRPC_INFERENCE_RPCS


def test_health_service_rpcs() -> None:
    from kserve_v2.grpc._generated import health_pb2

    service = health_pb2.DESCRIPTOR.services_by_name["Health"]
    assert service.full_name == "grpc.health.v1.Health"
    assert _methods(service, "grpc.health.v1") == [
        ("Check", "HealthCheckRequest", "HealthCheckResponse", False, False),
        ("Watch", "HealthCheckRequest", "HealthCheckResponse", False, True),
    ]
    status = health_pb2.HealthCheckResponse.ServingStatus
    assert [(v.name, v.number) for v in status.DESCRIPTOR.values] == [
        ("UNKNOWN", 0),
        ("SERVING", 1),
        ("NOT_SERVING", 2),
        ("SERVICE_UNKNOWN", 3),
    ]


# (message, field) -> (number, type name, repeated). Spot checks of the numbers the
# hand-written codec in kserve_v2/grpc/wire.py depends on, and of easy-to-get-wrong types.
KEY_FIELDS = {
    ("ModelInferRequest", "model_name"): (1, "string", False),
    ("ModelInferRequest", "model_version"): (2, "string", False),
    ("ModelInferRequest", "id"): (3, "string", False),
    ("ModelInferRequest", "parameters"): (4, "message", True),
    ("ModelInferRequest", "inputs"): (5, "message", True),
    ("ModelInferRequest", "outputs"): (6, "message", True),
    ("ModelInferRequest", "raw_input_contents"): (7, "bytes", True),
    ("ModelInferRequest.InferInputTensor", "name"): (1, "string", False),
    ("ModelInferRequest.InferInputTensor", "datatype"): (2, "string", False),
    ("ModelInferRequest.InferInputTensor", "shape"): (3, "int64", True),
    ("ModelInferRequest.InferInputTensor", "parameters"): (4, "message", True),
    ("ModelInferRequest.InferInputTensor", "contents"): (5, "message", False),
    ("ModelInferRequest.InferRequestedOutputTensor", "name"): (1, "string", False),
    ("ModelInferRequest.InferRequestedOutputTensor", "parameters"): (2, "message", True),
    ("ModelInferResponse", "parameters"): (4, "message", True),
    ("ModelInferResponse", "outputs"): (5, "message", True),
    ("ModelInferResponse", "raw_output_contents"): (6, "bytes", True),
    ("ModelInferResponse.InferOutputTensor", "shape"): (3, "int64", True),
    ("ModelInferResponse.InferOutputTensor", "contents"): (5, "message", False),
    ("ModelStreamInferResponse", "error_message"): (1, "string", False),
    ("ModelStreamInferResponse", "infer_response"): (2, "message", False),
    ("InferParameter", "bool_param"): (1, "bool", False),
    ("InferParameter", "int64_param"): (2, "int64", False),
    ("InferParameter", "string_param"): (3, "string", False),
    ("InferParameter", "double_param"): (4, "double", False),
    ("InferParameter", "uint64_param"): (5, "uint64", False),
    ("InferTensorContents", "bool_contents"): (1, "bool", True),
    ("InferTensorContents", "int_contents"): (2, "int32", True),
    ("InferTensorContents", "int64_contents"): (3, "int64", True),
    ("InferTensorContents", "uint_contents"): (4, "uint32", True),
    ("InferTensorContents", "uint64_contents"): (5, "uint64", True),
    ("InferTensorContents", "fp32_contents"): (6, "float", True),
    ("InferTensorContents", "fp64_contents"): (7, "double", True),
    ("InferTensorContents", "bytes_contents"): (8, "bytes", True),
    ("ModelStatistics", "response_stats"): (9, "message", True),
    ("InferResponseStatistics", "cancel"): (6, "message", False),
    ("MemoryUsage", "id"): (2, "int64", False),
    ("CudaSharedMemoryRegisterRequest", "device_id"): (3, "int64", False),
    ("CudaSharedMemoryStatusResponse.RegionStatus", "device_id"): (2, "uint64", False),
    ("ModelRepositoryParameter", "bytes_param"): (4, "bytes", False),
    ("LogSettingsRequest.SettingValue", "uint32_param"): (2, "uint32", False),
    ("TraceSettingRequest", "model_name"): (2, "string", False),
}

CONFIG_FIELDS = {
    ("ModelConfig", "backend"): (17, "string", False),
    ("ModelConfig", "runtime"): (25, "string", False),
    ("ModelConfig", "max_batch_size"): (4, "int32", False),
    ("ModelConfig", "dynamic_batching"): (11, "message", False),
    ("ModelConfig", "model_transaction_policy"): (19, "message", False),
    ("ModelConfig", "model_metrics"): (26, "message", False),
    ("ModelInput", "dims"): (4, "int64", True),
    ("ModelInput", "optional"): (8, "bool", False),
    ("ModelOutput", "label_filename"): (4, "string", False),
    ("ModelInstanceGroup", "kind"): (4, "enum", False),
    ("ModelEnsembling", "max_inflight_responses"): (2, "uint32", False),
    ("ModelTransactionPolicy", "decoupled"): (1, "bool", False),
}


def _type_name(field: Any) -> str:
    from google.protobuf.descriptor import FieldDescriptor

    names = {
        getattr(FieldDescriptor, k): k[len("TYPE_") :].lower()
        for k in dir(FieldDescriptor)
        if k.startswith("TYPE_")
    }
    return names[field.type]


def _is_repeated(field: Any) -> bool:
    # `label` is deprecated in newer protobuf in favour of `is_repeated`.
    if hasattr(field, "is_repeated"):
        return bool(field.is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


def _check_fields(module: Any, expected: dict[tuple[str, str], tuple[int, str, bool]]) -> None:
    actual = {}
    for message_path, field_name in expected:
        descriptor = module.DESCRIPTOR.message_types_by_name[message_path.split(".")[0]]
        for nested in message_path.split(".")[1:]:
            descriptor = descriptor.nested_types_by_name[nested]
        field = descriptor.fields_by_name[field_name]
        actual[(message_path, field_name)] = (field.number, _type_name(field), _is_repeated(field))
    assert actual == expected


def test_key_field_numbers() -> None:
    from kserve_v2.grpc._generated import grpc_service_pb2, model_config_pb2

    _check_fields(grpc_service_pb2, KEY_FIELDS)
    _check_fields(model_config_pb2, CONFIG_FIELDS)
    param = grpc_service_pb2.InferParameter.DESCRIPTOR
    assert [f.name for f in param.oneofs_by_name["parameter_choice"].fields] == [
        "bool_param",
        "int64_param",
        "string_param",
        "double_param",
        "uint64_param",
    ]


def test_stubs_use_a_private_descriptor_pool() -> None:
    from google.protobuf import descriptor_pool
    from google.protobuf.internal import api_implementation

    from kserve_v2.grpc._generated import _pool, grpc_service_pb2, health_pb2, model_config_pb2

    for module in (grpc_service_pb2, model_config_pb2, health_pb2):
        assert module.DESCRIPTOR.pool is _pool.POOL
    if api_implementation.Type() != "python":
        # (The pure-Python runtime also indexes every generated class in the default pool,
        # without conflict errors; see test_stubs_coexist_with_another_copy_of_the_protos.)
        with pytest.raises(KeyError):
            descriptor_pool.Default().FindMessageTypeByName("inference.ModelInferRequest")


def test_stubs_coexist_with_another_copy_of_the_protos() -> None:
    """Another package (tritonclient) registering its own grpc_service.proto is no conflict."""
    code = textwrap.dedent(
        """
        from google.protobuf import descriptor_pb2, descriptor_pool
        other = descriptor_pb2.FileDescriptorProto(name="grpc_service.proto", package="inference")
        msg = other.message_type.add(name="ModelInferRequest")
        msg.field.add(name="something_else", number=1, type=9, label=1)
        descriptor_pool.Default().AddSerializedFile(other.SerializeToString())
        from kserve_v2.grpc._generated import grpc_service_pb2
        data = grpc_service_pb2.ModelInferRequest(model_name="m").SerializeToString()
        assert grpc_service_pb2.ModelInferRequest.FromString(data).model_name == "m"
        """
    )
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True, cwd=REPO_ROOT)


def test_service_stubs_import() -> None:
    pytest.importorskip("grpc", reason="the 'grpc' extra (grpcio) is not installed")
    from kserve_v2.grpc._generated import grpc_service_pb2_grpc, health_pb2_grpc

    assert hasattr(grpc_service_pb2_grpc, "GRPCInferenceServiceStub")
    assert hasattr(health_pb2_grpc, "HealthStub")


# ------------------------------------------------- against the Triton server used in tests
#
# The tritonserver binary in .venv-triton embeds the serialized descriptors it was built
# with (C++ generated code keeps them for reflection). When that environment exists, every
# message, field, enum and RPC the server knows must exist in our protos with the same
# number, type, label and oneof: a wire-compatibility check against the real peer.


def _tritonserver_binary() -> Path | None:
    pattern = str(
        REPO_ROOT / ".venv-triton/lib/python*/site-packages/pytriton/tritonserver/bin/tritonserver"
    )
    found = sorted(glob.glob(pattern))
    return Path(found[0]) if found else None


def _embedded_file(data: bytes, name: str) -> Any:
    """Parse the serialized FileDescriptorProto named ``name`` embedded in ``data``."""
    from google.protobuf import descriptor_pb2

    start = data.find(b"\n" + bytes([len(name)]) + name.encode())
    assert start >= 0, f"{name} not embedded in the server binary"
    # Walk top-level fields (all length-delimited or varint in a FileDescriptorProto) until
    # the bytes stop looking like one; what follows the array is unrelated data.
    pos = start
    while pos < len(data):
        tag = data[pos]
        number, wire_type = tag >> 3, tag & 7
        if not 1 <= number <= 14 or wire_type not in (0, 2):
            break
        cursor, shift, value = pos + 1, 0, 0
        while True:
            byte = data[cursor]
            cursor += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        pos = cursor + (value if wire_type == 2 else 0)
    proto = descriptor_pb2.FileDescriptorProto()
    proto.ParseFromString(data[start:pos])
    return proto


def _flatten(proto: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fields: dict[str, Any] = {}
    enums: dict[str, Any] = {}

    def visit_message(message: Any, prefix: str) -> None:
        name = f"{prefix}.{message.name}"
        for f in message.field:
            oneof = message.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            fields[f"{name}.{f.name}"] = (f.number, f.type, f.label, f.type_name, oneof)
        for e in message.enum_type:
            enums[f"{name}.{e.name}"] = [(v.name, v.number) for v in e.value]
        for nested in message.nested_type:
            visit_message(nested, name)

    for message in proto.message_type:
        visit_message(message, proto.package)
    for e in proto.enum_type:
        enums[f"{proto.package}.{e.name}"] = [(v.name, v.number) for v in e.value]
    for service in proto.service:
        for m in service.method:
            fields[f"rpc {service.name}.{m.name}"] = (
                m.input_type,
                m.output_type,
                m.client_streaming,
                m.server_streaming,
            )
    return fields, enums


@pytest.mark.parametrize("proto_name", ["grpc_service.proto", "model_config.proto", "health.proto"])
def test_compatible_with_the_tritonserver_binary(proto_name: str) -> None:
    binary = _tritonserver_binary()
    if binary is None:
        pytest.skip("no .venv-triton tritonserver binary to compare with")
    from google.protobuf import descriptor_pb2

    from kserve_v2.grpc._generated import grpc_service_pb2, health_pb2, model_config_pb2

    module = {
        "grpc_service.proto": grpc_service_pb2,
        "model_config.proto": model_config_pb2,
        "health.proto": health_pb2,
    }[proto_name]
    ours = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(ours)
    server = _embedded_file(binary.read_bytes(), proto_name)
    our_fields, our_enums = _flatten(ours)
    server_fields, server_enums = _flatten(server)
    # The server may be older than our protos (fewer fields), never different or newer.
    differing = {
        k: (v, our_fields.get(k)) for k, v in server_fields.items() if our_fields.get(k) != v
    }
    assert not differing, f"fields that differ from the server's {proto_name}: {differing}"
    for name, values in server_enums.items():
        assert set(values) <= set(our_enums.get(name, ())), name


# ------------------------------------------------------------------- over a real channel


def test_stubs_and_wire_codec_over_a_local_channel() -> None:
    """Generated servicer + stub and the wire codec work end to end through grpcio."""
    grpc = pytest.importorskip("grpc", reason="the 'grpc' extra (grpcio) is not installed")
    from concurrent import futures

    import numpy as np

    from kserve_v2.grpc import wire
    from kserve_v2.grpc._generated import (
        grpc_service_pb2,
        grpc_service_pb2_grpc,
        health_pb2,
        health_pb2_grpc,
    )

    class Echo(grpc_service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
        def ServerLive(self, request: Any, context: Any) -> Any:
            return grpc_service_pb2.ServerLiveResponse(live=True)

        def ModelInfer(self, request: Any, context: Any) -> Any:
            response = grpc_service_pb2.ModelInferResponse(
                model_name=request.model_name, id=request.id
            )
            for tensor in request.inputs:
                response.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
            response.parameters["echoed"].int64_param = len(request.inputs)
            response.raw_output_contents.extend(request.raw_input_contents)
            return response

    class Health(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
        def Check(self, request: Any, context: Any) -> Any:
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    grpc_service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(Echo(), server)
    health_pb2_grpc.add_HealthServicer_to_server(Health(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
            assert stub.ServerLive(grpc_service_pb2.ServerLiveRequest(), timeout=10).live
            health = health_pb2_grpc.HealthStub(channel)
            status = health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING

            # The client path the codec is for: bytes out through grpcio, views back.
            infer = channel.unary_unary(
                "/inference.GRPCInferenceService/ModelInfer",
                request_serializer=lambda fields: b"".join(
                    wire.encode_infer_request_fields(*fields)
                ),
                response_deserializer=wire.decode_infer_response_fields,
            )
            tensor = np.arange(12, dtype=np.float32).reshape(3, 4)
            request = ("echo", "", "r1", {}, [("x", "FP32", tensor.shape, {})], [], [tensor])
            result = infer(request, timeout=10)
    finally:
        server.stop(None).wait()
    model_name, _, id, parameters, outputs, raw = result
    assert (model_name, id, parameters) == ("echo", "r1", {"echoed": 1})
    assert outputs[0][2] == (3, 4)  # the shape
    echoed = np.frombuffer(raw[0], dtype="<f4").reshape(3, 4)
    assert np.array_equal(echoed, tensor)
