"""gRPC channels for ``grpc://`` and ``grpcs://`` URLs, and the one place grpcio errors are
translated.

:class:`GRPCChannel` (sync) and :class:`AsyncGRPCChannel` (asyncio) are twins: each owns one
grpcio channel built from a :class:`ChannelConfig`, keeps its multicallables in a cache, and
moves *bytes*: the multicallables have no serializers, so the codec decides every copy of the
tensor data (see :mod:`kserve_v2.grpc.wire`). :func:`translate_rpc_error` turns a
``grpc.RpcError`` into the library's error tree; both channels and their stream calls use it.

Streaming calls (``open_stream``) follow :class:`SyncStreamCall` / :class:`AsyncStreamCall`,
which the native transport (:mod:`kserve_v2.transport.native_stream`) implements too, so
:mod:`kserve_v2.grpc.stream` runs on either transport.

grpcio is imported only when a channel is built; without it :class:`MissingDependencyError`
says ``pip install 'kserve-v2[grpc]'``.

Example::

    from kserve_v2.endpoint import parse_url
    from kserve_v2.transport.grpcio import GRPCChannel
    from kserve_v2.options import GRPCKeepAlive
    from kserve_v2.grpc.config import channel_config

    config = channel_config(parse_url("grpc://localhost:8001"),
                            keepalive=GRPCKeepAlive(time_ms=10_000))
    channel = GRPCChannel(config)
    reply = channel.call_unary("/inference.GRPCInferenceService/ServerLive", b"", timeout=5.0)
    channel.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import re
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.errors import (
    DeadlineExceededError,
    KServeError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc.config import ChannelConfig, Metadata, check_compression, import_grpc
from kserve_v2.grpc.status import code_name
from kserve_v2.interfaces import CLOSED_FOR_SENDING, AsyncStreamCall, StreamMessage, SyncStreamCall

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

__all__ = ["AsyncGRPCChannel", "GRPCChannel", "translate_rpc_error"]


# grpcio's words for a call that never reached the server (UNAVAILABLE is also what a server
# says when it is shutting down, which is a server answer, not a transport failure).
_CONNECT_FAILURE: Final = re.compile(
    r"failed to connect|connection refused|connections to all backends failing|"
    r"dns resolution failed|name resolution|socket closed|connection reset|broken pipe|"
    r"handshake|ssl|tls|certificate|end of tcp stream|keepalive|goaway|"
    r"failed to pick subchannel|empty address list|network is unreachable|no route to host",
    re.IGNORECASE,
)
# CANCELLED with these details comes from this side (channel closed, call cancelled).
_LOCAL_CANCEL: Final = re.compile(r"channel closed|locally cancelled", re.IGNORECASE)


def _import_grpc_aio() -> ModuleType:
    import_grpc()
    import grpc.aio

    module: ModuleType = grpc.aio
    return module


def _credentials(grpc: ModuleType, config: ChannelConfig) -> Any:
    if config.credentials is not None:
        return config.credentials
    return grpc.ssl_channel_credentials(
        root_certificates=config.root_certificates,
        private_key=config.private_key,
        certificate_chain=config.certificate_chain,
    )


def _grpcio_timeout(timeout: float | None) -> float | None:
    # grpcio takes an infinite timeout for an expired deadline; it means no deadline (as on
    # every other transport, see transport.base.deadline_after).
    return None if timeout == math.inf else timeout


def compression_of(grpc: ModuleType, name: str | None) -> Any:
    """grpcio's ``grpc.Compression`` member for ``name`` (``None`` stays ``None``)."""
    if name is None:
        return None
    return grpc.Compression.Gzip if name == "gzip" else grpc.Compression.Deflate


# ------------------------------------------------------------------------- error boundary


def _details(exc: BaseException) -> str:
    details_of = getattr(exc, "details", None)
    details = details_of() if callable(details_of) else None
    return details if isinstance(details, str) else str(exc)


