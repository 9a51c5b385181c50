"""The checks of user arguments, shared by every protocol and by the sync and async clients.

A bad argument raises :class:`~kserve_v2.errors.InvalidInputError` here, before a request is
built, whichever protocol the client speaks: the HTTP and gRPC backends call these functions
rather than checking anything themselves (each keeps only the rules of its own wire format,
such as which characters a header name may hold). :func:`build_infer_request` turns the
arguments of ``infer`` into an :class:`~kserve_v2.messages.InferRequest`.

Checks that run on every ``infer`` are written so that the common case (an argument left at
its default) costs one comparison.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.errors import InvalidInputError
from kserve_v2.messages import InferRequest, new_infer_request
from kserve_v2.parameters import UINT64_MAX, ParameterValue, validate_parameters
from kserve_v2.tensors import InferInput, RequestedOutput

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

__all__ = [
    "COMPRESSIONS",
    "Headers",
    "InputsArg",
    "LogSettingValue",
    "OutputsArg",
    "TraceSettingValue",
    "build_infer_request",
    "check_bool",
    "check_compression",
    "check_max_response_size",
    "check_model_name",
    "check_optional_model",
    "check_query",
    "check_region_name",
    "check_statistics_target",
    "check_timeout",
    "check_version",
    "cuda_shm_registration",
    "header_pairs",
    "log_settings_update",
    "normalize_load_request",
    "refuse_query",
    "system_shm_registration",
    "trace_settings_update",
]

#: Extra headers: a mapping or a sequence of (name, value) pairs.
Headers = Mapping[str, str] | Sequence[tuple[str, str]]

#: Compression algorithms of request bodies (HTTP ``Content-Encoding``) and messages (gRPC).
COMPRESSIONS: Final = ("gzip", "deflate")

# The limit of uint32 fields (Triton's log_verbose_level).
_UINT32_LIMIT: Final = 2**32


# ------------------------------------------------------------------ per-call options


def check_timeout(value: object, what: str = "timeout") -> float | None:
    """``value`` if it is a timeout in seconds: a positive number, or None (no override)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidInputError(
            f"{what} must be a positive number of seconds or None, got {value!r}", value=value
        )
    return value


def check_compression(value: object, what: str = "compression") -> str | None:
    """``value`` if it names a compression algorithm both protocols support (or is None)."""
    if value is None or (isinstance(value, str) and value in COMPRESSIONS):
        return value
    raise InvalidInputError(
        f"{what} must be one of {COMPRESSIONS} or None, got {value!r}", value=value
    )


def header_pairs(headers: Headers) -> list[tuple[str, str]]:
    """``headers`` as a list of (name, value) string pairs (no protocol's rules applied yet).

    Example::

        >>> header_pairs({"Authorization": "Bearer t"})
        [('Authorization', 'Bearer t')]
    """
    items: Iterable[object]
    candidate: object = headers  # what the caller passed, whatever its annotation says
    if isinstance(candidate, Mapping):
        items = candidate.items()
    elif isinstance(candidate, Sequence) and not isinstance(candidate, str | bytes):
        items = candidate
    else:
        raise InvalidInputError(
            "headers must be a mapping or a sequence of (name, value) pairs, got "
            f"{type(headers).__name__}",
            value=headers,
        )
    out = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidInputError(f"headers must be (name, value) pairs, got {item!r}")
        key, value = item
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(f"header {key!r}: names and values must be str", value=key)
        out.append((key, value))
    return out


def check_query(query: object) -> None:
    """Check extra URL query parameters: a mapping or a sequence of (name, value) pairs."""
    if isinstance(query, Mapping):
        keys: list[object] = list(query)
    elif isinstance(query, Sequence) and not isinstance(query, str | bytes):
        keys = []
        for item in query:
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise InvalidInputError(
                    f"query parameters must be (name, value) pairs, got {item!r}", value=item
                )
            keys.append(item[0])
    else:
        raise InvalidInputError(
            "query must be a mapping or a sequence of (name, value) pairs", value=query
        )
    for key in keys:
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                f"query parameter names must be non-empty strings, got {key!r}", value=key
            )


def refuse_query(query: object) -> None:
    """Refuse URL query parameters for a call that has no URL (every gRPC call).

    ``query=`` is accepted by every client method so that code reads the same for both
    protocols, but over gRPC there is nowhere to put it; dropping it silently would hide a
    mistake (an API key in the query, say), so any value but ``None`` is an error.

    Example::

        refuse_query(None)              # fine
        refuse_query({"key": "v"})      # InvalidInputError: query parameters apply to HTTP only
    """
    if query is not None:
        raise InvalidInputError(
            "query parameters apply to HTTP only: a gRPC call has no URL "
            "(drop query=, or use an http:// URL)",
            value=query,
        )


