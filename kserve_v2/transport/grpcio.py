"""gRPC channels for ``grpc://`` and ``grpcs://`` URLs, and the one place grpcio errors are
translated.

:class:`GRPCChannel` (sync) and :class:`AsyncGRPCChannel` (asyncio) are twins: each owns one
grpcio channel built from a :class:`ChannelConfig`, keeps its multicallables in a cache, and
moves *bytes*: the multicallables have no serializers, so the codec decides every copy of the
tensor data (see :mod:`kserve_v2.grpc.wire`). :func:`translate_rpc_error` turns a
``grpc.RpcError`` into the library's error tree; both channels and their stream calls use it.

Streaming calls (``open_stream``) follow :class:`SyncStreamCall` / :class:`AsyncStreamCall`,
which the native transport (:mod:`kserve_v2.transport.native`) implements too, so
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
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from kserve_v2.errors import (
    DeadlineExceededError,
    KServeError,
    ProtocolError,
    ServerError,
    TransportError,
)
from kserve_v2.grpc.config import ChannelConfig, Metadata, check_compression, import_grpc
from kserve_v2.grpc.status import code_name, retry_pushback
from kserve_v2.interfaces import CLOSED_FOR_SENDING, AsyncStreamCall, StreamMessage, SyncStreamCall
from kserve_v2.transport.grpc_base import GRPCChannelBase

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

__all__ = ["AsyncGRPCChannel", "GRPCChannel", "translate_rpc_error"]

_Call = TypeVar("_Call", SyncStreamCall, AsyncStreamCall)


# grpcio's words for a call that failed in the transport (UNAVAILABLE is also what a server
# says when it is shutting down, which is a server answer, not a transport failure).
_CONNECT_FAILURE: Final = re.compile(
    r"failed to connect|connection refused|connections to all backends failing|"
    r"dns resolution failed|name resolution|socket closed|connection reset|broken pipe|"
    r"handshake|ssl|tls|certificate|end of tcp stream|keepalive|goaway|"
    r"failed to pick subchannel|empty address list|network is unreachable|no route to host",
    re.IGNORECASE,
)
# Those of them that say no connection was ever made, so the call never reached the server
# (unprocessed); a closed socket, a reset or a GOAWAY may come after the request went out.
_NEVER_CONNECTED: Final = re.compile(
    r"failed to connect|connection refused|connections to all backends failing|"
    r"dns resolution failed|name resolution|handshake|certificate|"
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
    # every other transport, see transport.sockets.deadline_after).
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
    reached a server (refused, DNS, TLS handshake: ``unprocessed``), or whose connection broke,
    and ``CANCELLED`` by this side (channel closed) become :class:`TransportError`; every
    other status is the server's answer: :class:`ServerError` with ``grpc_code`` and the
    status details verbatim.
    """
    name = code_name(exc)
    details = _details(exc)
    if name == "DEADLINE_EXCEEDED":
        return DeadlineExceededError(f"gRPC deadline exceeded: {details}", url=url)
    if (name == "UNAVAILABLE" and _CONNECT_FAILURE.search(details)) or (
        name == "CANCELLED" and _LOCAL_CANCEL.search(details)
    ):
        unprocessed = name == "UNAVAILABLE" and bool(_NEVER_CONNECTED.search(details))
        return TransportError(
            f"gRPC {name}: {_scheme_hint(details, url)}{details}", url=url, unprocessed=unprocessed
        )
    return ServerError(details, grpc_code=name, retry_after=_pushback(exc))


def _pushback(exc: BaseException) -> float | None:
    """The server's ``grpc-retry-pushback-ms`` in the call's trailing metadata."""
    trailing_of = getattr(exc, "trailing_metadata", None)
    try:
        trailing = trailing_of() if callable(trailing_of) else None
    except Exception:  # an RpcError that is not a call (e.g. raised by a channel): none
        return None
    return retry_pushback(trailing) if trailing else None


def _scheme_hint(details: str, url: str | None) -> str:
    """What a failed connect says of the port, when grpcio's words show that it is not a gRPC
    one: grpc-core names an HTTP/1.x answer ("Trying to connect an http1.x server"); a server
    that closed the connection before the HTTP/2 handshake ("Socket closed", which is how
    Triton's HTTP port answers) is most likely an HTTP/1.1 one too. Empty otherwise."""
    if url is None or "://" not in url:
        return ""
    scheme, _, rest = url.partition("://")
    http_url = f"{'https' if scheme == 'grpcs' else 'http'}://{rest}"
    if "http1.x server" in details:
        return f"this port speaks HTTP/1.1 — did you mean {http_url}? grpcio: "
    if "Socket closed" in details and "failed to connect" in details:
        return f"this port probably speaks HTTP/1.1 — did you mean {http_url}? grpcio: "
    return ""


