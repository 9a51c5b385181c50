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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kserve_v2.hooks import WireHook
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    RepositoryModel,
    ServerMetadata,
)

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.datatypes import BytesLike
    from kserve_v2.rest.paths import QueryParams

__all__ = ["Backend", "Call"]


T_co = TypeVar("T_co", covariant=True)
#: The I/O interface a call runs on (sync), and its asyncio twin.
IO_contra = TypeVar("IO_contra", contravariant=True)
AIO_contra = TypeVar("AIO_contra", contravariant=True)


class Call(Protocol[T_co, IO_contra, AIO_contra]):
    """A prepared exchange of one protocol, run through an I/O object of that protocol.

    ``run`` sends through a sync I/O object (``IO_contra``) and ``arun`` through an asyncio
    one (``AIO_contra``); both tell the wire hook and return the decoded result.
    """

    def run(self, io: IO_contra, hook: WireHook | None, /) -> T_co: ...

    async def arun(self, io: AIO_contra, hook: WireHook | None, /) -> T_co: ...


class Backend(Protocol[IO_contra, AIO_contra]):
    """What each protocol (HTTP, gRPC) provides to the clients: prepared calls.

    Every method takes the per-call keywords ``headers`` (HTTP headers or gRPC metadata) and
    ``timeout`` (seconds; ``None``: the client's default). Extension results are plain
    structures shaped like Triton's REST JSON on both protocols (gRPC messages are converted:
    int64 values as ints, field names as in the REST JSON), so code does not change with the
    protocol. A bad argument raises :class:`~kserve_v2.errors.InvalidInputError` when the call
    is built.
    """

    # core protocol
    def server_live(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def server_ready(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def model_ready(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[bool, IO_contra, AIO_contra]: ...
    def server_metadata(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[ServerMetadata, IO_contra, AIO_contra]: ...
    def model_metadata(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
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

    # Triton extensions (kserve_v2/client/extensions.py documents the result shapes)
    def model_config(
        self,
        model: str,
        version: str | int = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def model_statistics(
        self,
        model: str = "",
        version: str | int = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def repository_index(
        self,
        *,
        ready_only: bool = False,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[list[RepositoryModel], IO_contra, AIO_contra]: ...
    def load_model(
        self,
        model: str,
        *,
        config: str | Mapping[str, Any] | None = None,
        files: Mapping[str, bytes] | None = None,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unload_model(
        self,
        model: str,
        *,
        unload_dependents: bool = False,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def system_shared_memory_status(
        self, region: str = "", *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[list[dict[str, Any]], IO_contra, AIO_contra]: ...
    def register_system_shared_memory(
        self,
        region: str,
        key: str,
        byte_size: int,
        *,
        offset: int = 0,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unregister_system_shared_memory(
        self, region: str = "", *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def cuda_shared_memory_status(
        self, region: str = "", *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[list[dict[str, Any]], IO_contra, AIO_contra]: ...
    def register_cuda_shared_memory(
        self,
        region: str,
        raw_handle: BytesLike,
        device_id: int,
        byte_size: int,
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def unregister_cuda_shared_memory(
        self, region: str = "", *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[None, IO_contra, AIO_contra]: ...
    def trace_settings(
        self, model: str = "", *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def update_trace_settings(
        self,
        settings: Mapping[str, Any],
        model: str = "",
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def log_settings(
        self, *, headers: Headers | None = None, timeout: float | None = None
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
    def update_log_settings(
        self,
        settings: Mapping[str, Any],
        *,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Call[dict[str, Any], IO_contra, AIO_contra]: ...
