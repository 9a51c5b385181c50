"""Client options: timeouts, TLS and gRPC settings (frozen value objects)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.errors import InvalidInputError

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "GRPC_TRANSPORTS",
    "GRPCKeepAlive",
    "GRPCOptions",
    "NATIVE_CHANNEL_OPTIONS",
    "TLSOptions",
]


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

    Both gRPC transports take them. On the native transport the ``AsyncClient``'s
    connections, which its event loop reads between calls too, ping as grpcio's do; the sync
    ``Client``'s are read only by a call, so they ping only while a call waits
    (``permit_without_calls`` does not apply; a pooled connection is checked for end of
    file before it is used again).

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


#: The gRPC transports: the library's own HTTP/2 client, or grpcio.
GRPC_TRANSPORTS: Final = ("native", "grpcio")

#: grpcio channel arguments the native transport honours too (the keepalive ones: see
#: :class:`GRPCKeepAlive`).
NATIVE_CHANNEL_OPTIONS: Final = frozenset(
    {
        "grpc.max_send_message_length",
        "grpc.max_receive_message_length",
        "grpc.keepalive_time_ms",
        "grpc.keepalive_timeout_ms",
        "grpc.keepalive_permit_without_calls",
        "grpc.http2.max_pings_without_data",
    }
)


def _channel_option_pairs(options: object) -> tuple[tuple[str, Any], ...]:
    if isinstance(options, Mapping):
        items: Sequence[object] = list(options.items())
    elif isinstance(options, Sequence) and not isinstance(options, str | bytes):
        items = options
    else:
        raise InvalidInputError(
            "gRPC channel options must be a mapping or a sequence of (name, value) pairs",
            value=options,
        )
    pairs = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidInputError(
                f"gRPC channel options must be (name, value) pairs, got {item!r}", value=item
            )
        key, value = item
        if not isinstance(key, str) or not key:
            raise InvalidInputError(
                f"gRPC channel option names must be non-empty strings, got {key!r}", value=key
            )
        pairs.append((key, value))
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class GRPCOptions:
    """The gRPC settings of a client (``grpc://`` and ``grpcs://`` URLs), checked when built.

    ``transport``: ``"native"`` (default), the library's own HTTP/2 client, which needs no
    grpcio and costs far less CPU per call; or ``"grpcio"``, which ``credentials`` and most
    channel options need (the native transport honours the message-size and keepalive
    ones).
    ``channel_options``: further grpcio channel arguments, a mapping or (name, value) pairs,
    added to the defaults (unlimited message sizes); kept as a tuple of pairs.
    ``credentials``: a ready ``grpc.ChannelCredentials`` for ``grpcs://`` (instead of the
    files of :class:`TLSOptions`). ``keepalive``: keepalive pings (:class:`GRPCKeepAlive`).

    The clients' ``grpc_transport``, ``grpc_options``, ``grpc_credentials`` and
    ``grpc_keepalive`` keywords fill the same object.

    Example::

        Client("grpc://host:8001", grpc=GRPCOptions(
            transport="grpcio", keepalive=GRPCKeepAlive(time_ms=30_000)))
    """

    transport: str = "native"
    channel_options: Mapping[str, Any] | Sequence[tuple[str, Any]] = ()
    credentials: Any = None
    keepalive: GRPCKeepAlive | None = None

    def __post_init__(self) -> None:
        if self.transport not in GRPC_TRANSPORTS:
            raise InvalidInputError(
                f"the gRPC transport must be one of {GRPC_TRANSPORTS}, got {self.transport!r}",
                value=self.transport,
            )
        if self.keepalive is not None and not isinstance(self.keepalive, GRPCKeepAlive):
            raise InvalidInputError("keepalive must be a GRPCKeepAlive", value=self.keepalive)
        pairs = _channel_option_pairs(self.channel_options)
        object.__setattr__(self, "channel_options", pairs)
        if self.transport == "native":
            # The native transport cannot use grpcio objects or grpcio's other channel
            # arguments: asking it to is an error, rather than a setting silently dropped.
            problems = []
            if self.credentials is not None:
                problems.append("credentials (grpc_credentials)")
            if any(key not in NATIVE_CHANNEL_OPTIONS for key, _ in pairs):
                names = ", ".join(sorted(NATIVE_CHANNEL_OPTIONS))
                problems.append(f"channel options (grpc_options) other than {names}")
            if problems:
                raise InvalidInputError(
                    f"{' and '.join(problems)} are grpcio settings: use "
                    'GRPCOptions(transport="grpcio", ...) or grpc_transport="grpcio" '
                    "(the default native transport does not use them)"
                )
