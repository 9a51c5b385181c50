"""kserve_v2.grpc.codec: what a decoded response must not be (the codec's round trips are in
test_backend.py, with the backend that uses them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kserve_v2.arguments import build_infer_request
from kserve_v2.datatypes import DATATYPE_BY_NAME, Datatype
from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.grpc import codec, wire
from kserve_v2.messages import InferResult
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
from tests.grpc.test_wire import mutated
from tests.strategies import LAYOUTS, relayout

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


# -- request forms: a request of a known form is its framing around the new tensors ---------

# numpy dtypes of inputs: both byte orders, and kinds whose bytes are converted (BYTES).
_FORM_DTYPES = st.sampled_from(
    ["?", "u1", "<i4", ">i4", "<u8", "f2", "<f4", ">f8", "O", "U3", "S2"]
)
_FORM_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)


@st.composite
def _form_arrays(draw: st.DrawFn, dtype: str, shape: tuple[int, ...]) -> npt.NDArray[Any]:
    """An array of this dtype and shape in any memory layout (the form does not know it)."""
    if dtype == "O":
        count = int(np.prod(shape))
        items = draw(st.lists(st.binary(max_size=4), min_size=count, max_size=count))
        array = np.empty(count, dtype=object)
        array[:] = items
        array = array.reshape(shape)
    else:
        array = draw(hnp.arrays(np.dtype(dtype), shape))
    return relayout(array, draw(LAYOUTS))


@st.composite
def _forms(draw: st.DrawFn) -> tuple[Any, Any, Any, dict[str, Any], dict[str, Any]]:
    """(model, version, outputs, inputs, more inputs of the same form); invalid ones too."""
    model = draw(st.sampled_from(["m", "simple", "é", ""]))
    version = draw(st.sampled_from(["", "1", "x", 0, 3, -1]))
    outputs = draw(
        st.one_of(
            st.none(),
            st.lists(st.sampled_from(["y", "z", ""]), max_size=3).flatmap(
                lambda names: st.sampled_from([names, tuple(names)])
            ),
        )
    )
    names = draw(st.lists(st.sampled_from(["a", "b", "c", ""]), max_size=3, unique=True))
    specs = [(name, draw(_FORM_DTYPES), draw(_FORM_SHAPES)) for name in names]
    first = {name: draw(_form_arrays(dtype, shape)) for name, dtype, shape in specs}
    second = {name: draw(_form_arrays(dtype, shape)) for name, dtype, shape in specs}
    return model, version, outputs, first, second


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(_forms())
def test_a_known_form_encodes_like_the_full_path(drawn: Any) -> None:
    """The full path (build, then encode) is the reference: a request of a known form must
    be its bytes exactly, whatever the new arrays' values and memory layouts."""
    model, version, outputs, first, second = drawn
    forms = codec.RequestForms()
    key = codec.request_form_key(model, version, first, outputs)
    assert key is not None
    assert codec.request_form_key(model, version, second, outputs) == key
    try:
        request = build_infer_request(model, first, outputs=outputs, version=version)
    except InvalidInputError:
        return  # never learnt (see tests/grpc/test_backend.py)
    forms.learn(key, request, codec.encode_infer_request_parts(request))
    parts = forms.parts(key, second.values())
    converted = any(array.dtype.kind in "OUS" for array in first.values())
    assert (parts is None) == converted  # BYTES elements have sizes of their own
    if parts is not None:
        expected = build_infer_request(model, second, outputs=outputs, version=version)
        assert b"".join(parts) == codec.encode_infer_request(expected)


def test_a_known_form_sends_wire_dtype_arrays_from_their_own_memory() -> None:
    """An input already in its wire form (little-endian, C-contiguous) goes out as a view of
    the array, not a copy; one in another byte order is converted."""
    forms = codec.RequestForms()
    first = {"x": np.arange(64, dtype="<f4"), "y": np.arange(64, dtype=">f4")}
    key = codec.request_form_key("m", "", first, None)
    assert key is not None
    request = build_infer_request("m", first)
    forms.learn(key, request, codec.encode_infer_request_parts(request))
    assert forms._forms[key] is not None
    assert forms._forms[key].direct == (True, False)
    second = {"x": np.ones(64, dtype="<f4"), "y": np.ones(64, dtype=">f4")}
    parts = forms.parts(key, second.values())
    assert parts is not None
    owners = [part.obj for part in parts if isinstance(part, memoryview)]
    assert any(owner is second["x"] for owner in owners)
    assert not any(owner is second["y"] for owner in owners)
    expected = codec.encode_infer_request(build_infer_request("m", second))
    assert b"".join(parts) == expected


class _Subclass(np.ndarray):  # type: ignore[type-arg]
    """An ndarray subclass: it may change how the array converts."""


@pytest.mark.parametrize(
    ("model", "version", "inputs", "outputs"),
    [
        ("m", "", [InferInput("x", np.zeros(2, np.int32))], None),  # not a dict
        ("m", "", {"x": [1, 2]}, None),  # not an array
        ("m", "", {"x": np.zeros(2).view(_Subclass)}, None),
        ("m", "", {"x": np.zeros(2)}, "y"),  # one name, not a list of names
        ("m", "", {"x": np.zeros(2)}, [RequestedOutput("y")]),
        ("m", True, {"x": np.zeros(2)}, None),  # True == 1: it must not find version 1's form
        ("m", 1.0, {"x": np.zeros(2)}, None),
        (b"m", "", {"x": np.zeros(2)}, None),
    ],
)
def test_other_calls_have_no_form(model: Any, version: Any, inputs: Any, outputs: Any) -> None:
    assert codec.request_form_key(model, version, inputs, outputs) is None


def test_forms_of_other_dtypes_shapes_and_orders_differ() -> None:
    keys = {
        codec.request_form_key("m", "", {"x": array}, None)
        for array in (
            np.zeros(2, "<i4"),
            np.zeros(2, ">i4"),
            np.zeros(2, "<u4"),
            np.zeros(3, "<i4"),
            np.zeros((1, 2), "<i4"),
        )
    }
    keys.add(codec.request_form_key("m", "", {"y": np.zeros(2, "<i4")}, None))
    keys.add(codec.request_form_key("m", 1, {"x": np.zeros(2, "<i4")}, None))
    keys.add(codec.request_form_key("m", "1", {"x": np.zeros(2, "<i4")}, None))
    keys.add(codec.request_form_key("m", "", {"x": np.zeros(2, "<i4")}, ["y"]))
    assert len(keys) == 9


def test_forms_that_cannot_be_reused_are_not_examined_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forms = codec.RequestForms()
    inputs = {"x": np.array([b"ab"], dtype=object)}
    key = codec.request_form_key("m", "", inputs, None)
    assert key is not None
    request = build_infer_request("m", inputs)
    forms.learn(key, request, codec.encode_infer_request_parts(request))
    assert forms.parts(key, inputs.values()) is None
    monkeypatch.setattr(wire, "RequestFraming", None)  # would fail if made again
    forms.learn(key, request, codec.encode_infer_request_parts(request))


def test_known_forms_stay_bounded() -> None:
    forms = codec.RequestForms()
    for count in range(2 * forms.SIZE + 1):
        inputs = {"x": np.zeros(count, np.int32)}
        key = codec.request_form_key("m", "", inputs, None)
        assert key is not None
        request = build_infer_request("m", inputs)
        forms.learn(key, request, codec.encode_infer_request_parts(request))
    assert 0 < len(forms._forms) <= forms.SIZE
