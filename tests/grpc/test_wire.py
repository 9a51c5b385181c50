"""kserve_v2.grpc.wire: byte-exact against protobuf's generated classes, total on bad input.

The generated classes (parsing with upb, protobuf's Python runtime) are the oracle: requests
must serialize to the same bytes, responses must decode to the same values, and arbitrary or
mutated bytes must be accepted or rejected exactly when upb accepts or rejects them.
"""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.grpc import wire
from kserve_v2.grpc.wire import InferResponseFields, WireTensorContents

try:
    from google.protobuf.internal import api_implementation
    from google.protobuf.message import DecodeError

    from kserve_v2.grpc._generated import grpc_service_pb2 as pb

    # The oracle is upb, protobuf's default runtime since 4.21; the pure-Python fallback
    # sorts map entries and reports some errors differently.
    ORACLE = api_implementation.Type() == "upb"
except ImportError:  # the codec itself needs neither; only the oracle tests do
    pb = None
    ORACLE = False

needs_protobuf = pytest.mark.skipif(
    not ORACLE, reason="protobuf (the 'grpc' extra) with its default upb runtime is needed"
)

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

# Property tests run on a small shared machine: no deadline, sizes kept small.
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def canon(value: Any) -> Any:
    """Comparable form: floats by bit pattern (NaN-safe), bools tagged, views as bytes."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, memoryview):
        return ("view", value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(canon(v) for v in value)
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value).__name__, tuple(canon(getattr(value, f.name)) for f in fields))
    return value


class Request(NamedTuple):
    """A ``ModelInferRequest``'s fields, in the order ``encode_infer_request_fields`` takes."""

    model_name: str
    model_version: str = ""
    id: str = ""
    parameters: Mapping[str, Any] = MappingProxyType({})
    inputs: Sequence[wire.InputFields] = ()
    outputs: Sequence[wire.RequestedOutputFields] = ()
    raw_input_contents: Sequence[Any] = ()


def encode(request: Request) -> list[wire.BytesLike]:
    return wire.encode_infer_request_fields(*request)


def serialize(request: Request) -> bytes:
    return b"".join(encode(request))


def decode(data: Any) -> InferResponseFields:
    return wire.decode_infer_response_fields(data)


def decode_stream(data: Any) -> tuple[str, InferResponseFields | None]:
    return wire.decode_stream_infer_response_fields(data)


# ------------------------------------------------------------------------ oracle helpers


def set_params(target: Any, params: dict[str, Any]) -> None:
    for key, value in params.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            if value <= INT64_MAX:
                param.int64_param = value
            else:
                param.uint64_param = value
        elif isinstance(value, float):
            param.double_param = value
        else:
            param.string_param = value


def message_from_request(request: Request) -> Any:
    message = pb.ModelInferRequest(
        model_name=request.model_name,
        model_version=request.model_version,
        id=request.id,
        raw_input_contents=[memoryview(r).tobytes() for r in request.raw_input_contents],
    )
    set_params(message.parameters, dict(request.parameters))
    for name, datatype, shape, parameters in request.inputs:
        added = message.inputs.add(name=name, datatype=datatype, shape=shape)
        set_params(added.parameters, dict(parameters))
    for name, parameters in request.outputs:
        set_params(message.outputs.add(name=name).parameters, dict(parameters))
    return message


def param_value(param: Any) -> Any:
    which = param.WhichOneof("parameter_choice")
    return None if which is None else getattr(param, which)


def expected_response(message: Any) -> InferResponseFields:
    def contents(c: Any) -> WireTensorContents:
        return WireTensorContents(
            tuple(c.bool_contents),
            tuple(c.int_contents),
            tuple(c.int64_contents),
            tuple(c.uint_contents),
            tuple(c.uint64_contents),
            tuple(c.fp32_contents),
            tuple(c.fp64_contents),
            tuple(c.bytes_contents),
        )

    outputs = [
        (
            o.name,
            o.datatype,
            tuple(o.shape),
            {k: param_value(v) for k, v in o.parameters.items()},
            contents(o.contents) if o.HasField("contents") else None,
        )
        for o in message.outputs
    ]
    return (
        message.model_name,
        message.model_version,
        message.id,
        {k: param_value(v) for k, v in message.parameters.items()},
        outputs,
        [memoryview(b) for b in message.raw_output_contents],
    )


