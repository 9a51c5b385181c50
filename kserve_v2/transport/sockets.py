"""What every transport shares: origins, TLS contexts, deadlines, scatter-gather sends."""

from __future__ import annotations

import math
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Union
from urllib.parse import urlsplit

from kserve_v2.datatypes import BytesLike
from kserve_v2.errors import (
    InvalidInputError,
)

if TYPE_CHECKING:
    from kserve_v2.datatypes import BytesLike

__all__ = [
    "HAS_SENDMSG",
    "IOV_MAX",
    "Origin",
    "StrPath",
    "deadline_after",
    "make_ssl_context",
    "parse_origin",
    "sendmsg_rest",
]


def deadline_after(timeout: float | None, now: float) -> float | None:
    """The deadline ``timeout`` seconds after ``now`` (monotonic or event-loop time), as every
    transport computes it. None for no timeout, and for an infinite one: sockets, select and
    timers cannot wait ``math.inf`` seconds."""
    return None if timeout is None or timeout == math.inf else now + timeout


StrPath = Union[str, "os.PathLike[str]"]


# Linux refuses more than IOV_MAX (1024) buffers in one sendmsg call.
try:
    IOV_MAX = max(16, min(os.sysconf("SCIOV_MAX"), 1024))
except (AttributeError, ValueError, OSError):  # pragma: no cover - platform dependent
    IOV_MAX = 1024


#: Whether sockets have ``sendmsg`` (not on Windows): the native gRPC transport asks too.
HAS_SENDMSG = hasattr(socket.socket, "sendmsg")


def sendmsg_rest(
    sendmsg: Callable[[list[memoryview]], int],
    buffers: Sequence[BytesLike],
    sent: int,
    arm: Callable[[], None],
) -> None:
    """Finish a partial ``sendmsg`` of ``buffers`` of which ``sent`` bytes went out: skip
    those, resend the rest in IOV_MAX batches, calling ``arm`` (the socket's timeout for the
    deadline) before each call. Shared by this transport and the native gRPC one."""
    views = [memoryview(b).cast("B") for b in buffers]
    index = 0
    while True:
        # Drop the fully sent buffers, trim the partly sent one.
        while index < len(views) and sent >= views[index].nbytes:
            sent -= views[index].nbytes
            index += 1
        if index == len(views):
            return
        if sent:
            views[index] = views[index][sent:]
        arm()
        sent = sendmsg(views[index : index + IOV_MAX])


class Origin:
    """Where requests go: scheme, host and port, plus the ``Host`` header derived from them."""

    __slots__ = ("host", "host_header", "port", "tls")

    def __init__(self, tls: bool, host: str, port: int) -> None:
        self.tls = tls
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.host_header = shown if port == (443 if tls else 80) else f"{shown}:{port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host_header}"

    def key(self) -> tuple[bool, str, int]:
        return (self.tls, self.host, self.port)


def parse_origin(url: str) -> tuple[Origin, str]:
    """Split ``http[s]://host[:port][/path?query]`` into its origin and request target.

    A bare ``host:port`` means ``http://host:port``.

    >>> origin, target = parse_origin("https://example.com/v2/models?x=1")
    >>> origin.host, origin.port, origin.tls, target
    ('example.com', 443, True, '/v2/models?x=1')
    """
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInputError(f"invalid URL {url!r}: {exc}", value=url) from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(f"expected an http:// or https:// URL, got {url!r}", value=url)
    tls = scheme == "https"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return Origin(tls, parts.hostname, port or (443 if tls else 80)), target


def make_ssl_context(
    *,
    verify: bool = True,
    ca_file: StrPath | None = None,
    ca_dir: StrPath | None = None,
    cert_file: StrPath | None = None,
    key_file: StrPath | None = None,
    key_password: str | None = None,
) -> ssl.SSLContext:
    """Build the client TLS context the transports use by default.

    Certificate and host name verification are on unless ``verify=False``. ``ca_file`` /
    ``ca_dir`` replace the system trust store; ``cert_file`` (+ ``key_file``) is the client
    certificate for mutual TLS.
    """
    try:
        if ca_file is not None or ca_dir is not None:
            ctx = ssl.create_default_context(cafile=ca_file, capath=ca_dir)
        else:
            ctx = ssl.create_default_context()
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cert_file is not None:
            ctx.load_cert_chain(cert_file, key_file, key_password)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidInputError(f"cannot set up TLS: {exc}") from exc
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


# ------------------------------------------------------------------ connection loss

#: What a socket call raises when the peer went away mid-exchange. On a reused (pooled)
#: connection before any answer arrived, this is the stale keep-alive case that transports
#: retry once on a new connection.
CONNECTION_LOST = (
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)
__all__ += ["CONNECTION_LOST"]
