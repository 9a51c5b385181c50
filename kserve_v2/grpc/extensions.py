"""Triton's extension messages over gRPC, converted to the shapes of Triton's REST JSON.

The clients promise the same result on both protocols (see
:class:`~kserve_v2.backend.Backend`), so every gRPC extension answer is turned into what
the REST endpoint returns: protobuf's JSON mapping with the proto field names, fields without
presence printed even at their default (Triton prints them), enums by name, and 64-bit
integers as numbers (protobuf's JSON writes them as strings; Triton's REST server turns them
back into numbers). Maps of settings become plain dicts; lists of regions become lists.

Example::

    >>> from kserve_v2.grpc.extensions import trace_settings_to_rest
    >>> trace_settings_to_rest({"trace_level": ["OFF"], "trace_rate": ["1000"]})
    {'trace_level': ['OFF'], 'trace_rate': '1000'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import InvalidInputError, ProtocolError
from kserve_v2.grpc.codec import generated, parse_message
from kserve_v2.messages import RepositoryModel

__all__ = [
    "decode_log_settings",
    "decode_model_config",
    "decode_model_statistics",
    "decode_repository_index",
    "decode_system_shm_status",
    "decode_cuda_shm_status",
    "decode_trace_settings",
    "load_request",
    "log_settings_request",
    "message_to_rest",
    "trace_settings_request",
    "trace_settings_to_rest",
    "unload_request",
]

# protobuf FieldDescriptor types whose JSON form is a string (64-bit integers).
_INT64_TYPES: Final = frozenset({3, 4, 6, 16, 18})  # INT64, UINT64, FIXED64, SFIXED64, SINT64
_MESSAGE_TYPE: Final = 11
# Trace settings the REST endpoint returns as arrays; the others are single strings.
_TRACE_LIST_SETTINGS: Final = frozenset({"trace_level"})


def _fix_int64(value: Any, descriptor: Any) -> Any:
    """Turn the 64-bit integers protobuf's JSON mapping wrote as strings into ints."""
    if not isinstance(value, dict):
        return value
    for field in descriptor.fields:
        name = field.name
        if name not in value:
            continue
        item = value[name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type == _MESSAGE_TYPE:
                for key in item:
                    item[key] = _fix_int64(item[key], value_field.message_type)
            elif value_field.type in _INT64_TYPES:
                for key in item:
                    item[key] = int(item[key])
        elif field.type == _MESSAGE_TYPE:
            if isinstance(item, list):
                value[name] = [_fix_int64(v, field.message_type) for v in item]
            else:
                value[name] = _fix_int64(item, field.message_type)
        elif field.type in _INT64_TYPES:
            value[name] = [int(v) for v in item] if isinstance(item, list) else int(item)
    return value


def message_to_rest(message: Any) -> dict[str, Any]:
    """A protobuf message as Triton's REST JSON shows it (see the module docstring)."""
    from google.protobuf import json_format

    try:
        value = json_format.MessageToDict(
            message,
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )
    except TypeError:
        # protobuf < 5.26 (the supported floor is 4.25) names the same option differently.
        value = json_format.MessageToDict(  # type: ignore[call-arg]
            message,
            preserving_proto_field_name=True,
            including_default_value_fields=True,
        )
    result: dict[str, Any] = _fix_int64(value, message.DESCRIPTOR)
    return result


# ------------------------------------------------------------------------ configuration


def decode_model_config(data: BytesLike) -> dict[str, Any]:
    """``ModelConfigResponse`` -> the model configuration dict REST ``/config`` returns."""
    response = parse_message(generated().ModelConfigResponse, data)
    return message_to_rest(response.config)


def decode_model_statistics(data: BytesLike) -> dict[str, Any]:
    """``ModelStatisticsResponse`` -> ``{"model_stats": [...]}`` as REST ``/stats``."""
    return message_to_rest(parse_message(generated().ModelStatisticsResponse, data))


# ---------------------------------------------------------------------------- repository


def decode_repository_index(data: BytesLike) -> list[RepositoryModel]:
    response = parse_message(generated().RepositoryIndexResponse, data)
    return [RepositoryModel(m.name, m.version, m.state, m.reason) for m in response.models]


def _repository_parameters(target: Any, params: Mapping[str, object]) -> None:
    for key, value in params.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            param.int64_param = value
        elif isinstance(value, str):
            param.string_param = value
        elif isinstance(value, bytes | bytearray | memoryview):
            param.bytes_param = bytes(value)
        else:
            raise InvalidInputError(
                f"repository parameter {key!r} must be bool, int, str or bytes", value=value
            )


def load_request(
    model: str, config: str | None = None, files: Mapping[str, bytes] | None = None
) -> bytes:
    """A serialized ``RepositoryModelLoadRequest``.

    ``config`` is the model configuration as JSON text; ``files`` maps ``"<version>/<name>"``
    (``"file:"`` prefix optional) to the file's bytes, sent as ``bytes_param`` (REST sends
    them base64-encoded).
    """
    message = generated().RepositoryModelLoadRequest(model_name=model)
    params: dict[str, object] = {}
    if config is not None:
        if not isinstance(config, str):
            raise InvalidInputError("config must be the model configuration as JSON text")
        params["config"] = config
    for name, content in (files or {}).items():
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"file names must be non-empty strings, got {name!r}")
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidInputError(f"file {name!r}: content must be bytes", value=content)
        params[name if name.startswith("file:") else f"file:{name}"] = content
    if files and config is None:
        raise InvalidInputError("loading model files needs config= (the server requires it)")
    _repository_parameters(message.parameters, params)
    data: bytes = message.SerializeToString()
    return data