def check_bool(value: object, what: str) -> bool:
    """``value`` if it is a bool (a truthy string such as ``"no"`` is a bug, not a flag)."""
    if value is not True and value is not False:
        raise InvalidInputError(f"{what} must be a bool, got {value!r}", value=value)
    return value


# ------------------------------------------------------------- models and regions


def check_model_name(model: object) -> str:
    """``model`` if it is a model name: a non-empty string."""
    if not isinstance(model, str) or not model:
        raise InvalidInputError(
            f"model name must be a non-empty string, got {model!r}", value=model
        )
    return model


def check_optional_model(model: object) -> str:
    """``model`` for calls that take ``""`` for "every model" or "global" (a string)."""
    if not isinstance(model, str):
        raise InvalidInputError(
            f"model name must be a string ('' for none), got {model!r}", value=model
        )
    return model


def check_version(version: object) -> str:
    """A model version as sent: a string (``""``: the server's choice) or a non-negative
    integer, which becomes its decimal text.

    Example::

        >>> check_version(2), check_version("3"), check_version("")
        ('2', '3', '')
    """
    if isinstance(version, str):
        return version
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidInputError(
            f"model version must be a str or a non-negative int, got {version!r}", value=version
        )
    return str(version)


def check_statistics_target(model: object, version: object) -> tuple[str, str]:
    """``(model, version)`` of ``model_statistics``: both optional, but a version needs a
    model."""
    name = check_optional_model(model)
    text = check_version(version)
    if text and not name:
        raise InvalidInputError("model_statistics: a version needs a model name", value=text)
    return name, text


def check_region_name(region: object, *, required: bool) -> str:
    """A shared-memory region name. Registration needs one; the status and unregister calls
    take ``""`` for every region."""
    if not isinstance(region, str) or (required and not region):
        want = "a non-empty string" if required else "a string ('' for every region)"
        raise InvalidInputError(f"region name must be {want}, got {region!r}", value=region)
    return region


def system_shm_registration(
    region: str, key: str, byte_size: int, offset: int
) -> tuple[str, dict[str, Any]]:
    """Check a system shared-memory registration: the region name and
    ``{"key", "offset", "byte_size"}`` (the REST body; gRPC sends the same fields)."""
    name = check_region_name(region, required=True)
    # Imported here: most programs never touch shared memory.
    from kserve_v2.shm.system import system_register_body

    return name, system_register_body(key, offset, byte_size)


def cuda_shm_registration(
    region: str, raw_handle: BytesLike, device_id: int, byte_size: int
) -> tuple[str, bytes, int, int]:
    """Check a CUDA shared-memory registration: ``(region, raw_handle, device_id,
    byte_size)`` with the 64 handle bytes as ``bytes``."""
    name = check_region_name(region, required=True)
    from kserve_v2.shm.cuda import cuda_register_body

    body = cuda_register_body(raw_handle, device_id, byte_size)
    return name, bytes(raw_handle), body["device_id"], body["byte_size"]


# ------------------------------------------------------------------------------ infer


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

    ``version`` is a string or a non-negative integer (see :func:`check_version`).

    ``sequence_*`` (sequence extension), ``priority`` and ``timeout_us`` (schedule-policy
    extension; the server-side queue timeout in **microseconds**) become the reserved request
    parameters Triton reads.
    """
    # Each check below costs one comparison when its argument has its default value.
    if not isinstance(model, str) or not model:
        raise InvalidInputError(
            f"model name must be a non-empty string, got {model!r}", value=model
        )
    if allow_reserved is not False:
        check_bool(allow_reserved, "allow_reserved")
    params = validate_parameters(parameters, where="request", allow_reserved=allow_reserved)
    if sequence_id is not None:
        params["sequence_id"] = _sequence_id(sequence_id)
        params["sequence_start"] = check_bool(sequence_start, "sequence_start")
        params["sequence_end"] = check_bool(sequence_end, "sequence_end")
    elif sequence_start is not False or sequence_end is not False:
        check_bool(sequence_start, "sequence_start")
        check_bool(sequence_end, "sequence_end")
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
        "" if version == "" else check_version(version),
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
    """Check log settings: values are ``bool``, ``int`` (uint32) or ``str``.

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
        # Triton's integer log settings (log_verbose_level) are uint32 on both protocols.
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not 0 <= value < _UINT32_LIMIT
        ):
            raise InvalidInputError(
                f"log setting {key!r}: {value} is outside the uint32 range", value=value
            )
        out[key] = value
    return out
