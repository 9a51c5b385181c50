"""Custom parameters: value types and ranges, reserved names per level."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from kserve_v2.errors import InvalidInputError
from kserve_v2.parameters import (
    INPUT_RESERVED,
    OUTPUT_RESERVED,
    REQUEST_RESERVED,
    validate_parameters,
)
from tests.strategies import INPUT_PARAMETERS, OUTPUT_PARAMETERS, REQUEST_PARAMETERS

LEVELS = {"request": REQUEST_RESERVED, "input": INPUT_RESERVED, "output": OUTPUT_RESERVED}


def test_the_reserved_names_are_those_of_the_extensions() -> None:
    assert set(REQUEST_RESERVED) == {
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "priority",
        "timeout",
        "headers",
        "binary_data_output",
    }
    assert set(INPUT_RESERVED) == {
        "binary_data_size",
        "shared_memory_region",
        "shared_memory_offset",
        "shared_memory_byte_size",
    }
    assert set(OUTPUT_RESERVED) == {
        "binary_data",
        "classification",
        "shared_memory_region",
        "shared_memory_offset",
        "shared_memory_byte_size",
    }


@pytest.mark.parametrize(
    "value",
    [True, False, 0, -(2**63), 2**64 - 1, 0.5, -0.0, 1e308, "", "text", "é\x00"],
)
def test_allowed_values_pass_unchanged(value: Any) -> None:
    checked = validate_parameters({"p": value}, where="request")
    assert checked == {"p": value}
    assert type(checked["p"]) is type(value)


@pytest.mark.parametrize(
    "value",
    [-(2**63) - 1, 2**64, 10**30],
    ids=["below-int64", "above-uint64", "huge"],
)
def test_integers_outside_int64_and_uint64_are_refused(value: int) -> None:
    with pytest.raises(InvalidInputError, match="range"):
        validate_parameters({"p": value}, where="request")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused(value: float) -> None:
    with pytest.raises(InvalidInputError, match="NaN"):
        validate_parameters({"p": value}, where="input")


@pytest.mark.parametrize(
    "value",
    [None, [1], {"a": 1}, b"bytes", (1,), np.int64(1), np.bool_(True), 1j],
    ids=["None", "list", "dict", "bytes", "tuple", "np-int64", "np-bool", "complex"],
)
def test_other_value_types_are_refused(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="must be bool, int, float or str"):
        validate_parameters({"p": value}, where="output")


@pytest.mark.parametrize("key", ["", 1, None, b"p"])
def test_names_must_be_non_empty_strings(key: Any) -> None:
    with pytest.raises(InvalidInputError, match="names"):
        validate_parameters({key: 1}, where="request")


@pytest.mark.parametrize(
    ("where", "name"), [(where, name) for where, names in LEVELS.items() for name in sorted(names)]
)
def test_reserved_names_are_refused_at_their_level_unless_allowed(where: str, name: str) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        validate_parameters({name: 1}, where=where)
    assert validate_parameters({name: 1}, where=where, allow_reserved=True) == {name: 1}


@pytest.mark.parametrize("where", sorted(LEVELS))
def test_triton_prefix_is_reserved_at_every_level(where: str) -> None:
    with pytest.raises(InvalidInputError, match="reserved"):
        validate_parameters({"triton_enable_empty_final_response": True}, where=where)


def test_a_name_reserved_at_one_level_is_free_at_another() -> None:
    assert validate_parameters({"binary_data": True}, where="request") == {"binary_data": True}
    assert validate_parameters({"sequence_id": 1}, where="input") == {"sequence_id": 1}
    assert validate_parameters({"binary_data_size": 1}, where="output") == {"binary_data_size": 1}


def test_error_names_the_level_and_the_parameter() -> None:
    with pytest.raises(InvalidInputError, match=r"input parameter 'p'") as info:
        validate_parameters({"p": None}, where="input")
    assert info.value.value is None


@pytest.mark.parametrize("empty", [None, {}])
def test_no_parameters_give_an_empty_dict(empty: Any) -> None:
    assert validate_parameters(empty, where="request") == {}


def test_parameters_must_be_a_mapping() -> None:
    with pytest.raises(InvalidInputError, match="mapping"):
        validate_parameters([("p", 1)], where="request")  # type: ignore[arg-type]


def test_result_is_a_new_plain_dict() -> None:
    given_parameters = OrderedDict(b=1, a=2)
    checked = validate_parameters(given_parameters, where="request")
    assert type(checked) is dict
    assert list(checked) == ["b", "a"]
    given_parameters["c"] = 3
    assert "c" not in checked


@settings(max_examples=100, deadline=None)
@given(REQUEST_PARAMETERS, INPUT_PARAMETERS, OUTPUT_PARAMETERS)
def test_any_custom_parameters_validate_to_themselves(
    request_parameters: dict[str, Any],
    input_parameters: dict[str, Any],
    output_parameters: dict[str, Any],
) -> None:
    assert validate_parameters(request_parameters, where="request") == request_parameters
    assert validate_parameters(input_parameters, where="input") == input_parameters
    assert validate_parameters(output_parameters, where="output") == output_parameters
