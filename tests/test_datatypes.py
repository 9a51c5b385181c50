"""Wire datatypes: binary form (golden table, both ways), BF16 rounding, BYTES, JSON form."""

from __future__ import annotations

import json
import math
import struct
import sys
import types
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kserve_v2 import datatypes
from kserve_v2.datatypes import (
    Datatype,
    bf16_bits_to_float32,
    datatype_of,
    deserialize,
    deserialize_bytes_elements,
    float32_to_bf16_bits,
    from_json_data,
    numpy_dtype,
    serialize,
    serialize_bytes_elements,
    serialized_size,
    to_json_data,
    to_str_array,
)
from kserve_v2.errors import InvalidInputError, ProtocolError
from tests.strategies import (
    ARRAYS,
    BYTES_ELEMENTS,
    JSON_SAFE_TENSORS,
    TENSORS,
    assert_tensor_equal,
    bytes_elements,
)


def _objects(*elements: Any) -> np.ndarray:
    out = np.empty(len(elements), dtype=object)
    out[:] = list(elements)
    return out


# (datatype, array, exact wire bytes): little-endian, row-major, no padding.
WIRE_GOLDEN = [
    (Datatype.BOOL, np.array([True, False, True]), b"\x01\x00\x01"),
    (Datatype.UINT8, np.array([0, 1, 255], np.uint8), b"\x00\x01\xff"),
    (Datatype.UINT16, np.array([1, 0xABCD], np.uint16), b"\x01\x00\xcd\xab"),
    (Datatype.UINT32, np.array([1, 0xDEADBEEF], np.uint32), b"\x01\0\0\0\xef\xbe\xad\xde"),
    (Datatype.UINT64, np.array([2**64 - 1, 2], np.uint64), b"\xff" * 8 + b"\x02" + b"\0" * 7),
    (Datatype.INT8, np.array([-1, 127, -128], np.int8), b"\xff\x7f\x80"),
    (Datatype.INT16, np.array([[1, -2], [3, 4]], np.int16), b"\x01\x00\xfe\xff\x03\x00\x04\x00"),
    (Datatype.INT32, np.array([-2, 0x01020304], np.int32), b"\xfe\xff\xff\xff\x04\x03\x02\x01"),
    (Datatype.INT64, np.array([-(2**63), 1], np.int64), b"\0" * 7 + b"\x80" + b"\x01" + b"\0" * 7),
    (Datatype.FP16, np.array([1.0, -2.0, 65504.0], np.float16), b"\x00\x3c\x00\xc0\xff\x7b"),
    (Datatype.FP32, np.array([1.0, -0.0, 0.5], np.float32), b"\0\0\x80\x3f\0\0\0\x80\0\0\0\x3f"),
    (Datatype.FP64, np.array([1.0, -2.5]), b"\0" * 6 + b"\xf0\x3f" + b"\0" * 6 + b"\x04\xc0"),
    (
        Datatype.BYTES,
        _objects(b"ab", b"", b"\x00c\x00"),
        b"\x02\0\0\0ab" + b"\0\0\0\0" + b"\x03\0\0\0\x00c\x00",
    ),
    (Datatype.BF16, np.array([1.0, -2.0, 3.140625], np.float32), b"\x80\x3f\x00\xc0\x49\x40"),
]
GOLDEN_IDS = [d.value for d, _, _ in WIRE_GOLDEN]


def test_golden_table_covers_the_13_protocol_datatypes_and_bf16() -> None:
    assert {d for d, _, _ in WIRE_GOLDEN} == set(Datatype)
    assert len(Datatype) == 14


@pytest.mark.parametrize(("datatype", "array", "wire"), WIRE_GOLDEN, ids=GOLDEN_IDS)
def test_serialize_gives_golden_bytes(datatype: Datatype, array: np.ndarray, wire: bytes) -> None:
    assert bytes(serialize(array, datatype)) == wire
    assert serialized_size(array, datatype) == len(wire)


