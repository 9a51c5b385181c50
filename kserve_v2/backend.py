"""The contract between the clients and the protocol backends: prepared calls.

A backend (:class:`~kserve_v2.rest.backend.HTTPBackend`, :class:`~kserve_v2.grpc.backend.
GRPCBackend`) turns each client method's arguments into a :class:`Call`, with no I/O; the
client runs the call through its I/O object: ``call.run(transport, hook)``. A call's type
names the I/O interfaces it runs on (:mod:`kserve_v2.interfaces`):

* an HTTP call is a ``Call[T, Transport, AsyncTransport]``;
* a gRPC call is a ``Call[T, UnaryChannel, AsyncUnaryChannel]``.

so mypy checks that each protocol's calls meet the transports of that protocol. Arguments are
checked by the backends with the shared functions of :mod:`kserve_v2.arguments` when a call is
built, before anything is sent.

Some defaults depend on what the server advertises (HTTP's binary tensors, Triton-only gRPC
parameters); a backend learns that once, on first need, through its :class:`MetadataProbe`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from kserve_v2.errors import InvalidInputError, KServeError, ServerError, TransportError
from kserve_v2.hooks import WireHook
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    RepositoryModel,
    ServerMetadata,
)

if TYPE_CHECKING:
    import asyncio

    from kserve_v2.arguments import Headers, InputsArg, OutputsArg
    from kserve_v2.datatypes import BytesLike
    from kserve_v2.rest.paths import QueryParams

__all__ = ["Backend", "Call", "MetadataProbe"]


T_co = TypeVar("T_co", covariant=True)
#: The I/O interface a call runs on (sync), and its asyncio twin.
IO_contra = TypeVar("IO_contra", contravariant=True)
AIO_contra = TypeVar("AIO_contra", contravariant=True)


class Call(Protocol[T_co, IO_contra, AIO_contra]):
    """A prepared exchange of one protocol, run through an I/O object of that protocol.

    ``run`` sends through a sync I/O object (``IO_contra``) and ``arun`` through an asyncio
    one (``AIO_contra``); both tell the wire hook and return the decoded result.

    ``timeout`` is the call's whole-request timeout in seconds (``None``: the I/O object's
    default, the client's ``timeout``); ``with_timeout`` gives the same call with another
    one, which a retrying client gives each attempt (the time left of the call's).
    """

    def run(self, io: IO_contra, hook: WireHook | None, /) -> T_co: ...

    async def arun(self, io: AIO_contra, hook: WireHook | None, /) -> T_co: ...

    @property
    def timeout(self) -> float | None: ...

    def with_timeout(self, timeout: float | None, /) -> Call[T_co, IO_contra, AIO_contra]: ...


IO = TypeVar("IO")
AIO = TypeVar("AIO")

# gRPC codes of a failure that may pass (the server is starting, overloaded, restarting).
_PASSING_GRPC_CODES: Final = frozenset(
    {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNKNOWN"}
)


def _passing(exc: KServeError) -> bool:
    """Whether asking again might get another answer: no answer at all, or a server error of a
    passing kind (HTTP 5xx, 408, 429; the gRPC codes above)."""
    if isinstance(exc, TransportError):
        return True
    if isinstance(exc, ServerError):
        if exc.http_status is not None:
            return exc.http_status >= 500 or exc.http_status in (408, 429)
        return exc.grpc_code in _PASSING_GRPC_CODES
    return False  # a malformed answer would be malformed again


class MetadataProbe:
    """The server's metadata, asked at most once per client, on first need, and kept.

    A backend asks when a default depends on what the server advertises, and only then (an
    answer the user asked for with ``server_metadata()`` first is kept instead, see
    :meth:`remember`):
    ``get`` (sync; one thread asks, the others wait for its answer) or ``aget`` (asyncio; one
    task asks) run the backend's ``server_metadata`` call through the client's I/O object.

    The answer is kept (:attr:`known` becomes true): the metadata, or ``None`` when the server
    answered with an error that asking again would not change (HTTP 4xx, a gRPC status such as
    UNIMPLEMENTED, a malformed answer): such a server advertises nothing. Failing to learn never
    fails the caller: with no answer (connection refused, timeout) or a passing error (HTTP 5xx,
    gRPC UNAVAILABLE...), ``get`` returns ``None`` with :attr:`known` false, the caller takes
    the portable choice for now, and the next need asks again; callers that waited while it
    failed do not ask again themselves. A bad argument (:class:`InvalidInputError`) is raised.

    Example::

        probe = MetadataProbe()
        metadata = probe.get(lambda: backend.server_metadata(), transport, None)
        probe.known, metadata.supports("binary_tensor_data") if metadata else False
    """

    def __init__(self) -> None:
        self.known = False
        self.metadata: ServerMetadata | None = None
        self._attempts = 0  # failed attempts: a caller that waited on one does not repeat it
        self._lock = threading.Lock()
        self._async_lock: asyncio.Lock | None = None

    def get(
        self, make_call: Callable[[], Call[ServerMetadata, IO, Any]], io: IO, hook: WireHook | None
    ) -> ServerMetadata | None:
        """The metadata, asked through the sync ``io`` unless known (see the class)."""
        if not self.known:
            attempt = self._attempts
            with self._lock:
                if not self.known and attempt == self._attempts:
                    call = make_call()
                    try:
                        self._keep(call.run(io, hook))
                    except InvalidInputError:
                        raise
                    except KServeError as exc:
                        self._failed(exc)
        return self.metadata

    async def aget(
        self,
        make_call: Callable[[], Call[ServerMetadata, Any, AIO]],
        io: AIO,
        hook: WireHook | None,
    ) -> ServerMetadata | None:
        """The metadata, asked through the asyncio ``io`` unless known (see the class)."""
        if not self.known:
            attempt = self._attempts
            if self._async_lock is None:  # made inside the loop that uses it
                import asyncio  # here: the sync client's import needs no asyncio

                self._async_lock = asyncio.Lock()
            async with self._async_lock:
                if not self.known and attempt == self._attempts:
                    call = make_call()
                    try:
                        self._keep(await call.arun(io, hook))
                    except InvalidInputError:
                        raise
                    except KServeError as exc:
                        self._failed(exc)
        return self.metadata

    def remember(self, metadata: ServerMetadata) -> ServerMetadata:
        """Keep ``metadata`` the client got anyway (its user asked for it) unless an answer
        is known already, so that a first need asks nothing; returns it. No lock: the probe's
        own question may come through here while :meth:`get` holds it, and two answers kept
        at once are both the server's."""
        if not self.known:
            self._keep(metadata)
        return metadata

    def _keep(self, metadata: ServerMetadata) -> None:
        self.metadata = metadata
        self.known = True

    def _failed(self, exc: KServeError) -> None:
        if _passing(exc):
            self._attempts += 1
        else:
            self.known = True  # it answered: it will not say more next time


class Backend(Protocol[IO_contra, AIO_contra]):
    """What each protocol (HTTP, gRPC) provides to the clients: prepared calls.

    Every method takes the per-call keywords ``headers`` (HTTP headers or gRPC metadata),
    ``query`` (HTTP: extra URL query parameters; gRPC refuses any, having no URL: see
    :func:`~kserve_v2.arguments.refuse_query`) and ``timeout`` (seconds; ``None``: the
    client's default). Extension results are plain
    structures shaped like Triton's REST JSON on both protocols (gRPC messages are converted:
    int64 values as ints, field names as in the REST JSON), so code does not change with the
    protocol. A bad argument raises :class:`~kserve_v2.errors.InvalidInputError` when the call
    is built.
    """

    # core protocol
    def server_live(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def server_ready(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def server_metadata(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[ServerMetadata, IO_contra, AIO_contra]: ...
    def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[ModelMetadata, IO_contra, AIO_contra]: ...
    def infer(
        self,
        request: InferRequest,
        *,
        binary: bool | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> Call[InferResult, IO_contra, AIO_contra]: ...
    def infer_arrays(
        self,
        model: str,
        inputs: InputsArg,
        outputs: OutputsArg | None,
        version: str | int,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
        compression: str | None = None,
    ) -> Call[InferResult, IO_contra, AIO_contra] | None:
        """The call of :meth:`infer` with ``build_infer_request(model, inputs,
        outputs=outputs, version=version)`` made cheaper by what the backend kept of earlier
        ones; None when it has no such path (then the client takes the full one)."""
        ...

    # Triton extensions (kserve_v2/client/extensions.py documents the result shapes)
    def model_config(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def model_statistics(
        self,
        model: str = "",
        version: str | int = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[list[RepositoryModel], IO_contra, AIO_contra]: ...
    def load_model(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unload_model(
        self,
        model: str,
        *,
        unload_dependents: bool = False,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def system_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[list[dict[str, Any]], IO_contra, AIO_contra]: ...
    def register_system_shared_memory(
        self,
        region: str,
        key: str,
        byte_size: int,
        *,
        offset: int = 0,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unregister_system_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def cuda_shared_memory_status(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[list[dict[str, Any]], IO_contra, AIO_contra]: ...
    def register_cuda_shared_memory(
        self,
        region: str,
        raw_handle: BytesLike,
        device_id: int,
        byte_size: int,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unregister_cuda_shared_memory(
        self,
        region: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def trace_settings(
        self,
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def update_trace_settings(
        self,
        settings: Mapping[str, Any],
        model: str = "",
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def log_settings(
        self,
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Headers | None = None,
        query: QueryParams | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
