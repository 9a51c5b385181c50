"""kserve_v2.grpc.codec: what a decoded response must not be (the codec's round trips are in
test_backend.py, with the backend that uses them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.datatypes import DATATYPE_BY_NAME, Datatype
from kserve_v2.errors import ProtocolError
from kserve_v2.grpc import codec, wire
from kserve_v2.messages import InferResult
from kserve_v2.tensors import SharedMemoryPlacement
from tests.grpc.test_wire import mutated

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


# --------------------------------------------------------------------- repeated layouts
#
# A response whose fields 1 to 5 (but the id) repeat the bytes of an earlier one is decoded
# through what the earlier one decoded to (codec._Layout). The full decoder is the reference:
# same values, and an error exactly where it raises one.


def as_stream(message: bytes | bytearray) -> bytes:
    """``message`` as the ``infer_response`` of a ``ModelStreamInferResponse``."""
    return b"\x12" + wire._varint_bytes(len(message)) + message


def reference(data: bytes | bytearray, stream: bool = False) -> Any:
    """What the full decoder makes of ``data`` (the lookup paused for one response)."""
    layouts = codec._LAYOUTS
    paused, layouts.paused = layouts.paused, 1
    try:
        return decoded(data, stream)
    finally:
        layouts.paused = paused


def decoded(data: bytes | bytearray, stream: bool = False) -> Any:
    try:
        if stream:
            event = codec.decode_stream_response(data)
            result = None if event.result is None else canon(event.result)
            error = None if event.error is None else event.error.message
            return (event.request_id, result, error, event.final, event.bare)
        return canon(codec.decode_infer_response(data))
    except ProtocolError as exc:
        return ("error", str(exc))


def canon(result: InferResult) -> Any:
    def data(array: Any) -> Any:
        if array is None:
            return None
        return (
            array.dtype.str,
            array.shape,
            array.tobytes() if array.dtype != object else [bytes(x) for x in array.reshape(-1)],
        )

    return (
        result.model_name,
        result.model_version,
        result.id,
        sorted((k, repr(v)) for k, v in result.parameters.items()),
        [
            (
                o.name,
                o.datatype,
                o.shape,
                sorted((k, repr(v)) for k, v in o.parameters.items()),
                data(o.data),
            )
            for o in result.outputs
        ],
    )


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Any, list[tuple[str, list[int]]]]:
    """A valid response (the template) and its outputs' datatypes and shapes."""
    message = pb.ModelInferResponse(
        model_name=draw(st.text(max_size=8)), model_version=draw(st.sampled_from(["", "1"]))
    )
    for key in draw(st.lists(st.sampled_from(["triton_final_response", "k", "x"]), unique=True)):
        value = draw(st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=4)))
        if isinstance(value, bool):
            message.parameters[key].bool_param = value
        elif isinstance(value, int):
            message.parameters[key].int64_param = value
        else:
            message.parameters[key].string_param = value
    outputs = []
    for index in range(draw(st.integers(0, 3))):
        datatype = draw(st.sampled_from([datatype.value for datatype in Datatype]))
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        output = message.outputs.add(name=f"out{index}", datatype=datatype, shape=shape)
        if draw(st.integers(0, 5)) == 0:  # parameters: never a reused layout
            key = draw(st.sampled_from(["shared_memory_region", "classification"]))
            output.parameters[key].string_param = "r"
        if draw(st.integers(0, 5)) == 0 and datatype == "INT32":  # typed contents too
            output.contents.int_contents.extend(range(int(np.prod(shape))))
        outputs.append((datatype, shape))
    return message, outputs


@st.composite
def raw_contents(draw: st.DrawFn, datatype: str, shape: list[int]) -> bytes:
    count = int(np.prod(shape))
    if datatype == "BYTES":
        elements = draw(st.lists(st.binary(max_size=5), min_size=count, max_size=count))
        return b"".join(len(e).to_bytes(4, "little") + e for e in elements)
    if datatype == "BOOL":
        return bytes(draw(st.lists(st.integers(0, 1), min_size=count, max_size=count)))
    size = count * (DATATYPE_BY_NAME[datatype].itemsize or 0)
    return draw(st.binary(min_size=size, max_size=size))


@st.composite
def responses_of_one_layout(draw: st.DrawFn) -> list[bytes]:
    """Responses sharing a layout (other ids, other tensors), some broken, in any order."""
    template, outputs = draw(layouts())
    messages = []
    for _ in range(draw(st.integers(1, 4))):
        message = pb.ModelInferResponse()
        message.CopyFrom(template)
        message.id = draw(st.sampled_from(["", "7", "req-é"]))
        for datatype, shape in outputs:
            message.raw_output_contents.append(draw(raw_contents(datatype, shape)))
        if draw(st.integers(0, 4)) == 0 and outputs:  # a raw part of the wrong size
            message.raw_output_contents[0] += b"\x00"
        if draw(st.integers(0, 5)) == 0:  # a raw part too few or too many
            if draw(st.booleans()) and message.raw_output_contents:
                del message.raw_output_contents[-1]
            else:
                message.raw_output_contents.append(b"")
        data = message.SerializeToString()
        if draw(st.integers(0, 5)) == 0:
            data = draw(mutated(st.just(message)))
        messages.append(data)
    return messages