@pytest.mark.parametrize(("datatype", "array", "wire"), WIRE_GOLDEN, ids=GOLDEN_IDS)
def test_deserialize_of_golden_bytes_gives_the_array(
    datatype: Datatype, array: np.ndarray, wire: bytes
) -> None:
    decoded = deserialize(wire, datatype, array.shape)
    assert_tensor_equal(decoded, array, datatype)


@pytest.mark.parametrize(
    ("datatype", "array", "wire"),
    [row for row in WIRE_GOLDEN if row[0] is not Datatype.BYTES],
    ids=[i for i in GOLDEN_IDS if i != "BYTES"],
)
def test_big_endian_input_is_little_endian_on_the_wire(
    datatype: Datatype, array: np.ndarray, wire: bytes
) -> None:
    swapped = array.astype(array.dtype.newbyteorder(">"))
    assert bytes(serialize(swapped, datatype)) == wire


@pytest.mark.parametrize(("datatype", "array", "wire"), WIRE_GOLDEN, ids=GOLDEN_IDS)
def test_datatype_of_golden_arrays(datatype: Datatype, array: np.ndarray, wire: bytes) -> None:
    expected = Datatype.FP32 if datatype is Datatype.BF16 else datatype  # float32 says FP32
    assert datatype_of(array) is expected


