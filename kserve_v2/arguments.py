"""Turning the arguments of ``infer`` into an :class:`~kserve_v2.messages.InferRequest`.

Shared by every protocol and by the sync and async clients.
"""

from __future__ import annotations

import json
from collections.abc import (
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any

from kserve_v2.errors import InvalidInputError
from kserve_v2.messages import (
    InferRequest,
)

if TYPE_CHECKING:
    pass


from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


from kserve_v2.messages import new_infer_request
from kserve_v2.parameters import UINT64_MAX, ParameterValue, validate_parameters
from kserve_v2.tensors import InferInput, RequestedOutput

__all__ = [
    "Headers",
    "InputsArg",
    "LogSettingValue",
    "OutputsArg",
    "TraceSettingValue",
    "build_infer_request",
    "check_max_response_size",
    "log_settings_update",
    "normalize_load_request",
    "trace_settings_update",
]

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


def check_max_response_size(value: int | None) -> int | None:
    """Validate a ``max_response_size`` argument: a positive number of bytes, or None."""
    if value is not None and (type(value) is not int or value < 1):
        raise InvalidInputError(
            "max_response_size must be a positive number of bytes or None", value=value
        )
    return value


#: A trace setting as sent: Triton wants strings (or a list of them for ``trace_level``);
#: ``None`` clears a model's setting so the global one applies again.
TraceSettingValue = str | list[str] | None


#: A log setting: ``bool`` (log_info, ...), ``int`` (log_verbose_level) or ``str``.
LogSettingValue = bool | int | str


# Trace settings whose value is a list of strings (the others are single strings).
_LIST_TRACE_SETTINGS = frozenset({"trace_level"})


def normalize_load_request(
    config: str | Mapping[str, Any] | None, files: Mapping[str, Any] | None
) -> tuple[str | None, dict[str, bytes]]:
    """Check ``load_model``'s ``config`` and ``files``; return the config as a JSON string and
    the files keyed ``"file:<version>/<name>"``.

    ``config`` is the model configuration as JSON text or as a mapping (dumped to JSON).
    ``files`` maps paths inside the model directory (``"1/model.py"``, with or without the
    ``"file:"`` prefix of the wire form) to their contents; Triton then loads the model from
    these files only, so a configuration must come with them.

    Example::

        >>> normalize_load_request({"backend": "python"}, {"1/model.py": b"..."})
        ('{"backend":"python"}', {'file:1/model.py': b'...'})
    """
    config_text: str | None
    if config is None:
        config_text = None
    elif isinstance(config, str):
        config_text = config
    elif isinstance(config, Mapping):
        try:
            config_text = json.dumps(config, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"config cannot be encoded as JSON: {exc}") from None
    else:
        raise InvalidInputError(
            f"config must be JSON text or a mapping, got {type(config).__name__}", value=config
        )
    out: dict[str, bytes] = {}
    for key, content in (files or {}).items():
        if not isinstance(key, str):
            raise InvalidInputError(f"file names must be str, got {key!r}", value=key)
        path = key.removeprefix("file:")
        segments = path.split("/")
        if not path or path.startswith("/") or any(s in ("", ".", "..") for s in segments):
            raise InvalidInputError(
                f"file {key!r}: give a relative path inside the model directory, such as "
                "'1/model.py'",
                value=key,
            )
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidInputError(
                f"file {key!r}: contents must be bytes, got {type(content).__name__}",
                value=key,
            )
        out[f"file:{path}"] = bytes(content)
    if out and config_text is None:
        raise InvalidInputError(
            "files need a config: Triton loads a model given as files from those files "
            "alone, and the configuration must be one of them"
        )
    return config_text, out


def trace_settings_update(settings: Mapping[str, Any]) -> dict[str, TraceSettingValue]:
    """Normalise trace settings to what Triton accepts: strings, lists of strings, or None.

    Integers become strings (``trace_rate=100`` -> ``"100"``); ``trace_level`` may be one
    string or a sequence; ``None`` clears a model's setting (the global one applies again).

    Example::

        >>> trace_settings_update({"trace_rate": 100, "trace_level": "TIMESTAMPS"})
        {'trace_rate': '100', 'trace_level': ['TIMESTAMPS']}
    """
    if not isinstance(settings, Mapping):
        raise InvalidInputError("trace settings must be a mapping", value=settings)
    out: dict[str, TraceSettingValue] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"trace setting names must be strings, got {key!r}")
        if value is None:
            out[key] = None
        elif isinstance(value, bool):
            raise InvalidInputError(f"trace setting {key!r}: {value!r} is not a valid value")
        elif isinstance(value, int):
            out[key] = str(value)
        elif isinstance(value, str):
            out[key] = [value] if key in _LIST_TRACE_SETTINGS else value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = list(value)
        else:
            raise InvalidInputError(
                f"trace setting {key!r}: expected a string, an integer, a list of strings or "
                f"None, got {value!r}",
                value=value,
            )
    return out


def log_settings_update(settings: Mapping[str, Any]) -> dict[str, LogSettingValue]:
    """Check log settings: values are ``bool``, ``int`` or ``str``.

    Example::

        >>> log_settings_update({"log_verbose_level": 1, "log_info": False})
        {'log_verbose_level': 1, 'log_info': False}
    """
    if not isinstance(settings, Mapping):
        raise InvalidInputError("log settings must be a mapping", value=settings)
    out: dict[str, LogSettingValue] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"log setting names must be strings, got {key!r}")
        if not isinstance(value, bool | int | str):
            raise InvalidInputError(
                f"log setting {key!r}: expected a bool, int or str, got {value!r}", value=value
            )
        out[key] = value
    return out


#: Extra headers: a mapping or a sequence of (name, value) pairs.
Headers = Mapping[str, str] | Sequence[tuple[str, str]]
