"""The gRPC side of the client, without I/O: the twin of :mod:`kserve_v2.rest.backend`.

Each method of :class:`GRPCBackend` returns a :class:`GRPCCall`: the RPC's full method name,
the serialized request, the call's metadata, deadline and compression, and the function that
turns the response bytes into the method's result. The clients run it through their channel:
anything with ``call_unary`` (:class:`~kserve_v2.interfaces.UnaryChannel`, or its asyncio
twin), i.e. either transport, native or grpcio; only ``run``/``arun`` touch I/O, so the sync and
async clients share everything else. Arguments are checked with :mod:`kserve_v2.arguments`,
as the HTTP backend checks them.

Example::

    from kserve_v2.endpoint import parse_url
    from kserve_v2.transport.native import NativeGRPCChannel
    from kserve_v2.grpc.config import channel_config
    from kserve_v2.grpc.backend import GRPCBackend

    endpoint = parse_url("grpc://localhost:8001")
    proto = GRPCBackend(endpoint, timeout=10.0)
    channel = NativeGRPCChannel(channel_config(endpoint))
    print(proto.server_metadata().run(channel, None))    # ServerMetadata(name='triton', ...)
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from kserve_v2.arguments import (
    Headers,
    InputsArg,
    OutputsArg,
    build_infer_request,
    check_bool,
    check_compression,
    check_model_name,
    check_optional_model,
    check_region_name,
    check_statistics_target,
    check_timeout,
    check_version,
    cuda_shm_registration,
    header_pairs,
    log_settings_update,
    normalize_load_request,
    refuse_query,
    system_shm_registration,
    trace_settings_update,
)
from kserve_v2.backend import Call, MetadataProbe
from kserve_v2.errors import InvalidInputError, ServerError
from kserve_v2.grpc import codec, extensions
from kserve_v2.grpc.config import Metadata
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
from kserve_v2.parameters import ParameterValue

if TYPE_CHECKING:
    from kserve_v2.backend import Backend
    from kserve_v2.endpoint import Endpoint
    from kserve_v2.interfaces import AsyncUnaryChannel, GRPCMessage, UnaryChannel
    from kserve_v2.rest.paths import QueryParams

__all__ = [
    "SERVICE",
    "TRITON_PARAMETERS",
    "GRPCBackend",
    "GRPCCall",
    "metadata_items",
    "refuse_triton_only_parameter",
    "speaks_triton_parameters",
    "triton_only_parameter",
]

T = TypeVar("T")

#: The service's full name as it prefixes every method (``/inference.GRPCInferenceService/``).
SERVICE: Final = "/inference.GRPCInferenceService/"

#: The extension whose servers are taken to use Triton's ``InferParameter`` (with
#: ``double_param`` and ``uint64_param``, which the open protocol's lacks) and to read
#: ``triton_*`` parameters themselves: Triton's parameters extension, which reserves them.
TRITON_PARAMETERS: Final = "parameters"

_INT64_MAX: Final = (1 << 63) - 1

# gRPC metadata keys: lower-case letters, digits, '-', '_', '.' (HTTP/2 wants lower case).
_METADATA_KEY: Final = re.compile(r"[0-9a-z_.\-]+")
# ASCII metadata values: visible characters and space.
_METADATA_VALUE: Final = re.compile(r"[\x20-\x7e]*")


def metadata_items(headers: Headers | None) -> list[tuple[str, str]]:
    """``headers`` as gRPC metadata: keys lower-cased and checked, values printable ASCII.

    ``-bin`` (binary) keys and the reserved ``grpc-`` prefix are refused. The names and values
    are checked first as on HTTP (:func:`~kserve_v2.arguments.header_pairs`).
    """
    if headers is None:
        return []
    out = []
    for key, value in header_pairs(headers):
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


def speaks_triton_parameters(metadata: ServerMetadata | None) -> bool:
    """Whether a server with this metadata (``None``: unknown) takes Triton's parameters:
    it lists :data:`TRITON_PARAMETERS` (Triton does; KServe and MLServer do not)."""
    return metadata is not None and metadata.supports(TRITON_PARAMETERS)


def _triton_only(params: Mapping[str, ParameterValue]) -> str | None:
    for key, value in params.items():
        if isinstance(value, float) or (isinstance(value, int) and value > _INT64_MAX):
            return key
    return None


def triton_only_parameter(request: InferRequest) -> str | None:
    """The first parameter of ``request`` that only Triton's ``InferParameter`` can carry, as
    ``"request parameter 'p' = 0.25"``, or None: a float (``double_param``) or an integer
    above int64 (``uint64_param``). The open protocol's ``InferParameter`` has only
    ``bool_param``, ``int64_param`` and ``string_param``: other servers drop such a value."""
    # Parameters are rare: each level costs one truth test when it has none.
    levels: list[tuple[str, Mapping[str, ParameterValue]]] = []
    if request.parameters:
        levels.append(("request parameter", request.parameters))
    for tensor in request.inputs:
        if tensor.parameters:
            levels.append((f"input {tensor.name!r} parameter", tensor.parameters))
    for output in request.outputs:
        if output.parameters:
            levels.append((f"output {output.name!r} parameter", output.parameters))
    for where, params in levels:
        key = _triton_only(params)
        if key is not None:
            return f"{where} {key!r} = {params[key]!r}"
    return None


def refuse_triton_only_parameter(found: str, metadata: ServerMetadata | None, known: bool) -> None:
    """Raise the :class:`InvalidInputError` for a parameter ``found`` by
    :func:`triton_only_parameter` that the server is not known to take."""
    if not known:
        why = "its metadata could not be read to see whether it takes Triton's parameters"
    elif metadata is None:
        why = "it gives no server metadata"
    else:
        why = (
            f"it ({metadata.name or 'unnamed'} {metadata.version}) does not list Triton's "
            f"{TRITON_PARAMETERS!r} extension"
        )
    raise InvalidInputError(
        f"{found} needs Triton's gRPC InferParameter (double_param for a float, uint64_param "
        "above int64), which the open protocol's lacks (bool, int64 and string only), and this "
        f"server would drop it: {why}. Send the value as a string, or over HTTP (JSON carries "
        "it)",
        value=found,
    )


@dataclass(frozen=True, slots=True)
class _TritonParameterCall:
    """An inference with a parameter only Triton's ``InferParameter`` carries, to a server
    not yet known to take it: learn its metadata (once per client), then send, or refuse
    with :func:`refuse_triton_only_parameter` rather than let the value be dropped."""

    backend: GRPCBackend
    call: GRPCCall[InferResult]
    found: str

    @property
    def timeout(self) -> float | None:
        return self.call.timeout

    def with_timeout(self, timeout: float | None) -> _TritonParameterCall:
        return replace(self, call=self.call.with_timeout(timeout))

    def run(self, channel: UnaryChannel, hook: WireHook | None) -> InferResult:
        self._check(self.backend.learn(channel, hook, self.call))
        return self.call.run(channel, hook)

    async def arun(self, channel: AsyncUnaryChannel, hook: WireHook | None) -> InferResult:
        self._check(await self.backend.alearn(channel, hook, self.call))
        return await self.call.arun(channel, hook)

    def _check(self, metadata: ServerMetadata | None) -> None:
        if not speaks_triton_parameters(metadata):
            refuse_triton_only_parameter(self.found, metadata, self.backend.probe.known)


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
    decode: Callable[[GRPCMessage], T]
    metadata: Metadata = ()
    timeout: float | None = None
    compression: str | None = None
    on_server_error: Callable[[ServerError], T] | None = None

    def with_timeout(self, timeout: float | None) -> GRPCCall[T]:
        return replace(self, timeout=timeout)

    def run(self, channel: UnaryChannel, hook: WireHook | None) -> T:
        """Send through a sync channel (either transport), tell the hook, decode."""
        started = _hook_send(hook, self) if hook is not None else 0.0
        try:
            response, headers = channel.call_unary(
                self.method,
                self.request,
                timeout=self.timeout,
                metadata=self.metadata,
                compression=self.compression,
                want_metadata=hook is not None,
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

    async def arun(self, channel: AsyncUnaryChannel, hook: WireHook | None) -> T:
        """Send through an asyncio channel (either transport), tell the hook, decode."""
        started = _hook_send(hook, self) if hook is not None else 0.0
        try:
            response, headers = await channel.call_unary(
                self.method,
                self.request,
                timeout=self.timeout,
                metadata=self.metadata,
                compression=self.compression,
                want_metadata=hook is not None,
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
    response: GRPCMessage | None,
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


def _nothing(_data: GRPCMessage) -> None:
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
        query: QueryParams | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout = check_timeout(timeout)
        self.compression = check_compression(compression, "request_compression")
        self._base_metadata: Metadata = tuple(metadata_items(headers))
        #: The server's metadata, learned on first need (see :class:`MetadataProbe`):
        #: whether it takes Triton's parameters (:func:`speaks_triton_parameters`).
        self.probe = MetadataProbe()
        # Whether the server is known to take Triton's parameters (infer() reads it per call).
        self._triton_parameters = False

    # -- what the server advertises ----------------------------------------------------------

    @property
    def takes_triton_parameters(self) -> bool:
        """Whether the server is known to take Triton's parameters (see
        :func:`speaks_triton_parameters`)."""
        return self._triton_parameters

    def _metadata_call(self, call: GRPCCall[Any]) -> GRPCCall[ServerMetadata]:
        # With the deadline and metadata of the call that needs it (headers may carry auth).
        return GRPCCall(
            SERVICE + "ServerMetadata",
            b"",
            codec.decode_server_metadata,
            call.metadata,
            call.timeout,
        )

    def learn(
        self, channel: UnaryChannel, hook: WireHook | None, call: GRPCCall[Any]
    ) -> ServerMetadata | None:
        """The server's metadata, asked through ``channel`` unless known (with the metadata
        and deadline of ``call``); ``None`` when unknown (see :class:`MetadataProbe`)."""
        metadata = self.probe.get(functools.partial(self._metadata_call, call), channel, hook)
        self._triton_parameters = speaks_triton_parameters(metadata)
        return metadata

    async def alearn(
        self, channel: AsyncUnaryChannel, hook: WireHook | None, call: GRPCCall[Any]
    ) -> ServerMetadata | None:
        """The asyncio twin of :meth:`learn`."""
        metadata = await self.probe.aget(
            functools.partial(self._metadata_call, call), channel, hook
        )
        self._triton_parameters = speaks_triton_parameters(metadata)
        return metadata

    # -- building blocks ------------------------------------------------------------------

    def metadata(self, headers: Headers | None = None) -> Metadata:
        """The client's metadata followed by a call's own."""
        if headers is None:
            return self._base_metadata
        return (*self._base_metadata, *metadata_items(headers))

    def call(
        self,
        rpc: str,
        request: bytes | tuple[BytesLike, ...],
        decode: Callable[[GRPCMessage], T],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        on_server_error: Callable[[ServerError], T] | None = None,
    ) -> GRPCCall[T]:
        """One call of ``rpc`` (e.g. ``"ModelInfer"``) with the client's defaults applied.

        ``compression=None`` leaves the channel's default in place. ``query`` is refused
        (:func:`~kserve_v2.arguments.refuse_query`): gRPC has no URL.
        """
        # The checks are skipped for what is absent: this runs per request.
        if query is not None:
            refuse_query(query)
        return GRPCCall(
            SERVICE + rpc,
            request,
            decode,
            self._base_metadata if headers is None else self.metadata(headers),
            self.timeout if timeout is None else check_timeout(timeout),
            None if compression is None else check_compression(compression),
            on_server_error,
        )

    def _named(self, rpc: str, name: str, version: str = "") -> bytes:
        """A serialized ``{name, version}`` request (ModelReady, ModelMetadata, ModelConfig,
        ModelStatistics share the layout)."""
        message = getattr(codec.generated(), f"{rpc}Request")(name=name, version=version)
        data: bytes = message.SerializeToString()
        return data

    # -- core protocol ---------------------------------------------------------------------

    def server_live(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[bool]:
        return self.call(
            "ServerLive",
            b"",
            codec.decode_server_live,
            headers=headers,
            query=query,
            timeout=timeout,
            on_server_error=_always(False),
        )

    def server_ready(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[bool]:
        return self.call(
            "ServerReady",
            b"",
            codec.decode_server_ready,
            headers=headers,
            query=query,
            timeout=timeout,
            on_server_error=_always(False),
        )

    def model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[bool]:
        return self.call(
            "ModelReady",
            self._named("ModelReady", check_model_name(model), check_version(version)),
            codec.decode_model_ready,
            headers=headers,
            query=query,
            timeout=timeout,
            on_server_error=_always(False),
        )

    def server_metadata(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[ServerMetadata]:
        return self.call(
            "ServerMetadata",
            b"",
            lambda data: self.probe.remember(codec.decode_server_metadata(data)),
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[ModelMetadata]:
        return self.call(
            "ModelMetadata",
            self._named("ModelMetadata", check_model_name(model), check_version(version)),
            codec.decode_model_metadata,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def infer(
        self,
        request: InferRequest,
        *,
        binary: bool | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> Call[InferResult, UnaryChannel, AsyncUnaryChannel]:
        """``ModelInfer``; ``binary`` is accepted for symmetry with HTTP (gRPC is binary).

        A parameter that only Triton's ``InferParameter`` carries (a float, an integer above
        int64; see :func:`triton_only_parameter`) is sent only to a server that lists Triton's
        ``parameters`` extension; the first such call asks the server's metadata (once per
        client), and to other servers it raises :class:`InvalidInputError` naming the
        parameter, rather than let the server drop the value.
        """
        if binary is not None:
            check_bool(binary, "binary")
        if query is not None:
            refuse_query(query)
        placements = codec.output_placements(request)
        decode: Callable[[GRPCMessage], InferResult] = (
            functools.partial(codec.decode_infer_response, placements=placements)
            if placements
            else codec.decode_infer_response
        )
        # Not joined here: the native transport sends the tensors from the caller's arrays.
        call = self.call(
            "ModelInfer",
            codec.encode_infer_request_parts(request),
            decode,
            headers=headers,
            query=query,
            timeout=timeout,
            compression=compression,
        )
        # A float (or uint64) parameter goes out only to a server known to take it: others
        # would drop it silently. Once the server is known to take them, nothing is looked at.
        if not self._triton_parameters:
            found = triton_only_parameter(request)
            if found is not None:
                if self.probe.known:
                    refuse_triton_only_parameter(found, self.probe.metadata, True)
                return _TritonParameterCall(self, call, found)
        return call

    def infer_arrays(
        self,
        model: str,
        inputs: InputsArg,
        outputs: OutputsArg | None,
        version: str | int,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> Call[InferResult, UnaryChannel, AsyncUnaryChannel] | None:
        """:meth:`infer` of ``build_infer_request(model, inputs, outputs=outputs,
        version=version)``, the call with no other argument, or None when ``inputs`` is not a
        dict of numpy arrays (or ``outputs`` not names): then the caller takes the full path.

        A request of a form already sent (same model, version, outputs, input names, dtypes
        and shapes: :func:`~kserve_v2.grpc.codec.request_form_key`) is that request's framing
        around the new arrays' bytes; its first request takes the full path, which stays the
        reference for what is sent and for every error.
        """
        key = codec.request_form_key(model, version, inputs, outputs)
        if key is None:
            return None
        assert isinstance(inputs, dict)  # the key says so
        parts = codec.REQUEST_FORMS.parts(key, inputs.values())
        if parts is not None:
            return self.call(
                "ModelInfer",
                parts,
                codec.decode_infer_response,
                headers=headers,
                timeout=timeout,
                compression=compression,
            )
        request = build_infer_request(model, inputs, outputs=outputs, version=version)
        call = self.infer(request, headers=headers, timeout=timeout, compression=compression)
        # Only the plain call (not a Triton-parameter check, not shared-memory outputs).
        if (
            isinstance(call, GRPCCall)
            and call.decode is codec.decode_infer_response
            and type(call.request) is tuple
        ):
            codec.REQUEST_FORMS.learn(key, request, call.request)
        return call

    # -- Triton extensions -------------------------------------------------------------------

    def model_config(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "ModelConfig",
            self._named("ModelConfig", check_model_name(model), check_version(version)),
            extensions.decode_model_config,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def model_statistics(
        self,
        model: str = "",
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "ModelStatistics",
            self._named("ModelStatistics", *check_statistics_target(model, version)),
            extensions.decode_model_statistics,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[list[RepositoryModel]]:
        message = codec.generated().RepositoryIndexRequest(
            ready=check_bool(ready_only, "ready_only")
        )
        return self.call(
            "RepositoryIndex",
            message.SerializeToString(),
            extensions.decode_repository_index,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def load_model(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        name = check_model_name(model)
        config_text, wire_files = normalize_load_request(config, files)
        return self.call(
            "RepositoryModelLoad",
            extensions.load_request(name, config_text, wire_files),
            _nothing,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def unload_model(
        self,
        model: str,
        *,
        unload_dependents: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        request = extensions.unload_request(
            check_model_name(model), check_bool(unload_dependents, "unload_dependents")
        )
        return self.call(
            "RepositoryModelUnload",
            request,
            _nothing,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def _region_call(
        self,
        method: str,
        region: str,
        decode: Callable[[GRPCMessage], T],
        headers: Headers | None,
        query: QueryParams | None,
        timeout: float | None,
    ) -> GRPCCall[T]:
        """A shared-memory status or unregister call: a request naming one region, or none."""
        request = getattr(codec.generated(), method + "Request")
        message = request(name=check_region_name(region, required=False))
        return self.call(
            method,
            message.SerializeToString(),
            decode,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def system_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[list[dict[str, Any]]]:
        return self._region_call(
            "SystemSharedMemoryStatus",
            region,
            extensions.decode_system_shm_status,
            headers,
            query,
            timeout,
        )

    def register_system_shared_memory(
        self,
        region: str,
        key: str,
        byte_size: int,
        *,
        offset: int = 0,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        name, fields = system_shm_registration(region, key, byte_size, offset)
        message = codec.generated().SystemSharedMemoryRegisterRequest(name=name, **fields)
        return self.call(
            "SystemSharedMemoryRegister",
            message.SerializeToString(),
            _nothing,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def unregister_system_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        return self._region_call(
            "SystemSharedMemoryUnregister", region, _nothing, headers, query, timeout
        )

    def cuda_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[list[dict[str, Any]]]:
        return self._region_call(
            "CudaSharedMemoryStatus",
            region,
            extensions.decode_cuda_shm_status,
            headers,
            query,
            timeout,
        )

    def register_cuda_shared_memory(
        self,
        region: str,
        raw_handle: BytesLike,
        device_id: int,
        byte_size: int,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        name, handle, device, size = cuda_shm_registration(region, raw_handle, device_id, byte_size)
        message = codec.generated().CudaSharedMemoryRegisterRequest(
            name=name, raw_handle=handle, device_id=device, byte_size=size
        )
        return self.call(
            "CudaSharedMemoryRegister",
            message.SerializeToString(),
            _nothing,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def unregister_cuda_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[None]:
        return self._region_call(
            "CudaSharedMemoryUnregister", region, _nothing, headers, query, timeout
        )

    def trace_settings(
        self,
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "TraceSetting",
            extensions.trace_settings_request(None, check_optional_model(model)),
            extensions.decode_trace_settings,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def update_trace_settings(
        self,
        settings: Mapping[str, Any],
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        normalized = trace_settings_update(settings)
        return self.call(
            "TraceSetting",
            extensions.trace_settings_request(normalized, check_optional_model(model)),
            extensions.decode_trace_settings,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def log_settings(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "LogSettings",
            b"",
            extensions.decode_log_settings,
            headers=headers,
            query=query,
            timeout=timeout,
        )

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> GRPCCall[dict[str, Any]]:
        return self.call(
            "LogSettings",
            extensions.log_settings_request(log_settings_update(settings)),
            extensions.decode_log_settings,
            headers=headers,
            query=query,
            timeout=timeout,
        )


if TYPE_CHECKING:
    # mypy checks that GRPCBackend keeps the contract, its calls running on the unary-channel
    # interfaces that both gRPC transports implement (nothing here runs).
    def _keeps_the_contract(
        backend: GRPCBackend,
    ) -> Backend[UnaryChannel, AsyncUnaryChannel]:
        return backend
