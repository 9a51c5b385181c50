"""tritonclient.http on kserve-v2: ``import kserve_v2.compat.http as httpclient``.

Example::

    import numpy as np
    import kserve_v2.compat.http as httpclient

    client = httpclient.InferenceServerClient("localhost:8000")
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
    result = client.infer("simple", inputs)
    print(result.as_numpy("OUTPUT0"))

The client is a thread-safe :class:`kserve_v2.Client`; ``async_infer`` runs on a pool of
``concurrency`` threads (see :mod:`kserve_v2.compat` for what differs from tritonclient).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType
from typing import Any, TypeVar

from kserve_v2.client.sync import Client
from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    PluginHost,
    Request,
    infer_arguments,
    query_arguments,
    raw_cuda_handle,
    translate,
    translated,
)
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
from kserve_v2.compat.utils import (
    InferenceServerException,
    deserialize_bytes_tensor,
    np_to_triton_dtype,
    raise_error,
    serialize_byte_tensor,
    serialized_byte_size,
    triton_to_np_dtype,
)
from kserve_v2.errors import KServeError

__all__ = [
    "InferAsyncRequest",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "Request",
    "deserialize_bytes_tensor",
    "np_to_triton_dtype",
    "raise_error",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]

T = TypeVar("T")


class InferAsyncRequest:
    """The handle :meth:`InferenceServerClient.async_infer` returns.

    ``greenlet`` is the future that will hold the result (the name is tritonclient's, whose
    handle wraps a gevent greenlet).
    """

    def __init__(self, greenlet: Future[InferResult], verbose: bool = False) -> None:
        self._future = greenlet
        self._verbose = verbose

    def get_result(self, block: bool = True, timeout: float | None = None) -> InferResult:
        """The result, waiting for it unless ``block=False`` (then the request must be
        complete); ``timeout`` in seconds. A failed request raises its
        :class:`InferenceServerException`."""
        if not block and not self._future.done():
            raise InferenceServerException(msg="the inference request has not completed yet")
        try:
            return self._future.result(timeout=timeout if block else None)
        except FutureTimeout:
            raise InferenceServerException(
                msg=f"no result within the timeout of {timeout} s"
            ) from None


class InferenceServerClient(PluginHost):
    """A client for Triton's HTTP/REST endpoint (``url`` is ``host:port``, no scheme).

    Args:
        url: the server's ``host:port`` (optionally with a base path).
        verbose: print every request and response.
        concurrency: connections kept to the server (and ``async_infer`` requests in flight).
        connection_timeout: connect timeout in seconds.
        network_timeout: timeout of each request in seconds.
        max_greenlets: at most this many ``async_infer`` requests run at once.
        ssl: use HTTPS.
        ssl_options: ``{"ca_certs": ..., "certfile": ..., "keyfile": ...}`` file names.
        ssl_context_factory: a callable returning the ``ssl.SSLContext`` to use.
        insecure: do not verify the server's certificate.
    """

    def __init__(
        self,
        url: str,
        verbose: bool = False,
        concurrency: int = 1,
        connection_timeout: float = 60.0,
        network_timeout: float = 60.0,
        max_greenlets: int | None = None,
        ssl: bool = False,
        ssl_options: Mapping[str, Any] | None = None,
        ssl_context_factory: Callable[[], Any] | None = None,
        insecure: bool = False,
    ) -> None:
        self._verbose = verbose
        self._client_options: dict[str, Any] = {
            "url": base_url(url, ssl),
            "timeout": network_timeout,
            "connect_timeout": connection_timeout,
            "pool_size": max(1, int(concurrency)),
            "tls": tls_options(ssl, ssl_options, ssl_context_factory, insecure),
            "verbose": verbose,
        }
        with translated("http"):
            self._client = Client(**self._client_options)
        workers = max(1, int(concurrency))
        if max_greenlets is not None:
            workers = max(1, min(workers, int(max_greenlets)))
        self._workers = workers
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        # Clients that ask for compressed responses (response_compression_algorithm=...).
        self._accepting: dict[str, Client] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the client: ``async_infer`` requests in flight finish first."""
        self._close(wait=True)

    def _close(self, wait: bool) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
            others, self._accepting = list(self._accepting.values()), {}
        if executor is not None:
            executor.shutdown(wait=wait)
        for client in (self._client, *others):
            client.close()

    def __del__(self) -> None:
        # As tritonclient's client does: a client nobody closed closes when collected.
        with contextlib.suppress(Exception):
            self._close(wait=False)

    def __enter__(self) -> InferenceServerClient:
        return self

    def __exit__(
        self,
        type: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------

    def _run(self, method: Callable[..., T], *args: Any, query_params: Any = None, **kw: Any) -> T:
        with translated("http"):
            return method(*args, **query_arguments(method, query_params), **kw)

    def _accepting_client(self, algorithm: str | None) -> Client:
        if not algorithm:
            return self._client
        with self._lock:
            client = self._accepting.get(algorithm)
            if client is None:
                with translated("http"):
                    client = Client(**self._client_options, accept_compression=algorithm)
                self._accepting[algorithm] = client
            return client

    # -- health and metadata -----------------------------------------------------------------

    def is_server_live(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is live."""
        return self._run(
            self._client.is_server_live, headers=self._headers(headers), query_params=query_params
        )

    def is_server_ready(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> bool:
        """Whether the server is ready."""
        return self._run(
            self._client.is_server_ready, headers=self._headers(headers), query_params=query_params
        )

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return self._run(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def get_server_metadata(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """``{"name", "version", "extensions"}``."""
        metadata = self._run(
            self._client.server_metadata, headers=self._headers(headers), query_params=query_params
        )
        return server_metadata_dict(metadata)

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """``{"name", "versions", "platform", "inputs", "outputs"}``."""
        metadata = self._run(
            self._client.model_metadata,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )
        return model_metadata_dict(metadata)

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The model configuration as Triton's JSON."""
        return self._run(
            self._client.model_config,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )

    # -- repository --------------------------------------------------------------------------

    def get_model_repository_index(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> list[dict[str, Any]]:
        """``[{"name", "version", "state", "reason"}, ...]`` (empty fields left out)."""
        models = self._run(
            self._client.repository_index,
            headers=self._headers(headers),
            query_params=query_params,
        )
        return repository_index_list(models)

    def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) a model, optionally with a configuration (JSON text) and its
        files (``{"file:1/model.py": bytes}``)."""
        self._run(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
        unload_dependents: bool = False,
    ) -> None:
        """Unload a model (and, with ``unload_dependents``, the models loaded with it)."""
        self._run(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=self._headers(headers),
            query_params=query_params,
        )

    # -- statistics, trace and log settings --------------------------------------------------

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """``{"model_stats": [...]}``."""
        return self._run(
            self._client.model_statistics,
            model_name,
            model_version,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},  # tritonclient's default; never changed
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """Change trace settings (globally, or for ``model_name``); the settings in force."""
        return self._run(
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=self._headers(headers),
            query_params=query_params,
        )

    def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """The trace settings (global, or those of ``model_name``)."""
        return self._run(
            self._client.trace_settings,
            model_name or "",
            headers=self._headers(headers),
            query_params=query_params,
        )

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> dict[str, Any]:
        """Change log settings; the settings in force."""
        return self._run(
            self._client.update_log_settings,
            settings,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def get_log_settings(
        self, headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> dict[str, Any]:
        """The log settings."""
        return self._run(
            self._client.log_settings, headers=self._headers(headers), query_params=query_params
        )

    # -- shared memory -----------------------------------------------------------------------

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "key", "offset", "byte_size"}, ...]``."""
        return self._run(
            self._client.system_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> None:
        """Register ``byte_size`` bytes at ``offset`` of the shared-memory object ``key``."""
        self._run(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def unregister_system_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        self._run(
            self._client.unregister_system_shared_memory,
            name,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        query_params: Any = None,
    ) -> list[dict[str, Any]]:
        """``[{"name", "device_id", "byte_size"}, ...]``."""
        return self._run(
            self._client.cuda_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def register_cuda_shared_memory(
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
        self._run(
            self._client.register_cuda_shared_memory,
            name,
            raw_cuda_handle(raw_handle),
            device_id,
            byte_size,
            headers=self._headers(headers),
            query_params=query_params,
        )

    def unregister_cuda_shared_memory(
        self, name: str = "", headers: Mapping[str, str] | None = None, query_params: Any = None
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        self._run(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=self._headers(headers),
            query_params=query_params,
        )

    # -- inference ---------------------------------------------------------------------------

    generate_request_body = staticmethod(generate_request_body)
    parse_response_body = staticmethod(parse_response_body)

    def infer(
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
        client = self._accepting_client(response_compression_algorithm)
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
            result = client.infer(
                model_name,
                headers=self._headers(headers),
                query=dict(query_params) if query_params else None,
                compression=request_compression_algorithm,
                **kwargs,
            )
        return wrap_result(result, outputs, self._verbose)

    def async_infer(
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
    ) -> InferAsyncRequest:
        """Start one inference; ``get_result()`` of the returned handle waits for it.

        The request's arguments are checked (and its inputs captured) here, so the input
        objects may be reused at once.
        """
        client = self._accepting_client(response_compression_algorithm)
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
        call_headers = self._headers(headers)
        query = dict(query_params) if query_params else None
        verbose = self._verbose

        def run() -> InferResult:
            try:
                result = client.infer(
                    model_name,
                    headers=call_headers,
                    query=query,
                    compression=request_compression_algorithm,
                    **kwargs,
                )
            except KServeError as exc:
                raise translate(exc, "http") from exc
            return wrap_result(result, outputs, verbose)

        return InferAsyncRequest(self._pool().submit(run), verbose)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._workers, thread_name_prefix="kserve-v2 compat async_infer"
                )
            return self._executor
