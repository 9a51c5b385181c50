"""Wire hooks: let the caller see every message the client sends and receives.

A hook is any callable taking a :class:`WireMessage`. It is called once before each request is
sent and once after each response (or failure) arrives. ``verbose=True`` on a client installs
:func:`print_hook`, which prints to stderr with credentials redacted.

Example::

    >>> seen = []
    >>> client = Client("http://localhost:8000", wire_hook=seen.append)   # doctest: +SKIP
    >>> client.is_server_live()                                            # doctest: +SKIP
    >>> [m.direction for m in seen]                                        # doctest: +SKIP
    ['send', 'receive']
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, TextIO

from kserve_v2.datatypes import BytesLike

__all__ = ["REDACTED_HEADERS", "WireHook", "WireMessage", "print_hook", "redact_headers"]

#: Header names whose values are replaced by ``<redacted>`` in anything printed.
REDACTED_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"}
)


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One message on the wire, as the hook sees it.

    ``direction`` is ``"send"`` or ``"receive"``; ``protocol`` is ``"http"`` or ``"grpc"``.
    Its ``repr`` redacts credentials (:data:`REDACTED_HEADERS`) and gives the body's size,
    not its bytes; the fields themselves hold what went over the wire.
    For HTTP ``target`` is the request target and ``status`` the response status; for gRPC
    ``target`` is the RPC's full method name and ``status`` the gRPC code name. ``body`` is the
    list of buffers sent, or the received body (already decompressed). ``error`` is set when
    the exchange failed before a response arrived.
    """

    direction: str
    protocol: str
    method: str
    target: str
    headers: Sequence[tuple[str, str]] = ()
    body: Sequence[BytesLike] = ()
    status: int | str | None = None
    elapsed: float | None = None
    error: BaseException | None = field(default=None, repr=False)

    @property
    def body_length(self) -> int:
        return sum(memoryview(b).nbytes for b in self.body)

    def __repr__(self) -> str:
        # Written out, not the dataclass's: a printed message must not show credentials
        # (REDACTED_HEADERS) nor a body that may be megabytes of tensor data.
        fields = [
            f"direction={self.direction!r}",
            f"protocol={self.protocol!r}",
            f"method={self.method!r}",
            f"target={self.target!r}",
            f"headers={tuple(redact_headers(self.headers))!r}",
            f"body=<{self.body_length} bytes in {len(self.body)} buffer(s)>",
            f"status={self.status!r}",
            f"elapsed={self.elapsed!r}",
        ]
        return f"WireMessage({', '.join(fields)})"


WireHook = Callable[[WireMessage], None]


def redact_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers with credential values replaced by ``<redacted>``."""
    return [(k, "<redacted>" if k.lower() in REDACTED_HEADERS else v) for k, v in headers]


def _preview(body: Sequence[BytesLike], limit: int) -> str:
    data = b"".join(bytes(memoryview(b)[:limit]) for b in body)[:limit]
    total = sum(memoryview(b).nbytes for b in body)
    text = data.decode("utf-8", "backslashreplace")
    return text + (f"... ({total} bytes)" if total > limit else "")


def print_hook(stream: TextIO | None = None, *, body_limit: int = 2048) -> WireHook:
    """A hook that prints each message (headers redacted, body preview) to ``stream``."""

    def hook(message: WireMessage) -> None:
        out = stream or sys.stderr
        arrow = ">>" if message.direction == "send" else "<<"
        line = f"{arrow} {message.protocol.upper()} {message.method} {message.target}"
        if message.status is not None:
            line += f" -> {message.status}"
        if message.elapsed is not None:
            line += f" ({message.elapsed * 1000:.2f} ms)"
        print(line, file=out)
        if message.error is not None:
            print(f"   error: {message.error}", file=out)
        for key, value in redact_headers(message.headers):
            print(f"   {key}: {value}", file=out)
        if message.body:
            print(f"   {_preview(message.body, body_limit)}", file=out)

    return hook