def test_fortran_strided_and_transposed_arrays_serialize_in_c_order() -> None:
    values = np.arange(6, dtype=np.int16).reshape(2, 3)
    fortran = np.asfortranarray(values)
    strided = np.repeat(values, 2, axis=1)[:, ::2]
    assert not fortran.flags.c_contiguous
    assert not strided.flags.c_contiguous
    assert bytes(serialize(fortran, Datatype.INT16)) == struct.pack("<6h", 0, 1, 2, 3, 4, 5)
    assert bytes(serialize(strided, Datatype.INT16)) == struct.pack("<6h", 0, 1, 2, 3, 4, 5)
    transposed = np.arange(6, dtype=">i2").reshape(3, 2).T  # [[0, 2, 4], [1, 3, 5]]
    assert bytes(serialize(transposed, Datatype.INT16)) == struct.pack("<6h", 0, 2, 4, 1, 3, 5)
    bf16 = np.asfortranarray(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    assert bytes(serialize(bf16, Datatype.BF16)) == b"\x80\x3f\x00\x40\x40\x40\x80\x40"


def test_contiguous_little_endian_array_serializes_without_a_copy() -> None:
    array = np.arange(8, dtype="<i4")
    wire = serialize(array, Datatype.INT32)
    assert np.shares_memory(np.frombuffer(wire, np.uint8), array)


def test_deserialized_numeric_array_is_a_view_on_the_buffer() -> None:
    buffer = bytearray(b"\x01\x00\x02\x00")
    decoded = deserialize(buffer, Datatype.UINT16, (2,))
    buffer[0] = 7
    assert decoded.tolist() == [7, 2]


def test_scalar_shape_is_one_element() -> None:
    assert bytes(serialize(np.array(5, np.int32), Datatype.INT32)) == b"\x05\0\0\0"
    decoded = deserialize(b"\x05\0\0\0", Datatype.INT32, ())
    assert decoded.shape == ()
    assert decoded[()] == 5


@settings(max_examples=300, deadline=None)
@given(TENSORS)
def test_binary_round_trip_of_every_datatype_and_shape(tensor: tuple[Datatype, np.ndarray]) -> None:
    datatype, array = tensor
    wire = bytes(serialize(array, datatype))
    assert serialized_size(array, datatype) == len(wire)
    assert_tensor_equal(deserialize(wire, datatype, array.shape), array, datatype)


@pytest.mark.parametrize(
    ("datatype", "wire", "shape"),
    [
        (Datatype.FP32, b"\0\0\0", (1,)),
        (Datatype.FP32, b"\0" * 8, (1,)),
        (Datatype.INT16, b"", (1,)),
        (Datatype.UINT8, b"", ()),  # a scalar is one element, not zero
        (Datatype.UINT8, b"\0", (0,)),
        (Datatype.BF16, b"\0", (1,)),
        (Datatype.BYTES, b"\x01\0\0\0a", (2,)),
        (Datatype.BYTES, b"\x01\0\0\0a\x01\0\0\0b", (1,)),
        (Datatype.FP32, b"", (0,) * 70),  # numpy cannot hold 70 dimensions
        (Datatype.UINT8, b"", (0, 2**70)),  # a dimension numpy cannot index
        (Datatype.BYTES, b"", (2**62, 2**62)),  # must not try to allocate 2**124 elements
        (Datatype.BYTES, b"", (0, 2**70)),
    ],
)
def test_deserialize_with_wrong_size_or_impossible_shape_raises_protocol_error(
    datatype: Datatype, wire: bytes, shape: tuple[int, ...]
) -> None:
    with pytest.raises(ProtocolError):
        deserialize(wire, datatype, shape)


# ---------------------------------------------------------------------------------------------
# BF16


def reference_bf16_bits(value: float) -> int:
    """bfloat16 bits of a finite or infinite ``value``, rounded to nearest with ties to even.

    Computed independently of the library: the value is divided by the spacing of bfloat16
    numbers near it and rounded with ``round()`` on an exact :class:`Fraction` (which rounds
    half to even); the result is packed with :mod:`struct`.
    """
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    if math.isinf(magnitude):
        return sign | 0x7F80
    if magnitude == 0:
        return sign
    _, exponent = math.frexp(magnitude)  # magnitude lies in [2**(exponent-1), 2**exponent)
    # 8 significant bits; below the smallest normal (2**-126) the spacing stays 2**-133.
    spacing = Fraction(2) ** (max(exponent, -125) - 8)
    rounded = round(Fraction(magnitude) / spacing) * spacing
    if rounded >= 2**128:
        return sign | 0x7F80
    (bits,) = struct.unpack("<I", struct.pack("<f", float(rounded)))
    assert bits & 0xFFFF == 0, "the reference produced a value bfloat16 cannot hold"
    return sign | (bits >> 16)


def _float32_of_bits(bits: int) -> float:
    return float(np.array([bits], np.uint32).view(np.float32)[0])


def _assert_is_bf16_nan_with_sign(bits: int, negative: bool) -> None:
    assert bits & 0x7F80 == 0x7F80, f"{bits:#06x} is not a NaN"
    assert bits & 0x007F, f"{bits:#06x} is not a NaN"
    assert bool(bits & 0x8000) is negative


# float32 bit pattern -> bfloat16 bit pattern.
BF16_ROUNDING_GOLDEN = [
    (0x3F800000, 0x3F80),  # 1.0 is exact
    (0x3F808000, 0x3F80),  # exactly half-way between 0x3F80 and 0x3F81: to the even 0x3F80
    (0x3F818000, 0x3F82),  # exactly half-way between 0x3F81 and 0x3F82: to the even 0x3F82
    (0x3F808001, 0x3F81),  # just above half-way rounds up
    (0x3F807FFF, 0x3F80),  # just below half-way rounds down
    (0xBF808001, 0xBF81),  # negative values round by magnitude
    (0x7F7F7FFF, 0x7F7F),  # just below the overflow threshold: the largest bfloat16
    (0x7F7F8000, 0x7F80),  # half-way to 2**128: to even, which is infinity
    (0x7F7FFFFF, 0x7F80),  # float32's largest value overflows bfloat16
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x80000000, 0x8000),  # -0.0 keeps its sign
    (0x00000001, 0x0000),  # the smallest float32 subnormal rounds to zero
    (0x00008000, 0x0000),  # half-way between 0 and the smallest bfloat16 subnormal: to even
    (0x00018000, 0x0002),  # half-way between subnormals 1 and 2: to even
    (0x007FFFFF, 0x0080),  # the largest float32 subnormal rounds up to the smallest normal
]


@pytest.mark.parametrize(("f32_bits", "bf16_bits"), BF16_ROUNDING_GOLDEN)
def test_bf16_rounding_golden_table(f32_bits: int, bf16_bits: int) -> None:
    value = _float32_of_bits(f32_bits)
    assert reference_bf16_bits(value) == bf16_bits  # the reference agrees with the table
    assert int(float32_to_bf16_bits(np.array([f32_bits], np.uint32).view(np.float32))[0]) == (
        bf16_bits
    )


