"""What :class:`Client` and :class:`AsyncClient` share: options, URL, protocol selection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kserve_v2.arguments import Headers, check_max_response_size
from kserve_v2.backend import Backend
from kserve_v2.endpoint import Endpoint, parse_url
from kserve_v2.errors import InvalidInputError
from kserve_v2.hooks import WireHook, print_hook
from kserve_v2.options import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, TLSOptions
from kserve_v2.rest.backend import HTTPBackend

if TYPE_CHECKING:
    from kserve_v2.options import GRPCKeepAlive

__all__ = ["ClientBase"]


class ClientBase:
    """Parses the URL, validates options and builds the protocol object."""

    def __init__(
        self,
        url: str,
        *,
        headers: Headers | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        binary: bool = True,
        request_compression: str | None = None,
        accept_compression: str | None = None,
        tls: TLSOptions | None = None,
        wire_hook: WireHook | None = None,
        verbose: bool = False,
        grpc_options: Mapping[str, Any] | None = None,
        grpc_credentials: Any = None,
        grpc_keepalive: GRPCKeepAlive | None = None,
        grpc_transport: str = "native",
        max_response_size: int | None = None,
    ) -> None:
        self.endpoint: Endpoint = parse_url(url)
        self.max_response_size = check_max_response_size(max_response_size)
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise InvalidInputError(f"{name} must be a positive number or None", value=value)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.tls = tls or TLSOptions()
        if (tls is not None) and not self.endpoint.tls and tls != TLSOptions():
            raise InvalidInputError(
                f"TLS options given for a plain-text URL {self.endpoint}; use https:// or grpcs://"
            )
        self._hook: WireHook | None = wire_hook or (print_hook() if verbose else None)
        self._closed = False
        # Open gRPC streams, cancelled when the client closes (their threads/tasks end then).
        self._streams: set[Any] = set()
        if self.endpoint.protocol == "http":
            if (
                grpc_options
                or grpc_credentials is not None
                or grpc_keepalive is not None
                or grpc_transport != "native"
            ):
                raise InvalidInputError(
                    "grpc_options, grpc_credentials, grpc_keepalive and grpc_transport apply "
                    "to grpc:// and grpcs:// URLs only"
                )
            self._proto: Backend = HTTPBackend(
                self.endpoint,
                headers=headers,
                timeout=timeout,
                binary=binary,
                request_compression=request_compression,
                accept_compression=accept_compression,
            )
        else:
            # Imported here: kserve_v2 must import without grpcio and protobuf.
            from kserve_v2.grpc.backend import GRPCBackend
            from kserve_v2.grpc.config import channel_config, check_compression, check_transport

            # gRPC always accepts gzip/deflate answers; the server chooses whether to compress.
            check_compression(accept_compression, "accept_compression")
            check_compression(request_compression, "request_compression")
            if max_response_size is not None:  # explicit grpc_options win
                grpc_options = {
                    "grpc.max_receive_message_length": max_response_size,
                    **(grpc_options or {}),
                }
            self._grpc_config = channel_config(
                self.endpoint,
                tls=tls,
                credentials=grpc_credentials,
                keepalive=grpc_keepalive,
                options=grpc_options,
                compression=request_compression,
            )
            self.grpc_transport = check_transport(
                grpc_transport, self._grpc_config, grpc_credentials, grpc_options
            )
            self._proto = GRPCBackend(
                self.endpoint,
                headers=headers,
                timeout=timeout,
                compression=request_compression,
            )

    def _check_foreign_transport(self) -> None:
        """A transport passed in: only HTTP clients take one, and it has its own settings."""
        if self.protocol == "grpc":
            raise InvalidInputError("transport= applies to HTTP; gRPC clients own a channel")
        if self.max_response_size is not None:
            raise InvalidInputError(
                "max_response_size is a setting of the default transport; "
                "give it to the transport passed as transport=",
                value=self.max_response_size,
            )

    def _transport_kwargs(self, pool_size: int) -> dict[str, Any]:
        """Arguments for the default HTTP transports (sync and async take the same)."""
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidInputError("pool_size must be a positive integer", value=pool_size)
        tls = self.tls
        return {
            "url": f"{self.endpoint.scheme}://{self.endpoint.authority}",
            "timeout": self.timeout,
            "connect_timeout": self.connect_timeout,
            "max_connections": pool_size,
            "verify": tls.verify,
            "ca_file": tls.ca_file,
            "cert_file": tls.cert_file,
            "key_file": tls.key_file,
            "ssl_context": tls.ssl_context,
            "server_hostname": tls.server_hostname,
            "max_response_size": self.max_response_size,
        }

    @property
    def url(self) -> str:
        """The server URL this client talks to."""
        return str(self.endpoint)

    @property
    def protocol(self) -> str:
        """``"http"`` or ``"grpc"``."""
        return self.endpoint.protocol

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
