"""Client options: timeouts, TLS and gRPC settings (frozen value objects)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kserve_v2.errors import InvalidInputError

if TYPE_CHECKING:
    import ssl

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_TIMEOUT", "GRPCKeepAlive", "TLSOptions"]


#: Default whole-request timeout in seconds (a hung server must not hang the caller forever).
DEFAULT_TIMEOUT = 60.0
#: Default TCP/TLS connect timeout in seconds.
DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class TLSOptions:
    """TLS settings for ``https://`` and ``grpcs://`` URLs.

    ``ca_file``: PEM file of CAs to trust (default: the system store). ``cert_file`` and
    ``key_file``: client certificate and key for mutual TLS. ``ssl_context``: a ready context
    (HTTP only; overrides the files). ``verify=False`` turns certificate checks off (HTTP only;
    for tests against self-signed servers you cannot give a CA for). ``server_hostname``
    overrides the name the certificate is checked against.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    ssl_context: ssl.SSLContext | None = None
    verify: bool = True
    server_hostname: str | None = None


@dataclass(frozen=True, slots=True)
class GRPCKeepAlive:
    """HTTP/2 keepalive pings of a gRPC channel (grpc's ``grpc.keepalive_*`` arguments).

    The defaults are grpcio's: no pings (``time_ms`` of 2**31 - 1). Servers refuse pings that
    come more often than they allow (Triton: ``--grpc-http2-min-recv-ping-interval-without-data``)
    and close the connection with GOAWAY ``too_many_pings``.

    Example::

        Client("grpc://host:8001", grpc_keepalive=GRPCKeepAlive(time_ms=30_000))
    """

    #: milliseconds between pings on an idle connection
    time_ms: int = 2**31 - 1
    #: milliseconds to wait for a ping's answer before the connection is declared dead
    timeout_ms: int = 20_000
    #: ping also when no call is in flight
    permit_without_calls: bool = False
    #: pings allowed without data in between (0: unlimited)
    http2_max_pings_without_data: int = 2

    def __post_init__(self) -> None:
        for name in ("time_ms", "timeout_ms", "http2_max_pings_without_data"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"GRPCKeepAlive.{name} must be a non-negative integer", value=value
                )

    def channel_options(self) -> tuple[tuple[str, Any], ...]:
        """The channel arguments for these settings."""
        return (
            ("grpc.keepalive_time_ms", self.time_ms),
            ("grpc.keepalive_timeout_ms", self.timeout_ms),
            ("grpc.keepalive_permit_without_calls", int(self.permit_without_calls)),
            ("grpc.http2.max_pings_without_data", self.http2_max_pings_without_data),
        )
