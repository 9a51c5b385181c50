"""What the sync and asyncio gRPC compat clients share: options, tensors, results and the
protobuf messages tritonclient returns (the project's generated messages, filled from the
native client's results)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from kserve_v2.compat._base import (
    InferInputBase,
    InferRequestedOutputBase,
    InferResultBase,
    translated,
)
from kserve_v2.compat._client_aio import Protocol
from kserve_v2.compat.utils import InferenceServerException
from kserve_v2.datatypes import Datatype, serialize
from kserve_v2.errors import KServeError, ServerError
from kserve_v2.grpc.codec import decode_infer_response, generated
from kserve_v2.messages import InferResult as NativeResult
from kserve_v2.messages import ModelMetadata, RepositoryModel, ServerMetadata
from kserve_v2.options import GRPCKeepAlive, TLSOptions

__all__ = [
    "GRPCProtocol",
    "StreamRequests",
    "stream_ends",
    "stream_options",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "KeepAliveOptions",
    "client_options",
    "config_message",
    "cuda_shm_status_message",
    "log_settings_message",
    "model_metadata_message",
    "reply",
    "repository_index_message",
    "server_metadata_message",
    "statistics_message",
    "system_shm_status_message",
    "trace_settings_message",
]

#: grpcio channel arguments the native transport honours itself.
_NATIVE_CHANNEL_ARGS: Final = frozenset(
    {"grpc.max_send_message_length", "grpc.max_receive_message_length"}
)
_NEVER: Final = 2**31 - 1


class GRPCProtocol(Protocol):
    """gRPC: ``client_timeout`` is the native call's deadline; verbose clients print each
    result; errors carry the gRPC status."""

    _protocol = "grpc"

    def _native_options(self, method: Callable[..., Any], options: dict[str, Any]) -> None:
        options["timeout"] = options.pop("client_timeout", None)

    def _returned(self, result: Any) -> None:
        if self._verbose:
            print(result)


class KeepAliveOptions:
    """HTTP/2 keepalive pings of the gRPC channel (grpcio's ``grpc.keepalive_*`` arguments).

    Pings need grpcio: a client given options that send pings (``keepalive_time_ms`` below
    2**31 - 1) uses the ``grpcio`` transport.
    """

    def __init__(
        self,
        keepalive_time_ms: int = _NEVER,
        keepalive_timeout_ms: int = 20000,
        keepalive_permit_without_calls: bool = False,
        http2_max_pings_without_data: int = 2,
    ) -> None:
        self.keepalive_time_ms = keepalive_time_ms
        self.keepalive_timeout_ms = keepalive_timeout_ms
        self.keepalive_permit_without_calls = keepalive_permit_without_calls
        self.http2_max_pings_without_data = http2_max_pings_without_data

    def __repr__(self) -> str:
        return (
            f"KeepAliveOptions(keepalive_time_ms={self.keepalive_time_ms}, "
            f"keepalive_timeout_ms={self.keepalive_timeout_ms}, "
            f"keepalive_permit_without_calls={self.keepalive_permit_without_calls}, "
            f"http2_max_pings_without_data={self.http2_max_pings_without_data})"
        )


def client_options(
    url: str,
    verbose: bool,
    ssl: bool,
    root_certificates: str | None,
    private_key: str | None,
    certificate_chain: str | None,
    creds: Any,
    keepalive_options: KeepAliveOptions | None,
    channel_args: Sequence[tuple[str, Any]] | None,
) -> dict[str, Any]:
    """The native client's arguments for tritonclient's gRPC constructor.

    No deadline by default (tritonclient has none); the native transport unless the program
    asks for what only grpcio does: ``creds``, keepalive pings, other channel arguments than
    the message size limits.
    """
    if "://" in url:
        raise InferenceServerException(msg="url should not include the scheme")
    options: dict[str, Any] = {
        "url": f"{'grpcs' if ssl or creds is not None else 'grpc'}://{url}",
        "timeout": None,
        "verbose": verbose,
    }
    if ssl and (root_certificates or private_key or certificate_chain):
        options["tls"] = TLSOptions(
            ca_file=root_certificates, key_file=private_key, cert_file=certificate_chain
        )
    grpcio = False
    if creds is not None:
        options["grpc_credentials"] = creds
        grpcio = True
    if keepalive_options is not None and keepalive_options.keepalive_time_ms < _NEVER:
        with translated("grpc"):
            options["grpc_keepalive"] = GRPCKeepAlive(
                time_ms=keepalive_options.keepalive_time_ms,
                timeout_ms=keepalive_options.keepalive_timeout_ms,
                permit_without_calls=keepalive_options.keepalive_permit_without_calls,
                http2_max_pings_without_data=keepalive_options.http2_max_pings_without_data,
            )
        grpcio = True
    if channel_args:
        args = dict(channel_args)
        # tritonclient's "no limit" is -1 (grpcio's spelling); the native one is no entry.
        args = {k: v for k, v in args.items() if not (k in _NATIVE_CHANNEL_ARGS and v == -1)}
        if args:
            options["grpc_options"] = args
            grpcio = grpcio or not set(args) <= _NATIVE_CHANNEL_ARGS
    if grpcio:
        options["grpc_transport"] = "grpcio"
    return options


# -- tensors ------------------------------------------------------------------------------


class InferInput(InferInputBase):
    """An input tensor of a request: ``InferInput(name, shape, datatype)``, then
    :meth:`set_data_from_numpy` or :meth:`set_shared_memory` (either may be called again to
    reuse the object).

    Example::

        x = InferInput("INPUT0", [1, 16], "INT32")
        x.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    """

    def set_data_from_numpy(self, input_tensor: Any) -> InferInput:
        """Send ``input_tensor`` (its dtype and shape must match the input's)."""
        self._set_data(input_tensor, None)
        return self


class InferRequestedOutput(InferRequestedOutputBase):
    """An output to return, optionally the top ``class_count`` classifications
    (``"score:index[:label]"`` strings) instead of the tensor."""

    def __init__(self, name: str, class_count: int = 0) -> None:
        super().__init__(name, class_count)


# -- results ------------------------------------------------------------------------------


def _set_parameter(target: Any, key: str, value: Any) -> None:
    param = target[key]
    if isinstance(value, bool):
        param.bool_param = value
    elif isinstance(value, int):
        if value > 2**63 - 1:
            param.uint64_param = value
        else:
            param.int64_param = value
    elif isinstance(value, float):
        param.double_param = value
    else:
        param.string_param = str(value)


def _to_json(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    value: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return value


def reply(message: Any, as_json: bool) -> Any:
    """A message as tritonclient returns it: the message, or with ``as_json`` its JSON form
    (protobuf's JSON mapping with the proto field names)."""
    return _to_json(message) if as_json else message


class InferResult(InferResultBase):
    """The result of an inference (or one response of a stream): :meth:`as_numpy` per
    output, :meth:`get_response` for the ``ModelInferResponse`` message.

    ``result`` is a ``ModelInferResponse`` message (or the native result the client made).
    """

    def __init__(self, result: Any) -> None:
        if isinstance(result, NativeResult):
            self._result = result
            self._response: Any = None
        else:
            with translated("grpc"):
                self._result = decode_infer_response(result.SerializeToString())
            self._response = result

    def get_output(self, name: str, as_json: bool = False) -> Any:
        """Output ``name``'s ``InferOutputTensor`` message (or its JSON form), or ``None``."""
        for output in self.get_response().outputs:
            if output.name == name:
                return reply(output, as_json)
        return None

    def get_response(self, as_json: bool = False) -> Any:
        """The ``ModelInferResponse`` message (or its JSON form); tensor data are in
        ``raw_output_contents``, one entry per output that has data."""
        if self._response is None:
            self._response = _response_message(self._result)
        return reply(self._response, as_json)


def _response_message(result: NativeResult) -> Any:
    response = generated().ModelInferResponse(
        model_name=result.model_name, model_version=result.model_version, id=result.id
    )
    for key, value in result.parameters.items():
        _set_parameter(response.parameters, key, value)
    for tensor in result.outputs:
        output = response.outputs.add(
            name=tensor.name, datatype=tensor.datatype, shape=list(tensor.shape)
        )
        for key, value in tensor.parameters.items():
            _set_parameter(output.parameters, key, value)
        if tensor.data is not None:
            response.raw_output_contents.append(
                bytes(serialize(tensor.data, Datatype(tensor.datatype)))
            )
    return response


# -- metadata and extension messages -------------------------------------------------------


def _parse(message: Any, value: Mapping[str, Any]) -> Any:
    from google.protobuf import json_format

    return json_format.ParseDict(dict(value), message, ignore_unknown_fields=True)


def server_metadata_message(metadata: ServerMetadata) -> Any:
    """``ServerMetadataResponse``."""
    return generated().ServerMetadataResponse(
        name=metadata.name, version=metadata.version, extensions=list(metadata.extensions)
    )


def model_metadata_message(metadata: ModelMetadata) -> Any:
    """``ModelMetadataResponse``."""
    message = generated().ModelMetadataResponse(
        name=metadata.name, versions=list(metadata.versions), platform=metadata.platform
    )
    for target, tensors in ((message.inputs, metadata.inputs), (message.outputs, metadata.outputs)):
        for tensor in tensors:
            target.add(name=tensor.name, datatype=tensor.datatype, shape=list(tensor.shape))
    return message


def config_message(config: Mapping[str, Any]) -> Any:
    """``ModelConfigResponse`` (its ``config`` the model configuration)."""
    return _parse(generated().ModelConfigResponse(), {"config": config})


def statistics_message(statistics: Mapping[str, Any]) -> Any:
    """``ModelStatisticsResponse``."""
    return _parse(generated().ModelStatisticsResponse(), statistics)


def repository_index_message(models: list[RepositoryModel]) -> Any:
    """``RepositoryIndexResponse``."""
    message = generated().RepositoryIndexResponse()
    for model in models:
        message.models.add(
            name=model.name, version=model.version, state=model.state, reason=model.reason
        )
    return message


def system_shm_status_message(regions: list[dict[str, Any]]) -> Any:
    """``SystemSharedMemoryStatusResponse`` (regions by name)."""
    return _parse(
        generated().SystemSharedMemoryStatusResponse(),
        {"regions": {region["name"]: region for region in regions}},
    )


def cuda_shm_status_message(regions: list[dict[str, Any]]) -> Any:
    """``CudaSharedMemoryStatusResponse`` (regions by name)."""
    return _parse(
        generated().CudaSharedMemoryStatusResponse(),
        {"regions": {region["name"]: region for region in regions}},
    )


def trace_settings_message(settings: Mapping[str, Any]) -> Any:
    """``TraceSettingResponse``: every setting a list of strings."""
    message = generated().TraceSettingResponse()
    for key, value in settings.items():
        values = value if isinstance(value, list) else [value]
        message.settings[key].value.extend(str(v) for v in values)
    return message


def log_settings_message(settings: Mapping[str, Any]) -> Any:
    """``LogSettingsResponse``."""
    message = generated().LogSettingsResponse()
    for key, value in settings.items():
        entry = message.settings[key]
        if isinstance(value, bool):
            entry.bool_param = value
        elif isinstance(value, int):
            entry.uint32_param = value
        else:
            entry.string_param = str(value)
    return message


# -- streams ------------------------------------------------------------------------------


def stream_options(
    headers: dict[str, str] | None,
    stream_timeout: float | None,
    compression_algorithm: str | None,
) -> dict[str, Any]:
    """The native ``stream()`` keywords for tritonclient's stream arguments (``headers`` as
    the plugin left them): a ``triton_grpc_error: true`` header becomes the native option.
    """
    call_headers = dict(headers or {})
    grpc_error = str(call_headers.pop("triton_grpc_error", "")).lower() == "true"
    return {
        "headers": call_headers or None,
        "timeout": stream_timeout,
        "compression": compression_algorithm,
        "enable_empty_final_response": True,  # shown per request, as asked
        "triton_grpc_error": grpc_error,
    }


def stream_ends(exc: KServeError, grpc_error_mode: bool) -> bool:
    """Whether a stream's error ends it: all but a request's own error (which Triton sends
    as a response) do, and in ``triton_grpc_error`` mode that one too."""
    per_request = isinstance(exc, ServerError) and exc.grpc_code is None
    return not per_request or grpc_error_mode


class StreamRequests:
    """The requests of a compat stream: those whose empty final response is hidden, and
    the ids made up for requests without one (shown as ``""``, as tritonclient has no id).

    Not locked: the sync stream calls it under its condition's lock.
    """

    def __init__(self) -> None:
        self._hide_empty_final: set[str] = set()
        self._made_up: set[str] = set()
        self._ids = 0

    def add(self, request_id: str, enable_empty_final_response: bool) -> str:
        """Track a request about to be sent; its id (made up when empty)."""
        if not request_id:
            self._ids += 1
            request_id = f"kserve-v2-compat-{self._ids}"
            self._made_up.add(request_id)
        if not enable_empty_final_response:
            self._hide_empty_final.add(request_id)
        return request_id

    def discard(self, request_id: str) -> None:
        """Forget a request that could not be sent."""
        self._made_up.discard(request_id)
        self._hide_empty_final.discard(request_id)

    def shown(self, native: NativeResult) -> InferResult | None:
        """The compat result of a native response, or ``None`` for an empty final response
        its request did not ask for."""
        request_id = native.id
        hide = request_id in self._hide_empty_final
        made_up = request_id in self._made_up
        if native.final:
            self.discard(request_id)
        if hide and native.final and not native.outputs:
            return None
        if made_up:
            native = replace(native, id="")
        return InferResult(native)
