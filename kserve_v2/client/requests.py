"""Turning the arguments of ``infer`` into an :class:`~kserve_v2.messages.InferRequest`.

Shared by every protocol and by the sync and async clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kserve_v2.errors import InvalidInputError
from kserve_v2.messages import InferRequest, new_infer_request
from kserve_v2.parameters import UINT64_MAX, ParameterValue, validate_parameters
from kserve_v2.tensors import InferInput, RequestedOutput

__all__ = ["InputsArg", "OutputsArg", "build_infer_request"]

#: ``{"name": array_or_list, ...}`` or a sequence of :class:`InferInput`.
InputsArg = Mapping[str, Any] | Sequence[InferInput]
#: Output names and/or :class:`RequestedOutput` objects.
OutputsArg = Sequence[str | RequestedOutput]


def _inputs(inputs: InputsArg) -> tuple[InferInput, ...]:
    if type(inputs) is dict or isinstance(inputs, Mapping):  # dict: skip the ABC check
        return tuple(
            [
                value
                if isinstance(value, InferInput) and value.name == name
                else InferInput(name, value)
                for name, value in inputs.items()
            ]
        )
    candidate: object = inputs
    if isinstance(candidate, InferInput):
        return (candidate,)
    if not isinstance(candidate, Sequence) or isinstance(candidate, str | bytes):
        raise InvalidInputError(
            "inputs must be a mapping of name -> array or a sequence of InferInput",
            value=inputs,
        )
    out = []
    for item in inputs:
        if not isinstance(item, InferInput):
            raise InvalidInputError(
                f"inputs given as a sequence must all be InferInput, got {type(item).__name__}",
                value=item,
            )
        out.append(item)
    return tuple(out)


def _outputs(outputs: OutputsArg | None) -> tuple[RequestedOutput, ...]:
    if not outputs:
        return ()
    if isinstance(outputs, str | RequestedOutput):
        outputs = [outputs]
    out = []
    for item in outputs:
        if isinstance(item, str):
            out.append(RequestedOutput(item))
        elif isinstance(item, RequestedOutput):
            out.append(item)
        else:
            raise InvalidInputError(
                f"outputs must be names or RequestedOutput, got {type(item).__name__}", value=item
            )
    return tuple(out)


def _sequence_id(value: int | str) -> ParameterValue:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInputError(
            f"sequence_id must be an int or a str, got {type(value).__name__}", value=value
        )
    if isinstance(value, int) and not 0 <= value <= UINT64_MAX:
        raise InvalidInputError(f"sequence_id {value} is outside the uint64 range", value=value)
    return value


def build_infer_request(
    model: str,
    inputs: InputsArg,
    *,
    outputs: OutputsArg | None = None,
    version: str | int = "",
    request_id: str = "",
    parameters: Mapping[str, ParameterValue] | None = None,
    sequence_id: int | str | None = None,
    sequence_start: bool = False,
    sequence_end: bool = False,
    priority: int | None = None,
    timeout_us: int | None = None,
    allow_reserved: bool = False,
) -> InferRequest:
    """Validate ``infer``'s arguments and build the protocol-neutral request.

    ``sequence_*`` (sequence extension), ``priority`` and ``timeout_us`` (schedule-policy
    extension; the server-side queue timeout in **microseconds**) become the reserved request
    parameters Triton reads.
    """
    if not isinstance(model, str) or not model:
        raise InvalidInputError(
            f"model name must be a non-empty string, got {model!r}", value=model
        )
    params = validate_parameters(parameters, where="request", allow_reserved=allow_reserved)
    if sequence_id is not None:
        params["sequence_id"] = _sequence_id(sequence_id)
        params["sequence_start"] = bool(sequence_start)
        params["sequence_end"] = bool(sequence_end)
    elif sequence_start or sequence_end:
        raise InvalidInputError("sequence_start/sequence_end need a sequence_id")
    for key, value in (("priority", priority), ("timeout", timeout_us)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT64_MAX:
            raise InvalidInputError(f"{key} must be a non-negative integer, got {value!r}")
        params[key] = value
    if not isinstance(request_id, str):
        raise InvalidInputError(f"request_id must be a str, got {request_id!r}", value=request_id)
    return new_infer_request(
        model,
        _inputs(inputs),
        _outputs(outputs),
        str(version) if version not in (None, "") else "",
        request_id,
        params,
    )
