"""The one error hierarchy of kserve-v2.

Every exception the library raises on purpose derives from :class:`KServeError`::

    KServeError
    ├── InvalidInputError        the caller passed something the protocol cannot carry
    │                            (also a ValueError)
    ├── MissingDependencyError   an optional extra is not installed (also an ImportError)
    ├── ServerError              the server answered with an error: HTTP status or gRPC code,
    │                            and the server's own message
    ├── ProtocolError            the peer sent something that breaks the protocol
    │                            (truncated body, sizes that do not add up, bad JSON, ...)
    └── TransportError           the bytes could not be moved (refused, reset, TLS failure);
        │                        ``unprocessed``: the server certainly did not act on it
        └── DeadlineExceededError   a connect or request timeout expired (also a TimeoutError)

Errors from sockets, ``ssl``, httpx and grpcio are translated into this tree at the
transport boundary with ``raise ... from exc``, so the original stays in ``__cause__``.

Example::

    try:
        client.infer("missing_model", {"x": arr})
    except kserve_v2.ServerError as exc:
        print(exc.http_status, exc.message)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DeadlineExceededError",
    "InvalidInputError",
    "KServeError",
    "MissingDependencyError",
    "ProtocolError",
    "ServerError",
    "TransportError",
]


class KServeError(Exception):
    """Base class of every error kserve-v2 raises."""


class InvalidInputError(KServeError, ValueError):
    """The caller asked for something the protocol cannot express.

    ``value`` holds the offending value when there is one.
    """

    def __init__(self, message: str, *, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.value = value


class MissingDependencyError(KServeError, ImportError):
    """An optional dependency is needed for this feature.

    The message carries a one-line install hint, e.g. ``pip install 'kserve-v2[grpc]'``.
    """

    def __init__(self, feature: str, extra: str, module: str) -> None:
        message = f"{feature} needs the '{module}' package: pip install 'kserve-v2[{extra}]'"
        super().__init__(message, name=module)
        self.message = message
        self.extra = extra


class ServerError(KServeError):
    """The server reported an error.

    Attributes:
        message: the server's own message (the ``error`` field of a REST error body, or the
            gRPC status details), verbatim.
        http_status: the HTTP status code, for REST calls.
        grpc_code: the gRPC status code's name (e.g. ``"NOT_FOUND"``), for gRPC calls: a
            member name of :class:`kserve_v2.grpc.status.StatusCode` (a name, not the enum,
            since this module sits below the gRPC engine; ``StatusCode[exc.grpc_code]`` gives
            the enum).
        body: the raw error body as received, when there was one.
        retry_after: how many seconds the server asked the client to wait before trying
            again: HTTP's ``Retry-After`` (seconds or a date), gRPC's
            ``grpc-retry-pushback-ms``; ``math.inf`` when a gRPC server asked not to retry
            (a negative or unreadable pushback); None when it said nothing. A
            :class:`~kserve_v2.RetryPolicy` waits that long instead of its backoff.
    """

    def __init__(
        self,
        message: str,
        *,
        http_status: int | None = None,
        grpc_code: str | None = None,
        body: bytes | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.http_status = http_status
        self.grpc_code = grpc_code
        self.body = body
        self.retry_after = retry_after
        where = []
        if http_status is not None:
            where.append(f"HTTP {http_status}")
        if grpc_code is not None:
            where.append(f"gRPC {grpc_code}")
        prefix = f"[{', '.join(where)}] " if where else ""
        super().__init__(f"{prefix}{message}")


class ProtocolError(KServeError):
    """The peer sent data that violates the protocol.

    ``value`` holds the offending piece (truncated where large) when it helps to see it.
    """

    def __init__(self, message: str, *, value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.value = value


class TransportError(KServeError):
    """The request could not be delivered or its response not received.

    ``unprocessed`` is true when the server certainly did not act on the request, so that
    sending it again cannot run it twice: the connection was refused, the name did not
    resolve, the TLS handshake or the connect timed out or failed, or HTTP/2 said the server
    did not process it (``REFUSED_STREAM``, a stream above GOAWAY's last-stream-id). False
    means it may have been processed (the connection broke after the request went out, no
    answer came in time): :class:`~kserve_v2.RetryPolicy` re-sends such a request only for
    calls that may run twice.
    """

    def __init__(self, message: str, *, url: str | None = None, unprocessed: bool = False) -> None:
        super().__init__(message if url is None else f"{message} ({url})")
        self.message = message
        self.url = url
        self.unprocessed = unprocessed


class DeadlineExceededError(TransportError, TimeoutError):
    """A connect timeout, request timeout or gRPC deadline expired."""
