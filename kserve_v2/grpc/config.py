"""The channel settings both gRPC transports share, checked once into a :class:`ChannelConfig`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from kserve_v2.arguments import COMPRESSIONS, check_compression
from kserve_v2.errors import (
    InvalidInputError,
    MissingDependencyError,
)
from kserve_v2.options import GRPCKeepAlive
from kserve_v2.pem import check_tls_files

if TYPE_CHECKING:
    from kserve_v2.endpoint import Endpoint
    from kserve_v2.options import TLSOptions

__all__ = [
    "COMPRESSIONS",
    "ChannelConfig",
    "DEFAULT_OPTIONS",
    "Metadata",
    "channel_config",
    "check_compression",
    "import_grpc",
]


#: gRPC metadata: (lower-case key, value) pairs.
Metadata = tuple[tuple[str, str], ...]


#: Channel arguments every channel starts from; user ``options`` are added on top (a key
#: given there replaces the default). Tensors routinely exceed grpcio's 4 MiB receive limit,
#: so both directions are unlimited (-1) like Triton's own server.
DEFAULT_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
)


def import_grpc() -> ModuleType:
    """The ``grpc`` module; :class:`MissingDependencyError` with an install hint without it."""
    try:
        import grpc
    except ImportError as exc:
        raise MissingDependencyError("gRPC", "grpc", "grpcio") from exc
    module: ModuleType = grpc  # grpcio ships no type information
    return module


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    """Everything needed to open a channel; built (and checked) by :func:`channel_config`.

    ``credentials`` is a ready ``grpc.ChannelCredentials`` (``None``: build one from the PEM
    bytes when ``secure``). ``options`` are the final channel arguments.
    """

    target: str
    url: str
    secure: bool = False
    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None
    credentials: Any = None
    options: tuple[tuple[str, Any], ...] = DEFAULT_OPTIONS
    compression: str | None = None
    # The same TLS material as files, for the native transport (the ssl module loads files).
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_hostname: str | None = None

    def __repr__(self) -> str:  # no key material in reprs or logs
        return (
            f"ChannelConfig(target={self.target!r}, secure={self.secure}, "
            f"compression={self.compression!r}, options={self.options!r})"
        )


def _read_pem(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise InvalidInputError(f"cannot read TLS {what} {path!r}: {exc}", value=path) from exc


def _merge_options(
    *groups: Sequence[tuple[str, Any]] | Mapping[str, Any] | None,
) -> tuple[tuple[str, Any], ...]:
    merged: dict[str, Any] = {}
    for group in groups:
        if not group:
            continue
        items = group.items() if isinstance(group, Mapping) else group
        for item in items:
            try:
                key, value = item
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f"gRPC channel options must be (name, value) pairs, got {item!r}", value=item
                ) from None
            if not isinstance(key, str) or not key:
                raise InvalidInputError(
                    f"gRPC channel option names must be non-empty strings, got {key!r}",
                    value=key,
                )
            merged.pop(key, None)  # a later setting replaces an earlier one, in its place
            merged[key] = value
    return tuple(merged.items())


def channel_config(
    endpoint: Endpoint,
    *,
    tls: TLSOptions | None = None,
    credentials: Any = None,
    keepalive: GRPCKeepAlive | None = None,
    options: Sequence[tuple[str, Any]] | Mapping[str, Any] | None = None,
    compression: str | None = None,
) -> ChannelConfig:
    """Check the channel settings of a ``grpc://``/``grpcs://`` endpoint.

    Args:
        endpoint: the parsed server URL.
        tls: for ``grpcs://``: ``ca_file`` (PEM roots; default: grpcio's bundled roots),
            ``cert_file`` + ``key_file`` (mutual TLS), ``server_hostname`` (the name the
            server certificate must carry, sent as ``grpc.ssl_target_name_override``).
            ``ssl_context`` and ``verify=False`` have no gRPC equivalent and are refused.
        credentials: a ready ``grpc.ChannelCredentials`` (e.g. with call credentials
            composed in); needs ``grpcs://`` and excludes the certificate files.
        keepalive: keepalive pings (see :class:`GRPCKeepAlive`).
        options: further channel arguments, added to the defaults (unlimited message sizes;
            a name given here replaces the default's value).
        compression: ``"gzip"`` or ``"deflate"``: compress every request message.

    Which transport may carry which settings is checked by
    :class:`~kserve_v2.options.GRPCOptions`, which the clients build.
    """
    if keepalive is not None and not isinstance(keepalive, GRPCKeepAlive):
        raise InvalidInputError("keepalive must be a GRPCKeepAlive", value=keepalive)
    check_compression(compression)
    if options is not None and not isinstance(options, Mapping | Sequence):
        raise InvalidInputError(
            "gRPC channel options must be a mapping or a sequence of (name, value) pairs",
            value=options,
        )
    extra: list[tuple[str, Any]] = []
    secure = endpoint.tls
    root = key = chain = None
    if credentials is not None:
        if not secure:
            raise InvalidInputError(
                f"grpc_credentials need a grpcs:// URL, got {endpoint}", value=credentials
            )
        grpc = import_grpc()
        if not isinstance(credentials, grpc.ChannelCredentials):
            raise InvalidInputError(
                "grpc_credentials must be a grpc.ChannelCredentials", value=credentials
            )
    if tls is not None:
        if tls.ssl_context is not None:
            raise InvalidInputError(
                "TLSOptions.ssl_context applies to https:// only; give gRPC ca_file, "
                "cert_file and key_file (or grpc_credentials)"
            )
        if not tls.verify:
            raise InvalidInputError(
                "TLSOptions.verify=False is not available over gRPC (grpcio always checks the "
                "server certificate); pass the server's CA as ca_file"
            )
        if (tls.cert_file is None) != (tls.key_file is None):
            raise InvalidInputError("mutual TLS needs both cert_file and key_file")
        if credentials is not None and (tls.ca_file or tls.cert_file):
            raise InvalidInputError(
                "give either grpc_credentials or TLS certificate files, not both"
            )
        if secure and credentials is None:
            # grpcio would only log OpenSSL's complaint about a bad file, then fail to
            # connect: say which file is wrong now (the native transport says so too).
            check_tls_files(tls.ca_file, tls.cert_file, tls.key_file)
            root = _read_pem(tls.ca_file, "ca_file")
            chain = _read_pem(tls.cert_file, "cert_file")
            key = _read_pem(tls.key_file, "key_file")
        if tls.server_hostname is not None:
            extra.append(("grpc.ssl_target_name_override", tls.server_hostname))
    return ChannelConfig(
        target=endpoint.authority,
        url=str(endpoint),
        secure=secure,
        root_certificates=root,
        private_key=key,
        certificate_chain=chain,
        credentials=credentials,
        ca_file=tls.ca_file if tls is not None and secure else None,
        cert_file=tls.cert_file if tls is not None and secure else None,
        key_file=tls.key_file if tls is not None and secure else None,
        server_hostname=tls.server_hostname if tls is not None else None,
        options=_merge_options(
            DEFAULT_OPTIONS,
            keepalive.channel_options() if keepalive is not None else None,
            extra,
            options,
        ),
        compression=compression,
    )
