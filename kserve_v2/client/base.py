"""What :class:`Client` and :class:`AsyncClient` share: options, URL, protocol selection."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kserve_v2.arguments import (
    Headers,
    check_bool,
    check_compression,
    check_max_response_size,
    check_timeout,
)
from kserve_v2.backend import Backend
from kserve_v2.endpoint import Endpoint, parse_url
from kserve_v2.errors import InvalidInputError
from kserve_v2.hooks import WireHook, print_hook
from kserve_v2.options import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, GRPCOptions, TLSOptions
from kserve_v2.rest.backend import HTTPBackend

if TYPE_CHECKING:
    from kserve_v2.options import GRPCKeepAlive
    from kserve_v2.retry import RetryPolicy

__all__ = ["ClientBase"]


def _grpc_settings(
    endpoint: Endpoint,
    grpc: GRPCOptions | None,
    *,
    options: Mapping[str, Any] | None,
    credentials: Any,
    keepalive: GRPCKeepAlive | None,
    transport: str,
) -> GRPCOptions:
    """The client's :class:`GRPCOptions`: ``grpc`` itself, or the one the ``grpc_*``
    keywords describe (giving both is an error; so is either, but for defaults, with an
    ``http://`` URL)."""
    keywords = (
        bool(options) or credentials is not None or keepalive is not None or transport != "native"
    )
    if grpc is not None:
        if not isinstance(grpc, GRPCOptions):
            raise InvalidInputError("grpc must be a GRPCOptions", value=grpc)
        if keywords:
            raise InvalidInputError(
                "give the gRPC settings either as grpc=GRPCOptions(...) or as the grpc_options, "
                "grpc_credentials, grpc_keepalive and grpc_transport keywords, not both"
            )
    if endpoint.protocol == "http":
        if keywords or (grpc is not None and grpc != GRPCOptions()):
            raise InvalidInputError(
                "gRPC settings (grpc=, grpc_options, grpc_credentials, grpc_keepalive, "
                "grpc_transport) apply to grpc:// and grpcs:// URLs only"
            )
        return GRPCOptions()
    if grpc is not None:
        return grpc
    return GRPCOptions(
        transport=transport,
        channel_options=options or (),
        credentials=credentials,
        keepalive=keepalive,
    )


class ClientBase:
    """Parses the URL, validates options and builds the protocol object.

    The URL picks the protocol at run time, so the clients hold a backend of either protocol
    (``Backend[Any, Any]``) and the I/O object of that same protocol, both made here from the
    same URL: that pairing is the one fact about calls and I/O objects that mypy cannot
    follow, and the reason ``_run`` takes a call of any I/O type. Everything below the
    clients is typed with the I/O interface of its protocol.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Headers | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        binary: bool | None = None,
        request_compression: str | None = None,
        accept_compression: str | None = None,
        tls: TLSOptions | None = None,
        wire_hook: WireHook | None = None,
        verbose: bool = False,
        grpc: GRPCOptions | None = None,
        grpc_options: Mapping[str, Any] | None = None,
        grpc_credentials: Any = None,
        grpc_keepalive: GRPCKeepAlive | None = None,
        grpc_transport: str = "native",
        max_response_size: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.endpoint: Endpoint = parse_url(url)
        if retry is not None:
            # Imported here: a client that retries nothing does not pay for the module.
            from kserve_v2.retry import RetryPolicy

            if not isinstance(retry, RetryPolicy):
                raise InvalidInputError("retry must be a RetryPolicy", value=retry)
        #: The retry policy (``None``: no call is retried but an ``infer(..., retry=...)``).
        self.retry = retry
        # How the policy applies to idempotent calls, and to infer unless a call says.
        self._read_retry = "never" if retry is None else "idempotent"
        self._infer_retry = "never" if retry is None else retry.infer
        self.max_response_size = check_max_response_size(max_response_size)
        # The default transports take the timeouts too (the backends check the other options).
        self.timeout = check_timeout(timeout, "timeout")
        self.connect_timeout = check_timeout(connect_timeout, "connect_timeout")
        self.tls = tls or TLSOptions()
        if (tls is not None) and not self.endpoint.tls and tls != TLSOptions():
            raise InvalidInputError(
                f"TLS options given for a plain-text URL {self.endpoint}; use https:// or grpcs://"
            )
        self._hook: WireHook | None = wire_hook or (print_hook() if verbose else None)
        self._closed = False
        # Open gRPC streams, cancelled when the client closes (their threads/tasks end then).
        self._streams: set[Any] = set()
        self._grpc = _grpc_settings(
            self.endpoint,
            grpc,
            options=grpc_options,
            credentials=grpc_credentials,
            keepalive=grpc_keepalive,
            transport=grpc_transport,
        )
        self._proto: Backend[Any, Any]
        if self.endpoint.protocol == "http":
            self._proto = HTTPBackend(
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
            from kserve_v2.grpc.config import channel_config

            # No use over gRPC, but a bad value is a mistake all the same. gRPC always accepts
            # gzip/deflate answers; the server chooses whether to compress.
            if binary is not None:
                check_bool(binary, "binary")
            check_compression(accept_compression, "accept_compression")
            self._proto = GRPCBackend(
                self.endpoint,
                headers=headers,
                timeout=timeout,
                compression=request_compression,
            )
            given_options = self._grpc.channel_options  # (name, value) pairs once built
            channel_options = tuple(
                given_options.items() if isinstance(given_options, Mapping) else given_options
            )
            if max_response_size is not None:  # explicit channel options win
                channel_options = (
                    ("grpc.max_receive_message_length", max_response_size),
                    *channel_options,
                )
            self._grpc_config = channel_config(
                self.endpoint,
                tls=tls,
                credentials=self._grpc.credentials,
                keepalive=self._grpc.keepalive,
                options=channel_options,
                compression=request_compression,
            )

    @property
    def grpc_transport(self) -> str:
        """The gRPC transport: ``"native"`` or ``"grpcio"`` (see :class:`GRPCOptions`)."""
        return self._grpc.transport

    def _check_foreign_transport(self, transport: object) -> None:
        """A transport passed in: only HTTP clients take one, and it has its own settings.

        The client's URL says where requests go, the transport how. A transport that tells
        its ``origin`` (this package's do) and was made without a URL (an ``httpx.Client``
        without ``base_url``) or for another server gets requests whose targets name the
        client's server (absolute URLs), so that they go where the client's ``url`` and errors
        say. Other transports take origin-form targets, as :class:`HTTPRequest` describes."""
        if self.protocol == "grpc":
            raise InvalidInputError("transport= applies to HTTP; gRPC clients own a channel")
        if self.max_response_size is not None:
            raise InvalidInputError(
                "max_response_size is a setting of the default transport; "
                "give it to the transport passed as transport=",
                value=self.max_response_size,
            )
        origin = getattr(transport, "origin", "")
        if origin is None or (isinstance(origin, str) and origin and not self._serves(origin)):
            assert isinstance(self._proto, HTTPBackend)
            self._proto.name_the_server_in_targets()

    def _serves(self, origin: str) -> bool:
        """Whether ``origin`` (a transport's) is the scheme, host and port of the client's URL."""
        # Imported here: only clients given a transport need it.
        from kserve_v2.transport.sockets import parse_origin

        endpoint = self.endpoint
        try:
            theirs, path = parse_origin(origin)
        except InvalidInputError:
            return False
        ours, _ = parse_origin(f"{endpoint.scheme}://{endpoint.authority}")
        return path == "/" and theirs.key() == ours.key()

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


if TYPE_CHECKING:
    # mypy checks that every transport keeps the I/O interface the calls of its protocol run
    # on (nothing here runs): the HTTP transports are Transports, both gRPC transports are
    # Channels (UnaryChannel for unary calls, SyncStreamChannel for streams, and close).
    from kserve_v2.interfaces import AsyncChannel, AsyncTransport, Channel, Transport
    from kserve_v2.transport.aio import AsyncHTTPTransport
    from kserve_v2.transport.grpcio import AsyncGRPCChannel, GRPCChannel
    from kserve_v2.transport.httpx import AsyncHTTPXTransport, HTTPXTransport
    from kserve_v2.transport.native import AsyncNativeGRPCChannel, NativeGRPCChannel
    from kserve_v2.transport.stdlib import HTTPTransport

    def _transports_keep_the_interfaces(
        stdlib: HTTPTransport,
        httpx: HTTPXTransport,
        aio: AsyncHTTPTransport,
        async_httpx: AsyncHTTPXTransport,
        native: NativeGRPCChannel,
        grpcio: GRPCChannel,
        async_native: AsyncNativeGRPCChannel,
        async_grpcio: AsyncGRPCChannel,
    ) -> None:
        # One assignment each, so that mypy names the transport and the member that differs.
        _stdlib: Transport = stdlib
        _httpx: Transport = httpx
        _aio: AsyncTransport = aio
        _async_httpx: AsyncTransport = async_httpx
        _native: Channel = native
        _grpcio: Channel = grpcio
        _async_native: AsyncChannel = async_native
        _async_grpcio: AsyncChannel = async_grpcio
