"""InferRequest, InferResult and metadata value objects."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from kserve_v2.errors import InvalidInputError
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    OutputTensor,
    ServerMetadata,
    TensorMetadata,
    new_infer_request,
    new_infer_result,
    new_output_tensor,
)
from kserve_v2.tensors import InferInput, SharedMemoryPlacement
from tests.strategies import INFER_RESULTS


def _bytes_array(*elements: bytes) -> np.ndarray:
    out = np.empty(len(elements), dtype=object)
    out[:] = list(elements)
    return out


PROBS = np.array([0.25, 0.75], np.float32)
TEXT = _bytes_array("héllo".encode(), b"a\x00")
RESULT = InferResult(
    model_name="m",
    model_version="2",
    outputs=(
        OutputTensor("probs", "FP32", (2,), PROBS),
        OutputTensor("text", "BYTES", (2,), TEXT),
        OutputTensor(
            "in_shm",
            "FP32",
            (4,),
            None,
            SharedMemoryPlacement("output_region", 16).as_parameters(),
        ),
    ),
)


def test_output_finds_the_tensor_by_name() -> None:
    assert RESULT.output("text").datatype == "BYTES"


def test_unknown_output_names_the_outputs_there_are() -> None:
    with pytest.raises(InvalidInputError, match="'probs', 'text', 'in_shm'") as info:
        RESULT.output("logits")
    assert info.value.value == "logits"
    with pytest.raises(InvalidInputError, match=r"\(outputs: none\)"):
        InferResult("m").as_numpy("logits")


def test_as_numpy_returns_the_output_array_itself() -> None:
    assert RESULT.as_numpy("probs") is PROBS


def test_as_numpy_of_a_shared_memory_output_says_where_to_read_it() -> None:
    with pytest.raises(InvalidInputError, match="output_region"):
        RESULT.as_numpy("in_shm")


def test_as_str_decodes_bytes_outputs_as_utf8() -> None:
    decoded = RESULT.as_str("text")
    assert decoded.dtype == object
    assert decoded.tolist() == ["héllo", "a\x00"]
    assert RESULT.as_numpy("text").tolist() == ["héllo".encode(), b"a\x00"]  # left as it was


def test_as_str_with_another_encoding() -> None:
    result = InferResult("m", outputs=(OutputTensor("t", "BYTES", (1,), _bytes_array(b"\xe9")),))
    assert result.as_str("t", encoding="latin-1").tolist() == ["é"]
    with pytest.raises(InvalidInputError, match=r"tensor 't' element \[0\]: b'\\xe9' is not utf-8"):
        result.as_str("t")


def test_as_str_names_the_output_and_element_that_is_not_text() -> None:
    array = np.array([b"ok", b"fine", b"x" * 40 + b"\xff", b"!"], dtype=object).reshape(2, 2)
    result = InferResult("m", outputs=(OutputTensor("OUT", "BYTES", (2, 2), array),))
    with pytest.raises(InvalidInputError) as info:
        result.as_str("OUT")
    message = str(info.value)
    assert "tensor 'OUT' element [1, 0]" in message
    assert "b'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'" in message  # a long element is cut short
    assert "invalid start byte at byte 40" in message
    assert info.value.value == b"x" * 40 + b"\xff"
    assert isinstance(info.value, ValueError)  # what UnicodeDecodeError was, too
    assert result.as_numpy("OUT")[1, 0] == b"x" * 40 + b"\xff"


def test_as_str_with_an_unknown_encoding() -> None:
    with pytest.raises(InvalidInputError, match="unknown text encoding 'bogus'") as info:
        RESULT.as_str("text", encoding="bogus")
    assert info.value.value == "bogus"


@pytest.mark.parametrize("name", ["logits", "in_shm"])
def test_as_str_errors_like_as_numpy(name: str) -> None:
    with pytest.raises(InvalidInputError):
        RESULT.as_str(name)


def test_as_dict_holds_the_outputs_with_data() -> None:
    assert RESULT.as_dict() == {"probs": PROBS, "text": TEXT}


@pytest.mark.parametrize(
    ("parameters", "final"),
    [
        ({"triton_final_response": True}, True),
        ({"triton_final_response": False}, False),
        ({}, None),
        ({"triton_final_response": 1}, None),
    ],
)
def test_final_flag_of_a_streamed_response(parameters: dict[str, Any], final: bool | None) -> None:
    assert InferResult("m", parameters=parameters).final is final


def test_output_repr_leaves_out_the_data() -> None:
    tensor = OutputTensor("y", "FP32", (100_000,), np.zeros(100_000, np.float32))
    assert repr(tensor) == "OutputTensor(name='y', datatype='FP32', shape=(100000,), parameters={})"


@pytest.mark.parametrize(
    "value",
    [
        InferRequest("m", (InferInput("x", [1]),)),
        OutputTensor("y", "FP32", (1,)),
        RESULT,
        TensorMetadata("x", "FP32", (-1, 3)),
        ServerMetadata("triton", "2.50.0"),
        ModelMetadata("m"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_messages_are_frozen(value: Any) -> None:
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, "other")


# Each fast constructor with the class it builds and one value per field, in field order.
FAST_CONSTRUCTORS = [
    (new_infer_request, InferRequest, ("m", (InferInput("x", [1]),), (), "2", "r", {"p": 1})),
    (new_output_tensor, OutputTensor, ("y", "FP32", (2,), PROBS, {"p": True})),
    (new_infer_result, InferResult, ("m", "2", "r", {"p": "v"}, RESULT.outputs)),
]


@pytest.mark.parametrize(
    ("build", "cls", "values"), FAST_CONSTRUCTORS, ids=lambda v: getattr(v, "__name__", "")
)
def test_fast_constructors_build_what_the_class_builds(
    build: Any, cls: type, values: tuple[Any, ...]
) -> None:
    # One value per field: a field added to the class fails here until its builder sets it.
    assert len(values) == len(dataclasses.fields(cls))
    built = build(*values)
    assert type(built) is cls
    assert built == cls(*values)
    for field, value in zip(dataclasses.fields(cls), values, strict=True):
        assert getattr(built, field.name) is value
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, dataclasses.fields(cls)[0].name, "other")


# ---------------------------------------------------------------------------------------------
# equality: outputs and results compare by value, arrays as numpy.array_equal does


def _fp32(data: Any, **changes: Any) -> OutputTensor:
    """An FP32 output of shape (2,) holding ``data``, with the fields in ``changes`` replaced."""
    return dataclasses.replace(OutputTensor("y", "FP32", (2,), data, {"p": 1}), **changes)


NAN = np.array([np.nan, 1.0], np.float32)

EQUAL_OUTPUTS = {
    "copy": (_fp32(PROBS), _fp32(PROBS.copy())),
    "same-array": (_fp32(PROBS), _fp32(PROBS)),
    "big-endian": (_fp32(PROBS), _fp32(PROBS.astype(">f4"))),
    "strided": (_fp32(PROBS), _fp32(np.array([0.25, 0, 0.75], np.float32)[::2])),
    "bytes-copy": (_fp32(TEXT, datatype="BYTES"), _fp32(TEXT.copy(), datatype="BYTES")),
    "shared-memory": (_fp32(None), _fp32(None)),
    "empty": (
        _fp32(np.zeros(0, np.float32), shape=(0,)),
        _fp32(np.zeros(0, np.float32), shape=(0,)),
    ),
    "scalar": (
        _fp32(np.float32(2).reshape(()), shape=()),
        _fp32(np.array(2, np.float32), shape=()),
    ),
    # NaN equals no NaN, but an array equals itself (as in a Python container).
    "nan-same-array": (_fp32(NAN), _fp32(NAN)),
}

UNEQUAL_OUTPUTS = {
    "data": (_fp32(PROBS), _fp32(np.array([0.25, 0.5], np.float32))),
    "dtype": (_fp32(np.array([1, 2], np.float32)), _fp32(np.array([1, 2], np.float64))),
    "data-shape": (_fp32(PROBS), _fp32(PROBS.reshape(1, 2))),
    "broadcastable": (_fp32(np.ones(2, np.float32)), _fp32(np.ones(1, np.float32))),
    "nan-copy": (_fp32(NAN), _fp32(NAN.copy())),
    "bytes-data": (
        _fp32(TEXT, datatype="BYTES"),
        _fp32(_bytes_array(b"other", b"a\x00"), datatype="BYTES"),
    ),
    "bytes-dtype": (
        _fp32(_bytes_array(b"a", b"b"), datatype="BYTES"),
        _fp32(np.array([b"a", b"b"]), datatype="BYTES"),
    ),
    "no-data": (_fp32(PROBS), _fp32(None)),
    "name": (_fp32(PROBS), _fp32(PROBS, name="z")),
    "datatype": (_fp32(PROBS), _fp32(PROBS, datatype="FP64")),
    "shape": (_fp32(PROBS), _fp32(PROBS, shape=(1, 2))),
    "parameters": (_fp32(PROBS), _fp32(PROBS, parameters={"p": 2})),
}


@pytest.mark.parametrize(("a", "b"), EQUAL_OUTPUTS.values(), ids=EQUAL_OUTPUTS.keys())
def test_outputs_with_equal_values_are_equal(a: OutputTensor, b: OutputTensor) -> None:
    assert a == b
    assert b == a
    assert (a != b) is False


@pytest.mark.parametrize(("a", "b"), UNEQUAL_OUTPUTS.values(), ids=UNEQUAL_OUTPUTS.keys())
def test_outputs_that_differ_anywhere_are_unequal(a: OutputTensor, b: OutputTensor) -> None:
    assert (a == b) is False
    assert (b == a) is False
    assert a != b


def test_outputs_equal_nothing_else() -> None:
    tensor = _fp32(PROBS)
    assert tensor == tensor
    assert tensor != ("y", "FP32", (2,), PROBS, {"p": 1})
    assert tensor != None  # noqa: E711 (the comparison is what is tested)


def test_results_compare_their_outputs_by_value() -> None:
    same = copy.deepcopy(RESULT)
    assert same.outputs[0].data is not PROBS
    assert same == RESULT
    other = dataclasses.replace(
        RESULT, outputs=(_fp32(np.array([0.25, 0.5], np.float32)), *RESULT.outputs[1:])
    )
    assert other != RESULT
    assert dataclasses.replace(RESULT, id="other") != RESULT


@pytest.mark.parametrize("value", [_fp32(PROBS), _fp32(None), RESULT, InferResult("m")])
def test_outputs_and_results_are_unhashable(value: Any) -> None:
    # Equal values must hash alike; arrays are mutable, so there is no hash at all.
    with pytest.raises(TypeError, match="unhashable"):
        hash(value)


def test_requests_compare_their_inputs_by_identity() -> None:
    inputs = (InferInput("x", [1]),)
    assert InferRequest("m", inputs) == InferRequest("m", inputs)
    assert InferRequest("m", inputs) != InferRequest("m", (InferInput("x", [1]),))


def _holds_nan(result: InferResult) -> bool:
    return any(
        t.data is not None and t.data.dtype.kind == "f" and bool(np.isnan(t.data).any())
        for t in result.outputs
    )


@settings(max_examples=100, deadline=None)
@given(INFER_RESULTS, INFER_RESULTS)
def test_comparing_results_gives_a_bool_and_a_copy_is_equal_unless_nan(
    result: InferResult, other: InferResult
) -> None:
    assert result == result
    assert (result == copy.deepcopy(result)) is not _holds_nan(result)
    assert (result == other) in (True, False)


def test_request_defaults() -> None:
    request = InferRequest("m", ())
    assert request.outputs == ()
    assert request.model_version == ""
    assert request.id == ""
    assert request.parameters == {}


SERVER = ServerMetadata(
    "triton",
    "2.50.0",
    ("binary_tensor_data", "model_repository(unload_dependents)", "statistics"),
)


@pytest.mark.parametrize(
    ("extension", "supported"),
    [
        ("binary_tensor_data", True),
        ("statistics", True),
        ("model_repository", True),  # a bare name matches its qualified form
        ("model_repository(unload_dependents)", True),  # the qualified form matches exactly
        ("model_repository(other)", False),
        ("binary", False),  # no prefix matching
        ("binary_tensor_data_v2", False),
        ("shared_memory", False),
        ("", False),
    ],
)
def test_server_supports_what_it_advertises(extension: str, supported: bool) -> None:
    assert SERVER.supports(extension) is supported


def test_server_without_extensions_supports_nothing() -> None:
    assert not ServerMetadata("s", "1").supports("binary_tensor_data")


def test_model_metadata_repr_is_readable() -> None:
    metadata = ModelMetadata("m", "python", ("1",), inputs=(TensorMetadata("x", "FP32", (-1, 3)),))
    assert repr(metadata) == (
        "ModelMetadata(name='m', platform='python', versions=('1',), "
        "inputs=(TensorMetadata(name='x', datatype='FP32', shape=(-1, 3)),), outputs=())"
    )
