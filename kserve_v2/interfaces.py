"""The transport interface: bytes in, bytes out, nothing about the protocol.

A transport moves one HTTP exchange. The client facade builds an :class:`HTTPRequest` with the
REST codec, hands it to a transport, and decodes the :class:`HTTPResponse` with the codec again.
Sync and async transports are twins with the same value objects.

Contract every transport keeps:

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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from kserve_v2.datatypes import BytesLike
from kserve_v2.grpc.config import ChannelConfig, Metadata

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import field
from typing import runtime_checkable

__all__ = [
    "AsyncStreamCall",
    "AsyncStreamChannel",
    "AsyncStreamingResponse",
    "AsyncTransport",
    "BytesLike",
    "CLOSED_FOR_SENDING",
    "HTTPRequest",
    "HTTPResponse",
    "StreamMessage",
    "StreamingResponse",
    "SyncStreamCall",
    "SyncStreamChannel",
    "Transport",
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
    """A synchronous transport. Instances are safe to share between threads."""

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


#: One response message of a stream call. The native transport hands over a message that
#: arrived in pieces as the bytearray it was assembled in (not copied once more).
StreamMessage = bytes | bytearray


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
