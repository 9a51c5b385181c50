"""Opt-in retries: :class:`RetryPolicy` says which failed calls are tried again, how often,
and how long to wait in between (exponential backoff with full jitter).

This module decides; the clients (``Client(..., retry=RetryPolicy())``, ``AsyncClient``) run
the loop and sleep (``time.sleep`` in threads, ``asyncio.sleep`` on the loop). A client with
no policy never retries.

What is retried, and when:

* **Idempotent calls** (health, readiness, metadata, model configuration, statistics, the
  repository index, shared-memory status, trace and log settings, metrics): after a transport
  failure (connection refused or lost, TLS failure, no answer) or an answer with a status of
  :attr:`~RetryPolicy.http_statuses` / :attr:`~RetryPolicy.grpc_codes` (by default HTTP 429,
  502, 503, 504 and gRPC ``UNAVAILABLE``: the ones that say "not now").
* **infer** follows :attr:`~RetryPolicy.infer` (or ``client.infer(..., retry=...)``):
  ``"never"`` (default); ``"unprocessed"``: only when the request certainly did not reach the
  server (:attr:`TransportError.unprocessed <kserve_v2.TransportError>`: refused, DNS or TLS
  failure, connect timeout, HTTP/2 ``REFUSED_STREAM``), so the model never runs twice;
  ``"idempotent"``: like the calls above, for models that may safely run twice.
* **Never**: other writes (load/unload, shared-memory registration, settings updates,
  ``generate``), streams, a bad argument (:class:`~kserve_v2.InvalidInputError`), a malformed
  answer (:class:`~kserve_v2.ProtocolError`), any other server error, and a
  :class:`~kserve_v2.DeadlineExceededError` once the call's own ``timeout`` is spent.

A server that says when to try again is obeyed: HTTP's ``Retry-After`` and gRPC's
``grpc-retry-pushback-ms`` (:attr:`ServerError.retry_after <kserve_v2.ServerError>`) replace
the backoff, up to :attr:`RetryPolicy.max_retry_after`; a longer wait, or a gRPC "do not
retry" (a negative pushback), ends the call with the server's error.

The call's ``timeout`` is for all its attempts together: each attempt gets the time left, and
no backoff is slept that would end past it (the last error is raised at once instead).
``RESOURCE_EXHAUSTED`` is not retried by default: the client reports its own
``max_response_size`` that way, and a message too large stays too large.

Example::

    import random
    from kserve_v2 import Client, RetryPolicy

    policy = RetryPolicy(attempts=5, initial_backoff=0.2, max_backoff=3.0)
    with Client("http://localhost:8000", retry=policy) as client:
        client.is_server_ready()                      # retried while the server starts
        client.infer("simple", inputs, retry="unprocessed")
    RetryPolicy(random=random.Random(7).random)       # reproducible jitter (tests)
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from kserve_v2.errors import (
    DeadlineExceededError,
    InvalidInputError,
    ServerError,
    TransportError,
)

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "GRPC_CODE_NAMES",
    "INFER_RETRY_MODES",
    "RetryPolicy",
    "check_infer_retry",
]

#: How infer is retried: not at all; only when the server certainly did not get it; or as
#: the idempotent calls are (the model may run twice).
INFER_RETRY_MODES: Final = ("never", "unprocessed", "idempotent")

#: The gRPC status code names (``kserve_v2.grpc.status.StatusCode`` members, but OK; named
#: here because this module sits below the gRPC engine; a test keeps the two equal).
GRPC_CODE_NAMES: Final = frozenset(
    {
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    }
)


def check_infer_retry(mode: object, name: str = "retry") -> str:
    """``mode`` when it is one of :data:`INFER_RETRY_MODES`; else :class:`InvalidInputError`."""
    if not isinstance(mode, str) or mode not in INFER_RETRY_MODES:
        raise InvalidInputError(
            f"{name} must be one of {', '.join(map(repr, INFER_RETRY_MODES))}", value=mode
        )
    return mode


def _seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"RetryPolicy.{name} must be a finite number", value=value)
    if value < 0:
        raise InvalidInputError(f"RetryPolicy.{name} must not be negative", value=value)
    return float(value)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how a client tries a failed call again (see :mod:`kserve_v2.retry`).

    Attributes:
        attempts: tries in all, the first included (1: no retry).
        initial_backoff: the most seconds slept before the second try; each later try may
            wait ``multiplier`` times longer, up to ``max_backoff``.
        max_backoff: the most seconds slept between two tries.
        multiplier: growth of the backoff from one try to the next (at least 1).
        jitter: full jitter (AWS's name): sleep a uniformly random fraction of the backoff,
            so that many clients failing at once do not retry in step. False: the backoff
            itself.
        http_statuses: HTTP answers that are retried (default 429, 502, 503, 504).
        grpc_codes: gRPC status codes that are retried (default ``UNAVAILABLE``).
        infer: how ``infer`` is retried (:data:`INFER_RETRY_MODES`): ``"never"``
            (default), ``"unprocessed"`` or ``"idempotent"``; ``client.infer(...,
            retry=...)`` overrides it for one call.
        max_retry_after: the longest wait a server may ask for (HTTP ``Retry-After``, gRPC
            ``grpc-retry-pushback-ms``: :attr:`ServerError.retry_after
            <kserve_v2.ServerError>`), which replaces the backoff before the next try; a
            server that asks for more (or, over gRPC, asks not to retry) gets its error
            raised at once.
        random: a function returning a float in [0, 1), for the jitter; give a seeded one
            (``random.Random(7).random``) for reproducible waits.

    Example::

        RetryPolicy(attempts=4, initial_backoff=0.5, infer="unprocessed")
        [RetryPolicy(jitter=False).backoff(n) for n in (1, 2, 3, 4, 5, 6)]
        # [0.1, 0.2, 0.4, 0.8, 1.6, 2.0]
    """

    attempts: int = 3
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: bool = True
    http_statuses: frozenset[int] = frozenset({429, 502, 503, 504})
    grpc_codes: frozenset[str] = frozenset({"UNAVAILABLE"})
    infer: str = "never"
    max_retry_after: float = 30.0
    random: Callable[[], float] = field(default=_random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise InvalidInputError("RetryPolicy.attempts must be an integer", value=self.attempts)
        if self.attempts < 1:
            raise InvalidInputError(
                "RetryPolicy.attempts counts every try, the first included: at least 1",
                value=self.attempts,
            )
        for name in ("initial_backoff", "max_backoff", "multiplier", "max_retry_after"):
            object.__setattr__(self, name, _seconds(getattr(self, name), name))
        if self.multiplier < 1:
            raise InvalidInputError(
                "RetryPolicy.multiplier must be at least 1", value=self.multiplier
            )
        if not isinstance(self.jitter, bool):
            raise InvalidInputError("RetryPolicy.jitter must be a bool", value=self.jitter)
        object.__setattr__(self, "http_statuses", _statuses(self.http_statuses))
        object.__setattr__(self, "grpc_codes", _codes(self.grpc_codes))
        check_infer_retry(self.infer, "RetryPolicy.infer")
        if not callable(self.random):
            raise InvalidInputError(
                "RetryPolicy.random must be a function returning a float in [0, 1)",
                value=self.random,
            )

    def backoff(self, retry: int) -> float:
        """Seconds to sleep before retry number ``retry`` (1: before the second try):
        ``initial_backoff * multiplier ** (retry - 1)``, at most ``max_backoff``, times a
        random fraction with ``jitter``."""
        delay = self.initial_backoff
        for _ in range(retry - 1):  # a loop, not **: no float overflow for large counts
            if delay >= self.max_backoff:
                break
            delay *= self.multiplier
        delay = min(delay, self.max_backoff)
        return delay * self.random() if self.jitter else delay

    def delay(self, retry: int, error: BaseException) -> float | None:
        """Seconds to sleep before retry number ``retry`` after ``error``: what the server
        asked for (:attr:`ServerError.retry_after <kserve_v2.ServerError>`) if it did, else
        :meth:`backoff`; None when the server asked for more than :attr:`max_retry_after`
        (the call then fails with ``error``).

        Example::

            policy = RetryPolicy(jitter=False)
            policy.delay(1, ServerError("busy", http_status=503, retry_after=2.0))  # 2.0
            policy.delay(1, ServerError("busy", http_status=503))  # 0.1, the backoff
        """
        asked = error.retry_after if isinstance(error, ServerError) else None
        if asked is None:
            return self.backoff(retry)
        return asked if asked <= self.max_retry_after else None

    def retries(self, error: BaseException, mode: str) -> bool:
        """Whether a call that failed with ``error`` may be sent again, by the failure
        alone (the client also counts attempts and the time left).

        ``mode``: ``"idempotent"`` for a call that may run twice, ``"unprocessed"`` for one
        that must not (only a request the server certainly did not get is sent again),
        ``"never"``.
        """
        if mode == "never":
            return False
        if isinstance(error, TransportError):
            if error.unprocessed:
                return True
            # No answer in the time given: that time is the whole call's (each try gets what
            # is left), so it is spent.
            if isinstance(error, DeadlineExceededError):
                return False
            return mode == "idempotent"
        if isinstance(error, ServerError) and mode == "idempotent":
            if error.http_status is not None:
                return error.http_status in self.http_statuses
            return error.grpc_code in self.grpc_codes
        return False


def _statuses(value: object) -> frozenset[int]:
    statuses: set[int] = set()
    for item in _items(value, "http_statuses"):
        if isinstance(item, bool) or not isinstance(item, int) or not 100 <= item <= 599:
            raise InvalidInputError(
                "RetryPolicy.http_statuses must hold HTTP status codes (100-599)", value=item
            )
        statuses.add(item)
    return frozenset(statuses)


def _codes(value: object) -> frozenset[str]:
    codes: set[str] = set()
    for item in _items(value, "grpc_codes"):
        if not isinstance(item, str) or item not in GRPC_CODE_NAMES:
            raise InvalidInputError(
                "RetryPolicy.grpc_codes must hold gRPC status code names such as "
                f"'UNAVAILABLE' (OK excluded), got {item!r}",
                value=item,
            )
        codes.add(item)
    return frozenset(codes)


def _items(value: object, name: str) -> list[object]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidInputError(f"RetryPolicy.{name} must be a collection", value=value)
    return list(value)


#: The policy of an ``infer(..., retry=...)`` on a client that has none.
DEFAULT_RETRY_POLICY: Final = RetryPolicy()
