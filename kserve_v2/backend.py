"""The contract between the clients and the protocol backends: prepared calls."""

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
    pass

__all__ = ["Backend", "Call"]


T_co = TypeVar("T_co", covariant=True)


class Call(Protocol[T_co]):
    """A prepared exchange of one protocol; the clients run it through their I/O object."""

    def run(self, io: Any, hook: WireHook | None, /) -> T_co: ...

    async def arun(self, io: Any, hook: WireHook | None, /) -> T_co: ...


class Backend(Protocol):
    """What each protocol (HTTP, gRPC) provides to the clients: prepared calls.

    Every method takes the per-call keywords ``headers`` (HTTP headers or gRPC metadata) and
    ``timeout`` (seconds). Extension results are plain structures shaped like Triton's REST
    JSON on both protocols (gRPC messages are converted: int64 values as ints, field names as in
    the REST JSON), so code does not change with the protocol.
    """

    # core protocol
    def server_live(self, **kw: Any) -> Call[bool]: ...
    def server_ready(self, **kw: Any) -> Call[bool]: ...
    def model_ready(self, model: str, version: str = "", **kw: Any) -> Call[bool]: ...
    def server_metadata(self, **kw: Any) -> Call[ServerMetadata]: ...
    def model_metadata(self, model: str, version: str = "", **kw: Any) -> Call[ModelMetadata]: ...
    def infer(
        self, request: InferRequest, *, binary: bool | None = None, **kw: Any
    ) -> Call[InferResult]: ...

    # Triton extensions (kserve_v2/client/extensions.py documents the result shapes)
    def model_config(self, model: str, version: str = "", **kw: Any) -> Call[dict[str, Any]]: ...
    def model_statistics(
        self, model: str = "", version: str = "", **kw: Any
    ) -> Call[dict[str, Any]]: ...
    def repository_index(
        self, *, ready_only: bool = False, **kw: Any
    ) -> Call[list[RepositoryModel]]: ...
    def load_model(
        self,
        model: str,
        *,
        config: str | None = None,
        files: Mapping[str, bytes] | None = None,
        **kw: Any,
    ) -> Call[None]: ...
    def unload_model(
        self, model: str, *, unload_dependents: bool = False, **kw: Any
    ) -> Call[None]: ...
    def system_shared_memory_status(
        self, region: str = "", **kw: Any
    ) -> Call[list[dict[str, Any]]]: ...
    def register_system_shared_memory(
        self, region: str, key: str, byte_size: int, *, offset: int = 0, **kw: Any
    ) -> Call[None]: ...
    def unregister_system_shared_memory(self, region: str = "", **kw: Any) -> Call[None]: ...
    def cuda_shared_memory_status(
        self, region: str = "", **kw: Any
    ) -> Call[list[dict[str, Any]]]: ...
    def register_cuda_shared_memory(
        self, region: str, raw_handle: bytes, device_id: int, byte_size: int, **kw: Any
    ) -> Call[None]: ...
    def unregister_cuda_shared_memory(self, region: str = "", **kw: Any) -> Call[None]: ...
    def trace_settings(self, model: str = "", **kw: Any) -> Call[dict[str, Any]]: ...
    def update_trace_settings(
        self, settings: Mapping[str, Any], model: str = "", **kw: Any
    ) -> Call[dict[str, Any]]: ...
    def log_settings(self, **kw: Any) -> Call[dict[str, Any]]: ...
    def update_log_settings(
        self, settings: Mapping[str, Any], **kw: Any
    ) -> Call[dict[str, Any]]: ...
