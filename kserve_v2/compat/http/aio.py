"""tritonclient.http.aio on kserve-v2: ``import kserve_v2.compat.http.aio as aiohttpclient``.

Example::

    import kserve_v2.compat.http.aio as aiohttpclient

    async def main():
        client = aiohttpclient.InferenceServerClient("localhost:8000")
        x = aiohttpclient.InferInput("INPUT0", [1, 16], "INT32")
        ...
        result = await client.infer("simple", [x, y])
        await client.close()

The client is a :class:`kserve_v2.AsyncClient`: any number of tasks of one event loop may
use it at once (``conn_limit`` connections).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from kserve_v2.client.aio import AsyncClient
from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    PluginHost,
    Request,
    infer_arguments,
    query_arguments,
    raw_cuda_handle,
    translated,
)
from kserve_v2.compat.http import InferAsyncRequest
from kserve_v2.compat.http._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    base_url,
    generate_request_body,
    model_metadata_dict,
    parse_response_body,
    repository_index_list,
    server_metadata_dict,
    tls_options,
    wrap_result,
)
from kserve_v2.compat.utils import InferenceServerException

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientBase",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
]

T = TypeVar("T")

#: The clients' base class (plugin registration), under tritonclient's name.
InferenceServerClientBase = PluginHost


class InferenceServerClient(PluginHost):
    """An asyncio client for Triton's HTTP/REST endpoint (``url`` is ``host:port``).

    Args:
        url: the server's ``host:port`` (optionally with a base path).
        verbose: print every request and response.
        conn_limit: most connections kept to the server.
        conn_timeout: timeout of each request in seconds.
        ssl: use HTTPS.
        ssl_context: the ``ssl.SSLContext`` to use.
    """

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        conn_limit: int = 100,
        conn_timeout: float = 60.0,
        ssl: bool = False,
        ssl_context: Any = None,
    ) -> None:
        self._verbose = verbose
        self._client_options: dict[str, Any] = {
            "url": base_url(url, ssl),
            "timeout": conn_timeout,
            "pool_size": max(1, int(conn_limit)),
            "tls": tls_options(ssl, None, None, False, ssl_context),
            "verbose": verbose,
        }
        with translated("http"):
            self._client = AsyncClient(**self._client_options)
        self._lock = asyncio.Lock()
        # Clients that ask for compressed responses (response_compression_algorithm=...).
        self._accepting: dict[str, AsyncClient] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the client's connections."""
        others, self._accepting = list(self._accepting.values()), {}
        for client in (self._client, *others):
            await client.aclose()

    async def __aenter__(self) -> InferenceServerClient:
        return self

    async def __aexit__(
        self,
        type: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- plumbing ----------------------------------------------------------------------------

    async def _run(
        self, method: Callable[..., Awaitable[T]], *args: Any, query_params: Any = None, **kw: Any
    ) -> T:
        with translated("http"):
            return await method(*args, **query_arguments(method, query_params), **kw)

    async def _accepting_client(self, algorithm: str | None) -> AsyncClient:
        if not algorithm:
            return self._client
        async with self._lock:
            client = self._accepting.get(algorithm)
            if client is None:
                with translated("http"):
                    client = AsyncClient(**self._client_options, accept_compression=algorithm)
                self._accepting[algorithm] = client
            return client

    # -- health and metadata -----------------------------------------------------------------

    async def is_server_live(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is live."""
        return await self._run(
            self._client.is_server_live, headers=self._headers(headers), query_params=query_params
        )

    async def is_server_ready(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is ready."""
        return await self._run(
            self._client.is_server_ready, headers=self._headers(headers), query_params=query_params
        )

    async def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return await self._run(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def get_server_metadata(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """``{"name", "version", "extensions"}``."""
        metadata = await self._run(
            self._client.server_metadata, headers=self._headers(headers), query_params=query_params
        )
        return server_metadata_dict(metadata)

    async def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """``{"name", "versions", "platform", "inputs", "outputs"}``."""
        metadata = await self._run(
            self._client.model_metadata,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )
        return model_metadata_dict(metadata)

    async def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The model configuration as Triton's JSON."""
        return await self._run(
            self._client.model_config,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )

    # -- repository --------------------------------------------------------------------------

    async def get_model_repository_index(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> list[dict[str, Any]]:
        """``[{"name", "version", "state", "reason"}, ...]`` (empty fields left out)."""
        models = await self._run(
            self._client.repository_index,
            headers=self._headers(headers),
            query_params=query_params,
        )
        return repository_index_list(models)

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
        await self._run(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=self._headers(headers),
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
        await self._run(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=self._headers(headers),
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
        return await self._run(
            self._client.model_statistics,
            model_name,
            model_version,
            headers=self._headers(headers),
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
        return await self._run(
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The trace settings (global, or those of ``model_name``)."""
        return await self._run(
            self._client.trace_settings,
            model_name or "",
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """Change log settings; the settings in force."""
        return await self._run(
            self._client.update_log_settings,
            settings,
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def get_log_settings(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """The log settings."""
        return await self._run(
            self._client.log_settings, headers=self._headers(headers), query_params=query_params
        )

    # -- shared memory -----------------------------------------------------------------------

    async def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}, ...]``."""
        return await self._run(
            self._client.system_shared_memory_status,
            region_name,
            headers=self._headers(headers),
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
        await self._run(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        await self._run(
            self._client.unregister_system_shared_memory,
            name,
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "device_id", "byte_size"}, ...]``."""
        return await self._run(
            self._client.cuda_shared_memory_status,
            region_name,
            headers=self._headers(headers),
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
        await self._run(
            self._client.register_cuda_shared_memory,
            name,
            raw_cuda_handle(raw_handle),
            device_id,
            byte_size,
            headers=self._headers(headers),
            query_params=query_params,
        )

    async def unregister_cuda_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        await self._run(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=self._headers(headers),
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
        with translated("http"):
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
            result = await client.infer(
                model_name,
                headers=self._headers(headers),
                query=dict(query_params) if query_params else None,
                compression=request_compression_algorithm,
                **kwargs,
            )
        return wrap_result(result, outputs, self._verbose)