def translate_rpc_error(exc: BaseException, url: str | None = None) -> KServeError:
    """The kserve-v2 error for a ``grpc.RpcError`` (raise it ``from exc``).

    ``DEADLINE_EXCEEDED`` becomes :class:`DeadlineExceededError`; ``UNAVAILABLE`` that never
    reached a server (refused, DNS, TLS handshake) and ``CANCELLED`` by this side (channel
    closed) become :class:`TransportError`; every other status is the server's answer:
    :class:`ServerError` with ``grpc_code`` and the status details verbatim.
    """
    name = code_name(exc)
    details = _details(exc)
    if name == "DEADLINE_EXCEEDED":
        return DeadlineExceededError(f"gRPC deadline exceeded: {details}", url=url)
    if (name == "UNAVAILABLE" and _CONNECT_FAILURE.search(details)) or (
        name == "CANCELLED" and _LOCAL_CANCEL.search(details)
    ):
        return TransportError(f"gRPC {name}: {details}", url=url)
    return ServerError(details, grpc_code=name)


def _response_metadata(call: Any) -> Metadata:
    out: list[tuple[str, str]] = []
    for getter in ("initial_metadata", "trailing_metadata"):
        items = getattr(call, getter)() or ()
        out.extend((str(k), v if isinstance(v, str) else repr(v)) for k, v in items)
    return tuple(out)


# --------------------------------------------------------------------------- stream calls


class _GrpcioStreamCall:
    """:class:`SyncStreamCall` over grpcio: requests reach grpcio through an iterator fed
    from a queue (grpcio consumes it on a thread of its own)."""

    def __init__(
        self,
        channel: GRPCChannel,
        method: str,
        timeout: float | None,
        metadata: Metadata,
        compression: str | None,
    ) -> None:
        self._grpc = channel.grpc
        self._url = channel.config.url
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        # Orders send() against done_sending(): a request queued after the end marker
        # would silently never go out.
        self._lock = threading.Lock()
        self._sending = True
        self._cancelled = False
        self.status: str | None = None
        self._call = channel.stream_stream(method)(
            self._request_iterator(),
            timeout=_grpcio_timeout(timeout),
            metadata=metadata or None,
            compression=channel.compression(compression),
        )

    def _request_iterator(self) -> Iterator[bytes]:
        while (item := self._requests.get()) is not None:
            yield item

    def send(self, data: bytes) -> None:
        with self._lock:
            if not self._sending:
                raise TransportError(CLOSED_FOR_SENDING, url=self._url)
            self._requests.put(data)

    def done_sending(self) -> None:
        with self._lock:
            if self._sending:
                self._sending = False
                self._requests.put(None)  # ends the request iterator: grpcio half-closes

    def __iter__(self) -> Iterator[StreamMessage]:
        try:
            yield from self._call
            self.status = "OK"
        except self._grpc.RpcError as exc:
            self.status = code_name(exc)
            if not (self._cancelled and self.status == "CANCELLED"):
                raise translate_rpc_error(exc, self._url) from exc
        finally:
            self.done_sending()  # releases grpcio's request thread if it still waits

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()
        self.done_sending()


