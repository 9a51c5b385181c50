"""The --dump printer's reading of gRPC messages (kserve_v2/cli/dump.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("google.protobuf")

from kserve_v2.cli.dump import describe_grpc_message
from kserve_v2.grpc import codec

STREAM = "/inference.GRPCInferenceService/ModelStreamInfer"


def test_a_bare_infer_response_on_a_stream_is_shown_as_one() -> None:
    # MLServer's stream messages: read as a ModelStreamInferResponse, the model name would
    # pass for an error_message.
    pb2 = codec.generated()
    body = pb2.ModelInferResponse(model_name="repeat_decoupled", id="r1").SerializeToString()
    lines = describe_grpc_message(STREAM, "receive", body)
    assert lines[0].startswith("# ModelInferResponse (a bare one on a stream")
    assert 'model_name: "repeat_decoupled"' in lines
    assert not any("error_message" in line for line in lines)


def test_a_stream_infer_response_is_shown_as_one() -> None:
    pb2 = codec.generated()
    inner = pb2.ModelInferResponse(model_name="m", id="r1")
    body = pb2.ModelStreamInferResponse(infer_response=inner).SerializeToString()
    assert describe_grpc_message(STREAM, "receive", body)[0].startswith(
        "# ModelStreamInferResponse, "
    )
    error = pb2.ModelStreamInferResponse(error_message="boom").SerializeToString()
    lines = describe_grpc_message(STREAM, "receive", error)
    assert lines[0].startswith("# ModelStreamInferResponse, ")
    assert 'error_message: "boom"' in lines
