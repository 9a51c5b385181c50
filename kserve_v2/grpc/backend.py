"""The gRPC side of the client, without I/O: the twin of :mod:`kserve_v2.rest.backend`.

Each method of :class:`GRPCBackend` returns a :class:`GRPCCall`: the RPC's full method name,
the serialized request, the call's metadata, deadline and compression, and the function that
turns the response bytes into the method's result. The clients run it through their channel
(:class:`~kserve_v2.transport.grpcio.GRPCChannel` or its asyncio twin); only ``run``/``arun``
touch I/O, so the sync and async clients share everything else.

Example::

    from kserve_v2.endpoint import parse_url
    from kserve_v2.transport.grpcio import GRPCChannel
    from kserve_v2.grpc.config import channel_config
    from kserve_v2.grpc.backend import GRPCBackend

    endpoint = parse_url("grpc://localhost:8001")
    proto, channel = GRPCBackend(endpoint, timeout=10.0), GRPCChannel(channel_config(endpoint))
    print(proto.server_metadata().run(channel, None))    # ServerMetadata(name='triton', ...)
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from kserve_v2.arguments import Headers
from kserve_v2.errors import InvalidInputError, ServerError
from kserve_v2.grpc import codec, extensions
from kserve_v2.grpc.config import Metadata, check_compression
from kserve_v2.grpc.status import status_of
from kserve_v2.grpc.wire import BytesLike
from kserve_v2.hooks import WireHook, WireMessage
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    RepositoryModel,
    ServerMetadata,
)

if TYPE_CHECKING:
    from kserve_v2.endpoint import Endpoint
    from kserve_v2.transport.grpcio import AsyncGRPCChannel, GRPCChannel

__all__ = ["SERVICE", "GRPCCall", "GRPCBackend", "metadata_items"]

T = TypeVar("T")

#: The service's full name as it prefixes every method (``/inference.GRPCInferenceService/``).
SERVICE: Final = "/inference.GRPCInferenceService/"

# gRPC metadata keys: lower-case letters, digits, '-', '_', '.' (HTTP/2 wants lower case).
_METADATA_KEY: Final = re.compile(r"[0-9a-z_.\-]+")
# ASCII metadata values: visible characters and space.
_METADATA_VALUE: Final = re.compile(r"[\x20-\x7e]*")


def metadata_items(headers: Headers | None) -> list[tuple[str, str]]:
    """``headers`` as gRPC metadata: keys lower-cased and checked, values printable ASCII.

    ``-bin`` (binary) keys and the reserved ``grpc-`` prefix are refused.
    """
    if not headers:
        return []
    out = []
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in items:
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInputError(f"header {key!r}: names and values must be str", value=key)
        name = key.lower()
        if not _METADATA_KEY.fullmatch(name) or name.startswith("grpc-"):
            raise InvalidInputError(f"{key!r} is not a valid gRPC metadata key", value=key)
        if name.endswith("-bin"):
            raise InvalidInputError(
                f"binary metadata ({key!r}) is not supported; send text values", value=key
            )
        if not _METADATA_VALUE.fullmatch(value):
            raise InvalidInputError(
                f"metadata {key!r}: values must be printable ASCII", value=value
            )
        out.append((name, value))
    return out


def _always(value: T) -> Callable[[ServerError], T]:
    return lambda _error: value


@dataclass(frozen=True, slots=True)
class GRPCCall(Generic[T]):
    """A prepared unary RPC: what to send and how to read the answer.

    ``on_server_error`` turns a server's error status into a result instead of raising it
    (health checks answer False, as their HTTP twins do for an error status).
    """

    method: str
    #: the serialized request, or the buffers whose concatenation it is
    request: bytes | tuple[BytesLike, ...]
    decode: Callable[[bytes], T]
    metadata: Metadata = ()
    timeout: float | None = None
    compression: str | None = None
    on_server_error: Callable[[ServerError], T] | None = None

    def run(self, channel: GRPCChannel, hook: WireHook | None) -> T:
        """Send through a sync channel, tell the hook, decode."""
        kw: dict[str, Any] = {
            "timeout": self.timeout,
            "metadata": self.metadata,
            "compression": self.compression,
        }
        started = _hook_send(hook, self) if hook is not None else 0.0
        try:
            response, headers = channel.call_unary(
                self.method, self.request, want_metadata=hook is not None, **kw
            )
        except BaseException as exc:
            if hook is not None:
                _hook_receive(hook, self, started, None, (), exc)
            if isinstance(exc, ServerError) and self.on_server_error is not None:
                return self.on_server_error(exc)
            raise
        if hook is not None:
            _hook_receive(hook, self, started, response, headers)
        return self.decode(response)

    async def arun(self, channel: AsyncGRPCChannel, hook: WireHook | None) -> T:
        """Send through an asyncio channel, tell the hook, decode."""
        kw: dict[str, Any] = {
            "timeout": self.timeout,
            "metadata": self.metadata,
            "compression": self.compression,
        }
        started = _hook_send(hook, self) if hook is not None else 0.0
        try:
            response, headers = await channel.call_unary(
                self.method, self.request, want_metadata=hook is not None, **kw
            )
        except BaseException as exc:
            if hook is not None:
                _hook_receive(hook, self, started, None, (), exc)
            if isinstance(exc, ServerError) and self.on_server_error is not None:
                return self.on_server_error(exc)
            raise
        if hook is not None:
            _hook_receive(hook, self, started, response, headers)
        return self.decode(response)


def _hook_send(hook: WireHook, call: GRPCCall[Any]) -> float:
    body = call.request if isinstance(call.request, tuple) else (call.request,)
    hook(WireMessage("send", "grpc", "unary", call.method, call.metadata, body))
    return time.perf_counter()


def _hook_receive(
    hook: WireHook,
    call: GRPCCall[Any],
    started: float,
    response: bytes | None,
    headers: Metadata,
    error: BaseException | None = None,
) -> None:
    hook(
        WireMessage(
            "receive",
            "grpc",
            "unary",
            call.method,
            headers,
            (response,) if response is not None else (),
            "OK" if error is None else status_of(error),
            time.perf_counter() - started,
            error,
        )
    )


def _nothing(_data: bytes) -> None:
    return None


class GRPCBackend:
    """Builds gRPC calls for one server; shared by :class:`Client` and :class:`AsyncClient`.

    Args:
        endpoint: the parsed ``grpc://`` / ``grpcs://`` URL.
        headers: metadata sent with every call (keys are lower-cased, as gRPC requires).
        timeout: default deadline of each call in seconds (``None``: none).
        compression: ``"gzip"`` / ``"deflate"``: default compression of request messages
            (the channel's; a call's ``compression=`` overrides it).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.compression = check_compression(compression, "request_compression")
        self._base_metadata: Metadata = tuple(metadata_items(headers))

    # -- building blocks ------------------------------------------------------------------

    def metadata(self, headers: Headers | None = None) -> Metadata:
        """The client's metadata followed by a call's own."""
        if not headers:
            return self._base_metadata
        return (*self._base_metadata, *metadata_items(headers))

    def call(
        self,
        rpc: str,
        request: bytes | tuple[BytesLike, ...],
        decode: Callable[[bytes], T],
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        query: Mapping[str, Any] | None = None,
        on_server_error: Callable[[ServerError], T] | None = None,
    ) -> GRPCCall[T]:
        """One call of ``rpc`` (e.g. ``"ModelInfer"``) with the client's defaults applied.

        ``compression=None`` leaves the channel's default in place.
        """
        if query:
            raise InvalidInputError("query parameters apply to HTTP only, not gRPC", value=query)
        return GRPCCall(
            SERVICE + rpc,
            request,
            decode,
            self.metadata(headers),
            self.timeout if timeout is None else timeout,
            check_compression(compression),
            on_server_error,
        )

    def _named(self, rpc: str, name: str, version: str = "") -> bytes:
        """A serialized ``{name, version}`` request (ModelReady, ModelMetadata, ModelConfig,
        ModelStatistics share the layout)."""
        message = getattr(codec.generated(), f"{rpc}Request")(name=name, version=version)
        data: bytes = message.SerializeToString()
        return data

    # -- core protocol ---------------------------------------------------------------------

    def server_live(self, **kw: Any) -> GRPCCall[bool]:
        return self.call(
            "ServerLive", b"", codec.decode_server_live, on_server_error=_always(False), **kw
        )

    def server_ready(self, **kw: Any) -> GRPCCall[bool]:
        return self.call(
            "ServerReady", b"", codec.decode_server_ready, on_server_error=_always(False), **kw
        )

    def model_ready(self, model: str, version: str = "", **kw: Any) -> GRPCCall[bool]:
        return self.call(
            "ModelReady",
            self._named("ModelReady", model, version),
            codec.decode_model_ready,
            on_server_error=_always(False),
            **kw,
        )

    def server_metadata(self, **kw: Any) -> GRPCCall[ServerMetadata]:
        return self.call("ServerMetadata", b"", codec.decode_server_metadata, **kw)

    def model_metadata(self, model: str, version: str = "", **kw: Any) -> GRPCCall[ModelMetadata]:
        return self.call(
            "ModelMetadata",
            self._named("ModelMetadata", model, version),
            codec.decode_model_metadata,
            **kw,
        )

    def infer(
        self, request: InferRequest, *, binary: bool | None = None, **kw: Any
    ) -> GRPCCall[InferResult]:
        """``ModelInfer``; ``binary`` is accepted for symmetry with HTTP (gRPC is binary)."""
        placements = codec.output_placements(request)
        decode = (
            functools.partial(codec.decode_infer_response, placements=placements)
            if placements
            else codec.decode_infer_response
        )
        # Not joined here: the native transport sends the tensors from the caller's arrays.
        return self.call("ModelInfer", codec.encode_infer_request_parts(request), decode, **kw)

    # -- Triton extensions -------------------------------------------------------------------

    def model_config(self, model: str, version: str = "", **kw: Any) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "ModelConfig",
            self._named("ModelConfig", model, version),
            extensions.decode_model_config,
            **kw,
        )

    def model_statistics(
        self, model: str = "", version: str = "", **kw: Any
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "ModelStatistics",
            self._named("ModelStatistics", model, version),
            extensions.decode_model_statistics,
            **kw,
        )

    def repository_index(
        self, *, ready_only: bool = False, **kw: Any
    ) -> GRPCCall[list[RepositoryModel]]:
        message = codec.generated().RepositoryIndexRequest(ready=ready_only)
        return self.call(
            "RepositoryIndex", message.SerializeToString(), extensions.decode_repository_index, **kw
        )

    def load_model(
        self,
        model: str,
        *,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        **kw: Any,
    ) -> GRPCCall[None]:
        return self.call(
            "RepositoryModelLoad", extensions.load_request(model, config, files), _nothing, **kw
        )

    def unload_model(
        self, model: str, *, unload_dependents: bool = False, **kw: Any
    ) -> GRPCCall[None]:
        return self.call(
            "RepositoryModelUnload",
            extensions.unload_request(model, unload_dependents),
            _nothing,
            **kw,
        )

    def system_shared_memory_status(
        self, region: str = "", **kw: Any
    ) -> GRPCCall[list[dict[str, Any]]]:
        message = codec.generated().SystemSharedMemoryStatusRequest(name=region)
        return self.call(
            "SystemSharedMemoryStatus",
            message.SerializeToString(),
            extensions.decode_system_shm_status,
            **kw,
        )

    def register_system_shared_memory(
        self, region: str, key: str, byte_size: int, *, offset: int = 0, **kw: Any
    ) -> GRPCCall[None]:
        message = codec.generated().SystemSharedMemoryRegisterRequest(
            name=region, key=key, offset=offset, byte_size=byte_size
        )
        return self.call("SystemSharedMemoryRegister", message.SerializeToString(), _nothing, **kw)

    def unregister_system_shared_memory(self, region: str = "", **kw: Any) -> GRPCCall[None]:
        message = codec.generated().SystemSharedMemoryUnregisterRequest(name=region)
        return self.call(
            "SystemSharedMemoryUnregister", message.SerializeToString(), _nothing, **kw
        )

    def cuda_shared_memory_status(
        self, region: str = "", **kw: Any
    ) -> GRPCCall[list[dict[str, Any]]]:
        message = codec.generated().CudaSharedMemoryStatusRequest(name=region)
        return self.call(
            "CudaSharedMemoryStatus",
            message.SerializeToString(),
            extensions.decode_cuda_shm_status,
            **kw,
        )

    def register_cuda_shared_memory(
        self, region: str, raw_handle: bytes, device_id: int, byte_size: int, **kw: Any
    ) -> GRPCCall[None]:
        message = codec.generated().CudaSharedMemoryRegisterRequest(
            name=region, raw_handle=bytes(raw_handle), device_id=device_id, byte_size=byte_size
        )
        return self.call("CudaSharedMemoryRegister", message.SerializeToString(), _nothing, **kw)

    def unregister_cuda_shared_memory(self, region: str = "", **kw: Any) -> GRPCCall[None]:
        message = codec.generated().CudaSharedMemoryUnregisterRequest(name=region)
        return self.call("CudaSharedMemoryUnregister", message.SerializeToString(), _nothing, **kw)

    def trace_settings(self, model: str = "", **kw: Any) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "TraceSetting",
            extensions.trace_settings_request(None, model),
            extensions.decode_trace_settings,
            **kw,
        )

    def update_trace_settings(
        self, settings: Mapping[str, Any], model: str = "", **kw: Any
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "TraceSetting",
            extensions.trace_settings_request(settings, model),
            extensions.decode_trace_settings,
            **kw,
        )

    def log_settings(self, **kw: Any) -> GRPCCall[dict[str, Any]]:
        return self.call("LogSettings", b"", extensions.decode_log_settings, **kw)

    def update_log_settings(
        self, settings: Mapping[str, Any], **kw: Any
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "LogSettings",
            extensions.log_settings_request(settings),
            extensions.decode_log_settings,
            **kw,
        )