def _response_metadata(*groups: Any) -> Metadata:
    """Initial and trailing metadata as (key, value) pairs of strings."""
    return tuple(
        (str(key), value if isinstance(value, str) else repr(value))
        for items in groups
        for key, value in items or ()
    )


def _message(response: Any, url: str | None) -> bytes:
    """A message grpcio handed back: grpcio gives None for a call that ended OK without
    one (or whose message it dropped, e.g. cut short by the end of the stream), which the
    codecs must never see."""
    if response is None:
        raise ProtocolError(
            "the server ended the call with status OK but no (whole) response message"
            + (f" ({url})" if url else "")
        )
    message: bytes = response
    return message


def _joined(request: bytes | tuple[BytesLike, ...]) -> bytes:
    # grpcio sends one bytes object.
    return b"".join(request) if isinstance(request, tuple) else request


# --------------------------------------------------------------------------- stream calls


class _StreamCallBase:
    """What both grpcio stream calls share: the final status, and the error (if any) of a
    call that ended with an ``RpcError``."""

    def __init__(self, channel: _GrpcioChannel[Any]) -> None:
        self._grpc = channel.grpc
        self._url = channel.config.url
        self._cancelled = False
        self.status: str | None = None

    def _ended_by(self, exc: BaseException) -> KServeError | None:
        """Record the status of ``exc``; the error to raise, None for our own cancel."""
        self.status = code_name(exc)
        if self._cancelled and self.status == "CANCELLED":
            return None
        return translate_rpc_error(exc, self._url)


class _GrpcioStreamCall(_StreamCallBase):
    """:class:`SyncStreamCall` over grpcio: requests reach grpcio through an iterator fed
    from a queue (grpcio consumes it on a thread of its own)."""

    def __init__(self, channel: GRPCChannel, method: str, options: dict[str, Any]) -> None:
        super().__init__(channel)
        self._requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        # Orders send() against done_sending(): a request queued after the end marker
        # would silently never go out.
        self._lock = threading.Lock()
        self._sending = True
        self._call = channel.stream_stream(method)(self._request_iterator(), **options)

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
            for message in self._call:
                yield _message(message, self._url)
            self.status = "OK"
        except self._grpc.RpcError as exc:
            error = self._ended_by(exc)
            if error is not None:
                raise error from exc
        finally:
            self.done_sending()  # releases grpcio's request thread if it still waits

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()
        self.done_sending()


class _AsyncGrpcioStreamCall(_StreamCallBase):
    """:class:`AsyncStreamCall` over ``grpc.aio``."""

    def __init__(self, channel: AsyncGRPCChannel, method: str, options: dict[str, Any]) -> None:
        super().__init__(channel)
        self._eof = _import_grpc_aio().EOF
        self._call = channel.stream_stream(method)(**options)

    async def read(self) -> StreamMessage | None:
        try:
            data = await self._call.read()
        except self._grpc.RpcError as exc:
            error = self._ended_by(exc)
            if error is None:
                return None
            raise error from exc
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
        # None here would read as the end of the stream to the caller: a message lost.
        return _message(data, self._url)

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


# ------------------------------------------------------------------------------ channels


