"""gRPC status codes (the ``grpc-status`` trailer) and the status behind an error.

:class:`StatusCode` is the wire value of every code. A :class:`~kserve_v2.errors.ServerError`
from a gRPC call carries the code's *name* in ``grpc_code`` (errors sit below this module, and a
name reads the same from grpcio and from the native transport); the enum converts both ways.

Example::

    from kserve_v2.grpc.status import StatusCode

    try:
        client.infer("missing_model", inputs)
    except ServerError as exc:
        exc.grpc_code == "NOT_FOUND"                       # True: a name
        StatusCode[exc.grpc_code] is StatusCode.NOT_FOUND  # True: the enum of that name
    StatusCode(14).name                                    # 'UNAVAILABLE'
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from typing import Final

from kserve_v2.errors import DeadlineExceededError, ServerError

__all__ = ["PUSHBACK_KEY", "StatusCode", "code_name", "retry_pushback", "status_of"]


@enum.unique
class StatusCode(enum.IntEnum):
    """The 17 gRPC status codes (grpc/grpc ``doc/statuscodes.md``), by their wire number."""

    #: Not an error: the call succeeded.
    OK = 0
    #: The call was cancelled, typically by the caller.
    CANCELLED = 1
    #: An error with no better code (also: a status from an unknown error space).
    UNKNOWN = 2
    #: The caller sent an invalid argument, whatever the server's state.
    INVALID_ARGUMENT = 3
    #: The deadline expired before the call completed (it may still have had effects).
    DEADLINE_EXCEEDED = 4
    #: A requested entity (model, region, ...) was not found.
    NOT_FOUND = 5
    #: The entity the caller tried to create already exists.
    ALREADY_EXISTS = 6
    #: The caller may not do this (but is authenticated).
    PERMISSION_DENIED = 7
    #: A resource ran out: a quota, or a message larger than the receiver's limit.
    RESOURCE_EXHAUSTED = 8
    #: The system is not in the state the call needs (retrying will not help as is).
    FAILED_PRECONDITION = 9
    #: The call was aborted, typically by a concurrency conflict.
    ABORTED = 10
    #: An argument was past the valid range (e.g. a read beyond the end).
    OUT_OF_RANGE = 11
    #: The server does not implement or support this call.
    UNIMPLEMENTED = 12
    #: An invariant of the server (or of the protocol underneath) broke.
    INTERNAL = 13
    #: The service is unavailable for now, usually transient: retry with back-off.
    UNAVAILABLE = 14
    #: Unrecoverable data loss or corruption.
    DATA_LOSS = 15
    #: The call has no valid authentication credentials.
    UNAUTHENTICATED = 16


def code_name(exc: BaseException) -> str:
    """The name of a grpcio error's status code (``exc.code().name``), else ``"UNKNOWN"``."""
    code_of = getattr(exc, "code", None)
    code = code_of() if callable(code_of) else None
    name = getattr(code, "name", None)
    return name if isinstance(name, str) else StatusCode.UNKNOWN.name


def status_of(exc: BaseException) -> str:
    """The gRPC status name behind a translated error (for wire hooks)."""
    if isinstance(exc, ServerError) and exc.grpc_code:
        return exc.grpc_code
    cause = exc.__cause__
    if cause is not None and hasattr(cause, "code"):
        return code_name(cause)
    if isinstance(exc, DeadlineExceededError):
        return StatusCode.DEADLINE_EXCEEDED.name
    return StatusCode.UNKNOWN.name


#: The trailer in which a server says when to retry, or not to (gRFC A6, "pushback").
PUSHBACK_KEY: Final = "grpc-retry-pushback-ms"


def retry_pushback(metadata: Iterable[tuple[str, str | bytes]]) -> float | None:
    """The wait in seconds a failed call's ``grpc-retry-pushback-ms`` asks for: None without
    one; ``math.inf`` ("do not retry") for a negative or unreadable value, as gRFC A6 reads
    them.

    Example::

        >>> retry_pushback([("grpc-retry-pushback-ms", "1500")]), retry_pushback([])
        (1.5, None)
        >>> retry_pushback([("grpc-retry-pushback-ms", "-1")])
        inf
    """
    for name, value in metadata:
        if name == PUSHBACK_KEY:
            text = value if isinstance(value, str) else value.decode("latin-1")
            if 0 < len(text) <= 12 and text.isascii() and text.isdigit():
                return int(text) / 1000
            return math.inf
    return None