def expected_stream(message: Any) -> tuple[str, InferResponseFields | None]:
    inner = message.infer_response if message.HasField("infer_response") else None
    return message.error_message, None if inner is None else expected_response(inner)


# ---------------------------------------------------------------------------- strategies

texts = st.text(max_size=10)
int64s = st.integers(INT64_MIN, INT64_MAX)
# What callers pass as parameter values; ints beyond int64 must go out as uint64_param.
param_values = st.one_of(
    st.booleans(), st.integers(INT64_MIN, UINT64_MAX), st.floats(), st.text(max_size=8)
)
params = st.dictionaries(st.text(max_size=6), param_values, max_size=4)


def _as_buffer(kind: str, data: bytes) -> Any:
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "uint8":
        return np.frombuffer(data, dtype=np.uint8)
    # A typed 2-D array: its memoryview's len() counts rows, not bytes.
    usable = data[: len(data) // 8 * 8]
    return np.frombuffer(usable, dtype="<f4").reshape(-1, 2)


raw_buffers = st.builds(
    _as_buffer,
    st.sampled_from(["bytes", "bytearray", "memoryview", "uint8", "float32-2d"]),
    st.binary(max_size=48),
)
requests = st.builds(
    Request,
    texts,
    texts,
    texts,
    params,
    st.lists(st.tuples(texts, texts, st.lists(int64s, max_size=4), params), max_size=3),
    st.lists(st.tuples(texts, params), max_size=3),
    st.lists(raw_buffers, max_size=4),
)


@st.composite
def drawn_params(draw: st.DrawFn, target: Any) -> None:
    for key in draw(st.lists(st.text(max_size=5), max_size=3, unique=True)):
        kind = draw(st.sampled_from(["unset", "bool", "int64", "string", "double", "uint64"]))
        param = target[key]
        if kind == "bool":
            param.bool_param = draw(st.booleans())
        elif kind == "int64":
            param.int64_param = draw(int64s)
        elif kind == "string":
            param.string_param = draw(st.text(max_size=6))
        elif kind == "double":
            param.double_param = draw(st.floats())
        elif kind == "uint64":
            param.uint64_param = draw(st.integers(0, UINT64_MAX))


@st.composite
def response_messages(draw: st.DrawFn) -> Any:
    message = pb.ModelInferResponse(
        model_name=draw(texts), model_version=draw(texts), id=draw(texts)
    )
    draw(drawn_params(message.parameters))
    for _ in range(draw(st.integers(0, 3))):
        output = message.outputs.add(
            name=draw(texts), datatype=draw(texts), shape=draw(st.lists(int64s, max_size=4))
        )
        draw(drawn_params(output.parameters))
        if draw(st.booleans()):
            c = output.contents
            c.SetInParent()  # present even when every list is empty
            c.bool_contents.extend(draw(st.lists(st.booleans(), max_size=3)))
            c.int_contents.extend(draw(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3)))
            c.int64_contents.extend(draw(st.lists(int64s, max_size=3)))
            c.uint_contents.extend(draw(st.lists(st.integers(0, 2**32 - 1), max_size=3)))
            c.uint64_contents.extend(draw(st.lists(st.integers(0, UINT64_MAX), max_size=3)))
            c.fp32_contents.extend(draw(st.lists(st.floats(width=32), max_size=3)))
            c.fp64_contents.extend(draw(st.lists(st.floats(), max_size=3)))
            c.bytes_contents.extend(draw(st.lists(st.binary(max_size=6), max_size=3)))
    message.raw_output_contents.extend(draw(st.lists(st.binary(max_size=24), max_size=4)))
    return message


@st.composite
def stream_messages(draw: st.DrawFn) -> Any:
    message = pb.ModelStreamInferResponse(error_message=draw(texts))
    if draw(st.booleans()):
        message.infer_response.CopyFrom(draw(response_messages()))
    return message


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= UINT64_MAX
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, wire_type: int, payload: bytes = b"") -> bytes:
    return _varint(number << 3 | wire_type) + payload


def _len_field(number: int, body: bytes) -> bytes:
    return _field(number, 2, _varint(len(body)) + body)


