"""The asyncio gRPC compat client's methods, written once for both clients.

``_methods_sync.py`` is generated from ``_methods_aio.py`` by ``scripts/unasync.py``: edit
the latter, then run the script. Each method is tritonclient's signature around one native
call (:meth:`AsyncCompatClient._call`); the messages are made in
:mod:`kserve_v2.compat.grpc._shared`.
"""

from __future__ import annotations

from collections.abc import (
    Awaitable,  # unasync: sync:
    Callable,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar

from kserve_v2.client.aio import AsyncClient
from kserve_v2.compat._base import raw_cuda_handle, translated
from kserve_v2.compat._client_aio import AsyncCompatClient
from kserve_v2.compat.grpc._shared import (
    GRPCProtocol,
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

__all__ = ["AsyncGRPCMethods"]

T = TypeVar("T")


class AsyncGRPCMethods(GRPCProtocol, AsyncCompatClient):
    """The asyncio gRPC client's calls (the client adds its constructor, lifecycle and
    streams)."""

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
        super().__init__()
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
        with translated(self._protocol):
            self._client = AsyncClient(**options)
        self._opened()

    def _opened(self) -> None:
        """Set up what a client adds (once the native client is made)."""

    async def _message(
        self,
        to_message: Callable[[T], Any],
        method: Callable[..., Awaitable[T]],  # unasync: sync: method: Callable[..., T],
        *args: Any,
        headers: Mapping[str, str] | None,
        as_json: bool,
        client_timeout: float | None,
    ) -> Any:
        """``method(*args)``'s result as tritonclient returns it: the protobuf message
        ``to_message`` makes of it, or with ``as_json`` its JSON form."""
        result = await self._call(method, *args, headers=headers, client_timeout=client_timeout)
        return reply(to_message(result), as_json)

    # -- health and metadata -----------------------------------------------------------------

    async def is_server_live(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is live."""
        return await self._call(
            self._client.is_server_live, headers=headers, client_timeout=client_timeout
        )

    async def is_server_ready(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is ready."""
        return await self._call(
            self._client.is_server_ready, headers=headers, client_timeout=client_timeout
        )

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return await self._call(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=headers,
            client_timeout=client_timeout,
        )

    async def get_server_metadata(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ServerMetadataResponse``."""
        return await self._message(
            server_metadata_message,
            self._client.server_metadata,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelMetadataResponse``."""
        return await self._message(
            model_metadata_message,
            self._client.model_metadata,
            model_name,
            model_version,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelConfigResponse``."""
        return await self._message(
            config_message,
            self._client.model_config,
            model_name,
            model_version,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    # -- repository --------------------------------------------------------------------------

    async def get_model_repository_index(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``RepositoryIndexResponse``."""
        return await self._message(
            repository_index_message,
            self._client.repository_index,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

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
        await self._call(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=headers,
            client_timeout=client_timeout,
        )

    async def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        client_timeout: float | None = None,
    ) -> None:
        """Unload a model (and, with ``unload_dependents``, the models loaded with it)."""
        await self._call(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=headers,
            client_timeout=client_timeout,
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
        return await self._message(
            statistics_message,
            self._client.model_statistics,
            model_name,
            model_version,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},  # tritonclient's default; never changed
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change trace settings; ``TraceSettingResponse`` with the settings in force."""
        return await self._message(
            trace_settings_message,
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``TraceSettingResponse``."""
        return await self._message(
            trace_settings_message,
            self._client.trace_settings,
            model_name or "",
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change log settings; ``LogSettingsResponse`` with the settings in force."""
        return await self._message(
            log_settings_message,
            self._client.update_log_settings,
            settings,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    async def get_log_settings(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``LogSettingsResponse``."""
        return await self._message(
            log_settings_message,
            self._client.log_settings,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

    # -- shared memory -----------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``SystemSharedMemoryStatusResponse``."""
        return await self._message(
            system_shm_status_message,
            self._client.system_shared_memory_status,
            region_name,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

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
        await self._call(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=headers,
            client_timeout=client_timeout,
        )

    async def unregister_system_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        await self._call(
            self._client.unregister_system_shared_memory,
            name,
            headers=headers,
            client_timeout=client_timeout,
        )

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``CudaSharedMemoryStatusResponse``."""
        return await self._message(
            cuda_shm_status_message,
            self._client.cuda_shared_memory_status,
            region_name,
            headers=headers,
            as_json=as_json,
            client_timeout=client_timeout,
        )

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
        await self._call(
            self._client.register_cuda_shared_memory,
            name,
            raw_cuda_handle(raw_handle),
            device_id,
            byte_size,
            headers=headers,
            client_timeout=client_timeout,
        )

    async def unregister_cuda_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        await self._call(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=headers,
            client_timeout=client_timeout,
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
        result = await self._call(
            self._client.infer,
            model_name,
            headers=headers,
            client_timeout=client_timeout,
            compression=compression_algorithm,
            **self._infer_arguments(locals()),
        )
        return InferResult(result)
