"""gRPC status codes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kserve_v2.errors import (
    DeadlineExceededError,
    ServerError,
)

if TYPE_CHECKING:
    pass

__all__ = ["code_name", "status_of"]


def code_name(exc: BaseException) -> str:
    code_of = getattr(exc, "code", None)
    code = code_of() if callable(code_of) else None
    name = getattr(code, "name", None)
    return name if isinstance(name, str) else "UNKNOWN"


def status_of(exc: BaseException) -> str:
    """The gRPC status name behind a translated error (for wire hooks)."""
    if isinstance(exc, ServerError) and exc.grpc_code:
        return exc.grpc_code
    cause = exc.__cause__
    if cause is not None and hasattr(cause, "code"):
        return code_name(cause)
    if isinstance(exc, DeadlineExceededError):
        return "DEADLINE_EXCEEDED"
    return "UNKNOWN"