# Wire "tokens" for structured fuzzing: plausible fields (known and unknown numbers, every
# wire type including groups and the invalid 6/7), nested through length-delimited ones.
def _token(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    numbers = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 2**29 - 1])
    return st.one_of(
        st.builds(lambda n, v: _field(n, 0, _varint(v)), numbers, st.integers(0, UINT64_MAX)),
        st.builds(lambda n, b: _field(n, 1, b), numbers, st.binary(min_size=8, max_size=8)),
        st.builds(lambda n, b: _field(n, 5, b), numbers, st.binary(min_size=4, max_size=4)),
        st.builds(_len_field, numbers, st.binary(max_size=12)),
        st.builds(_len_field, numbers, children),
        st.builds(lambda n, b: _field(n, 3) + b + _field(n, 4), numbers, children),
        st.builds(lambda n, w: _field(n, w), numbers, st.sampled_from([3, 4, 6, 7])),
    )


wire_tokens = st.recursive(
    st.just(b""),
    lambda children: st.lists(_token(children), max_size=4).map(b"".join),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, messages: st.SearchStrategy[Any]) -> bytes:
    """A valid encoding with a few byte-level mutations applied."""
    data = bytearray(draw(messages).SerializeToString())
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            del data[at:]
    return bytes(data)


# ------------------------------------------------------------------------------ requests


@needs_protobuf
@FAST
@given(requests)
def test_request_bytes_equal_generated_serialization(request: Request) -> None:
    assert serialize(request) == message_from_request(request).SerializeToString(deterministic=True)


