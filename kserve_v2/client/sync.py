"""The synchronous client."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

from kserve_v2.client.base import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    Call,
    ClientBase,
    TLSOptions,
)
from kserve_v2.client.http import Headers
from kserve_v2.client.requests import InputsArg, OutputsArg, build_infer_request
from kserve_v2.client.wire import WireHook
from kserve_v2.messages import InferResult, ModelMetadata, ServerMetadata
from kserve_v2.parameters import ParameterValue
from kserve_v2.rest.paths import QueryParams
from kserve_v2.transport.base import Transport

__all__ = ["Client"]

T = TypeVar("T")


class Client(ClientBase):
    """A synchronous client for one inference server.

    The URL chooses the protocol: ``http://host:8000`` (or a bare ``host:8000``),
    ``https://...``, optionally with a base path for servers behind a gateway
    (``http://gw/serving/ns/model``). One client may be shared by many threads: the HTTP
    transport keeps a thread-safe pool of keep-alive connections.

    Example::

        import numpy as np
        from kserve_v2 import Client

        with Client("http://localhost:8000") as client:
            result = client.infer("simple", {
                "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
                "INPUT1": np.ones((1, 16), dtype=np.int32),
            })
            print(result.as_numpy("OUTPUT0"))

    Args:
        url: the server URL.
        headers: headers sent with every request (e.g. ``Authorization``).
        timeout: default whole-request timeout in seconds (``None``: wait forever).
        connect_timeout: TCP/TLS connect timeout in seconds.
        binary: send and receive tensors in binary form (binary-data extension) unless a
            tensor says otherwise; ``False`` uses JSON.
        request_compression: ``"gzip"`` or ``"deflate"`` to compress request bodies.
        accept_compression: ``"gzip"`` or ``"deflate"`` to ask for compressed responses.
        tls: certificates for ``https://`` (see :class:`TLSOptions`).
        pool_size: most connections kept open to the server (and most requests in flight).
        transport: a ready transport (e.g. ``HTTPXTransport(...)``) instead of the default.
        wire_hook: called with a :class:`WireMessage` for every message sent and received.
        verbose: print every message to stderr (credentials redacted).
    """

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
        pool_size: int = 16,
        transport: Transport | None = None,
        wire_hook: WireHook | None = None,
        verbose: bool = False,
        grpc_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            url,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            binary=binary,
            request_compression=request_compression,
            accept_compression=accept_compression,
            tls=tls,
            wire_hook=wire_hook,
            verbose=verbose,
            grpc_options=grpc_options,
        )
        self._io: Any = transport if transport is not None else self._default_io(pool_size)
        self._owns_io = transport is None

    def _default_io(self, pool_size: int) -> Any:
        from kserve_v2.transport.stdlib import HTTPTransport

        return HTTPTransport(**self._transport_kwargs(pool_size))

    def _run(self, call: Call[T]) -> T:
        return call.run(self._io, self._hook)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections this client opened (a transport passed in stays open)."""
        if not self._closed:
            self._closed = True
            if self._owns_io:
                self._io.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- health and metadata -----------------------------------------------------------------

    def is_server_live(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is live (``GET v2/health/live`` answers 200)."""
        return self._run(self._proto.server_live(headers=headers, timeout=timeout))

    def is_server_ready(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> bool:
        """Whether the server is ready for inference."""
        return self._run(self._proto.server_ready(headers=headers, timeout=timeout))

    def is_model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Whether ``model`` (optionally a given version) is ready for inference."""
        return self._run(
            self._proto.model_ready(model, str(version), headers=headers, timeout=timeout)
        )

    def server_metadata(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> ServerMetadata:
        """Server name, version and extensions."""
        return self._run(self._proto.server_metadata(headers=headers, timeout=timeout))

    def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> ModelMetadata:
        """A model's platform, versions, inputs and outputs."""
        return self._run(
            self._proto.model_metadata(model, str(version), headers=headers, timeout=timeout)
        )

    def supports_extension(self, extension: str) -> bool:
        """Whether the server advertises ``extension`` in its metadata."""
        return self.server_metadata().supports(extension)

    # -- inference ---------------------------------------------------------------------------

    def infer(
        self,
        model: str,
        inputs: InputsArg,
        *,
        outputs: OutputsArg | None = None,
        version: str | int = "",
        request_id: str = "",
        parameters: Mapping[str, ParameterValue] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        binary: bool | None = None,
        compression: str | None = None,
        sequence_id: int | str | None = None,
        sequence_start: bool = False,
        sequence_end: bool = False,
        priority: int | None = None,
        timeout_us: int | None = None,
        allow_reserved: bool = False,
    ) -> InferResult:
        """Run one inference.

        Args:
            model: model name.
            inputs: ``{"name": numpy_array_or_list}`` (datatype inferred from the dtype), or a
                sequence of :class:`InferInput`.
            outputs: output names or :class:`RequestedOutput` objects (default: all outputs).
            version: model version (default: the server's choice).
            request_id: echoed back in the result's ``id``.
            parameters: custom request parameters (reserved names need ``allow_reserved``).
            headers: extra headers for this call.
            query: extra URL query parameters for this call (HTTP).
            timeout: whole-request timeout in seconds for this call (client-side).
            binary: override the client's binary/JSON default for this call.
            compression: compress this request body (``"gzip"``/``"deflate"``).
            sequence_id, sequence_start, sequence_end: sequence-batching controls.
            priority: scheduling priority (schedule-policy extension).
            timeout_us: server-side queue timeout in **microseconds** (schedule policy).
        """
        request = build_infer_request(
            model,
            inputs,
            outputs=outputs,
            version=version,
            request_id=request_id,
            parameters=parameters,
            sequence_id=sequence_id,
            sequence_start=sequence_start,
            sequence_end=sequence_end,
            priority=priority,
            timeout_us=timeout_us,
            allow_reserved=allow_reserved,
        )
        return self._run(
            self._proto.infer(
                request,
                binary=binary,
                headers=headers,
                query=query,
                timeout=timeout,
                compression=compression,
            )
        )
