"""gRPC channels for ``grpc://`` and ``grpcs://`` URLs, and the one place grpcio errors are
translated.

:class:`GRPCChannel` (sync) and :class:`AsyncGRPCChannel` (asyncio) are twins: each owns one
grpcio channel built from a :class:`ChannelConfig`, keeps its multicallables in a cache, and
moves *bytes*: the multicallables have no serializers, so the codec decides every copy of the
tensor data (see :mod:`kserve_v2.grpc.wire`). :func:`translate_rpc_error` turns a
``grpc.RpcError`` into the library's error tree; both channels and their stream calls use it.

Streaming calls (``open_stream``) follow :class:`SyncStreamCall` / :class:`AsyncStreamCall`,
which the native transport (:mod:`kserve_v2.grpc.native_stream`) implements too, so
:mod:`kserve_v2.grpc.stream` runs on either transport.

grpcio is imported only when a channel is built; without it :class:`MissingDependencyError`
says ``pip install 'kserve-v2[grpc]'``.

Example::

    from kserve_v2.client.endpoint import parse_url
    from kserve_v2.grpc.channel import GRPCChannel, GRPCKeepAlive, channel_config

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ServerError,
    TransportError,
)

if TYPE_CHECKING:
    from kserve_v2.client.base import TLSOptions
    from kserve_v2.client.endpoint import Endpoint
    from kserve_v2.datatypes import BytesLike

__all__ = [
    "AsyncGRPCChannel",
    "AsyncStreamCall",
    "AsyncStreamChannel",
    "ChannelConfig",
    "GRPCChannel",
    "GRPCKeepAlive",
    "Metadata",
    "StreamMessage",
    "SyncStreamCall",
    "SyncStreamChannel",
    "channel_config",
    "import_grpc",
    "status_of",
    "translate_rpc_error",
]

#: gRPC metadata: (lower-case key, value) pairs.
Metadata = tuple[tuple[str, str], ...]

#: Compression names accepted by ``compression=`` arguments (grpcio's algorithms).
COMPRESSIONS: Final = ("gzip", "deflate")

#: Channel arguments every channel starts from; user ``options`` are added on top (a key
#: given there replaces the default). Tensors routinely exceed grpcio's 4 MiB receive limit,
#: so both directions are unlimited (-1) like Triton's own server.
DEFAULT_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
)

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


def import_grpc() -> ModuleType:
    """The ``grpc`` module; :class:`MissingDependencyError` with an install hint without it."""
    try:
        import grpc
    except ImportError as exc:
        raise MissingDependencyError("gRPC", "grpc", "grpcio") from exc
    module: ModuleType = grpc  # grpcio ships no type information
    return module


def _import_grpc_aio() -> ModuleType:
    import_grpc()
    import grpc.aio

    module: ModuleType = grpc.aio
    return module


@dataclass(frozen=True, slots=True)
class GRPCKeepAlive:
    """HTTP/2 keepalive pings of a gRPC channel (grpc's ``grpc.keepalive_*`` arguments).

    The defaults are grpcio's: no pings (``time_ms`` of 2**31 - 1). Servers refuse pings that
    come more often than they allow (Triton: ``--grpc-http2-min-recv-ping-interval-without-data``)
    and close the connection with GOAWAY ``too_many_pings``.

    Example::

        Client("grpc://host:8001", grpc_keepalive=GRPCKeepAlive(time_ms=30_000))
    """

    #: milliseconds between pings on an idle connection
    time_ms: int = 2**31 - 1
    #: milliseconds to wait for a ping's answer before the connection is declared dead
    timeout_ms: int = 20_000
    #: ping also when no call is in flight
    permit_without_calls: bool = False
    #: pings allowed without data in between (0: unlimited)
    http2_max_pings_without_data: int = 2

    def __post_init__(self) -> None:
        for name in ("time_ms", "timeout_ms", "http2_max_pings_without_data"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"GRPCKeepAlive.{name} must be a non-negative integer", value=value
                )

    def channel_options(self) -> tuple[tuple[str, Any], ...]:
        """The channel arguments for these settings."""
        return (
            ("grpc.keepalive_time_ms", self.time_ms),
            ("grpc.keepalive_timeout_ms", self.timeout_ms),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", self.http2_max_pings_without_data),
        )


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """Everything needed to open a channel; built (and checked) by :func:`channel_config`.

    ``credentials`` is a ready ``grpc.ChannelCredentials`` (``None``: build one from the PEM
    bytes when ``secure``). ``options`` are the final channel arguments.
    """

    target: str
    url: str
    secure: bool = False
    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None
    credentials: Any = None
    options: tuple[tuple[str, Any], ...] = DEFAULT_OPTIONS
    compression: str | None = None
    # The same TLS material as files, for the native transport (the ssl module loads files).
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_hostname: str | None = None

    def __repr__(self) -> str:  # no key material in reprs or logs
        return (
            f"ChannelConfig(target={self.target!r}, secure={self.secure}, "
            f"compression={self.compression!r}, options={self.options!r})"
        )


#: The gRPC transports: the library's own HTTP/2 client, or grpcio.
TRANSPORTS: Final = ("native", "grpcio")
# grpcio channel arguments the native transport honours too.
NATIVE_OPTIONS: Final = frozenset(
    {"grpc.max_send_message_length", "grpc.max_receive_message_length"}
)


def check_transport(
    name: object,
    config: ChannelConfig,
    credentials: Any = None,
    options: Sequence[tuple[str, Any]] | Mapping[str, Any] | None = None,
) -> str:
    """``name`` if it is a transport that can carry ``config``.

    The native transport cannot use grpcio objects or grpcio's other channel arguments;
    asking it to is an error that names ``grpc_transport="grpcio"``, rather than a setting
    silently dropped.
    """
    if name not in TRANSPORTS:
        raise InvalidInputError(
            f"grpc_transport must be one of {TRANSPORTS}, got {name!r}", value=name
        )
    if name == "native":
        problems = []
        if credentials is not None:
            problems.append("grpc_credentials")
        if any(key not in NATIVE_OPTIONS for key, _ in _merge_options(options)):
            problems.append("grpc_options other than " + " and ".join(sorted(NATIVE_OPTIONS)))
        if any(key.startswith("grpc.keepalive") for key, _ in config.options):
            problems.append("grpc_keepalive")
        if problems:
            raise InvalidInputError(
                f'{" and ".join(problems)} are grpcio settings: pass grpc_transport="grpcio" '
                "to use them (the default native transport does not)"
            )
    return str(name)


def check_compression(value: str | None, what: str = "compression") -> str | None:
    """``value`` if it names a gRPC compression algorithm (or is None)."""
    if value is not None and value not in COMPRESSIONS:
        raise InvalidInputError(
            f"{what} must be one of {COMPRESSIONS} or None, got {value!r}", value=value
        )
    return value


def _read_pem(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read TLS {what} {path!r}: {exc}", value=path) from exc


def _merge_options(
    *groups: Sequence[tuple[str, Any]] | Mapping[str, Any] | None,
) -> tuple[tuple[str, Any], ...]:
    merged: dict[str, Any] = {}
    for group in groups:
        if not group:
            continue
        items = group.items() if isinstance(group, Mapping) else group
        for item in items:
            try:
                key, value = item
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f"gRPC channel options must be (name, value) pairs, got {item!r}", value=item
                ) from None
            if not isinstance(key, str) or not key:
                raise InvalidInputError(
                    f"gRPC channel option names must be non-empty strings, got {key!r}",
                    value=key,
                )
            merged.pop(key, None)  # a later setting replaces an earlier one, in its place
            merged[key] = value
    return tuple(merged.items())


def channel_config(
    endpoint: Endpoint,
    *,
    tls: TLSOptions | None = None,
    credentials: Any = None,
    keepalive: GRPCKeepAlive | None = None,
    options: Sequence[tuple[str, Any]] | Mapping[str, Any] | None = None,
    compression: str | None = None,
) -> ChannelConfig:
    """Check the channel settings of a ``grpc://``/``grpcs://`` endpoint.

    Args:
        endpoint: the parsed server URL.
        tls: for ``grpcs://``: ``ca_file`` (PEM roots; default: grpcio's bundled roots),
            ``cert_file`` + ``key_file`` (mutual TLS), ``server_hostname`` (the name the
            server certificate must carry, sent as ``grpc.ssl_target_name_override``).
            ``ssl_context`` and ``verify=False`` have no gRPC equivalent and are refused.
        credentials: a ready ``grpc.ChannelCredentials`` (e.g. with call credentials
            composed in); needs ``grpcs://`` and excludes the certificate files.
        keepalive: keepalive pings (see :class:`GRPCKeepAlive`).
        options: further channel arguments, added to the defaults (unlimited message sizes;
            a name given here replaces the default's value).
        compression: ``"gzip"`` or ``"deflate"``: compress every request message.
    """
    if keepalive is not None and not isinstance(keepalive, GRPCKeepAlive):
        raise InvalidInputError("keepalive must be a GRPCKeepAlive", value=keepalive)
    check_compression(compression)
    if options is not None and not isinstance(options, Mapping | Sequence):
        raise InvalidInputError(
            "gRPC channel options must be a mapping or a sequence of (name, value) pairs",
            value=options,
        )
    extra: list[tuple[str, Any]] = []
    secure = endpoint.tls
    root = key = chain = None
    if credentials is not None:
        if not secure:
            raise InvalidInputError(
                f"grpc_credentials need a grpcs:// URL, got {endpoint}", value=credentials
            )
        grpc = import_grpc()
        if not isinstance(credentials, grpc.ChannelCredentials):
            raise InvalidInputError(
                "grpc_credentials must be a grpc.ChannelCredentials", value=credentials
            )
    if tls is not None:
        if tls.ssl_context is not None:
            raise InvalidInputError(
                "TLSOptions.ssl_context applies to https:// only; give gRPC ca_file, "
                "cert_file and key_file (or grpc_credentials)"
            )
        if not tls.verify:
            raise InvalidInputError(
                "TLSOptions.verify=False is not available over gRPC (grpcio always checks the "
                "server certificate); pass the server's CA as ca_file"
            )
        if (tls.cert_file is None) != (tls.key_file is None):
            raise InvalidInputError("mutual TLS needs both cert_file and key_file")
        if credentials is not None and (tls.ca_file or tls.cert_file):
            raise InvalidInputError(
                "give either grpc_credentials or TLS certificate files, not both"
            )
        if secure and credentials is None:
            root = _read_pem(tls.ca_file, "ca_file")
            chain = _read_pem(tls.cert_file, "cert_file")
            key = _read_pem(tls.key_file, "key_file")
        if tls.server_hostname is not None:
            extra.append(("grpc.ssl_target_name_override", tls.server_hostname))
    return ChannelConfig(
        target=endpoint.authority,
        url=str(endpoint),
        secure=secure,
        root_certificates=root,
        private_key=key,
        certificate_chain=chain,
        credentials=credentials,
        ca_file=tls.ca_file if tls is not None and secure else None,
        cert_file=tls.cert_file if tls is not None and secure else None,
        key_file=tls.key_file if tls is not None and secure else None,
        server_hostname=tls.server_hostname if tls is not None else None,
        options=_merge_options(
            DEFAULT_OPTIONS,
            keepalive.channel_options() if keepalive is not None else None,
            extra,
            options,
        ),
        compression=compression,
    )


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


def _code_name(exc: BaseException) -> str:
    code_of = getattr(exc, "code", None)
    code = code_of() if callable(code_of) else None
    name = getattr(code, "name", None)
    return name if isinstance(name, str) else "UNKNOWN"


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
    name = _code_name(exc)
    details = _details(exc)
    if name == "DEADLINE_EXCEEDED":
        return DeadlineExceededError(f"gRPC deadline exceeded: {details}", url=url)
    if (name == "UNAVAILABLE" and _CONNECT_FAILURE.search(details)) or (
        name == "CANCELLED" and _LOCAL_CANCEL.search(details)
    ):
        return TransportError(f"gRPC {name}: {details}", url=url)
    return ServerError(details, grpc_code=name)


def status_of(exc: BaseException) -> str:
    """The gRPC status name behind a translated error (for wire hooks)."""
    if isinstance(exc, ServerError) and exc.grpc_code:
        return exc.grpc_code
    cause = exc.__cause__
    if cause is not None and hasattr(cause, "code"):
        return _code_name(cause)
    if isinstance(exc, DeadlineExceededError):
        return "DEADLINE_EXCEEDED"
    return "UNKNOWN"


def _response_metadata(call: Any) -> Metadata:
    out: list[tuple[str, str]] = []
    for getter in ("initial_metadata", "trailing_metadata"):
        items = getattr(call, getter)() or ()
        out.extend((str(k), v if isinstance(v, str) else repr(v)) for k, v in items)
    return tuple(out)


# --------------------------------------------------------------------------- stream calls

#: One response message of a stream call. The native transport hands over a message that
#: arrived in pieces as the bytearray it was assembled in (not copied once more).
StreamMessage = bytes | bytearray

_CLOSED_FOR_SENDING: Final = "the stream is closed; open a new one with client.stream()"


class SyncStreamCall(Protocol):
    """One bidirectional-streaming call, whatever the transport (``open_stream``'s result).

    Requests go out with :meth:`send` (from any thread, one whole message at a time) until
    :meth:`done_sending`; iterating the call (one thread) yields the response messages and
    ends when the server ends the call with ``OK``. Any other status, a deadline or a broken
    connection raises the kserve-v2 error :func:`translate_rpc_error` gives (``ServerError``
    with ``grpc_code``, :class:`DeadlineExceededError`, :class:`TransportError`) once the
    messages before it were yielded. After :meth:`cancel` iteration ends quietly. ``status``
    is the final gRPC status name (``"CANCELLED"`` after a cancel), ``None`` while running.

    A send that waits for flow control is released by the iteration, so keep iterating while
    sending.
    """

    @property
    def status(self) -> str | None: ...

    def send(self, data: bytes) -> None:
        """Send one request message (serialized, not yet framed)."""

    def done_sending(self) -> None:
        """No more requests (half-close). A no-op once the call is over."""

    def __iter__(self) -> Iterator[StreamMessage]: ...

    def cancel(self) -> None:
        """End the call now, from any thread. Idempotent."""


class AsyncStreamCall(Protocol):
    """The asyncio twin of :class:`SyncStreamCall`: ``await read()`` returns the next
    message, ``None`` at an ``OK`` end (and after :meth:`cancel`); errors as there. One
    :meth:`write` at a time."""

    @property
    def status(self) -> str | None: ...

    async def read(self) -> StreamMessage | None: ...

    async def write(self, data: bytes) -> None: ...

    async def done_writing(self) -> None:
        """No more requests (half-close). A no-op once the call is over."""

    def cancel(self) -> None:
        """End the call now. Idempotent."""


class SyncStreamChannel(Protocol):
    """What :class:`~kserve_v2.grpc.stream.GRPCStream` needs of a channel."""

    @property
    def config(self) -> ChannelConfig: ...

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> SyncStreamCall: ...


class AsyncStreamChannel(Protocol):
    """What :class:`~kserve_v2.grpc.stream.AsyncGRPCStream` needs of a channel
    (``open_stream`` is called inside the running event loop)."""

    @property
    def config(self) -> ChannelConfig: ...

    def open_stream(
        self,
        method: str,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
    ) -> AsyncStreamCall: ...


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
                raise TransportError(_CLOSED_FOR_SENDING, url=self._url)
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
            self.status = _code_name(exc)
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
            self.status = _code_name(exc)
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
            raise TransportError(_CLOSED_FOR_SENDING, url=self._url) from exc

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