# Golden bytes, written out by hand from the encoding rules.
REQUEST_GOLDEN = [
    (Request(model_name=""), b""),
    (Request(model_name="m"), b"\x0a\x01m"),
    (
        Request("m", "2", "r1"),
        b"\x0a\x01m" + b"\x12\x012" + b"\x1a\x02r1",
    ),
    (
        # Entries sorted by key; map entries always carry key and value.
        Request("m", parameters={"s": "", "b": False, "i": -1}),
        b"\x0a\x01m"
        + b"\x22\x07\x0a\x01b\x12\x02\x08\x00"
        + b"\x22\x10\x0a\x01i\x12\x0b\x10" + b"\xff" * 9 + b"\x01"
        + b"\x22\x07\x0a\x01s\x12\x02\x1a\x00",
    ),
    (
        Request("m", parameters={"u": 2**64 - 1, "d": 0.5}),
        b"\x0a\x01m"
        + b"\x22\x0e\x0a\x01d\x12\x09\x21" + struct.pack("<d", 0.5)
        + b"\x22\x10\x0a\x01u\x12\x0b\x28" + b"\xff" * 9 + b"\x01",
    ),
    (
        Request(
            "m",
            inputs=[("x", "INT32", [2, -1], {"p": 1})],
            outputs=[("y", {})],
            raw_input_contents=[b"\x01\x00\x00\x00\x02\x00\x00\x00", b""],
        ),
        b"\x0a\x01m"
        + b"\x2a\x20"  # inputs[0], 32 bytes
        + b"\x0a\x01x\x12\x05INT32"
        + b"\x1a\x0b\x02" + b"\xff" * 9 + b"\x01"  # packed shape [2, -1]
        + b"\x22\x07\x0a\x01p\x12\x02\x10\x01"
        + b"\x32\x03\x0a\x01y"
        + b"\x3a\x08\x01\x00\x00\x00\x02\x00\x00\x00"
        + b"\x3a\x00",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("request_", "expected"), REQUEST_GOLDEN)
def test_request_golden_bytes(request_: Request, expected: bytes) -> None:
    assert serialize(request_) == expected


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (Request("\ud800"), "model_name"),
        (Request("m", parameters={"k": 2**64}), "outside the int64/uint64"),
        (Request("m", parameters={"k": INT64_MIN - 1}), "outside the int64/uint64"),
        (Request("m", parameters={"k": b"x"}), "bool, int, float or str"),
        (Request("m", parameters={"k": None}), "bool, int, float or str"),
        (Request("m", parameters={1: "v"}), "key must be a str"),
        (Request("m", inputs=[("x", "FP32", [2**63], {})]), "int64"),
        (Request("m", inputs=[("x", "FP32", [1.0], {})]), "integer"),
        (Request("m", inputs=[("x", "FP32", [True], {})]), "bool"),
        (Request("m", raw_input_contents=["text"]), "bytes-like"),
        (
            Request("m", raw_input_contents=[np.zeros((4, 4), np.float32)[:, ::2]]),
            "C-contiguous",
        ),
    ],
)
def test_request_rejects_what_protobuf_cannot_carry(request_: Request, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        encode(request_)


def test_cached_tensor_fields_are_only_reused_for_equal_values_of_the_same_type() -> None:
    # The encoder caches inputs and outputs without parameters. True and 1.0 are equal to 1
    # (and hash alike) but are no dimension: a cached (1, 2) must not let them through.
    def request(shape: Any) -> Request:
        return Request("m", inputs=[("x", "INT8", shape, {})])

    good = serialize(request((1, 2)))
    assert serialize(request((1, 2))) == good
    assert serialize(request([1, 2])) == good
    assert serialize(request((np.int64(1), 2))) == good
    with pytest.raises(InvalidInputError, match=r"inputs\[0\]\.shape\[0\] must be .*not a bool"):
        encode(request((True, 2)))
    with pytest.raises(InvalidInputError, match=r"inputs\[0\]\.shape\[0\] must be .*float"):
        encode(request((1.0, 2)))


def test_tensor_field_caches_stay_bounded() -> None:
    for n in range(wire._FIELD_CACHE_SIZE + 10):
        serialize(Request("m", inputs=[("x", "INT8", (n,), {})], outputs=[(f"y{n}", {})]))
    assert 0 < len(wire._input_field_cache) <= wire._FIELD_CACHE_SIZE
    assert 0 < len(wire._output_field_cache) <= wire._FIELD_CACHE_SIZE


def test_request_over_2gib_is_rejected_before_any_copy() -> None:
    # np.zeros maps zero pages lazily: the 2 GiB are never touched.
    huge = np.zeros(2**31, dtype=np.uint8)
    with pytest.raises(InvalidInputError, match="2 GiB"):
        encode(Request("m", raw_input_contents=[huge]))


def test_numpy_scalars_are_accepted_as_parameters() -> None:
    request = Request("m", parameters={"i": np.int64(-3), "f": np.float64(0.25)})
    assert serialize(request) == serialize(Request("m", parameters={"i": -3, "f": 0.25}))


def test_request_tensor_buffers_are_referenced_not_copied() -> None:
    tensor = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
    request = Request("m", inputs=[("x", "FP32", [tensor.size], {})], raw_input_contents=[tensor])
    tracemalloc.start()
    try:
        buffers = encode(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, "encoding allocated memory on the order of the tensor"
    views = [b for b in buffers if isinstance(b, memoryview)]
    assert len(views) == 1
    assert views[0].obj is tensor
    assert buffers[-1] is views[0]  # the framing goes before it, nothing after
    assert len(b"".join(buffers)) == len(buffers[0]) + tensor.nbytes


@pytest.mark.parametrize(
    "sizes",
    [[], [0], [4], [0, 4], [4, 0], [0, 4, 0, 0, 8], [4, 8], [0, 0]],
)
def test_request_framing_puts_new_tensors_where_the_old_ones_were(sizes: list[int]) -> None:
    """Empty tensors have no buffer of their own (their field joins the framing), non-empty
    ones do: the framing keeps which input goes where, zero-size ones included."""
    old = [bytes([i + 1]) * size for i, size in enumerate(sizes)]
    new = [bytes([i + 101]) * size for i, size in enumerate(sizes)]
    fields = [(f"in{i}", "UINT8", [size], {}) for i, size in enumerate(sizes)]

    def encoded(raws: list[bytes]) -> list[wire.BytesLike]:
        return wire.encode_infer_request_fields("m", "1", "", {}, fields, [("o", {})], raws)

    framing = wire.RequestFraming(encoded(old), sizes)
    parts = framing.parts([memoryview(raw) for raw in new])
    assert b"".join(parts) == b"".join(encoded(new))
    assert [part.obj for part in parts if isinstance(part, memoryview)] == [
        raw for raw in new if raw
    ]  # the tensors themselves, not copies


def test_request_framing_refuses_buffers_of_another_form() -> None:
    parts = wire.encode_infer_request_fields("m", "", "", {}, [], [], [b"ab", b"cde"])
    for sizes in ([2], [2, 3, 1], [3, 2], [2, 3, 0, 1]):
        with pytest.raises(ValueError, match="not the encoder's buffers"):
            wire.RequestFraming(parts, sizes)
    with pytest.raises(ValueError, match="not the encoder's buffers"):
        wire.RequestFraming([b"".join(parts)], [2, 3])  # joined: no tensor buffers


# ----------------------------------------------------------------------------- responses


@needs_protobuf
@FAST
@given(response_messages())
def test_response_decodes_to_generated_values(message: Any) -> None:
    data = message.SerializeToString()
    expected = canon(expected_response(message))
    assert canon(decode(data)) == expected
    assert canon(decode(bytearray(data))) == expected
    assert canon(decode(memoryview(data))) == expected


@needs_protobuf
@FAST
@given(stream_messages())
def test_stream_response_decodes_to_generated_values(message: Any) -> None:
    data = message.SerializeToString()
    expected = canon(expected_stream(message))
    # bytes (grpcio) and bytearray (native transport) take the shortcut, memoryview does not.
    assert canon(decode_stream(data)) == expected
    assert canon(decode_stream(bytearray(data))) == expected
    assert canon(decode_stream(memoryview(data))) == expected


@st.composite
def contents_encodings(draw: st.DrawFn) -> bytes:
    """InferTensorContents with every scalar field written packed, unpacked or both."""
    body = bytearray()
    varint_fields = {
        1: st.booleans().map(int),
        2: st.integers(-(2**31), 2**31 - 1),
        3: int64s,
        4: st.integers(0, 2**32 - 1),
        5: st.integers(0, UINT64_MAX),
    }
    chunks: list[bytes] = []
    for number, values in varint_fields.items():
        for value_list in draw(st.lists(st.lists(values, max_size=3), max_size=2)):
            if draw(st.booleans()):
                chunks.append(_len_field(number, b"".join(_varint(v) for v in value_list)))
            else:
                chunks.extend(_field(number, 0, _varint(v)) for v in value_list)
    for number, code, wire_type in ((6, "<f", 5), (7, "<d", 1)):
        width = 32 if number == 6 else 64
        for value_list in draw(st.lists(st.lists(st.floats(width=width), max_size=3), max_size=2)):
            packed = [struct.pack(code, v) for v in value_list]
            if draw(st.booleans()):
                chunks.append(_len_field(number, b"".join(packed)))
            else:
                chunks.extend(_field(number, wire_type, p) for p in packed)
    # Interleave: protobuf appends each occurrence in order, whatever the field.
    body += b"".join(draw(st.permutations(chunks)))
    shape = draw(st.lists(int64s, max_size=3))
    shape_bytes = (
        _len_field(3, b"".join(_varint(d) for d in shape))
        if draw(st.booleans())
        else b"".join(_field(3, 0, _varint(d)) for d in shape)
    )
    output = _len_field(1, b"y") + shape_bytes + _len_field(5, bytes(body))
    return _len_field(5, output)


@needs_protobuf
@FAST
@given(contents_encodings())
def test_packed_and_unpacked_scalars_decode_alike(data: bytes) -> None:
    expected = expected_response(pb.ModelInferResponse.FromString(data))
    assert canon(decode(data)) == canon(expected)


# The layout Triton sends for the `simple` model: two [1, 16] INT32 outputs, raw contents.
TRITON_RESPONSE = (
    b"\x0a\x06simple\x12\x011"
    + (b"\x2a\x14\x0a\x07OUTPUT0\x12\x05INT32\x1a\x02\x01\x10")
    + (b"\x2a\x14\x0a\x07OUTPUT1\x12\x05INT32\x1a\x02\x01\x10")
    + (b"\x32\x40" + bytes(range(64)))
    + (b"\x32\x40" + bytes(64))
)


def test_triton_responses_split_into_layout_and_raw_contents() -> None:
    """The codec reuses decoded layouts only for what the splitter accepts: Triton's form."""
    with_id = TRITON_RESPONSE[:11] + b"\x1a\x03abc" + TRITON_RESPONSE[11:]
    for data, id in ((TRITON_RESPONSE, b""), (with_id, b"abc")):
        split = wire.split_infer_response(data, memoryview(data), 0, len(data))
        assert split is not None
        layout, id_start, id_end, raws = split
        assert layout == TRITON_RESPONSE[: TRITON_RESPONSE.index(b"\x32\x40")]
        assert data[id_start:id_end] == id
        assert [bytes(raw) for raw in raws] == [bytes(range(64)), bytes(64)]
    stream = b"\x12" + wire._varint_bytes(len(with_id)) + with_id
    assert wire.stream_infer_response_span(stream) == (3, len(stream))


@pytest.mark.parametrize(
    "data",
    [
        TRITON_RESPONSE + b"\x0a\x01m",  # a field after the raw contents
        TRITON_RESPONSE[:11] + b"\x1a\x01a\x1a\x01b" + TRITON_RESPONSE[11:],  # two ids
        b"\x42\x00" + TRITON_RESPONSE,  # an unknown field
        TRITON_RESPONSE[:-1],  # the last raw part cut short
        b"\x0a\x7fsimple",  # a length past the end
    ],
)
def test_other_shapes_are_not_split(data: bytes) -> None:
    assert wire.split_infer_response(data, memoryview(data), 0, len(data)) is None


def _usual(data: bytes) -> Any:
    return wire._decode_usual_response(data, memoryview(data))


def _general(data: bytes) -> Any:
    response = wire._Response()
    wire._decode_response(
        data, memoryview(data), 0, len(data), response, wire._MAX_DEPTH, "ModelInferResponse"
    )
    return response.fields()


def test_usual_responses_take_the_shortcut() -> None:
    # The shortcut is only worth having if Triton's responses take it.
    fields = _usual(TRITON_RESPONSE)
    assert fields is not None
    assert canon(fields) == canon(_general(TRITON_RESPONSE))
    assert fields[4][0] == ("OUTPUT0", "INT32", (1, 16), {}, None)
    assert [bytes(r) for r in fields[5]] == [bytes(range(64)), bytes(64)]


def _shortcut_agrees(data: bytes) -> None:
    """The shortcut gives up, or decodes what the general decoder decodes."""
    fields = _usual(data)
    if fields is not None:
        assert canon(fields) == canon(_general(data)), data.hex()


@needs_protobuf
@FAST
@given(response_messages())
def test_usual_response_shortcut_agrees_on_valid_messages(message: Any) -> None:
    _shortcut_agrees(message.SerializeToString())


@needs_protobuf
@settings(FAST, max_examples=400)
@given(st.one_of(st.binary(max_size=160), wire_tokens, mutated(response_messages())))
def test_usual_response_shortcut_agrees_or_gives_up_on_anything(data: bytes) -> None:
    _shortcut_agrees(data)


def test_usual_stream_responses_take_the_shortcut(monkeypatch: pytest.MonkeyPatch) -> None:
    size = len(TRITON_RESPONSE)
    assert 0x80 <= size < 0x4000  # a two-byte length: the usual case for small tensors
    stream_message = b"\x12" + bytes([size & 0x7F | 0x80, size >> 7]) + TRITON_RESPONSE
    monkeypatch.setattr(wire, "_decode_stream", None)  # the general path would fail now
    error, fields = wire.decode_stream_infer_response_fields(bytearray(stream_message))
    assert error == ""
    assert fields is not None
    assert canon(fields) == canon(_general(TRITON_RESPONSE))


@needs_protobuf
@settings(FAST, max_examples=400)
@given(st.one_of(st.binary(max_size=160), wire_tokens, mutated(stream_messages())))
def test_stream_shortcut_agrees_or_fails_like_the_general_decoder(data: bytes) -> None:
    """Whatever the shortcut accepts, the general decoder decodes to the same values."""
    try:
        fast = wire.decode_stream_infer_response_fields(data)
    except ProtocolError:
        fast = None
    try:
        error, response = wire._decode_stream(data, memoryview(data))
        general = (error, None if response is None else response.fields())
    except ProtocolError:
        general = None
    assert (fast is None) == (general is None), data.hex()
    if fast is not None and general is not None:
        assert canon(fast) == canon(general), data.hex()


def _either_kind(data: bytes) -> tuple[str, Any, bool] | None:
    try:
        return wire.decode_stream_message_fields(data)
    except ProtocolError:
        return None


@needs_protobuf
@FAST
@given(stream_messages())
def test_stream_responses_are_read_as_such(message: Any) -> None:
    data = message.SerializeToString()
    assert canon(_either_kind(data)) == canon((*decode_stream(data), False))


@needs_protobuf
@FAST
@given(response_messages())
def test_bare_infer_responses_on_a_stream_are_read_as_such(message: Any) -> None:
    """MLServer's form: any response with an id, parameters, outputs or raw contents."""
    data = message.SerializeToString()
    bare = bool(message.id or message.parameters or message.outputs or message.raw_output_contents)
    fields = _either_kind(data)
    if bare:
        assert fields is not None
        assert canon(fields) == canon(("", decode(data), True))
    elif fields is not None:  # model_name and model_version only: the two kinds agree
        assert fields[2] is False


@needs_protobuf
@settings(FAST, max_examples=400)
@given(
    st.one_of(
        st.binary(max_size=160),
        wire_tokens,
        mutated(stream_messages()),
        mutated(response_messages()),
    )
)
def test_stream_messages_of_either_kind_decode_as_that_kind_or_raise(data: bytes) -> None:
    fields = _either_kind(data)
    if fields is None:
        return
    if fields[2]:
        assert canon(fields[:2]) == canon(("", decode(data)))
    else:
        assert canon(fields[:2]) == canon(decode_stream(data))


def test_response_golden() -> None:
    output = (
        b"\x0a\x03out\x12\x04FP32"
        + b"\x18\x02\x18\x7f"  # shape [2, 127], unpacked
        + b"\x2a\x00"  # contents present, empty
    )
    data = (
        b"\x0a\x05model"  # model_name
        + b"\x1a\x02id"  # id
        + b"\x22\x07\x0a\x01k\x12\x02\x08\x01"  # parameters {k: true}
        + b"\x2a\x11" + output  # outputs[0], 17 bytes
        + b"\x32\x08" + struct.pack("<2f", 1.5, -2.0)  # raw_output_contents[0]
        + b"\x32\x00"  # raw_output_contents[1], empty
        + b"\x50\x01"  # unknown field 10, skipped
    )  # fmt: skip
    assert len(output) == 0x11
    model_name, model_version, id, parameters, outputs, raw = decode(data)
    assert (model_name, model_version, id) == ("model", "", "id")
    assert parameters == {"k": True}
    assert list(outputs) == [("out", "FP32", (2, 127), {}, WireTensorContents())]
    assert [bytes(r) for r in raw] == [struct.pack("<2f", 1.5, -2.0), b""]
    assert np.frombuffer(raw[0], "<f4").tolist() == [1.5, -2.0]


def test_stream_golden() -> None:
    assert decode_stream(b"\x0a\x04oops") == ("oops", None)
    error_message, response = decode_stream(b"\x12\x03\x0a\x01m")
    assert error_message == ""
    assert response is not None
    assert response[0] == "m"


def test_raw_outputs_are_views_of_the_received_buffer() -> None:
    payload = np.arange(1 << 20, dtype=np.float32).tobytes()  # 4 MiB
    data = b"\x32" + _varint(len(payload)) + payload
    tracemalloc.start()
    try:
        response = decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, "decoding allocated memory on the order of the tensor"
    (raw,) = response[5]
    assert raw.obj is data
    assert raw.readonly
    assert raw.nbytes == len(payload)


# Each malformed input, the problem the error names, and where.
MALFORMED = [
    (b"\x0a", "truncated varint", "byte 1"),
    (b"\x0a\x05abc", "runs past the end", "byte 1"),
    (b"\x2a\x03\x0a\x05x", "runs past the end", "ModelInferResponse.outputs[0]"),
    (b"\x0e", "invalid wire type 6", "byte 0"),
    (b"\x0f", "invalid wire type 7", "byte 0"),
    (b"\x0a\x02\xc3\x28", "invalid UTF-8", "byte 2"),
    (b"\x22\x05\x0a\x01\xff\x12\x00", "invalid UTF-8", "ModelInferResponse.parameters"),
    (b"\x0c", "end-group tag outside a group", "byte 0"),
    (b"\x0b\x08\x01", "no end-group tag", "ModelInferResponse"),
    (b"\x0b\x14", "does not match", "byte 1"),
    (b"\x00\x00", "field number 0", "byte 0"),
    (b"\x88\x80\x80\x80\x80\x00\x00", "invalid field tag", "byte 0"),
    (b"\x18" + b"\x80" * 10 + b"\x00", "longer than 10 bytes", "byte 1"),
    (b"\x2a\x04\x2a\x02\x35\x00", "truncated 32-bit value", "contents"),
    (b"\x2a\x05\x2a\x03\x32\x01\x00", "packed f-array of 1 bytes", "contents"),
    (b"\x2a\x04\x1a\x02\x80\x80", "truncated varint", "outputs[0]"),
    (b"\x3b" * 101 + b"\x3c" * 101, "nested too deep", "ModelInferResponse"),
    (b"\x2a\xc8\x01" + b"\x3b" * 100 + b"\x3c" * 100, "nested too deep", "outputs[0]"),
]


@pytest.mark.parametrize(("data", "problem", "where"), MALFORMED)
def test_malformed_input_is_a_protocol_error(data: bytes, problem: str, where: str) -> None:
    with pytest.raises(ProtocolError, match=problem) as info:
        decode(data)
    assert where in str(info.value)
    if ORACLE:  # upb rejects each of them too
        with pytest.raises(DecodeError):
            pb.ModelInferResponse.FromString(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x3b" * 100 + b"\x3c" * 100,  # groups 100 deep: upb's limit, still accepted
        b"\x88\x80\x80\x80\x00\x00",  # a 5-byte tag is still a tag
        b"\x18" + b"\xff" * 9 + b"\x7f",  # 10-byte varint, bits past 64 ignored
        b"\x22\x07\x0a\x01k\x12\x00\x18\x01",  # entry with an unknown field: left out
        b"\x3a\x01\xff",  # unknown length-delimited field: no UTF-8 check
        b"\x2a\xc6\x01" + b"\x3b" * 99 + b"\x3c" * 99,  # 99 deep inside outputs[0]
    ],
)
def test_edge_cases_accepted_like_upb(data: bytes) -> None:
    response = decode(data)
    if ORACLE:
        expected = expected_response(pb.ModelInferResponse.FromString(data))
        assert canon(response) == canon(expected)


def test_non_contiguous_input_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="contiguous"):
        decode(memoryview(b"\x0a\x01m\x00")[::2])


