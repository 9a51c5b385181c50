"""kserve_v2.grpc.codec: what a decoded response must not be (the codec's round trips are in
test_backend.py, with the backend that uses them)."""

from __future__ import annotations

import numpy as np
import pytest

from kserve_v2.errors import ProtocolError
from kserve_v2.grpc import codec

pb = pytest.importorskip("kserve_v2.grpc._generated.grpc_service_pb2")


@pytest.mark.parametrize("stream", [False, True])
def test_response_naming_an_output_twice_is_a_protocol_error(stream: bool) -> None:
    """Which of the two would ``output("y")`` mean? A broken server, not a result."""
    message = pb.ModelInferResponse(model_name="m")
    for name in ("y", "x", "y"):
        message.outputs.add(name=name, datatype="INT32", shape=[1])
        message.raw_output_contents.append(np.array([1], "<i4").tobytes())
    if stream:
        data = pb.ModelStreamInferResponse(infer_response=message).SerializeToString()
        with pytest.raises(ProtocolError, match="'y' more than once"):
            codec.decode_stream_response(data)
    else:
        with pytest.raises(ProtocolError, match="'y' more than once"):
            codec.decode_infer_response(message.SerializeToString())


def test_distinct_output_names_decode() -> None:
    message = pb.ModelInferResponse(model_name="m")
    for name in ("y", "x"):
        message.outputs.add(name=name, datatype="INT32", shape=[1])
        message.raw_output_contents.append(np.array([1], "<i4").tobytes())
    result = codec.decode_infer_response(message.SerializeToString())
    assert [output.name for output in result.outputs] == ["y", "x"]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_parse_message_takes_any_bytes_like(kind: type) -> None:
    """The native transport hands messages over as bytearrays, which protobuf 4.x refuses
    (TypeError) where it takes bytes and memoryviews: the floor run (protobuf 4.25.1) keeps
    this true."""
    data = pb.ServerMetadataResponse(name="triton", version="2.51").SerializeToString()
    message = codec.parse_message(pb.ServerMetadataResponse, kind(data))
    assert (message.name, message.version) == ("triton", "2.51")


def test_parse_message_refuses_garbage_with_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="malformed ServerMetadataResponse"):
        codec.parse_message(pb.ServerMetadataResponse, bytearray(b"\xff\xff\xff"))
