"""Request, tensor and response parameters: the protocol's ``$parameters`` objects.

A parameter value is a ``bool``, an ``int`` (int64 or uint64 range), a finite ``float`` or a
``str``. Some names are reserved by Triton's extensions; the client sets those itself from
dedicated arguments (``sequence_id=...``, ``binary=...``), so passing one as a custom parameter
is refused unless the caller opts in with ``allow_reserved=True``.

Example::

    >>> from kserve_v2.parameters import validate_parameters
    >>> validate_parameters({"temperature": 0.5}, where="request")
    {'temperature': 0.5}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from kserve_v2.errors import InvalidInputError

__all__ = [
    "INPUT_RESERVED",
    "OUTPUT_RESERVED",
    "ParameterValue",
    "Parameters",
    "REQUEST_RESERVED",
    "validate_parameters",
]

ParameterValue = bool | int | float | str
Parameters = Mapping[str, ParameterValue]

INT64_MIN: Final = -(2**63)
UINT64_MAX: Final = 2**64 - 1

#: Request-level names reserved by Triton's extensions (parameters, sequence, schedule policy,
#: binary data); any name starting with ``triton_`` is reserved too.
REQUEST_RESERVED: Final = frozenset(
    {
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "priority",
        "timeout",
        "headers",
        "binary_data_output",
    }
)
#: Input-level names the binary-data and shared-memory extensions use.
INPUT_RESERVED: Final = frozenset(
    {"binary_data_size", "shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"}
)
#: Output-level names the binary-data, classification and shared-memory extensions use.
OUTPUT_RESERVED: Final = frozenset(
    {
        "binary_data",
        "classification",
        "shared_memory_region",
        "shared_memory_offset",
        "shared_memory_byte_size",
    }
)
_RESERVED_BY_LEVEL: Final = {
    "request": REQUEST_RESERVED,
    "input": INPUT_RESERVED,
    "output": OUTPUT_RESERVED,
}


def _check_value(key: str, value: object, where: str) -> ParameterValue:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= UINT64_MAX:
            raise InvalidInputError(
                f"{where} parameter {key!r}: integer {value} is outside the int64/uint64 range",
                value=value,
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(
                f"{where} parameter {key!r}: {value} cannot be sent (JSON has no NaN/infinity)",
                value=value,
            )
        return value
    raise InvalidInputError(
        f"{where} parameter {key!r}: value must be bool, int, float or str, "
        f"got {type(value).__name__}",
        value=value,
    )


def validate_parameters(
    parameters: Mapping[str, object] | None,
    *,
    where: str,
    allow_reserved: bool = False,
) -> dict[str, ParameterValue]:
    """Check custom parameters and return them as a new dict.

    ``where`` is ``"request"``, ``"input"`` or ``"output"``: it selects the reserved names and
    names the level in error messages.
    """
    if not parameters:
        return {}
    if not isinstance(parameters, Mapping):
        raise InvalidInputError(
            f"{where} parameters must be a mapping, got {type(parameters).__name__}",
            value=parameters,
        )
    reserved = _RESERVED_BY_LEVEL.get(where, frozenset())
    out: dict[str, ParameterValue] = {}
    for key, value in parameters.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                f"{where} parameter names must be non-empty strings, got {key!r}", value=key
            )
        if not allow_reserved and (key in reserved or key.startswith("triton_")):
            raise InvalidInputError(
                f"{where} parameter {key!r} is reserved by the protocol extensions; use the "
                "dedicated argument, or pass allow_reserved=True if you mean it",
                value=key,
            )
        out[key] = _check_value(key, value, where)
    return out