def test_field_number_zero_inside_a_group_is_rejected() -> None:
    # Protobuf 4.25's upb rejects it like field number 0 anywhere else; recent upb skips it
    # inside unknown groups. The decoder keeps to the stricter rule.
    with pytest.raises(ProtocolError, match="field number 0 inside a group"):
        decode(b"\x0b\x02\x00\x03\x04\x0c")


def test_merge_semantics() -> None:
    # A map value given twice merges (the later oneof member wins); a repeated key replaces
    # the earlier entry; `contents` given twice concatenates; an infer_response given twice
    # in a stream message merges.
    data = (
        b"\x22\x0b\x0a\x01k\x12\x02\x08\x01\x12\x02\x10\x05"
        + b"\x22\x07\x0a\x01j\x12\x02\x08\x01"
        + b"\x22\x05\x0a\x01j\x12\x00"
        + b"\x2a\x0c\x2a\x04\x12\x02\x01\x02\x2a\x04\x12\x02\x03\x04"
    )
    response = decode(data)
    assert response[3] == {"k": 5, "j": None}  # parameters
    assert response[4][0][4] == WireTensorContents(int_contents=(1, 2, 3, 4))  # contents
    _, stream = decode_stream(b"\x12\x03\x0a\x01a\x12\x03\x1a\x01b")
    assert stream is not None
    assert (stream[0], stream[2]) == ("a", "b")  # model_name, id
    if ORACLE:
        expected = expected_response(pb.ModelInferResponse.FromString(data))
        assert canon(response) == canon(expected)


