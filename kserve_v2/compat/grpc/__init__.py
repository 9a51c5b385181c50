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
from typing import TYPE_CHECKING, Any

from kserve_v2.compat._base import (
    InferenceServerClientPlugin,
    Request,
    callback_failed,
    translate,
    translated,
)
from kserve_v2.compat.grpc._methods_sync import GRPCMethods
from kserve_v2.compat.grpc._shared import (
    InferInput,
    InferRequestedOutput,
    InferResult,
    KeepAliveOptions,
    StreamRequests,
    stream_ends,
    stream_options,
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
from kserve_v2.grpc.codec import generated

if TYPE_CHECKING:
    from kserve_v2.grpc.stream import GRPCStream

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
        self._requests = StreamRequests()
        self._thread = threading.Thread(
            target=self._dispatch, name="kserve-v2 compat stream callback", daemon=True
        )
        self._thread.start()

    def send(self, model_name: str, enable_empty_final_response: bool, **kw: Any) -> None:
        with self._cond:
            if self._dead or self._stopping:
                raise InferenceServerException(msg="the stream is closed")
            request_id = self._requests.add(kw.pop("request_id"), enable_empty_final_response)
        try:
            self._stream.send(model_name, request_id=request_id, **kw)
        except BaseException:
            with self._cond:
                self._requests.discard(request_id)
            raise
        with self._cond:
            self._sent += 1
            self._cond.notify_all()

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
                for native in self._stream.responses(until_closed=False):
                    with self._cond:
                        result = self._requests.shown(native)
                    if result is not None:
                        self._call(result, None)
            except KServeError as exc:
                self._call(None, translate(exc, "grpc"))
                if stream_ends(exc, self._grpc_error_mode):
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


class InferenceServerClient(GRPCMethods):
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

    def _opened(self) -> None:
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

    # -- inference on a thread pool ----------------------------------------------------------

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
        kwargs = self._infer_arguments(locals())
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
        options = stream_options(self._headers(headers), stream_timeout, compression_algorithm)
        with self._lock:
            if self._stream is not None:
                raise InferenceServerException(
                    msg="cannot start another stream with one already running: "
                    "'InferenceServerClient' supports one active stream at a time"
                )
            with translated("grpc"):
                stream = self._client.stream(**options)
            self._stream = _CallbackStream(stream, callback, options["triton_grpc_error"])

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
        kwargs = self._infer_arguments(locals())
        with translated("grpc"):
            stream.send(model_name, enable_empty_final_response, **kwargs)

    def stop_stream(self, cancel_requests: bool = False) -> None:
        """Close the stream: wait until every request's responses reached the callback, or
        with ``cancel_requests`` cancel those in flight."""
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            with translated("grpc"):
                stream.stop(cancel_requests)
