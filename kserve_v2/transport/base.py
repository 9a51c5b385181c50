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

import math
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kserve_v2.errors import InvalidInputError

__all__ = [
    "AsyncStreamingResponse",
    "AsyncTransport",
    "BytesLike",
    "HTTPRequest",
    "HTTPResponse",
    "StreamingResponse",
    "Transport",
    "check_max_response_size",
    "deadline_after",
]

BytesLike = bytes | bytearray | memoryview


def deadline_after(timeout: float | None, now: float) -> float | None:
    """The deadline ``timeout`` seconds after ``now`` (monotonic or event-loop time), as every
    transport computes it. None for no timeout, and for an infinite one: sockets, select and
    timers cannot wait ``math.inf`` seconds."""
    return None if timeout is None or timeout == math.inf else now + timeout


def check_max_response_size(value: int | None) -> int | None:
    """Validate a ``max_response_size`` argument: a positive number of bytes, or None."""
    if value is not None and (type(value) is not int or value < 1):
        raise InvalidInputError(
            "max_response_size must be a positive number of bytes or None", value=value
        )
    return value


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