# ---------------------------------------------------------------------------- totality


def _agree(data: bytes, parse: Any, decode: Any, expected: Any) -> None:
    """upb and wire.py accept the same inputs and, when they do, agree on the values."""
    try:
        reference = parse(data)
    except DecodeError:
        reference = None
    try:
        decoded = decode(data)
    except ProtocolError as exc:
        if reference is not None and "field number 0 inside a group" in str(exc):
            return  # the one deliberate difference from recent upb (see the test above)
        decoded = None
    assert (decoded is None) == (reference is None), (data.hex(), decoded, reference)
    if reference is not None:
        assert canon(decoded) == canon(expected(reference))


def _agree_response(data: bytes) -> None:
    _agree(data, pb.ModelInferResponse.FromString, decode, expected_response)


def _agree_stream(data: bytes) -> None:
    _agree(
        data,
        pb.ModelStreamInferResponse.FromString,
        decode_stream,
        expected_stream,
    )


@needs_protobuf
@settings(FAST, max_examples=800)
@given(st.binary(max_size=160))
def test_arbitrary_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    _agree_response(data)
    _agree_stream(data)


@needs_protobuf
@settings(FAST, max_examples=800)
@given(wire_tokens)
def test_structured_garbage_decodes_like_upb(data: bytes) -> None:
    _agree_response(data)
    _agree_stream(data)


@needs_protobuf
@settings(FAST, max_examples=800)
@given(mutated(response_messages()))
def test_mutated_responses_decode_like_upb(data: bytes) -> None:
    _agree_response(data)


@needs_protobuf
@settings(FAST, max_examples=400)
@given(mutated(stream_messages()))
def test_mutated_stream_responses_decode_like_upb(data: bytes) -> None:
    _agree_stream(data)