class _GrpcioChannel(GRPCChannelBase, Generic[_Call]):
    """What the sync and async channels share: the multicallables' caches, the per-call
    options, opening stream calls. ``_channel_now`` is the grpcio channel to call on (the
    async one opens it on first use)."""

    def __init__(self, config: ChannelConfig) -> None:
        super().__init__(config)
        self._grpc = import_grpc()
        self._unary: dict[str, Any] = {}
        self._stream: dict[str, Any] = {}

    @property
    def grpc(self) -> ModuleType:
        """The grpc module (for streams, without importing it again)."""
        return self._grpc

    def compression(self, name: str | None) -> Any:
        """``grpc.Compression`` for a per-call ``compression`` name (None: channel default)."""
        return compression_of(self._grpc, check_compression(name))

    def _new_channel(self, module: ModuleType) -> Any:
        """A channel of ``module`` (``grpc`` or ``grpc.aio``) built from the config."""
        config = self.config
        compression = compression_of(self._grpc, config.compression)
        if config.secure:
            credentials = _credentials(self._grpc, config)
            return module.secure_channel(
                config.target, credentials, list(config.options), compression
            )
        return module.insecure_channel(config.target, list(config.options), compression)

    def _channel_now(self) -> Any:
        raise NotImplementedError

    def unary_unary(self, method: str) -> Any:
        """The cached bytes-in, bytes-out multicallable of ``method``."""
        callable_ = self._unary.get(method)
        channel = self._channel_now()  # checks the channel is open (and on the right loop)
        if callable_ is None:
            # No serializers: requests are already bytes, responses stay bytes.
            callable_ = self._unary[method] = channel.unary_unary(method)
        return callable_

    def stream_stream(self, method: str) -> Any:
        """The cached bytes-in, bytes-out bidirectional-streaming multicallable of ``method``."""
        callable_ = self._stream.get(method)
        channel = self._channel_now()
        if callable_ is None:
            callable_ = self._stream[method] = channel.stream_stream(method)
        return callable_

    def call_options(
        self, timeout: float | None, metadata: Metadata, compression: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of a grpcio call."""
        return {
            "timeout": _grpcio_timeout(timeout),
            "metadata": metadata or None,
            "compression": self.compression(compression),
        }

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> _Call:
        """Start a bidirectional-streaming call of ``method`` (see :class:`SyncStreamCall`
        and :class:`AsyncStreamCall`; the asyncio channel's from the event loop)."""
        return self._stream_call(method, self.call_options(timeout, metadata, compression))

    def _stream_call(self, method: str, options: dict[str, Any]) -> _Call:
        raise NotImplementedError

    def _close_state(self) -> bool:
        """Mark the channel closed; whether it was open."""
        if self._closed:
            return False
        self._closed = True
        self._unary.clear()
        self._stream.clear()
        return True


# ---------------------------------------------------------------------------------- sync


class GRPCChannel(_GrpcioChannel[SyncStreamCall]):
    """A synchronous grpcio channel plus its multicallables; thread-safe like grpcio's.

    Calls move bytes: :meth:`call_unary` sends serialized request bytes and returns the
    response bytes, raising kserve-v2 errors (:func:`translate_rpc_error`).
    """

    def __init__(self, config: ChannelConfig) -> None:
        super().__init__(config)
        self._channel = self._new_channel(self._grpc)

    def _channel_now(self) -> Any:
        self.check_open()
        return self._channel

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
        multicallable = self.unary_unary(method)
        options = self.call_options(timeout, metadata, compression)
        try:
            if want_metadata:
                response, call = multicallable.with_call(_joined(request), **options)
                return _message(response, self.config.url), _response_metadata(
                    call.initial_metadata(), call.trailing_metadata()
                )
            response = multicallable(_joined(request), **options)
        except self._grpc.RpcError as exc:
            raise translate_rpc_error(exc, self.config.url) from exc
        return _message(response, self.config.url), ()

    def _stream_call(self, method: str, options: dict[str, Any]) -> SyncStreamCall:
        return _GrpcioStreamCall(self, method, options)

    def close(self) -> None:
        """Close the channel (cancels calls still in flight). Idempotent."""
        if self._close_state():
            self._channel.close()


# --------------------------------------------------------------------------------- async


class AsyncGRPCChannel(_GrpcioChannel[AsyncStreamCall]):
    """The asyncio twin of :class:`GRPCChannel` (``grpc.aio``).

    The grpcio channel is opened on first use, inside the running event loop (grpc.aio binds
    a channel to the loop that creates it, and clients are often built before any loop
    runs); using it from another loop afterwards raises :class:`TransportError`.
    """

    def __init__(self, config: ChannelConfig) -> None:
        self._aio = _import_grpc_aio()
        super().__init__(config)
        self._channel: Any = None

    def _channel_now(self) -> Any:
        self.check_open()
        self.bind_loop()
        if self._channel is None:
            self._channel = self._new_channel(self._aio)
        return self._channel

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
        """Run one unary call (see :meth:`GRPCChannel.call_unary`); call from the event loop."""
        multicallable = self.unary_unary(method)
        options = self.call_options(timeout, metadata, compression)
        try:
            call = multicallable(_joined(request), **options)
            response = await call
            if want_metadata:
                return _message(response, self.config.url), _response_metadata(
                    await call.initial_metadata(), await call.trailing_metadata()
                )
        except self._grpc.RpcError as exc:
            raise translate_rpc_error(exc, self.config.url) from exc
        return _message(response, self.config.url), ()

    def _stream_call(self, method: str, options: dict[str, Any]) -> AsyncStreamCall:
        return _AsyncGrpcioStreamCall(self, method, options)

    async def aclose(self) -> None:
        """Close the channel (cancels calls in flight). Idempotent."""
        if self._close_state():
            channel, self._channel = self._channel, None
            if channel is not None:
                await channel.close()