@pytest.fixture(autouse=True)
def _no_layouts_from_other_tests() -> None:
    codec._LAYOUTS.clear()


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(responses_of_one_layout(), st.booleans(), st.booleans())
def test_reused_layouts_decode_like_the_full_decoder(
    messages: list[bytes], stream: bool, as_bytearray: bool
) -> None:
    codec._LAYOUTS.clear()
    for message in messages:
        if stream:
            message = as_stream(message)
        data = bytearray(message) if as_bytearray else message
        expected = reference(data, stream)
        assert decoded(data, stream) == expected, message.hex()
        assert decoded(data, stream) == expected, message.hex()  # now with its layout known


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(st.one_of(st.binary(max_size=160), mutated(layouts().map(lambda drawn: drawn[0]))))
def test_anything_decodes_like_the_full_decoder_with_or_without_a_known_layout(
    data: bytes,
) -> None:
    codec._LAYOUTS.clear()
    for stream in (False, True):
        expected = reference(data, stream)
        assert decoded(data, stream) == expected
        assert decoded(data, stream) == expected


def triton_response(out: list[int], id: str = "", final: bool | None = None) -> bytes:
    message = pb.ModelInferResponse(model_name="repeat_decoupled", model_version="1", id=id)
    if final is not None:
        message.parameters["triton_final_response"].bool_param = final
    message.outputs.add(name="OUT", datatype="INT32", shape=[len(out)])
    message.outputs.add(name="IDX", datatype="INT32", shape=[1])
    message.raw_output_contents.append(np.array(out, "<i4").tobytes())
    message.raw_output_contents.append(np.array([len(out)], "<i4").tobytes())
    return message.SerializeToString()


def test_a_known_layout_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    codec.decode_infer_response(triton_response([1, 2, 3], id="a"))

    def no_full_decode(*args: object) -> None:
        raise AssertionError("decoded in full")

    monkeypatch.setattr(wire, "decode_infer_response_span", no_full_decode)
    monkeypatch.setattr(wire, "decode_infer_response_fields", no_full_decode)
    data = bytearray(triton_response([4, 5, 6], id="b"))
    result = codec.decode_infer_response(data)
    assert (result.id, result.model_name) == ("b", "repeat_decoupled")
    out = result.as_numpy("OUT")
    assert out.tolist() == [4, 5, 6]
    assert np.shares_memory(out, np.frombuffer(data, np.uint8))
    stream = as_stream(data)
    event = codec.decode_stream_response(stream)
    assert (event.request_id, event.final) == ("b", None)
    assert event.result is not None
    assert event.result.as_numpy("IDX").tolist() == [3]


def test_results_of_one_layout_share_nothing_mutable() -> None:
    first = codec.decode_infer_response(triton_response([1], final=False))
    second = codec.decode_infer_response(triton_response([2], final=False))
    first.parameters["triton_final_response"] = True  # type: ignore[index]
    first.outputs[0].parameters["x"] = 1  # type: ignore[index]
    third = codec.decode_infer_response(triton_response([3], final=False))
    assert second.parameters == third.parameters == {"triton_final_response": False}
    assert third.outputs[0].parameters == {}
    last = triton_response([4], final=True)
    assert codec.decode_stream_response(as_stream(last)).final is True


def test_layouts_in_shared_memory_are_decoded_in_full() -> None:
    """An output the request placed in shared memory comes back empty: the placement's
    parameters fill it, whatever layouts are known."""
    placement = SharedMemoryPlacement("region", 8)
    message = pb.ModelInferResponse(model_name="m", id="r")
    message.outputs.add(name="y", datatype="INT32", shape=[2])
    message.raw_output_contents.append(b"")
    data = message.SerializeToString()
    stream = as_stream(data)
    for _ in range(2):
        result = codec.decode_infer_response(data, {"y": placement})
        assert result.outputs[0].data is None
        assert result.outputs[0].parameters["shared_memory_region"] == "region"
        event = codec.decode_stream_response(stream, {"r": {"y": placement}}.get)
        assert event.result is not None
        assert event.result.outputs[0].data is None


def test_known_layouts_stay_bounded() -> None:
    layouts = codec._LAYOUTS
    for count in range(3 * layouts.SIZE):
        codec.decode_infer_response(triton_response(list(range(count))))
        layouts.paused = 0  # every response looks for its layout
    assert 0 < len(layouts.known) <= layouts.SIZE
    long_name = pb.ModelInferResponse(model_name="m" * wire.MAX_LAYOUT_BYTES)
    layouts.clear()
    codec.decode_infer_response(long_name.SerializeToString())
    assert not layouts.known


def test_outputs_that_change_shape_pause_the_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    layouts = codec._LAYOUTS
    for count in range(layouts.MISSES):
        assert not layouts.paused
        codec.decode_infer_response(triton_response(list(range(count))))
    assert layouts.paused == layouts.PAUSE
    monkeypatch.setattr(wire, "split_infer_response", None)  # not called while paused
    for count in range(layouts.PAUSE):
        result = codec.decode_infer_response(triton_response(list(range(count))))
        assert result.as_numpy("OUT").tolist() == list(range(count))
    monkeypatch.undo()
    assert not layouts.paused
    repeated = triton_response([1, 2])
    codec.decode_infer_response(repeated)  # learnt again
    codec.decode_infer_response(repeated)
    assert layouts.misses == 0
