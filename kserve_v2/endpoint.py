"""Parsing of server URLs into the protocol, address and base path to use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote, urlsplit

from kserve_v2.errors import InvalidInputError

__all__ = ["Endpoint", "parse_url"]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "grpc": 8001, "grpcs": 8001}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server is: ``scheme`` is http, https, grpc or grpcs.

    ``base_path`` is decoded (``/my ns``, not ``/my%20ns``): request targets encode it once.
    """

    scheme: str
    host: str
    port: int
    base_path: str = ""

    @property
    def protocol(self) -> str:
        """``"http"`` or ``"grpc"``."""
        return "grpc" if self.scheme.startswith("grpc") else "http"

    @property
    def tls(self) -> bool:
        return self.scheme in ("https", "grpcs")

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{quote(self.base_path, safe='/')}"


def parse_url(url: str) -> Endpoint:
    """Parse ``http://host:port[/base/path]``, ``https://...``, ``grpc://host:port``,
    ``grpcs://...``, or a bare ``host:port`` (taken as http).

    >>> parse_url("localhost:8000")
    Endpoint(scheme='http', host='localhost', port=8000, base_path='')
    >>> parse_url("grpc://[::1]:8001").authority
    '[::1]:8001'
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInputError(f"server URL must be a non-empty string, got {url!r}", value=url)
    text = url.strip()
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidInputError(
            f"unsupported URL scheme {parts.scheme!r} in {url!r}; use http, https, grpc or grpcs",
            value=url,
        )
    try:
        port = parts.port
    except ValueError:
        raise InvalidInputError(f"invalid port in server URL {url!r}", value=url) from None
    host = parts.hostname
    if not host:
        raise InvalidInputError(f"server URL {url!r} has no host", value=url)
    if parts.query or parts.fragment:
        raise InvalidInputError(
            f"server URL {url!r} must not carry a query or fragment; pass query=... per call",
            value=url,
        )
    # Decoded here because RestPaths percent-encodes it: "/a%20b" must not become "/a%2520b".
    base_path = unquote(parts.path).rstrip("/")
    if base_path and scheme.startswith("grpc"):
        raise InvalidInputError(f"gRPC URLs take no path, got {url!r}", value=url)
    return Endpoint(scheme, host, port or _DEFAULT_PORTS[scheme], base_path)
