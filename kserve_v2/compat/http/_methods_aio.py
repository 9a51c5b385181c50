"""The asyncio HTTP compat client's methods, written once for both clients.

``_methods_sync.py`` is generated from ``_methods_aio.py`` by ``scripts/unasync.py``: edit
the latter, then run the script. Each method is tritonclient's
signature around one native call (:meth:`AsyncCompatClient._call`); the result shapes are in
:mod:`kserve_v2.compat.http._shared`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kserve_v2.client.aio import AsyncClient
from kserve_v2.compat._base import raw_cuda_handle, translated
from kserve_v2.compat._client_aio import AsyncCompatClient
from kserve_v2.compat.http._shared import (
    HTTPProtocol,
    InferInput,
    InferRequestedOutput,
    InferResult,
    generate_request_body,
    model_metadata_dict,
    parse_response_body,
    repository_index_list,
    server_metadata_dict,
    wrap_result,
)
from kserve_v2.concurrency import AsyncLock

__all__ = ["AsyncHTTPMethods"]


class AsyncHTTPMethods(HTTPProtocol, AsyncCompatClient):
    """The asyncio HTTP client's calls (the client adds its constructor and lifecycle)."""

    _lock: AsyncLock

    def _open(self, options: dict[str, Any]) -> None:
        """Make the native client for the native ``options``."""
        self._client_options = options
        with translated(self._protocol):
            self._client = AsyncClient(**options)
        # Clients that ask for compressed responses (response_compression_algorithm=...).
        self._accepting: dict[str, AsyncClient] = {}

    async def _close_clients(self) -> None:
        others, self._accepting = list(self._accepting.values()), {}
        for client in (self._client, *others):
            await client.aclose()

    async def _accepting_client(self, algorithm: str | None) -> AsyncClient:
        if not algorithm:
            return self._client
        async with self._lock:
            client = self._accepting.get(algorithm)
            if client is None:
                with translated(self._protocol):
                    client = AsyncClient(**self._client_options, accept_compression=algorithm)
                self._accepting[algorithm] = client
            return client

    # -- health and metadata -----------------------------------------------------------------

    async def is_server_live(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is live."""
        return await self._call(
            self._client.is_server_live, headers=headers, query_params=query_params
        )

    async def is_server_ready(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is ready."""
        return await self._call(
            self._client.is_server_ready, headers=headers, query_params=query_params
        )

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return await self._call(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=headers,
            query_params=query_params,
        )

    async def get_server_metadata(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """``{"name", "version", "extensions"}``."""
        return server_metadata_dict(
            await self._call(
                self._client.server_metadata, headers=headers, query_params=query_params
            )
        )

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """``{"name", "versions", "platform", "inputs", "outputs"}``."""
        return model_metadata_dict(
            await self._call(
                self._client.model_metadata,
                model_name,
                model_version,
                headers=headers,
                query_params=query_params,
            )
        )

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The model configuration as Triton's JSON."""
        return await self._call(
            self._client.model_config,
            model_name,
            model_version,
            headers=headers,
            query_params=query_params,
        )

    # -- repository --------------------------------------------------------------------------

    async def get_model_repository_index(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> list[dict[str, Any]]:
        """``[{"name", "version", "state", "reason"}, ...]`` (empty fields left out)."""
        return repository_index_list(
            await self._call(
                self._client.repository_index, headers=headers, query_params=query_params
            )
        )

    async def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) a model, optionally with a configuration (JSON text) and its
        files (``{"file:1/model.py": bytes}``)."""
        await self._call(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=headers,
            query_params=query_params,
        )

    async def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
        unload_dependents: bool = False,
    ) -> None:
        """Unload a model (and, with ``unload_dependents``, the models loaded with it)."""
        await self._call(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=headers,
            query_params=query_params,
        )

    # -- statistics, trace and log settings --------------------------------------------------

    async def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """``{"model_stats": [...]}``."""
        return await self._call(
            self._client.model_statistics,
            model_name,
            model_version,
            headers=headers,
            query_params=query_params,
        )

    async def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},  # tritonclient's default; never changed
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """Change trace settings (globally, or for ``model_name``); the settings in force."""
        return await self._call(
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=headers,
            query_params=query_params,
        )

    async def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The trace settings (global, or those of ``model_name``)."""
        return await self._call(
            self._client.trace_settings,
            model_name or "",
            headers=headers,
            query_params=query_params,
        )

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """Change log settings; the settings in force."""
        return await self._call(
            self._client.update_log_settings, settings, headers=headers, query_params=query_params
        )

    async def get_log_settings(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """The log settings."""
        return await self._call(
            self._client.log_settings, headers=headers, query_params=query_params
        )

    # -- shared memory -----------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}, ...]``."""
        return await self._call(
            self._client.system_shared_memory_status,
            region_name,
            headers=headers,
            query_params=query_params,
        )

    async def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> None:
        """Register ``byte_size`` bytes at ``offset`` of the shared-memory object ``key``."""
        await self._call(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=headers,
            query_params=query_params,
        )

    async def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        await self._call(
            self._client.unregister_system_shared_memory,
            name,
            headers=headers,
            query_params=query_params,
        )

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "device_id", "byte_size"}, ...]``."""
        return await self._call(
            self._client.cuda_shared_memory_status,
            region_name,
            headers=headers,
            query_params=query_params,
        )

    async def register_cuda_shared_memory(
        self,
        name: str,
        raw_handle: bytes,
        device_id: int,
        byte_size: int,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
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
            query_params=query_params,
        )

    async def unregister_cuda_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        await self._call(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=headers,
            query_params=query_params,
        )

    # -- inference ---------------------------------------------------------------------------

    generate_request_body = staticmethod(generate_request_body)
    parse_response_body = staticmethod(parse_response_body)

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
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
        request_compression_algorithm: str | None = None,
        response_compression_algorithm: str | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> InferResult:
        """Run one inference (``timeout``: the server-side timeout in microseconds)."""
        client = await self._accepting_client(response_compression_algorithm)
        result = await self._call(
            client.infer,
            model_name,
            headers=headers,
            query_params=query_params,
            compression=request_compression_algorithm,
            **self._infer_arguments(locals()),
        )
        return wrap_result(result, outputs, self._verbose)
