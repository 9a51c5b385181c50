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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType
from typing import Any

from kserve_v2.compat._base import InferenceServerClientPlugin, Request, translate
from kserve_v2.compat.http._methods_sync import HTTPMethods
from kserve_v2.compat.http._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    base_url,
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
from kserve_v2.concurrency import Lock
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


class InferenceServerClient(HTTPMethods):
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
        super().__init__()
        self._verbose = verbose
        self._lock = Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._open(
            {
                "url": base_url(url, ssl),
                "timeout": network_timeout,
                "connect_timeout": connection_timeout,
                "pool_size": max(1, int(concurrency)),
                "tls": tls_options(ssl, ssl_options, ssl_context_factory, insecure),
                "verbose": verbose,
            }
        )
        workers = max(1, int(concurrency))
        if max_greenlets is not None:
            workers = max(1, min(workers, int(max_greenlets)))
        self._workers = workers

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the client: ``async_infer`` requests in flight finish first."""
        self._close(wait=True)

    def _close(self, wait: bool) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait)
        self._close_clients()

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

    # -- inference on a thread pool ----------------------------------------------------------

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
        kwargs = self._infer_arguments(locals())
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