@pytest.mark.parametrize(
    "f32_bits",
    [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7F80FFFF, 0xFFFF0000],
    ids=hex,
)
def test_bf16_nan_stays_nan_with_its_sign(f32_bits: int) -> None:
    value = np.array([f32_bits], np.uint32).view(np.float32)
    bits = int(float32_to_bf16_bits(value)[0])
    _assert_is_bf16_nan_with_sign(bits, negative=bool(f32_bits & 0x80000000))
    assert np.isnan(deserialize(np.array([bits], "<u2").tobytes(), Datatype.BF16, (1,))[0])


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bf16_rounding_of_float32_matches_the_exact_reference(f32_bits: int) -> None:
    value = _float32_of_bits(f32_bits)
    bits = int(float32_to_bf16_bits(np.array([value], np.float32))[0])
    if math.isnan(value):
        _assert_is_bf16_nan_with_sign(bits, negative=bool(f32_bits & 0x80000000))
    else:
        assert bits == reference_bf16_bits(value), f"{f32_bits:#010x} -> {bits:#06x}"


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False))
@example(1 + 2**-8 + 2**-30)  # float32 would round this to the tie 1 + 2**-8, then to even
@example(-(1 + 2**-8 + 2**-40))
@example(1e300)
@example(2.0**-134 + 2.0**-160)
def test_bf16_rounding_of_float64_rounds_once(value: float) -> None:
    with np.errstate(over="ignore"):
        bits = int(float32_to_bf16_bits(np.array([value], np.float64))[0])
    assert bits == reference_bf16_bits(value), f"{value!r} -> {bits:#06x}"


def test_bf16_widening_is_exact_for_all_65536_patterns() -> None:
    patterns = np.arange(2**16, dtype=np.uint16)
    widened = bf16_bits_to_float32(patterns)
    assert widened.dtype == np.float32
    expected = np.array([p << 16 for p in range(2**16)], np.uint32)
    assert np.array_equal(widened.view(np.uint32), expected)
    not_nan = ~np.isnan(widened)
    assert np.array_equal(float32_to_bf16_bits(widened)[not_nan], patterns[not_nan])


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5)))
def test_bf16_serialize_writes_the_rounded_bits_little_endian(array: np.ndarray) -> None:
    wire = bytes(serialize(array, Datatype.BF16))
    got = struct.unpack(f"<{array.size}H", wire)
    for value, bits in zip(array.ravel().tolist(), got, strict=True):
        if math.isnan(value):
            _assert_is_bf16_nan_with_sign(bits, negative=math.copysign(1.0, value) < 0)
        else:
            assert bits == reference_bf16_bits(value)


