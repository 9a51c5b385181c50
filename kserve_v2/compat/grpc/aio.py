"""tritonclient.grpc.aio on kserve-v2: ``import kserve_v2.compat.grpc.aio as aiogrpcclient``.

Example::

    import kserve_v2.compat.grpc.aio as aiogrpcclient

    async def main():
        client = aiogrpcclient.InferenceServerClient("localhost:8001")
        result = await client.infer("simple", inputs)

        async def requests():
            yield {"model_name": "repeat_decoupled", "inputs": [x, repeat]}

        async for result, error in client.stream_infer(requests()):
            ...
        await client.close()

The client is a :class:`kserve_v2.AsyncClient`: calls of any number of tasks share one
HTTP/2 connection (on the native transport).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kserve_v2.client.aio import AsyncClient
from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    PluginHost,
    Request,
    infer_arguments,
    raw_cuda_handle,
    translate,
    translated,
)
from kserve_v2.compat.grpc._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    KeepAliveOptions,
    client_options,
    config_message,
    cuda_shm_status_message,
    log_settings_message,
    model_metadata_message,
    reply,
    repository_index_message,
    server_metadata_message,
    statistics_message,
    system_shm_status_message,
    trace_settings_message,
)
from kserve_v2.compat.utils import InferenceServerException, raise_error
from kserve_v2.errors import KServeError, ServerError

__all__ = [
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientBase",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "KeepAliveOptions",
    "Request",
    "raise_error",
]

T = TypeVar("T")

#: The clients' base class (plugin registration), under tritonclient's name.
InferenceServerClientBase = PluginHost


class InferenceServerClient(PluginHost):
    """An asyncio client for Triton's gRPC endpoint (``url`` is ``host:port``); the
    arguments are those of :class:`kserve_v2.compat.grpc.InferenceServerClient`."""

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        ssl: bool = False,
        root_certificates: str | None = None,
        private_key: str | None = None,
        certificate_chain: str | None = None,
        creds: Any = None,
        keepalive_options: KeepAliveOptions | None = None,
        channel_args: Sequence[tuple[str, Any]] | None = None,
    ) -> None:
        self._verbose = verbose
        options = client_options(
            url,
            verbose,
            ssl,
            root_certificates,
            private_key,
            certificate_chain,
            creds,
            keepalive_options,
            channel_args,
        )
        with translated("grpc"):
            self._client = AsyncClient(**options)

    # -- lifecycle ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the client (its streams are cancelled)."""
        await self._client.aclose()

    async def __aenter__(self) -> InferenceServerClient:
        return self

    async def __aexit__(
        self,
        type: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def _run(self, method: Callable[..., Awaitable[T]], *args: Any, **kw: Any) -> T:
        with translated("grpc"):
            result = await method(*args, **kw)
        if self._verbose:
            print(result)
        return result

    # -- health and metadata -----------------------------------------------------------------

    async def is_server_live(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is live."""
        return await self._run(
            self._client.is_server_live, headers=self._headers(headers), timeout=client_timeout
        )

    async def is_server_ready(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is ready."""
        return await self._run(
            self._client.is_server_ready, headers=self._headers(headers), timeout=client_timeout
        )

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return await self._run(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    async def get_server_metadata(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ServerMetadataResponse``."""
        metadata = await self._run(
            self._client.server_metadata, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(server_metadata_message(metadata), as_json)

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelMetadataResponse``."""
        metadata = await self._run(
            self._client.model_metadata,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(model_metadata_message(metadata), as_json)

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelConfigResponse``."""
        config = await self._run(
            self._client.model_config,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(config_message(config), as_json)

    # -- repository --------------------------------------------------------------------------

    async def get_model_repository_index(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``RepositoryIndexResponse``."""
        models = await self._run(
            self._client.repository_index, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(repository_index_message(models), as_json)

    async def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Load (or reload) a model, optionally with a configuration (JSON text) and its
        files (``{"file:1/model.py": bytes}``)."""
        await self._run(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    async def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        client_timeout: float | None = None,
    ) -> None:
        """Unload a model (and, with ``unload_dependents``, the models loaded with it)."""
        await self._run(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    # -- statistics, trace and log settings --------------------------------------------------

    async def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelStatisticsResponse``."""
        statistics = await self._run(
            self._client.model_statistics,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(statistics_message(statistics), as_json)

    async def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},  # tritonclient's default; never changed
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change trace settings; ``TraceSettingResponse`` with the settings in force."""
        current = await self._run(
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(trace_settings_message(current), as_json)

    async def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``TraceSettingResponse``."""
        current = await self._run(
            self._client.trace_settings,
            model_name or "",
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(trace_settings_message(current), as_json)

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change log settings; ``LogSettingsResponse`` with the settings in force."""
        current = await self._run(
            self._client.update_log_settings,
            settings,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(log_settings_message(current), as_json)

    async def get_log_settings(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``LogSettingsResponse``."""
        current = await self._run(
            self._client.log_settings, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(log_settings_message(current), as_json)

    # -- shared memory -----------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``SystemSharedMemoryStatusResponse``."""
        regions = await self._run(
            self._client.system_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(system_shm_status_message(regions), as_json)

    async def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Register ``byte_size`` bytes at ``offset`` of the shared-memory object ``key``."""
        await self._run(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    async def unregister_system_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        await self._run(
            self._client.unregister_system_shared_memory,
            name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``CudaSharedMemoryStatusResponse``."""
        regions = await self._run(
            self._client.cuda_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(cuda_shm_status_message(regions), as_json)

    async def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Register GPU memory by its CUDA IPC handle, base64-encoded as
        ``cuda_shared_memory.get_raw_handle`` returns it."""
        await self._run(
            self._client.register_cuda_shared_memory,
            name,
            raw_cuda_handle(raw_handle),
            device_id,
            byte_size,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    async def unregister_cuda_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        await self._run(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    # -- inference ---------------------------------------------------------------------------

    async def infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        client_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        compression_algorithm: str | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> InferResult:
        """Run one inference (``timeout``: the server-side timeout in microseconds;
        ``client_timeout``: the call's deadline in seconds)."""
        with translated("grpc"):
            kwargs = infer_arguments(
                inputs,
                outputs,
                model_version,
                request_id,
                sequence_id,
                sequence_start,
                sequence_end,
                priority,
                timeout,
                parameters,
            )
            result = await self._client.infer(
                model_name,
                headers=self._headers(headers),
                timeout=client_timeout,
                compression=compression_algorithm,
                **kwargs,
            )
        return InferResult(result)

    # -- streaming ---------------------------------------------------------------------------

    def stream_infer(
        self,
        inputs_iterator: AsyncIterable[Mapping[str, Any]],
        stream_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        compression_algorithm: str | None = None,
    ) -> AsyncIterator[tuple[InferResult | None, InferenceServerException | None]]:
        """Stream requests and their responses: ``inputs_iterator`` yields requests as dicts
        of :meth:`kserve_v2.compat.grpc.InferenceServerClient.async_stream_infer`'s arguments
        (``model_name``, ``inputs``, ``outputs``, ``request_id``, ``sequence_id``, ...); the
        result yields ``(result, None)`` or ``(None, error)`` for each response, in arrival
        order, until the requests are exhausted and answered.
        """
        return self._stream(inputs_iterator, stream_timeout, headers, compression_algorithm)

    async def _stream(
        self,
        requests: AsyncIterable[Mapping[str, Any]],
        stream_timeout: float | None,
        headers: Mapping[str, str] | None,
        compression_algorithm: str | None,
    ) -> AsyncIterator[tuple[InferResult | None, InferenceServerException | None]]:
        call_headers = self._headers(headers) or {}
        grpc_error = str(call_headers.pop("triton_grpc_error", "")).lower() == "true"
        with translated("grpc"):
            stream = self._client.stream(
                headers=call_headers or None,
                timeout=stream_timeout,
                compression=compression_algorithm,
                enable_empty_final_response=True,  # shown per request, as asked
                triton_grpc_error=grpc_error,
            )
        state = _StreamState()
        sender = asyncio.ensure_future(_send_all(stream, requests, state))
        try:
            async with stream:
                while True:
                    snapshot = state.sent
                    try:
                        async for native in stream:
                            item = state.shown(native)
                            if item is not None:
                                yield item, None
                    except KServeError as exc:
                        yield None, translate(exc, "grpc")
                        per_request = isinstance(exc, ServerError) and exc.grpc_code is None
                        if not per_request or grpc_error:
                            return
                        continue
                    if sender.done():
                        sender.result()  # a failure of the request iterator is raised here
                        if state.sent == snapshot:
                            return
                        continue
                    if state.sent == snapshot:
                        state.more.clear()
                        await state.more.wait()
        finally:
            if not sender.done():
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender


class _StreamState:
    """What ``stream_infer``'s sender and consumer share."""

    def __init__(self) -> None:
        self.sent = 0
        self.more = asyncio.Event()
        self.hide_empty_final: set[str] = set()
        self.made_up: set[str] = set()
        self.ids = 0

    def shown(self, native: Any) -> InferResult | None:
        """The compat result of a native response, or ``None`` for an empty final response
        its request did not ask for."""
        request_id = native.id
        hide = request_id in self.hide_empty_final
        made_up = request_id in self.made_up
        if native.final:
            self.hide_empty_final.discard(request_id)
            self.made_up.discard(request_id)
        if hide and native.final and not native.outputs:
            return None
        if made_up:
            from dataclasses import replace

            native = replace(native, id="")
        return InferResult(native)


async def _send_all(
    stream: Any, requests: AsyncIterable[Mapping[str, Any]], state: _StreamState
) -> None:
    try:
        async for request in requests:
            request = dict(request)
            unknown = set(request) - _STREAM_REQUEST_KEYS
            if unknown:
                raise InferenceServerException(
                    msg=f"unknown stream request keys: {sorted(unknown)}"
                )
            model_name = request.pop("model_name")
            inputs = request.pop("inputs")
            show_empty_final = bool(request.pop("enable_empty_final_response", False))
            with translated("grpc"):
                kwargs = infer_arguments(
                    inputs,
                    request.get("outputs"),
                    request.get("model_version", ""),
                    request.get("request_id", ""),
                    request.get("sequence_id", 0),
                    request.get("sequence_start", False),
                    request.get("sequence_end", False),
                    request.get("priority", 0),
                    request.get("timeout"),
                    request.get("parameters"),
                )
                request_id = kwargs.pop("request_id")
                if not request_id:
                    state.ids += 1
                    request_id = f"kserve-v2-compat-{state.ids}"
                    state.made_up.add(request_id)
                if not show_empty_final:
                    state.hide_empty_final.add(request_id)
                await stream.send(model_name, request_id=request_id, **kwargs)
            state.sent += 1
            state.more.set()
    finally:
        state.more.set()


#: The keys a ``stream_infer`` request may have.
_STREAM_REQUEST_KEYS = frozenset(
    {
        "model_name",
        "inputs",
        "model_version",
        "outputs",
        "request_id",
        "sequence_id",
        "sequence_start",
        "sequence_end",
        "enable_empty_final_response",
        "priority",
        "timeout",
        "parameters",
    }
)