class _AsyncGrpcioStreamCall:
    """:class:`AsyncStreamCall` over ``grpc.aio``."""

    def __init__(
        self,
        channel: AsyncGRPCChannel,
        method: str,
        timeout: float | None,
        metadata: Metadata,
        compression: str | None,
    ) -> None:
        self._grpc = channel.grpc
        self._eof = _import_grpc_aio().EOF
        self._url = channel.config.url
        self._cancelled = False
        self.status: str | None = None
        self._call = channel.stream_stream(method)(
            timeout=_grpcio_timeout(timeout),
            metadata=metadata or None,
            compression=channel.compression(compression),
        )

    async def read(self) -> StreamMessage | None:
        try:
            data = await self._call.read()
        except self._grpc.RpcError as exc:
            self.status = code_name(exc)
            if self._cancelled and self.status == "CANCELLED":
                return None
            raise translate_rpc_error(exc, self._url) from exc
        except asyncio.CancelledError:
            # grpc.aio raises this from read() once the call was cancelled; if we did
            # that, it is the quiet end. Otherwise the reading task itself is cancelled.
            if not self._cancelled:
                raise
            self.status = "CANCELLED"
            return None
        if data is self._eof:  # grpc.aio reports a non-OK status by raising instead
            self.status = "OK"
            return None
        message: bytes = data
        return message

    async def write(self, data: bytes) -> None:
        try:
            await self._call.write(data)
        except self._grpc.RpcError as exc:
            raise translate_rpc_error(exc, self._url) from exc
        except asyncio.InvalidStateError as exc:  # half-closed, or the call is over
            raise TransportError(CLOSED_FOR_SENDING, url=self._url) from exc

    async def done_writing(self) -> None:
        with contextlib.suppress(self._grpc.RpcError, asyncio.InvalidStateError):
            await self._call.done_writing()

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()


# ---------------------------------------------------------------------------------- sync


class GRPCChannel:
    """A synchronous grpcio channel plus its multicallables; thread-safe like grpcio's.

    Calls move bytes: :meth:`call_unary` sends serialized request bytes and returns the
    response bytes, raising kserve-v2 errors (:func:`translate_rpc_error`).
    """

    def __init__(self, config: ChannelConfig) -> None:
        grpc = import_grpc()
        self._grpc = grpc
        self.config = config
        compression = compression_of(grpc, config.compression)
        if config.secure:
            self._channel = grpc.secure_channel(
                config.target, _credentials(grpc, config), list(config.options), compression
            )
        else:
            self._channel = grpc.insecure_channel(config.target, list(config.options), compression)
        self._unary: dict[str, Any] = {}
        self._stream: dict[str, Any] = {}
        self._closed = False

    @property
    def grpc(self) -> ModuleType:
        """The grpc module (for streams, without importing it again)."""
        return self._grpc

    @property
    def closed(self) -> bool:
        return self._closed

    def compression(self, name: str | None) -> Any:
        """``grpc.Compression`` for a per-call ``compression`` name (None: channel default)."""
        return compression_of(self._grpc, check_compression(name))

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)

    def unary_unary(self, method: str) -> Any:
        """The cached bytes-in, bytes-out multicallable of ``method``."""
        self._check_open()
        callable_ = self._unary.get(method)
        if callable_ is None:
            # No serializers: requests are already bytes, responses stay bytes.
            callable_ = self._unary[method] = self._channel.unary_unary(method)
        return callable_

    def stream_stream(self, method: str) -> Any:
        """The cached bytes-in, bytes-out bidirectional-streaming multicallable of ``method``."""
        self._check_open()
        callable_ = self._stream.get(method)
        if callable_ is None:
            callable_ = self._stream[method] = self._channel.stream_stream(method)
        return callable_

    def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes, Metadata]:
        """Run one unary call; returns the response bytes and (if asked) response metadata."""
        if isinstance(request, tuple):
            request = b"".join(request)  # grpcio sends one bytes object
        multicallable = self.unary_unary(method)
        try:
            if want_metadata:
                response, call = multicallable.with_call(
                    request,
                    timeout=_grpcio_timeout(timeout),
                    metadata=metadata or None,
                    compression=self.compression(compression),
                )
                return response, _response_metadata(call)
            response = multicallable(
                request,
                timeout=_grpcio_timeout(timeout),
                metadata=metadata or None,
                compression=self.compression(compression),
            )
        except self._grpc.RpcError as exc:
            raise translate_rpc_error(exc, self.config.url) from exc
        return response, ()

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> SyncStreamCall:
        """Start a bidirectional-streaming call of ``method`` (see :class:`SyncStreamCall`)."""
        return _GrpcioStreamCall(self, method, timeout, metadata, compression)

    def close(self) -> None:
        """Close the channel (cancels calls still in flight). Idempotent."""
        if not self._closed:
            self._closed = True
            self._unary.clear()
            self._stream.clear()
            self._channel.close()

    def __repr__(self) -> str:
        return f"GRPCChannel({self.config.url!r}{', closed' if self._closed else ''})"