def unload_request(model: str, unload_dependents: bool = False) -> bytes:
    message = generated().RepositoryModelUnloadRequest(model_name=model)
    if unload_dependents:
        _repository_parameters(message.parameters, {"unload_dependents": True})
    data: bytes = message.SerializeToString()
    return data


# ------------------------------------------------------------------------- shared memory


def _regions(regions: Any) -> list[dict[str, Any]]:
    return [message_to_rest(regions[name]) for name in sorted(regions)]


def decode_system_shm_status(data: BytesLike) -> list[dict[str, Any]]:
    """-> ``[{"name", "key", "offset", "byte_size"}, ...]`` as REST, ordered by name."""
    return _regions(parse_message(generated().SystemSharedMemoryStatusResponse, data).regions)


def decode_cuda_shm_status(data: BytesLike) -> list[dict[str, Any]]:
    """-> ``[{"name", "device_id", "byte_size"}, ...]`` as REST, ordered by name."""
    return _regions(parse_message(generated().CudaSharedMemoryStatusResponse, data).regions)


# --------------------------------------------------------------------------------- trace


def trace_settings_to_rest(settings: Mapping[str, list[str]]) -> dict[str, Any]:
    """gRPC trace settings (every value a list) -> REST's (``trace_level`` a list, others a
    string; a setting with several values stays a list)."""
    out: dict[str, Any] = {}
    for key, values in settings.items():
        if key in _TRACE_LIST_SETTINGS or len(values) > 1:
            out[key] = list(values)
        else:
            out[key] = values[0] if values else ""
    return out


def decode_trace_settings(data: BytesLike) -> dict[str, Any]:
    response = parse_message(generated().TraceSettingResponse, data)
    # A protobuf map has no order: sorted, so that the same settings read the same each time.
    return trace_settings_to_rest({k: list(v.value) for k, v in sorted(response.settings.items())})


def trace_settings_request(settings: Mapping[str, Any] | None, model: str = "") -> bytes:
    """A serialized ``TraceSettingRequest``; ``None`` as a value clears that setting (as
    JSON null does over REST), numbers are sent as their decimal text."""
    message = generated().TraceSettingRequest(model_name=model)
    for key, value in (settings or {}).items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"trace setting names must be non-empty strings: {key!r}")
        entry = message.settings[key]  # an entry with no values clears the setting
        if value is None:
            continue
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise InvalidInputError(
                    f"trace setting {key!r}: values must be strings or numbers", value=value
                )
            entry.value.append(item if isinstance(item, str) else str(item))
    data: bytes = message.SerializeToString()
    return data


# ----------------------------------------------------------------------------------- log


def decode_log_settings(data: BytesLike) -> dict[str, Any]:
    """``LogSettingsResponse`` -> ``{"log_file": "", "log_info": true, ...}`` as REST."""
    response = parse_message(generated().LogSettingsResponse, data)
    out: dict[str, Any] = {}
    for key, value in sorted(response.settings.items()):  # a map has no order: sorted
        choice = value.WhichOneof("parameter_choice")
        if choice is None:
            raise ProtocolError(f"log setting {key!r} carries no value")
        out[key] = getattr(value, choice)
    return out


def log_settings_request(settings: Mapping[str, Any]) -> bytes:
    """A serialized ``LogSettingsRequest``: bools, non-negative ints (uint32) and strings."""
    message = generated().LogSettingsRequest()
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"log setting names must be non-empty strings: {key!r}")
        entry = message.settings[key]
        if isinstance(value, bool):
            entry.bool_param = value
        elif isinstance(value, int):
            if not 0 <= value < 2**32:
                raise InvalidInputError(
                    f"log setting {key!r}: {value} is outside the uint32 range", value=value
                )
            entry.uint32_param = value
        elif isinstance(value, str):
            entry.string_param = value
        else:
            raise InvalidInputError(
                f"log setting {key!r} must be a bool, int or str, got {type(value).__name__}",
                value=value,
            )
    data: bytes = message.SerializeToString()
    return data
