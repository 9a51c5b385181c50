"""tritonclient.grpc on kserve-v2: ``import kserve_v2.compat.grpc as grpcclient``.

Example::

    import numpy as np
    import kserve_v2.compat.grpc as grpcclient

    client = grpcclient.InferenceServerClient("localhost:8001")
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
              grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    inputs[1].set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
    print(client.infer("simple", inputs).as_numpy("OUTPUT0"))

The metadata, configuration, statistics, repository and shared-memory methods return the
protobuf messages tritonclient returns (``as_json=True``: their JSON form). Calls run on the
native gRPC transport (no grpcio) unless the program asks for grpcio's features (see
:mod:`kserve_v2.compat`). ``service_pb2`` is the module of the generated messages.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from kserve_v2.client.sync import Client
from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    PluginHost,
    Request,
    callback_failed,
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
from kserve_v2.compat.utils import (
    InferenceServerException,
    deserialize_bytes_tensor,
    np_to_triton_dtype,
    raise_error,
    serialize_byte_tensor,
    serialized_byte_size,
    triton_to_np_dtype,
)
from kserve_v2.errors import KServeError, ServerError
from kserve_v2.grpc.codec import generated

if TYPE_CHECKING:
    from kserve_v2.grpc.stream import GRPCStream
    from kserve_v2.messages import InferResult as NativeResult

__all__ = [
    "CallContext",
    "InferInput",
    "InferRequestedOutput",
    "InferResult",
    "InferenceServerClient",
    "InferenceServerClientPlugin",
    "InferenceServerException",
    "KeepAliveOptions",
    "Request",
    "deserialize_bytes_tensor",
    "np_to_triton_dtype",
    "raise_error",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]

T = TypeVar("T")
Callback = Callable[[Any, Any], None]

#: Threads that run ``async_infer`` requests of one client (each holds one native connection
#: while its request is in flight); further requests wait for a free one.
ASYNC_WORKERS = 16


def __getattr__(name: str) -> ModuleType:
    # ``grpcclient.service_pb2`` as in tritonclient: the generated messages (needs protobuf).
    if name == "service_pb2":
        return generated()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CallContext:
    """What :meth:`InferenceServerClient.async_infer` returns: ``cancel()`` stops a request
    that has not started yet."""

    def __init__(self, future: Future[None]) -> None:
        self._future = future

    def cancel(self) -> bool:
        """Cancel the request if it has not been sent yet; whether it was cancelled."""
        return self._future.cancel()


class _CallbackStream:
    """``start_stream``'s stream: a native stream and a thread that hands each response
    (or error) to the callback, in arrival order.

    The native stream's iteration ends whenever every request sent so far is complete, so
    the thread iterates again after each new send; it stops once the stream is stopped or
    has failed.
    """

    def __init__(self, stream: GRPCStream, callback: Callback, grpc_error_mode: bool) -> None:
        self._stream = stream
        self._callback = callback
        self._grpc_error_mode = grpc_error_mode
        self._cond = threading.Condition()
        self._sent = 0  # requests sent
        self._taken = 0  # requests sent when the dispatcher last started iterating
        self._idle = True
        self._stopping = False
        self._dead = False
        # Requests that did not ask for Triton's empty final response, and ids made up here
        # (shown as "" to the callback, as tritonclient sends no id then).
        self._hide_empty_final: set[str] = set()
        self._made_up: set[str] = set()
        self._ids = 0
        self._thread = threading.Thread(
            target=self._dispatch, name="kserve-v2 compat stream callback", daemon=True
        )
        self._thread.start()

    def send(self, model_name: str, enable_empty_final_response: bool, **kw: Any) -> None:
        request_id = kw.pop("request_id")
        with self._cond:
            if self._dead or self._stopping:
                raise InferenceServerException(msg="the stream is closed")
            made_up = not request_id
            if made_up:
                self._ids += 1
                request_id = f"kserve-v2-compat-{self._ids}"
                self._made_up.add(request_id)
            if not enable_empty_final_response:
                self._hide_empty_final.add(request_id)
        try:
            self._stream.send(model_name, request_id=request_id, **kw)
        except BaseException:
            with self._cond:
                self._made_up.discard(request_id)
                self._hide_empty_final.discard(request_id)
            raise
        with self._cond:
            self._sent += 1
            self._cond.notify_all()

    def _deliver(self, result: NativeResult) -> None:
        request_id = result.id
        with self._cond:
            hide = request_id in self._hide_empty_final
            made_up = request_id in self._made_up
            if result.final:
                self._hide_empty_final.discard(request_id)
                self._made_up.discard(request_id)
        if hide and result.final and not result.outputs:
            return
        if made_up:
            result = _without_id(result)
        self._call(InferResult(result), None)

    def _call(self, result: InferResult | None, error: InferenceServerException | None) -> None:
        try:
            self._callback(result, error)
        except Exception:
            callback_failed("the stream callback")

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                self._cond.notify_all()
                while self._taken == self._sent and not self._stopping:
                    self._cond.wait()
                if self._taken == self._sent:
                    return  # stopping, and nothing left to take
                self._taken = self._sent
                self._idle = False
            try:
                for result in self._stream:
                    self._deliver(result)
            except KServeError as exc:
                self._call(None, translate(exc, "grpc"))
                per_request = isinstance(exc, ServerError) and exc.grpc_code is None
                if not per_request or self._grpc_error_mode:
                    with self._cond:
                        self._dead = True
                        self._idle = True
                        self._cond.notify_all()
                    return
                with self._cond:
                    self._taken -= 1  # iterate again: other requests may still be in flight

    def stop(self, cancel_requests: bool) -> None:
        in_dispatcher = threading.current_thread() is self._thread
        if cancel_requests:
            self._stream.cancel()
        else:
            with self._cond:
                # Every response handed to the callback first, as tritonclient's stop waits.
                while (
                    not in_dispatcher
                    and not self._dead
                    and not (self._idle and self._taken == self._sent)
                ):
                    self._cond.wait()
            self._stream.close()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if not in_dispatcher:
            self._thread.join()


def _without_id(result: NativeResult) -> NativeResult:
    from dataclasses import replace

    return replace(result, id="")


class InferenceServerClient(PluginHost):
    """A client for Triton's gRPC endpoint (``url`` is ``host:port``, no scheme).

    Args:
        url: the server's ``host:port``.
        verbose: print every request and response.
        ssl: use TLS; ``root_certificates``, ``private_key`` and ``certificate_chain`` are
            PEM file names (CA, client key and certificate for mutual TLS).
        creds: ready ``grpc.ChannelCredentials`` (selects the grpcio transport).
        keepalive_options: :class:`KeepAliveOptions` (pings select the grpcio transport).
        channel_args: grpcio channel arguments, ``[(name, value), ...]``.
    """

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
            self._client = Client(**options)
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._stream: _CallbackStream | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the client: stops the stream (cancelling its requests) and waits for
        ``async_infer`` requests in flight."""
        self._close(wait=True)

    def _close(self, wait: bool) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
            executor, self._executor = self._executor, None
        if stream is not None:
            stream.stop(cancel_requests=True)
        if executor is not None:
            executor.shutdown(wait=wait)
        self._client.close()

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

    def _run(self, method: Callable[..., T], *args: Any, **kw: Any) -> T:
        with translated("grpc"):
            result = method(*args, **kw)
        if self._verbose:
            print(result)
        return result

    # -- health and metadata -----------------------------------------------------------------

    def is_server_live(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is live."""
        return self._run(
            self._client.is_server_live, headers=self._headers(headers), timeout=client_timeout
        )

    def is_server_ready(
        self, headers: Mapping[str, str] | None = None, client_timeout: float | None = None
    ) -> bool:
        """Whether the server is ready."""
        return self._run(
            self._client.is_server_ready, headers=self._headers(headers), timeout=client_timeout
        )

    def is_model_ready(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> bool:
        """Whether the model (version) is ready."""
        return self._run(
            self._client.is_model_ready,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    def get_server_metadata(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ServerMetadataResponse``."""
        metadata = self._run(
            self._client.server_metadata, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(server_metadata_message(metadata), as_json)

    def get_model_metadata(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelMetadataResponse``."""
        metadata = self._run(
            self._client.model_metadata,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(model_metadata_message(metadata), as_json)

    def get_model_config(
        self,
        model_name: str,
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelConfigResponse``."""
        config = self._run(
            self._client.model_config,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(config_message(config), as_json)

    # -- repository --------------------------------------------------------------------------

    def get_model_repository_index(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``RepositoryIndexResponse``."""
        models = self._run(
            self._client.repository_index, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(repository_index_message(models), as_json)

    def load_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Load (or reload) a model, optionally with a configuration (JSON text) and its
        files (``{"file:1/model.py": bytes}``)."""
        self._run(
            self._client.load_model,
            model_name,
            config=config,
            files=files,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    def unload_model(
        self,
        model_name: str,
        headers: Mapping[str, str] | None = None,
        unload_dependents: bool = False,
        client_timeout: float | None = None,
    ) -> None:
        """Unload a model (and, with ``unload_dependents``, the models loaded with it)."""
        self._run(
            self._client.unload_model,
            model_name,
            unload_dependents=unload_dependents,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    # -- statistics, trace and log settings --------------------------------------------------

    def get_inference_statistics(
        self,
        model_name: str = "",
        model_version: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``ModelStatisticsResponse``."""
        statistics = self._run(
            self._client.model_statistics,
            model_name,
            model_version,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(statistics_message(statistics), as_json)

    def update_trace_settings(
        self,
        model_name: str | None = None,
        settings: Mapping[str, Any] = {},  # tritonclient's default; never changed
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change trace settings; ``TraceSettingResponse`` with the settings in force."""
        current = self._run(
            self._client.update_trace_settings,
            settings,
            model_name or "",
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(trace_settings_message(current), as_json)

    def get_trace_settings(
        self,
        model_name: str | None = None,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``TraceSettingResponse``."""
        current = self._run(
            self._client.trace_settings,
            model_name or "",
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(trace_settings_message(current), as_json)

    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """Change log settings; ``LogSettingsResponse`` with the settings in force."""
        current = self._run(
            self._client.update_log_settings,
            settings,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(log_settings_message(current), as_json)

    def get_log_settings(
        self,
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``LogSettingsResponse``."""
        current = self._run(
            self._client.log_settings, headers=self._headers(headers), timeout=client_timeout
        )
        return reply(log_settings_message(current), as_json)

    # -- shared memory -----------------------------------------------------------------------

    def get_system_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``SystemSharedMemoryStatusResponse``."""
        regions = self._run(
            self._client.system_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(system_shm_status_message(regions), as_json)

    def register_system_shared_memory(
        self,
        name: str,
        key: str,
        byte_size: int,
        offset: int = 0,
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Register ``byte_size`` bytes at ``offset`` of the shared-memory object ``key``."""
        self._run(
            self._client.register_system_shared_memory,
            name,
            key,
            byte_size,
            offset=offset,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    def unregister_system_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a system region (every one when ``name`` is empty)."""
        self._run(
            self._client.unregister_system_shared_memory,
            name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    def get_cuda_shared_memory_status(
        self,
        region_name: str = "",
        headers: Mapping[str, str] | None = None,
        as_json: bool = False,
        client_timeout: float | None = None,
    ) -> Any:
        """``CudaSharedMemoryStatusResponse``."""
        regions = self._run(
            self._client.cuda_shared_memory_status,
            region_name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )
        return reply(cuda_shm_status_message(regions), as_json)

    def register_cuda_shared_memory(
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
        self._run(
            self._client.register_cuda_shared_memory,
            name,
            raw_cuda_handle(raw_handle),
            device_id,
            byte_size,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    def unregister_cuda_shared_memory(
        self,
        name: str = "",
        headers: Mapping[str, str] | None = None,
        client_timeout: float | None = None,
    ) -> None:
        """Unregister a CUDA region (every one when ``name`` is empty)."""
        self._run(
            self._client.unregister_cuda_shared_memory,
            name,
            headers=self._headers(headers),
            timeout=client_timeout,
        )

    # -- inference ---------------------------------------------------------------------------

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
            result = self._client.infer(
                model_name,
                headers=self._headers(headers),
                timeout=client_timeout,
                compression=compression_algorithm,
                **kwargs,
            )
        return InferResult(result)

    def async_infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        callback: Callback,
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
    ) -> CallContext:
        """Start one inference; ``callback(result, error)`` is called with its
        :class:`InferResult` or :class:`InferenceServerException` (on a worker thread).

        The request's arguments are checked (and its inputs captured) here, so the input
        objects may be reused at once.
        """
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
        call_headers = self._headers(headers)
        client = self._client

        def run() -> None:
            try:
                result = client.infer(
                    model_name,
                    headers=call_headers,
                    timeout=client_timeout,
                    compression=compression_algorithm,
                    **kwargs,
                )
            except KServeError as exc:
                outcome: tuple[InferResult | None, InferenceServerException | None] = (
                    None,
                    translate(exc, "grpc"),
                )
            else:
                outcome = (InferResult(result), None)
            try:
                callback(*outcome)
            except Exception:
                callback_failed("the async_infer callback")

        return CallContext(self._pool().submit(run))

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    ASYNC_WORKERS, thread_name_prefix="kserve-v2 compat async_infer"
                )
            return self._executor

    # -- streaming ---------------------------------------------------------------------------

    def start_stream(
        self,
        callback: Callback,
        stream_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        compression_algorithm: str | None = None,
    ) -> None:
        """Open the client's stream; ``callback(result, error)`` receives every response
        (or error) of the requests :meth:`async_stream_infer` sends, in arrival order.

        A ``triton_grpc_error: true`` header makes Triton end the stream at the first error.
        """
        call_headers = self._headers(headers) or {}
        grpc_error = str(call_headers.pop("triton_grpc_error", "")).lower() == "true"
        with self._lock:
            if self._stream is not None:
                raise InferenceServerException(
                    msg="cannot start another stream with one already running: "
                    "'InferenceServerClient' supports one active stream at a time"
                )
            with translated("grpc"):
                stream = self._client.stream(
                    headers=call_headers or None,
                    timeout=stream_timeout,
                    compression=compression_algorithm,
                    enable_empty_final_response=True,  # shown per request, as asked
                    triton_grpc_error=grpc_error,
                )
            self._stream = _CallbackStream(stream, callback, grpc_error)

    def async_stream_infer(
        self,
        model_name: str,
        inputs: Sequence[InferInput],
        model_version: str = "",
        outputs: Sequence[InferRequestedOutput] | None = None,
        request_id: str = "",
        sequence_id: int | str = 0,
        sequence_start: bool = False,
        sequence_end: bool = False,
        enable_empty_final_response: bool = False,
        priority: int = 0,
        timeout: int | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        """Send one request on the stream opened by :meth:`start_stream`.

        ``enable_empty_final_response``: also hand the callback the empty response that
        ends a decoupled model's request (``triton_final_response`` set, no outputs).
        """
        stream = self._stream
        if stream is None:
            raise InferenceServerException(
                msg="stream not available, use start_stream() to make one available."
            )
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
            stream.send(model_name, enable_empty_final_response, **kwargs)

    def stop_stream(self, cancel_requests: bool = False) -> None:
        """Close the stream: wait until every request's responses reached the callback, or
        with ``cancel_requests`` cancel those in flight."""
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            with translated("grpc"):
                stream.stop(cancel_requests)
