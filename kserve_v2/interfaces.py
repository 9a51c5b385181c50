"""The I/O interfaces: what the backends' prepared calls need of a transport or channel.

Each is small, like httpx's ``BaseTransport``. HTTP: a :class:`Transport` (or
:class:`AsyncTransport`) moves one HTTP exchange, bytes in, bytes out, nothing about the
protocol. gRPC: one interface per kind of call, each of one method: :class:`UnaryChannel`
(``call_unary``) and :class:`SyncStreamChannel` (``open_stream``), and their asyncio twins.
Both gRPC transports (native and grpcio) implement them; :class:`Channel` and
:class:`AsyncChannel` are what a client owns (both kinds of call, and ``close``). mypy checks
that every transport keeps its interfaces (the ``TYPE_CHECKING`` block at the end of
:mod:`kserve_v2.client.base`).

The client facade builds an :class:`HTTPRequest` with the REST codec, hands it to a
transport, and decodes the :class:`HTTPResponse` with the codec again.
Sync and async transports are twins with the same value objects.

Contract every HTTP transport keeps:

* ``HTTPRequest.body`` is a sequence of bytes-like buffers sent back to back, never joined
  into one bytes object by the transport (large tensors travel as memoryviews of numpy data).
* The response body is returned fully read and already decompressed when the server used
  ``Content-Encoding: gzip`` or ``deflate``; the ``content-encoding`` header is left as received.
* Response header names are lower-case (a repeated header's values are joined with ``", "``).
* ``HTTPRequest.timeout`` bounds the whole exchange. For ``stream``/``astream`` it bounds
  connecting, sending and receiving the response head; each later read of the body then waits
  at most that long for new bytes (an event stream may outlive any whole-request timeout).
* A transport made with ``max_response_size`` refuses a complete response whose body, as
  received or decompressed, is larger (:class:`kserve_v2.errors.ProtocolError`, before the
  body is allocated when its size is announced); streamed bodies are not limited.
* Failures are raised as :class:`kserve_v2.errors.TransportError`, timeouts as
  :class:`kserve_v2.errors.DeadlineExceededError`; an HTTP error status is *not* an exception
  at this layer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from kserve_v2.datatypes import BytesLike
from kserve_v2.grpc.config import ChannelConfig, Metadata

__all__ = [
    "AsyncChannel",
    "AsyncStreamCall",
    "AsyncStreamChannel",
    "AsyncStreamingResponse",
    "AsyncTransport",
    "AsyncUnaryChannel",
    "BytesLike",
    "CLOSED_FOR_SENDING",
    "Channel",
    "GRPCMessage",
    "HTTPRequest",
    "HTTPResponse",
    "StreamMessage",
    "StreamingResponse",
    "SyncStreamCall",
    "SyncStreamChannel",
    "Transport",
    "UnaryChannel",
]


@dataclass(frozen=True, slots=True)
class HTTPRequest:
    """One HTTP request, ready to send.

    ``target`` is the request target: an absolute path with its query string, already
    percent-encoded (e.g. ``/v2/models/simple/infer?x=1``), sent to the origin the transport
    was created for; or an absolute URL (``http://host:port/path?query``) to send this one
    request elsewhere. ``timeout`` is the whole-request timeout in seconds (``None``: the
    transport's default).
    """

    method: str
    target: str
    headers: Sequence[tuple[str, str]] = ()
    body: Sequence[BytesLike] = ()
    timeout: float | None = None

    @property
    def content_length(self) -> int:
        return sum(memoryview(part).nbytes for part in self.body)


@dataclass(frozen=True, slots=True)
class HTTPResponse:
    """A complete HTTP response; ``headers`` has lower-case names."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: BytesLike = b""
    reason: str = ""


class StreamingResponse(Protocol):
    """A response whose body is read incrementally (Server-Sent Events)."""

    status: int
    headers: Mapping[str, str]

    def iter_bytes(self) -> Iterator[bytes]: ...

    def read(self) -> bytes: ...


class AsyncStreamingResponse(Protocol):
    status: int
    headers: Mapping[str, str]

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aread(self) -> bytes: ...


@runtime_checkable
class Transport(Protocol):
    """A synchronous transport. Instances are safe to share between threads.

    A transport may also tell where it sends origin-form targets, as an ``origin`` attribute
    (``"http://host:port"``, or ``None`` for nowhere): a client given a transport whose origin
    is not the client's server then sends absolute targets (both transport kinds).
    """

    def handle_request(self, request: HTTPRequest) -> HTTPResponse: ...

    def stream(self, request: HTTPRequest) -> AbstractContextManager[StreamingResponse]: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncTransport(Protocol):
    """An asyncio transport."""

    async def handle_async_request(self, request: HTTPRequest) -> HTTPResponse: ...

    def astream(
        self, request: HTTPRequest
    ) -> AbstractAsyncContextManager[AsyncStreamingResponse]: ...

    async def aclose(self) -> None: ...


#: One received gRPC message, serialized. The native transport hands over a message that
#: arrived in pieces as the bytearray it was assembled in (not copied once more).
GRPCMessage = bytes | bytearray

#: One response message of a stream call.
StreamMessage = GRPCMessage


CLOSED_FOR_SENDING: Final = "the stream is closed; open a new one with client.stream()"


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


class UnaryChannel(Protocol):
    """What a prepared unary call (:class:`~kserve_v2.grpc.backend.GRPCCall`) needs of a
    synchronous channel.

    ``call_unary`` sends one request message (``request``: the serialized message, or the
    buffers whose concatenation it is, sent without being joined where the transport can)
    and returns the response message with, when ``want_metadata``, the response metadata
    (``()`` otherwise). ``timeout=None`` means no deadline, ``compression=None`` the
    channel's default. Errors are kserve-v2 errors (a gRPC error status is a
    :class:`~kserve_v2.errors.ServerError` with its ``grpc_code``).
    """

    def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[GRPCMessage, Metadata]: ...


class AsyncUnaryChannel(Protocol):
    """The asyncio twin of :class:`UnaryChannel`."""

    async def call_unary(
        self,
        method: str,
        request: bytes | tuple[BytesLike, ...],
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        compression: str | None = None,
        want_metadata: bool = False,
    ) -> tuple[GRPCMessage, Metadata]: ...


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


class Channel(UnaryChannel, SyncStreamChannel, Protocol):
    """A synchronous gRPC channel as a client owns it: unary calls, streams, ``close``."""

    def close(self) -> None: ...


class AsyncChannel(AsyncUnaryChannel, AsyncStreamChannel, Protocol):
    """An asyncio gRPC channel as a client owns it: unary calls, streams, ``aclose``."""

    async def aclose(self) -> None: ...