@pytest.fixture
def without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import ml_dtypes`` fail and forget the cached lookup."""
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    monkeypatch.setattr(datatypes, "_BF16_DTYPE", datatypes._UNSET)


@pytest.mark.usefixtures("without_ml_dtypes")
def test_bf16_decodes_to_float32_without_ml_dtypes() -> None:
    assert numpy_dtype(Datatype.BF16) == np.float32
    decoded = deserialize(b"\x80\x3f\x00\xc0\xc0\x7f", Datatype.BF16, (3,))
    assert decoded.dtype == np.float32
    assert decoded[:2].tolist() == [1.0, -2.0]
    assert np.isnan(decoded[2])


def test_bf16_decodes_to_ml_dtypes_bfloat16_when_importable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in module: float16 plays bfloat16 (both are 2-byte float types numpy knows).
    monkeypatch.setitem(sys.modules, "ml_dtypes", types.SimpleNamespace(bfloat16=np.float16))
    monkeypatch.setattr(datatypes, "_BF16_DTYPE", datatypes._UNSET)
    buffer = bytearray(b"\x80\x3f\x00\xc0")
    decoded = deserialize(buffer, Datatype.BF16, (2,))
    assert decoded.dtype == np.float16 == numpy_dtype(Datatype.BF16)
    assert decoded.view("<u2").tolist() == [0x3F80, 0xC000]  # the bits, untouched
    assert np.shares_memory(decoded, np.frombuffer(buffer, np.uint8))


# ---------------------------------------------------------------------------------------------
# BYTES


@settings(max_examples=200, deadline=None)
@given(st.lists(BYTES_ELEMENTS, max_size=6))
def test_bytes_elements_round_trip_with_nuls_and_non_utf8(elements: list[bytes]) -> None:
    wire = serialize_bytes_elements(elements)
    assert wire == b"".join(struct.pack("<I", len(e)) + e for e in elements)
    assert deserialize_bytes_elements(wire) == elements
    assert deserialize_bytes_elements(bytearray(wire), len(elements)) == elements


def test_bytes_trailing_nuls_survive_a_round_trip_through_an_object_array() -> None:
    array = _objects(b"a\x00", b"\x00\x00", b"")
    decoded = deserialize(serialize(array, Datatype.BYTES), Datatype.BYTES, (3,))
    assert decoded.tolist() == [b"a\x00", b"\x00\x00", b""]


def test_str_elements_are_sent_as_utf8() -> None:
    wire = serialize(_objects("é", "日本", ""), Datatype.BYTES)
    assert wire == b"\x02\0\0\0\xc3\xa9" + b"\x06\0\0\0\xe6\x97\xa5\xe6\x9c\xac" + b"\0\0\0\0"
    assert serialize(np.array(["é"]), Datatype.BYTES) == b"\x02\0\0\0\xc3\xa9"


def test_bytes_decode_to_object_array_of_bytes_and_to_str_on_request() -> None:
    decoded = deserialize(b"\x02\0\0\0\xc3\xa9", Datatype.BYTES, ())
    assert decoded.dtype == object
    assert decoded.shape == ()
    assert decoded[()] == b"\xc3\xa9"
    assert to_str_array(decoded)[()] == "é"


@pytest.mark.parametrize(
    "element", [1, 1.5, None, ["a"], "\ud800"], ids=["int", "float", "None", "list", "surrogate"]
)
def test_bytes_element_that_is_not_bytes_or_encodable_str_is_invalid_input(element: Any) -> None:
    with pytest.raises(InvalidInputError):
        serialize_bytes_elements([element])


@pytest.mark.parametrize(
    ("wire", "count"),
    [
        (b"\x01\0\0", None),  # a length prefix cut short
        (b"\x05\0\0\0abc", None),  # an element longer than what is left
        (b"\x01\0\0\0ab", None),  # a trailing byte after the last element
        (b"\x01\0\0\0a", 2),  # fewer elements than the shape needs
        (b"\x01\0\0\0a\0\0\0\0", 1),  # more elements than the shape needs
        (b"\xff\xff\xff\xff", None),  # 4 GiB claimed, nothing there
    ],
)
def test_malformed_bytes_tensor_raises_protocol_error(wire: bytes, count: int | None) -> None:
    with pytest.raises(ProtocolError):
        deserialize_bytes_elements(wire, count)


# ---------------------------------------------------------------------------------------------
# numpy dtypes


@pytest.mark.parametrize(
    ("dtype", "datatype"),
    [
        ("?", Datatype.BOOL),
        ("u1", Datatype.UINT8),
        (">u2", Datatype.UINT16),
        ("<u4", Datatype.UINT32),
        ("u8", Datatype.UINT64),
        ("i1", Datatype.INT8),
        ("i2", Datatype.INT16),
        (">i4", Datatype.INT32),
        ("i8", Datatype.INT64),
        ("f2", Datatype.FP16),
        (">f4", Datatype.FP32),
        ("f8", Datatype.FP64),
        ("O", Datatype.BYTES),
        ("S3", Datatype.BYTES),
        ("U3", Datatype.BYTES),
    ],
)
def test_datatype_of_numpy_dtypes(dtype: str, datatype: Datatype) -> None:
    assert datatype_of(np.dtype(dtype)) is datatype
    assert datatype_of(np.zeros(2, dtype)) is datatype


@pytest.mark.parametrize(
    "dtype",
    ["c8", "c16", "M8[s]", "m8[ms]", "V4", [("a", "i4"), ("b", "f4")], "g"],
    ids=["complex64", "complex128", "datetime", "timedelta", "void", "structured", "longdouble"],
)
def test_unsupported_numpy_dtypes_are_invalid_input(dtype: Any) -> None:
    with pytest.raises(InvalidInputError):
        datatype_of(np.zeros(2, dtype))


@pytest.mark.parametrize("datatype", list(Datatype))
def test_datatype_parse_accepts_wire_names_and_members(datatype: Datatype) -> None:
    assert Datatype.parse(datatype.value) is datatype
    assert Datatype.parse(datatype) is datatype
    assert str(datatype) == datatype.value


@pytest.mark.parametrize("name", ["fp32", "FLOAT", "", "INT128", None, 5, ["FP32"]])
def test_datatype_parse_refuses_other_names(name: Any) -> None:
    with pytest.raises(InvalidInputError):
        Datatype.parse(name)


def test_itemsize_of_each_datatype() -> None:
    assert {d.value: d.itemsize for d in Datatype} == {
        "BOOL": 1, "UINT8": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8,
        "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8,
        "FP16": 2, "FP32": 4, "FP64": 8, "BYTES": None, "BF16": 2,
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------
# JSON form


def test_json_data_keeps_int64_and_uint64_extremes_exact() -> None:
    assert to_json_data(np.array([-(2**63), 2**63 - 1], np.int64), Datatype.INT64) == [
        -(2**63),
        2**63 - 1,
    ]
    assert to_json_data(np.array([2**64 - 1], np.uint64), Datatype.UINT64) == [2**64 - 1]
    body = json.dumps({"data": [2**64 - 1, -(2**63)]})
    assert body == '{"data": [18446744073709551615, -9223372036854775808]}'
    decoded = from_json_data(json.loads(body)["data"][:1], Datatype.UINT64, (1,))
    assert decoded.tolist() == [2**64 - 1]
    assert decoded.dtype == np.uint64


def test_json_data_is_flat_python_values() -> None:
    assert to_json_data(np.array([[True], [False]]), Datatype.BOOL) == [True, False]
    assert to_json_data(np.array(7, np.int8), Datatype.INT8) == [7]
    assert to_json_data(np.array([0.5, -0.0], ">f4"), Datatype.FP32) == [0.5, -0.0]
    assert to_json_data(_objects(b"a\x00", "é"), Datatype.BYTES) == ["a\x00", "é"]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("dtype", "datatype"),
    [
        (np.float16, Datatype.FP16),
        (np.float32, Datatype.FP32),
        (np.float64, Datatype.FP64),
        (np.float32, Datatype.BF16),
    ],
)
def test_nan_and_infinity_are_refused_for_json(
    value: float, dtype: type, datatype: Datatype
) -> None:
    with pytest.raises(InvalidInputError, match="NaN and infinity"):
        to_json_data(np.array([1.0, value], dtype), datatype)


# FP16 and BF16 as JSON numbers (the protocol lets JSON carry them; MLServer takes them): the
# exact values the binary form carries, BF16 rounded to nearest even from wider floats.
HALF_PRECISION_JSON = [
    (
        np.array([1.5, -0.1, 65504.0, 6e-08], np.float16),
        Datatype.FP16,
        [1.5, -0.0999755859375, 65504.0, 5.960464477539063e-08],
    ),
    (
        np.array([1.0, 0.1, -3.0e38, 1e-40], np.float32),
        Datatype.BF16,
        [1.0, 0.10009765625, -3.00405527047391e38, 9.183549615799121e-41],
    ),
    (
        np.array([1.0, 0.1, -3.0e38], np.float64),
        Datatype.BF16,
        [1.0, 0.10009765625, -3.00405527047391e38],
    ),
]


@pytest.mark.parametrize(("array", "datatype", "values"), HALF_PRECISION_JSON)
def test_golden_half_precision_json_numbers(
    array: np.ndarray, datatype: Datatype, values: list[float]
) -> None:
    assert to_json_data(array, datatype) == values
    binary = deserialize(serialize(array, datatype), datatype, array.shape)
    assert values == binary.astype(np.float64).tolist()  # JSON and binary carry the same values
    back = from_json_data(json.loads(json.dumps(values)), datatype, array.shape)
    assert_tensor_equal(back, binary, datatype)


@pytest.mark.parametrize(
    ("array", "datatype"),
    [
        (np.array([0.1, 1e5], np.float64), Datatype.FP16),
        (np.array([3.4e38], np.float32), Datatype.BF16),
    ],
)
def test_values_beyond_half_precision_are_refused_for_json(
    array: np.ndarray, datatype: Datatype
) -> None:
    with pytest.raises(InvalidInputError, match=f"too large for {datatype.value}"):
        to_json_data(array, datatype)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([Datatype.FP16, Datatype.BF16]),
    hnp.arrays(
        np.float32,
        hnp.array_shapes(max_dims=2, max_side=4),
        elements=st.floats(-6e4, 6e4, width=32),
    ),
)
def test_half_precision_json_numbers_are_the_binary_values(
    datatype: Datatype, array: np.ndarray
) -> None:
    source = array.astype(np.float16) if datatype is Datatype.FP16 else array
    binary = deserialize(serialize(source, datatype), datatype, source.shape)
    assert to_json_data(source, datatype) == binary.astype(np.float64).reshape(-1).tolist()


def test_non_utf8_bytes_are_refused_for_json() -> None:
    with pytest.raises(InvalidInputError, match="UTF-8"):
        to_json_data(_objects(b"\xff"), Datatype.BYTES)


@settings(max_examples=300, deadline=None)
@given(JSON_SAFE_TENSORS, st.booleans())
def test_json_round_trip_flat_and_nested(tensor: tuple[Datatype, np.ndarray], nested: bool) -> None:
    datatype, array = tensor
    flat = json.loads(json.dumps(to_json_data(array, datatype)))
    data = np.array(flat, dtype=object).reshape(array.shape).tolist() if nested else flat
    assert_tensor_equal(from_json_data(data, datatype, array.shape), array, datatype)


def test_json_data_for_a_scalar_shape() -> None:
    assert from_json_data([5], Datatype.INT32, ()).shape == ()
    assert from_json_data(5, Datatype.INT32, ())[()] == 5


def test_json_numbers_of_the_right_kind_are_accepted() -> None:
    assert from_json_data([1, 2.5], Datatype.FP32, (2,)).tolist() == [1.0, 2.5]
    assert from_json_data([0, 1, True], Datatype.BOOL, (3,)).tolist() == [False, True, True]
    assert from_json_data([[1, 2], [3, 4]], Datatype.INT8, (2, 2)).tolist() == [[1, 2], [3, 4]]
    assert from_json_data([[], []], Datatype.INT8, (2, 0)).shape == (2, 0)
    assert from_json_data([65504.0], Datatype.FP16, (1,)).tolist() == [65504.0]


MALFORMED_JSON_DATA = [
    pytest.param([1.5], Datatype.INT32, (1,), id="float-for-int"),
    pytest.param([1.0], Datatype.INT32, (1,), id="integral-float-for-int"),
    pytest.param([True], Datatype.INT32, (1,), id="bool-for-int"),
    pytest.param(["1"], Datatype.INT32, (1,), id="str-for-int"),
    pytest.param([None], Datatype.INT64, (1,), id="null-for-int"),
    pytest.param([128], Datatype.INT8, (1,), id="int8-overflow"),
    pytest.param([-1], Datatype.UINT8, (1,), id="uint8-negative"),
    pytest.param([2**64], Datatype.UINT64, (1,), id="uint64-overflow"),
    pytest.param([-(2**63) - 1], Datatype.INT64, (1,), id="int64-underflow"),
    pytest.param([True], Datatype.FP32, (1,), id="bool-for-float"),
    pytest.param(["1.0"], Datatype.FP64, (1,), id="str-for-float"),
    pytest.param([10**400], Datatype.FP64, (1,), id="int-beyond-float64"),
    pytest.param([1e300], Datatype.FP32, (1,), id="float32-overflow"),
    pytest.param([70000.0], Datatype.FP16, (1,), id="float16-overflow"),
    pytest.param([2], Datatype.BOOL, (1,), id="two-for-bool"),
    pytest.param(["true"], Datatype.BOOL, (1,), id="str-for-bool"),
    pytest.param([1], Datatype.BYTES, (1,), id="int-for-bytes"),
    pytest.param(["\ud800"], Datatype.BYTES, (1,), id="lone-surrogate-for-bytes"),
    pytest.param([{"a": 1}], Datatype.INT32, (1,), id="object-element"),
    pytest.param([1, 2], Datatype.INT32, (3,), id="too-few"),
    pytest.param([1, 2, 3, 4], Datatype.INT32, (3,), id="too-many"),
    pytest.param([[1, 2], [3]], Datatype.INT32, (3,), id="ragged"),
    pytest.param([[1, 2], [3, [4]]], Datatype.INT32, (2, 2), id="ragged-deeper"),
    pytest.param([1, [2, 3]], Datatype.INT32, (3,), id="mixed-nesting"),
    pytest.param([[1, 2], [3, 4]], Datatype.INT32, (4,), id="nesting-contradicts-shape"),
    pytest.param([], Datatype.INT32, (0,) * 70, id="shape-numpy-cannot-hold"),
]


@pytest.mark.parametrize(("data", "datatype", "shape"), MALFORMED_JSON_DATA)
def test_malformed_json_data_raises_protocol_error(
    data: Any, datatype: Datatype, shape: tuple[int, ...]
) -> None:
    with pytest.raises(ProtocolError):
        from_json_data(data, datatype, shape, name="t")


def test_json_data_errors_can_be_raised_as_invalid_input() -> None:
    with pytest.raises(InvalidInputError):
        from_json_data([1.5], Datatype.INT32, (1,), error=InvalidInputError)


@settings(max_examples=150, deadline=None)
@given(ARRAYS[Datatype.BYTES])
def test_bytes_arrays_of_every_form_serialize_their_elements(array: np.ndarray) -> None:
    wire = bytes(serialize(array, Datatype.BYTES))
    assert deserialize_bytes_elements(wire, array.size) == bytes_elements(array)


def test_assert_tensor_equal_tells_apart_what_the_wire_tells_apart() -> None:
    # The comparison the round-trip tests rely on must itself be able to fail.
    with pytest.raises(AssertionError):
        assert_tensor_equal(
            np.array([0.0], np.float32), np.array([-0.0], np.float32), Datatype.FP32
        )
    with pytest.raises(AssertionError):
        assert_tensor_equal(np.array([1], np.int64), np.array([1], np.int32), Datatype.INT32)
    bytes_array = np.array([b"a"], object)
    with pytest.raises(AssertionError):
        assert_tensor_equal(bytes_array, np.array([b"a\x00"], object), Datatype.BYTES)
    assert_tensor_equal(
        np.array([np.nan], np.float32), np.array([-np.nan], np.float32), Datatype.FP32
    )


# -- the public helpers (kserve_v2.datatype_of, numpy_dtype, BYTES serialise/deserialise) -------


def test_public_helpers_are_exported_and_round_trip() -> None:
    import kserve_v2

    for datatype in Datatype:
        if datatype is Datatype.BF16:
            continue  # float32 without ml_dtypes, which maps back to FP32
        assert kserve_v2.datatype_of(kserve_v2.numpy_dtype(datatype.value)) is datatype
        assert kserve_v2.numpy_dtype(datatype) == kserve_v2.numpy_dtype(datatype.value)
    with pytest.raises(kserve_v2.InvalidInputError, match="unknown datatype"):
        kserve_v2.numpy_dtype("FLOAT32")
    elements = [b"", b"a", "\u00e9", b"\x00" * 5]
    wire = kserve_v2.serialize_bytes_elements(elements)
    assert kserve_v2.deserialize_bytes_elements(wire, 4) == [b"", b"a", b"\xc3\xa9", b"\x00" * 5]
    with pytest.raises(kserve_v2.ProtocolError):
        kserve_v2.deserialize_bytes_elements(wire[:-1])
