"""Hypothesis strategies shared by the wire-model and REST codec tests.

Every strategy is a module constant with a comment saying what it draws. The helpers at the end
say what "the same tensor" means after a trip over the wire (bit-exact, NaN-aware, BYTES as
``bytes``), so that every round-trip test compares the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kserve_v2.datatypes import Datatype, numpy_dtype
from kserve_v2.messages import InferRequest, InferResult, OutputTensor
from kserve_v2.parameters import INPUT_RESERVED, OUTPUT_RESERVED, REQUEST_RESERVED
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement

INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1

# The numpy type each fixed-size datatype is generated as (BF16 data is float32 on the client).
_GENERATED_TYPE: dict[Datatype, str] = {
    Datatype.BOOL: "?",
    Datatype.UINT8: "u1",
    Datatype.UINT16: "u2",
    Datatype.UINT32: "u4",
    Datatype.UINT64: "u8",
    Datatype.INT8: "i1",
    Datatype.INT16: "i2",
    Datatype.INT32: "i4",
    Datatype.INT64: "i8",
    Datatype.FP16: "f2",
    Datatype.FP32: "f4",
    Datatype.FP64: "f8",
    Datatype.BF16: "f4",
}

# ---------------------------------------------------------------------------------------------
# datatypes and shapes

# Every wire datatype, BF16 included.
DATATYPES = st.sampled_from(list(Datatype))
# Datatypes with a fixed element size (all but BYTES).
FIXED_SIZE_DATATYPES = st.sampled_from([d for d in Datatype if d.itemsize is not None])
# Datatypes that have a JSON form: all of them (FP16 and BF16 as JSON numbers).
JSON_DATATYPES = DATATYPES

# Shapes of up to 3 dimensions and 4 elements a side: scalars `()`, zero-size shapes like `(2, 0)`.
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
# Byte orders of generated numeric arrays (the wire is little-endian whatever the input).
BYTE_ORDERS = st.sampled_from("<>")
# Memory layouts of generated arrays: C order, Fortran order, or a non-contiguous strided view.
LAYOUTS = st.sampled_from(["C", "F", "strided"])


def relayout(array: npt.NDArray[Any], layout: str) -> npt.NDArray[Any]:
    """The same values in another memory layout."""
    if layout == "F" and array.ndim:  # (asfortranarray makes a scalar one-dimensional)
        return np.asfortranarray(array)
    if layout == "strided" and array.ndim:
        # Every element twice along the last axis, then every other one: equal values, stride 2.
        return np.repeat(array, 2, axis=-1)[..., ::2]
    return array


# ---------------------------------------------------------------------------------------------
# elements and arrays

# BYTES elements: arbitrary bytes, plus embedded/trailing NULs and bytes that are not UTF-8.
BYTES_ELEMENTS = st.one_of(
    st.binary(max_size=8),
    st.sampled_from([b"", b"\x00", b"a\x00", b"\x00b\x00\x00", b"\xff\xfe", b"\xc3\x28", b"\x80"]),
)
# BYTES elements that JSON can carry: any text (UTF-8 on the wire), NULs included.
TEXT_ELEMENTS = st.one_of(st.text(max_size=8), st.sampled_from(["", "\x00", "a\x00", "é", "日本"]))
# bfloat16 bit patterns: arbitrary, plus infinities, NaNs, signed zero and the smallest subnormal.
BF16_BITS = st.one_of(
    st.integers(0, 0xFFFF), st.sampled_from([0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x8000, 0x0001])
)


def _object_array(shape: tuple[int, ...], elements: list[Any]) -> npt.NDArray[Any]:
    out = np.empty(len(elements), dtype=object)
    out[:] = elements
    return out.reshape(shape)


def _object_arrays(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[npt.NDArray[Any]]:
    return SHAPES.flatmap(
        lambda shape: st.lists(
            elements, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))
        ).map(lambda items: _object_array(shape, items))
    )


def _float_elements(dtype: np.dtype[Any], finite: bool) -> st.SearchStrategy[float]:
    width = dtype.itemsize * 8
    return st.floats(width=width, allow_nan=not finite, allow_infinity=not finite)  # type: ignore[arg-type]


def _numeric_arrays(datatype: Datatype, finite: bool) -> st.SearchStrategy[npt.NDArray[Any]]:
    base = np.dtype(_GENERATED_TYPE[datatype])
    if datatype is Datatype.BF16:
        # Values bfloat16 can hold exactly, so a round trip must give them back bit for bit.
        bits = BF16_BITS.filter(lambda b: b & 0x7F80 != 0x7F80) if finite else BF16_BITS
        arrays = hnp.arrays(np.dtype(np.uint16), SHAPES, elements=bits).map(
            lambda bits: np.asarray(bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
        )
    else:
        elements = _float_elements(base, finite) if base.kind == "f" else None
        arrays = hnp.arrays(base, SHAPES, elements=elements)
    return st.builds(
        lambda array, order, layout: relayout(
            array.astype(array.dtype.newbyteorder(order)), layout
        ),
        arrays,
        BYTE_ORDERS,
        LAYOUTS,
    )


# BYTES arrays as users give them: object arrays of bytes or of str, and numpy U and S arrays.
_BYTES_ARRAYS = st.one_of(
    _object_arrays(BYTES_ELEMENTS),
    _object_arrays(TEXT_ELEMENTS),
    hnp.arrays(
        st.sampled_from(["<U4", ">U4"]),
        SHAPES,
        # numpy drops trailing NULs of U elements; text() draws no lone surrogates.
        elements=st.text(max_size=4).filter(lambda text: not text.endswith("\x00")),
    ),
    hnp.arrays(hnp.byte_string_dtypes(max_len=4), SHAPES),
).flatmap(lambda array: LAYOUTS.map(lambda layout: relayout(array, layout)))
# BYTES arrays whose every element is text (they have a JSON form).
_TEXT_ARRAYS = st.one_of(
    _object_arrays(TEXT_ELEMENTS), _object_arrays(TEXT_ELEMENTS.map(str.encode))
).flatmap(lambda array: LAYOUTS.map(lambda layout: relayout(array, layout)))

# Arrays of every datatype: all values (NaN, infinities, subnormals, -0.0), both byte orders,
# C/Fortran/strided layouts; BYTES with NULs and non-UTF-8 elements.
ARRAYS: dict[Datatype, st.SearchStrategy[npt.NDArray[Any]]] = {
    **{d: _numeric_arrays(d, finite=False) for d in Datatype if d is not Datatype.BYTES},
    Datatype.BYTES: _BYTES_ARRAYS,
}
# Arrays that JSON can carry: finite numbers and text.
JSON_SAFE_ARRAYS: dict[Datatype, st.SearchStrategy[npt.NDArray[Any]]] = {
    **{d: _numeric_arrays(d, finite=True) for d in Datatype if d is not Datatype.BYTES},
    Datatype.BYTES: _TEXT_ARRAYS,
}
# (datatype, array) pairs of every datatype.
TENSORS = DATATYPES.flatmap(lambda d: st.tuples(st.just(d), ARRAYS[d]))
# (datatype, array) pairs that have a JSON form.
JSON_SAFE_TENSORS = JSON_DATATYPES.flatmap(lambda d: st.tuples(st.just(d), JSON_SAFE_ARRAYS[d]))

# ---------------------------------------------------------------------------------------------
# parameters


def _custom_names(reserved: frozenset[str]) -> st.SearchStrategy[str]:
    return st.text(min_size=1, max_size=10).filter(
        lambda name: name not in reserved and not name.startswith("triton_")
    )


# Values a parameter may hold: booleans, int64/uint64-range integers, finite floats, text.
PARAMETER_VALUES = st.one_of(
    st.booleans(),
    st.integers(INT64_MIN, UINT64_MAX),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
# Custom request parameters (no name the extensions reserve).
REQUEST_PARAMETERS = st.dictionaries(_custom_names(REQUEST_RESERVED), PARAMETER_VALUES, max_size=3)
# Custom input parameters.
INPUT_PARAMETERS = st.dictionaries(_custom_names(INPUT_RESERVED), PARAMETER_VALUES, max_size=3)
# Custom output parameters.
OUTPUT_PARAMETERS = st.dictionaries(_custom_names(OUTPUT_RESERVED), PARAMETER_VALUES, max_size=3)
# Parameters of a response: any names, e.g. Triton's `triton_final_response`.
RESPONSE_PARAMETERS = st.dictionaries(
    st.text(min_size=1, max_size=10), PARAMETER_VALUES, max_size=3
)

# ---------------------------------------------------------------------------------------------
# value objects

# Tensor and model names: any non-empty text (spaces, slashes, non-ASCII).
NAMES = st.text(min_size=1, max_size=8)
# Where a tensor lives in a registered shared-memory region.
SHARED_MEMORY_PLACEMENTS = st.builds(
    SharedMemoryPlacement,
    region=NAMES,
    byte_size=st.integers(0, 2**40),
    offset=st.integers(0, 2**40),
)


def _infer_inputs(
    tensors: st.SearchStrategy[tuple[Datatype, npt.NDArray[Any]]],
    binary: st.SearchStrategy[bool | None],
) -> st.SearchStrategy[InferInput]:
    return st.builds(
        lambda name, tensor, binary, parameters: InferInput(
            name, tensor[1], datatype=tensor[0], binary=binary, parameters=parameters
        ),
        NAMES,
        tensors,
        binary,
        INPUT_PARAMETERS,
    )


# Inputs of any datatype and data that travel binary (binary=True, or left to the default).
BINARY_INPUTS = _infer_inputs(TENSORS, st.sampled_from([None, True]))
# Inputs with a JSON form that travel as JSON (binary=False, or left to the default).
JSON_INPUTS = _infer_inputs(JSON_SAFE_TENSORS, st.sampled_from([None, False]))
# Inputs that say how they travel: any data with binary=True, JSON-safe data with binary=False.
SELF_ROUTED_INPUTS = st.one_of(
    _infer_inputs(TENSORS, st.just(True)), _infer_inputs(JSON_SAFE_TENSORS, st.just(False))
)
# Inputs placed in shared memory: no data in the body, datatype and shape explicit.
SHARED_MEMORY_INPUTS = st.builds(
    lambda name, datatype, shape, placement, parameters: InferInput(
        name, None, datatype=datatype, shape=shape, shared_memory=placement, parameters=parameters
    ),
    NAMES,
    DATATYPES,
    SHAPES,
    SHARED_MEMORY_PLACEMENTS,
    INPUT_PARAMETERS,
)
# Outputs a request asks for: binary or JSON or default, classification, shared memory.
REQUESTED_OUTPUTS = st.one_of(
    st.builds(
        RequestedOutput,
        NAMES,
        binary=st.sampled_from([None, True, False]),
        class_count=st.integers(0, 5),
        parameters=OUTPUT_PARAMETERS,
    ),
    st.builds(
        RequestedOutput,
        NAMES,
        class_count=st.integers(0, 5),
        parameters=OUTPUT_PARAMETERS,
        shared_memory=SHARED_MEMORY_PLACEMENTS,
    ),
)


def _infer_requests(inputs: st.SearchStrategy[InferInput]) -> st.SearchStrategy[InferRequest]:
    return st.builds(
        InferRequest,
        model_name=NAMES,
        inputs=st.lists(inputs, max_size=3, unique_by=lambda t: t.name).map(tuple),
        outputs=st.lists(REQUESTED_OUTPUTS, max_size=3, unique_by=lambda o: o.name).map(tuple),
        id=st.text(max_size=8),
        parameters=REQUEST_PARAMETERS,
    )


# Requests whose inputs all travel binary (or live in shared memory).
BINARY_INFER_REQUESTS = _infer_requests(st.one_of(BINARY_INPUTS, SHARED_MEMORY_INPUTS))
# Requests that encode as pure JSON when binary_inputs=False.
JSON_INFER_REQUESTS = _infer_requests(st.one_of(JSON_INPUTS, SHARED_MEMORY_INPUTS))
# Requests mixing JSON and binary inputs (and shared memory) in one body.
MIXED_INFER_REQUESTS = _infer_requests(
    st.one_of(SELF_ROUTED_INPUTS, BINARY_INPUTS, SHARED_MEMORY_INPUTS)
)


def _output_tensors(
    tensors: st.SearchStrategy[tuple[Datatype, npt.NDArray[Any]]],
) -> st.SearchStrategy[OutputTensor]:
    with_data = st.builds(
        lambda name, tensor, parameters: OutputTensor(
            name, tensor[0].value, tuple(tensor[1].shape), tensor[1], parameters
        ),
        NAMES,
        tensors,
        OUTPUT_PARAMETERS,
    )
    in_shared_memory = st.builds(
        lambda name, datatype, shape, placement: OutputTensor(
            name, datatype.value, shape, None, placement.as_parameters()
        ),
        NAMES,
        DATATYPES,
        SHAPES,
        SHARED_MEMORY_PLACEMENTS,
    )
    return st.one_of(with_data, in_shared_memory)


def _infer_results(outputs: st.SearchStrategy[OutputTensor]) -> st.SearchStrategy[InferResult]:
    return st.builds(
        InferResult,
        model_name=NAMES,
        model_version=st.text(max_size=4),
        id=st.text(max_size=8),
        parameters=RESPONSE_PARAMETERS,
        outputs=st.lists(outputs, max_size=3, unique_by=lambda t: t.name).map(tuple),
    )


# Results with outputs of every datatype and value (the binary form carries them all).
INFER_RESULTS = _infer_results(_output_tensors(TENSORS))
# Results whose outputs all have a JSON form.
JSON_INFER_RESULTS = _infer_results(_output_tensors(JSON_SAFE_TENSORS))

# ---------------------------------------------------------------------------------------------
# comparing tensors after a trip over the wire


def bytes_elements(array: npt.NDArray[Any]) -> list[bytes]:
    """A BYTES array's elements as the wire carries them (``str`` as UTF-8), in C order."""
    return [e.encode("utf-8") if isinstance(e, str) else bytes(e) for e in array.flat]


def assert_tensor_equal(
    actual: npt.NDArray[Any], expected: npt.NDArray[Any], datatype: Datatype
) -> None:
    """``actual`` (decoded) holds exactly ``expected``'s values, in the datatype's result dtype.

    Numbers compare bit for bit (so -0.0 differs from 0.0), except that any NaN equals any NaN
    (BF16 rounding quiets NaNs). BYTES compare as lists of ``bytes``.
    """
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if datatype is Datatype.BYTES:
        assert actual.dtype == np.dtype(object)
        assert all(type(e) is bytes for e in actual.flat)
        assert list(actual.flat) == bytes_elements(expected)
        return
    result_dtype = numpy_dtype(datatype)
    assert actual.dtype == result_dtype, (actual.dtype, result_dtype)
    want = np.ascontiguousarray(expected.astype(result_dtype))
    got = np.ascontiguousarray(actual)
    if result_dtype.kind != "f":
        assert np.array_equal(got, want), (got, want)
        return
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (got, want)
    bits = np.dtype(f"<u{result_dtype.itemsize}")
    assert np.array_equal(got.view(bits)[~nan], want.view(bits)[~nan]), (got, want)