# --------------------------------------------------------------------------------- async


class AsyncGRPCChannel:
    """The asyncio twin of :class:`GRPCChannel` (``grpc.aio``).

    The grpcio channel is opened on first use, inside the running event loop (grpc.aio binds
    a channel to the loop that creates it, and clients are often built before any loop
    runs); using it from another loop afterwards raises :class:`TransportError`.
    """

    def __init__(self, config: ChannelConfig) -> None:
        self._aio = _import_grpc_aio()
        self._grpc = import_grpc()
        self.config = config
        self._channel: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unary: dict[str, Any] = {}
        self._stream: dict[str, Any] = {}
        self._closed = False

    @property
    def grpc(self) -> ModuleType:
        return self._grpc

    @property
    def closed(self) -> bool:
        return self._closed

    def compression(self, name: str | None) -> Any:
        return compression_of(self._grpc, check_compression(name))

    def _open(self) -> Any:
        if self._closed:
            raise TransportError("the gRPC channel is closed", url=self.config.url)
        loop = asyncio.get_running_loop()
        if self._channel is None:
            config = self.config
            compression = compression_of(self._grpc, config.compression)
            if config.secure:
                self._channel = self._aio.secure_channel(
                    config.target,
                    _credentials(self._grpc, config),
                    list(config.options),
                    compression,
                )
            else:
                self._channel = self._aio.insecure_channel(
                    config.target, list(config.options), compression
                )
            self._loop = loop
        elif loop is not self._loop:
            raise TransportError(
                "this AsyncClient's gRPC channel belongs to another event loop; "
                "make one client per loop",
                url=self.config.url,
            )
        return self._channel

    def unary_unary(self, method: str) -> Any:
        """The cached bytes-in, bytes-out multicallable (call from the event loop)."""
        channel = self._open()
        callable_ = self._unary.get(method)
        if callable_ is None:
            callable_ = self._unary[method] = channel.unary_unary(method)
        return callable_

    def stream_stream(self, method: str) -> Any:
        channel = self._open()
        callable_ = self._stream.get(method)
        if callable_ is None:
            callable_ = self._stream[method] = channel.stream_stream(method)
        return callable_

    async def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[bytes, Metadata]:
        """Run one unary call (see :meth:`GRPCChannel.call_unary`)."""
        if isinstance(request, tuple):
            request = b"".join(request)  # grpcio sends one bytes object
        multicallable = self.unary_unary(method)
        try:
            call = multicallable(
                request,
                timeout=_grpcio_timeout(timeout),
                metadata=metadata or None,
                compression=self.compression(compression),
            )
            response = await call
            if want_metadata:
                initial = await call.initial_metadata()
                trailing = await call.trailing_metadata()
                pairs = [*(initial or ()), *(trailing or ())]
                return response, tuple(
                    (str(k), v if isinstance(v, str) else repr(v)) for k, v in pairs
                )
        except self._grpc.RpcError as exc:
            raise translate_rpc_error(exc, self.config.url) from exc
        return response, ()

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> AsyncStreamCall:
        """Start a bidirectional-streaming call (call from the event loop; see
        :class:`AsyncStreamCall`)."""
        return _AsyncGrpcioStreamCall(self, method, timeout, metadata, compression)

    async def aclose(self) -> None:
        """Close the channel (cancels calls in flight). Idempotent."""
        if not self._closed:
            self._closed = True
            channel, self._channel = self._channel, None
            self._unary.clear()
            self._stream.clear()
            if channel is not None:
                await channel.close()

    def __repr__(self) -> str:
        return f"AsyncGRPCChannel({self.config.url!r}{', closed' if self._closed else ''})"
