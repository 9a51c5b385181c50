"""InferInput, RequestedOutput and SharedMemoryPlacement: validation when built, data, repr."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from kserve_v2.datatypes import Datatype
from kserve_v2.errors import InvalidInputError
from kserve_v2.parameters import INPUT_RESERVED, OUTPUT_RESERVED
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement
from tests.strategies import TENSORS

# ---------------------------------------------------------------------------------------------
# InferInput: names and shapes


@pytest.mark.parametrize("name", ["", None, 5, b"x"])
def test_input_name_must_be_a_non_empty_string(name: Any) -> None:
    with pytest.raises(InvalidInputError, match="name"):
        InferInput(name, np.zeros(1, np.float32))


@pytest.mark.parametrize(
    "shape",
    [(-1,), (2, -3), (1.0,), (True,), ("2",), "2", b"\x02", 2, {2: 1}, (np.int32(-1),)],
    ids=["neg", "neg-inner", "float", "bool", "str-dim", "str", "bytes", "int", "dict", "np-neg"],
)
def test_shape_with_negative_or_non_integer_dims_is_refused(shape: Any) -> None:
    placement = SharedMemoryPlacement("region", 16)
    with pytest.raises(InvalidInputError):
        InferInput("x", None, datatype="FP32", shape=shape, shared_memory=placement)


def test_shape_dims_may_be_numpy_integers_and_zero() -> None:
    tensor = InferInput("x", np.zeros((2, 0), np.int8), shape=[np.int64(0), 2])
    assert tensor.shape == (0, 2)
    assert type(tensor.shape[0]) is int


def test_shape_with_the_same_element_count_reshapes_the_data() -> None:
    tensor = InferInput("x", np.arange(6, dtype=np.int32), shape=(2, 3))
    assert tensor.shape == (2, 3)
    assert tensor.data is not None
    assert tensor.data.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("shape", [(5,), (2, 2), (), (0,)])
def test_shape_that_does_not_fit_the_data_is_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(InvalidInputError, match="element"):
        InferInput("x", np.arange(6, dtype=np.int32), shape=shape)


# ---------------------------------------------------------------------------------------------
# InferInput: data and datatypes


@pytest.mark.parametrize(
    ("dtype", "datatype"),
    [
        ("?", "BOOL"),
        ("u1", "UINT8"),
        ("u8", "UINT64"),
        ("i2", "INT16"),
        (">i8", "INT64"),
        ("f2", "FP16"),
        ("f4", "FP32"),
        ("f8", "FP64"),
        ("O", "BYTES"),
        ("U2", "BYTES"),
        ("S2", "BYTES"),
    ],
)
def test_datatype_is_inferred_from_the_array(dtype: str, datatype: str) -> None:
    array = np.zeros((2, 1), dtype) if dtype != "O" else np.array([[b"a"], [b"b"]], object)
    tensor = InferInput("x", array)
    assert tensor.datatype is Datatype(datatype)
    assert tensor.shape == (2, 1)
    assert tensor.data is array


@pytest.mark.parametrize(
    ("dtype", "datatype"),
    [
        ("i4", "FP32"),
        ("f8", "FP32"),
        ("f4", "FP64"),
        ("i8", "INT32"),
        ("u4", "INT32"),
        ("?", "UINT8"),
        ("f4", "BYTES"),
        ("U1", "INT8"),
        ("i4", "BF16"),
    ],
)
def test_array_whose_dtype_does_not_match_the_datatype_is_refused(
    dtype: str, datatype: str
) -> None:
    with pytest.raises(InvalidInputError, match="convert it first"):
        InferInput("x", np.zeros(2, dtype), datatype=datatype)


@pytest.mark.parametrize(
    ("data", "datatype", "what"),
    [
        (np.zeros(2, "f4"), "INT32", "does not match datatype"),
        (["abc"], "INT32", "not a valid INT32 element"),
        ([1.5], "INT64", "not a valid INT64 element"),
        ([[1, 2], [3]], None, "cannot make a tensor"),
        ([object()], None, "cannot infer a datatype"),
    ],
)
def test_bad_data_errors_name_the_input(data: Any, datatype: str | None, what: str) -> None:
    with pytest.raises(InvalidInputError, match=what) as info:
        InferInput("INPUT7", data, datatype=datatype)
    assert "'INPUT7'" in info.value.message


def test_data_the_wire_form_refuses_names_the_input() -> None:
    # An object array is taken as it is; its elements are checked when it is serialized.
    tensor = InferInput("INPUT7", np.array([["a", 1]], dtype=object))
    with pytest.raises(InvalidInputError, match="BYTES elements must be bytes or str") as info:
        tensor.wire_bytes()
    assert info.value.message.startswith("input 'INPUT7': ")
    assert info.value.value == 1


@pytest.mark.parametrize("dtype", ["f4", ">f4", "f8"])
def test_bf16_takes_float32_or_float64_arrays(dtype: str) -> None:
    array = np.array([1.0, 1 + 2**-8 + 2**-20], dtype)
    tensor = InferInput("x", array, datatype="BF16")
    assert tensor.datatype is Datatype.BF16
    assert bytes(tensor.wire_bytes()) == b"\x80\x3f\x81\x3f"


@pytest.mark.parametrize("dtype", ["f2", ">f2"])
def test_bf16_takes_float16_arrays(dtype: str) -> None:
    # 1 + 2**-8 + 2**-10 is past the tie between bfloat16's 1 and 1 + 2**-7: it rounds up.
    array = np.array([1.0, 1 + 2**-8 + 2**-10, -65504.0], dtype)
    tensor = InferInput("x", array, datatype="BF16")
    assert tensor.datatype is Datatype.BF16
    assert bytes(tensor.wire_bytes()) == b"\x80\x3f\x81\x3f\x80\xc7"


def test_bf16_from_float64_is_rounded_once() -> None:
    # Through float32 this would become the tie 1 + 2**-8 and round to even (0x3F80).
    tensor = InferInput("x", np.array([1 + 2**-8 + 2**-30]), datatype="BF16")
    assert bytes(tensor.wire_bytes()) == b"\x81\x3f"


@pytest.mark.parametrize(
    ("data", "datatype", "shape", "values"),
    [
        ([1, 2, 3], Datatype.INT64, (3,), [1, 2, 3]),
        ([[1.5], [2.0]], Datatype.FP64, (2, 1), [[1.5], [2.0]]),
        ([True, False], Datatype.BOOL, (2,), [True, False]),
        (["a", "é"], Datatype.BYTES, (2,), [b"a", "é".encode()]),
        ([b"a\x00", b""], Datatype.BYTES, (2,), [b"a\x00", b""]),
        ("text", Datatype.BYTES, (), b"text"),
        (b"\x00raw\x00", Datatype.BYTES, (), b"\x00raw\x00"),
        (np.float32(1.5), Datatype.FP32, (), 1.5),
        (np.int8(-3), Datatype.INT8, (), -3),
        ([], Datatype.FP64, (0,), []),
    ],
)
def test_datatype_is_inferred_from_lists_strings_bytes_and_scalars(
    data: Any, datatype: Datatype, shape: tuple[int, ...], values: Any
) -> None:
    tensor = InferInput("x", data)
    assert tensor.datatype is datatype
    assert tensor.shape == shape
    assert tensor.data is not None
    assert tensor.data.tolist() == values


@pytest.mark.parametrize(
    ("data", "datatype", "values", "dtype"),
    [
        ([1, 2], "FP32", [1.0, 2.0], np.float32),
        ([[1, 2], [3, 4]], "INT8", [[1, 2], [3, 4]], np.int8),
        ([0, 1], "BOOL", [False, True], np.bool_),
        ([2**64 - 1], "UINT64", [2**64 - 1], np.uint64),
        (["x"], "BYTES", [b"x"], object),
        (5, "INT32", 5, np.int32),
        ([1.0], "FP16", [1.0], np.float16),
    ],
)
def test_lists_with_an_explicit_datatype_are_converted_exactly(
    data: Any, datatype: str, values: Any, dtype: Any
) -> None:
    tensor = InferInput("x", data, datatype=datatype)
    assert tensor.data is not None
    assert tensor.data.dtype == np.dtype(dtype)
    assert tensor.data.tolist() == values


@pytest.mark.parametrize(
    ("data", "datatype"),
    [
        ([1.5], "INT32"),
        ([True], "INT32"),
        ([300], "UINT8"),
        ([-1], "UINT32"),
        ([1], "BYTES"),
        (["a"], "FP32"),
        ([2], "BOOL"),
        ([[1, 2], [3]], "INT32"),
        ([1e300], "FP32"),
        (["\ud800"], "BYTES"),
    ],
    ids=[
        "float-int",
        "bool-int",
        "uint8-range",
        "negative-uint",
        "int-bytes",
        "str-float",
        "two-bool",
        "ragged",
        "fp32-range",
        "surrogate",
    ],
)
def test_lists_that_do_not_fit_the_datatype_are_refused(data: Any, datatype: str) -> None:
    with pytest.raises(InvalidInputError):
        InferInput("x", data, datatype=datatype)


@pytest.mark.parametrize(
    "data",
    [[1, None], [[1, 2], [3]], [object()], [1, "a"], [{"a": 1}], ["\ud800"], [1 + 2j]],
    ids=["None", "ragged", "object", "int-and-str", "dict", "surrogate", "complex"],
)
def test_data_without_a_datatype_that_has_none_is_refused(data: Any) -> None:
    with pytest.raises(InvalidInputError):
        InferInput("x", data)


def test_unknown_datatype_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="unknown datatype"):
        InferInput("x", [1], datatype="FLOAT32")


def test_no_data_and_no_shared_memory_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="needs data"):
        InferInput("x", datatype="FP32", shape=(1,))


@pytest.mark.parametrize("binary", ["yes", 1, 0])
def test_binary_flag_must_be_a_bool_or_none(binary: Any) -> None:
    with pytest.raises(InvalidInputError, match="binary"):
        InferInput("x", [1], binary=binary)
    with pytest.raises(InvalidInputError, match="binary"):
        RequestedOutput("y", binary=binary)


# ---------------------------------------------------------------------------------------------
# wire bytes


def test_wire_bytes_of_a_contiguous_array_is_a_view_computed_once() -> None:
    array = np.arange(4, dtype="<f4")
    tensor = InferInput("x", array)
    wire = tensor.wire_bytes()
    assert tensor.wire_bytes() is wire
    assert np.shares_memory(np.frombuffer(wire, np.uint8), array)


def test_wire_bytes_of_big_endian_fortran_data_is_little_endian_c_order() -> None:
    array = np.asfortranarray(np.array([[1, 2], [3, 4]], ">i2"))
    assert bytes(InferInput("x", array).wire_bytes()) == b"\x01\0\x02\0\x03\0\x04\0"


@settings(max_examples=100, deadline=None)
@given(TENSORS)
def test_input_data_keeps_the_values_given(tensor: tuple[Datatype, np.ndarray]) -> None:
    datatype, array = tensor
    built = InferInput("x", array, datatype=datatype)
    assert built.datatype is datatype
    assert built.shape == array.shape
    assert built.data is array  # arrays are taken as they are: no cast, no copy


# ---------------------------------------------------------------------------------------------
# shared memory


def test_shared_memory_input_has_no_data_and_no_wire_bytes() -> None:
    placement = SharedMemoryPlacement("input_region", byte_size=64, offset=16)
    tensor = InferInput("x", None, datatype="FP32", shape=[4, 4], shared_memory=placement)
    assert tensor.data is None
    assert tensor.shape == (4, 4)
    assert tensor.shared_memory is placement
    with pytest.raises(InvalidInputError, match="shared memory"):
        tensor.wire_bytes()


def test_shared_memory_input_needs_an_explicit_datatype_and_shape() -> None:
    placement = SharedMemoryPlacement("r", 4)
    with pytest.raises(InvalidInputError, match="datatype and shape"):
        InferInput("x", None, shape=[1], shared_memory=placement)
    with pytest.raises(InvalidInputError, match="datatype and shape"):
        InferInput("x", None, datatype="FP32", shared_memory=placement)


def test_data_and_shared_memory_together_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="not both"):
        InferInput("x", [1.0], shared_memory=SharedMemoryPlacement("r", 8))


@pytest.mark.parametrize(
    ("region", "byte_size", "offset"),
    [("", 4, 0), (None, 4, 0), ("r", -1, 0), ("r", 4, -1), ("r", 4.0, 0), ("r", True, 0)],
    ids=["empty-region", "no-region", "neg-size", "neg-offset", "float-size", "bool-size"],
)
def test_shared_memory_placement_is_validated(region: Any, byte_size: Any, offset: Any) -> None:
    with pytest.raises(InvalidInputError):
        SharedMemoryPlacement(region, byte_size, offset)


def test_shared_memory_parameters_omit_a_zero_offset() -> None:
    assert SharedMemoryPlacement("r", 8).as_parameters() == {
        "shared_memory_region": "r",
        "shared_memory_byte_size": 8,
    }
    assert SharedMemoryPlacement("r", 8, 4).as_parameters() == {
        "shared_memory_region": "r",
        "shared_memory_byte_size": 8,
        "shared_memory_offset": 4,
    }


def test_shared_memory_placement_is_frozen() -> None:
    placement = SharedMemoryPlacement("r", 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        placement.offset = 4  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# parameters on tensors


@pytest.mark.parametrize("name", [*sorted(INPUT_RESERVED), "triton_anything"])
def test_reserved_input_parameters_are_refused_unless_allowed(name: str) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        InferInput("x", [1], parameters={name: 1})
    assert InferInput("x", [1], parameters={name: 1}, allow_reserved=True).parameters == {name: 1}


@pytest.mark.parametrize("name", [*sorted(OUTPUT_RESERVED), "triton_anything"])
def test_reserved_output_parameters_are_refused_unless_allowed(name: str) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        RequestedOutput("y", parameters={name: True})
    output = RequestedOutput("y", parameters={name: True}, allow_reserved=True)
    assert output.parameters == {name: True}


def test_tensor_parameters_are_copied() -> None:
    given_parameters = {"scale": 0.5}
    tensor = InferInput("x", [1], parameters=given_parameters)
    given_parameters["scale"] = 2.0
    assert tensor.parameters == {"scale": 0.5}


# ---------------------------------------------------------------------------------------------
# RequestedOutput


@pytest.mark.parametrize("class_count", [-1, 1.5, True, "3", None])
def test_class_count_must_be_a_non_negative_integer(class_count: Any) -> None:
    with pytest.raises(InvalidInputError, match="class_count"):
        RequestedOutput("y", class_count=class_count)


@pytest.mark.parametrize("name", ["", None, 3])
def test_output_name_must_be_a_non_empty_string(name: Any) -> None:
    with pytest.raises(InvalidInputError, match="name"):
        RequestedOutput(name)


# ---------------------------------------------------------------------------------------------
# equality


def test_inputs_compare_and_hash_by_identity() -> None:
    # Inputs hold the caller's array uncopied: equal data now may differ when sent.
    array = np.arange(3, dtype=np.int32)
    first, second = InferInput("x", array), InferInput("x", array)
    assert first == first
    assert first != second
    assert len({first, second, first}) == 2
    assert hash(first) == hash(first)


def test_requested_outputs_compare_by_identity() -> None:
    first = RequestedOutput("y")
    assert first == first
    assert first != RequestedOutput("y")


# ---------------------------------------------------------------------------------------------
# repr


def test_input_repr_names_name_datatype_and_shape() -> None:
    assert repr(InferInput("INPUT0", np.zeros((1, 16), np.int32))) == (
        "InferInput(name='INPUT0', datatype='INT32', shape=(1, 16))"
    )
    placement = SharedMemoryPlacement("r", 8)
    assert repr(InferInput("x", None, datatype="FP32", shape=[2], shared_memory=placement)) == (
        "InferInput(name='x', datatype='FP32', shape=(2,), "
        "shared_memory=SharedMemoryPlacement(region='r', byte_size=8, offset=0))"
    )


def test_input_repr_does_not_dump_the_data() -> None:
    assert len(repr(InferInput("x", np.zeros(100_000, np.float32)))) < 80


def test_output_repr_shows_only_what_was_set() -> None:
    assert repr(RequestedOutput("probs")) == "RequestedOutput(name='probs')"
    assert repr(RequestedOutput("probs", binary=False, class_count=3)) == (
        "RequestedOutput(name='probs', binary=False, class_count=3)"
    )
    assert repr(RequestedOutput("y", shared_memory=SharedMemoryPlacement("r", 4, 8))) == (
        "RequestedOutput(name='y', "
        "shared_memory=SharedMemoryPlacement(region='r', byte_size=4, offset=8))"
    )


# -- reuse: set_data and set_shared_memory ------------------------------------------------------


def test_set_data_replaces_data_datatype_and_shape() -> None:
    x = InferInput("x", np.zeros((1, 4), np.float32), binary=True, parameters={"p": 1})
    first_wire = bytes(x.wire_bytes())
    x.set_data(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert (x.datatype, x.shape) == (Datatype.INT32, (2, 3))
    assert bytes(x.wire_bytes()) == np.arange(6, dtype="<i4").tobytes() != first_wire
    assert (x.name, x.binary, x.parameters) == ("x", True, {"p": 1})  # kept
    x.set_data([1.5, 2.5], shape=(2, 1))
    assert (x.datatype, x.shape) == (Datatype.FP64, (2, 1))
    x.set_data(np.ones(4, np.float32), datatype="BF16", shape=[2, 2])
    assert (x.datatype, x.shape) == (Datatype.BF16, (2, 2))
    x.set_data(["a", "bc"])
    assert (x.datatype, x.shape) == (Datatype.BYTES, (2,))


def test_set_data_is_checked_like_the_constructor_and_leaves_the_input_alone() -> None:
    data = np.zeros((1, 4), np.float32)
    x = InferInput("x", data)
    for bad in (
        lambda: x.set_data(np.ones(3, np.float32), shape=(2, 2)),  # element count
        lambda: x.set_data(np.ones(2, np.int32), datatype="FP32"),  # no silent cast
        lambda: x.set_data([1, 2], datatype="NOPE"),
        lambda: x.set_data(None),
        lambda: x.set_shared_memory("r"),  # no byte_size
        lambda: x.set_shared_memory("r", -1),
        lambda: x.set_shared_memory(SharedMemoryPlacement("r", 8), 8),
    ):
        with pytest.raises(InvalidInputError):
            bad()
        assert (x.data is data, x.datatype, x.shape, x.shared_memory) == (
            True,
            Datatype.FP32,
            (1, 4),
            None,
        )


def test_set_shared_memory_and_back() -> None:
    x = InferInput("x", np.zeros((1, 4), np.float32))
    x.wire_bytes()
    x.set_shared_memory("io", 16, 4096)
    assert x.shared_memory == SharedMemoryPlacement("io", 16, 4096)
    assert (x.data, x.datatype, x.shape) == (None, Datatype.FP32, (1, 4))
    with pytest.raises(InvalidInputError, match="shared memory"):
        x.wire_bytes()
    x.set_shared_memory(SharedMemoryPlacement("io2", 8), datatype="INT32", shape=(2,))
    assert (x.shared_memory, x.datatype, x.shape) == (
        SharedMemoryPlacement("io2", 8),
        Datatype.INT32,
        (2,),
    )
    x.set_data(np.ones((3,), np.int8))
    assert (x.shared_memory, x.datatype, x.shape) == (None, Datatype.INT8, (3,))
    assert bytes(x.wire_bytes()) == b"\x01\x01\x01"


def test_a_reused_input_builds_fresh_requests() -> None:
    """The codecs read the input when a request is encoded: each encoding sees its data."""
    from kserve_v2.messages import InferRequest
    from kserve_v2.rest import codec

    x = InferInput("x", np.zeros(2, np.int32))
    request = InferRequest("m", (x,))
    before = codec.encode_infer_request(request, binary_inputs=False, binary_outputs=False)
    x.set_data(np.array([7, 8, 9], np.int32))
    after = codec.encode_infer_request(request, binary_inputs=False, binary_outputs=False)
    assert b'"shape":[2]' in b"".join(bytes(p) for p in before.parts)
    assert b'"data":[7,8,9]' in b"".join(bytes(p) for p in after.parts)
    x.set_shared_memory("r", 12)
    placed = codec.encode_infer_request(request, binary_inputs=False, binary_outputs=False)
    assert b'"shared_memory_region":"r"' in b"".join(bytes(p) for p in placed.parts)
