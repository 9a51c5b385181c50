"""Triton's protocol extensions: result shapes, and helpers shared by both protocols.

The extension methods of :class:`~kserve_v2.Client` and :class:`~kserve_v2.AsyncClient` return
plain structures shaped like Triton's REST JSON, on HTTP and gRPC alike (gRPC answers are
converted: field names as in the REST JSON, int64 values as ints), so code does not change with
the protocol:

======================================  ==================================================
method                                  result
======================================  ==================================================
``model_config(m)``                     ``dict``: the model configuration
                                        (``{"name": ..., "backend": ..., "input": [...],
                                        "max_batch_size": 8, ...}``)
``model_statistics([m[, v]])``          ``{"model_stats": [{"name", "version",
                                        "inference_count", "execution_count",
                                        "inference_stats": {"success": {"count", "ns"},
                                        ...}, "batch_stats": [...], ...}]}``
``repository_index()``                  ``list[RepositoryModel]`` (name, version, state,
                                        reason)
``system_shared_memory_status()``       ``[{"name", "key", "offset", "byte_size"}, ...]``
``cuda_shared_memory_status()``         ``[{"name", "device_id", "byte_size"}, ...]``
``trace_settings([m])``                 ``{"trace_level": ["OFF"], "trace_rate": "1000",
                                        "trace_count": "-1", "log_frequency": "0",
                                        "trace_file": "", "trace_mode": "triton"}``
                                        (numbers as strings, as Triton sends them)
``log_settings()``                      ``{"log_file": "", "log_info": True,
                                        "log_warning": True, "log_error": True,
                                        "log_verbose_level": 0, "log_format": "default"}``
``generate(m, payload)``                ``{"model_name", "model_version", "text_output",
                                        ...}`` (HTTP only)
``generate_stream(m, payload)``         an iterator of such dicts (HTTP only)
``metrics()``                           ``dict[str, MetricFamily]``
                                        (see :mod:`kserve_v2.metrics`)
======================================  ==================================================

Helpers here:

* :func:`parse_classification`: read the ``"value:index[:label]"`` strings of the
  classification extension (``RequestedOutput(name, class_count=N)``);
* :func:`read_shared_memory_output`: read an output the server wrote to a region, by name;
* :func:`normalize_load_request`, :func:`trace_settings_update`, :func:`log_settings_update`:
  argument checks and normalisation shared by the HTTP and gRPC backends;
* :class:`GenerateStream` / :class:`AsyncGenerateStream`: what ``generate_stream`` returns.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from kserve_v2.errors import InvalidInputError

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.backend import Backend, Call
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

__all__ = ["AsyncGenerateStream", "GenerateStream", "region_call"]

IO = TypeVar("IO")
AIO = TypeVar("AIO")


# ---------------------------------------------------------------------------------------------
# classification


# ---------------------------------------------------------------------------------------------
# shared memory


def region_call(
    backend: Backend[IO, AIO],
    region: SystemSharedMemoryRegion | CudaSharedMemoryRegion,
    *,
    register: bool,
    headers: Headers | None = None,
    timeout: float | None = None,
) -> Call[None, IO, AIO]:
    """The register (or unregister) call for a region object, system or CUDA."""
    # Imported here: the facades import this module, and most programs never touch shm.
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

    if isinstance(region, SystemSharedMemoryRegion):
        if not register:
            return backend.unregister_system_shared_memory(
                region.name, headers=headers, timeout=timeout
            )
        return backend.register_system_shared_memory(
            region.name, region.key, region.byte_size, headers=headers, timeout=timeout
        )
    if isinstance(region, CudaSharedMemoryRegion):
        if not register:
            return backend.unregister_cuda_shared_memory(
                region.name, headers=headers, timeout=timeout
            )
        return backend.register_cuda_shared_memory(
            region.name,
            region.raw_handle,
            region.device_id,
            region.byte_size,
            headers=headers,
            timeout=timeout,
        )
    raise InvalidInputError(
        "region must be a SystemSharedMemoryRegion or CudaSharedMemoryRegion, "
        f"got {type(region).__name__}",
        value=region,
    )


# ---------------------------------------------------------------------------------------------
# model repository, trace and log settings


# ---------------------------------------------------------------------------------------------
# generate_stream results


class GenerateStream(Iterator[dict[str, Any]]):
    """The responses of ``Client.generate_stream``, one dict per server-sent event.

    The request is sent when iteration starts. An error the server reports mid-stream raises
    :class:`~kserve_v2.errors.ServerError`. Stopping early is fine: leaving a ``with`` block,
    calling :meth:`close`, or dropping the iterator closes the connection (it is not reused,
    since the rest of the stream was not read).

    Example::

        with client.generate_stream("llm", {"text_input": "Hi", "max_tokens": 8}) as stream:
            for response in stream:
                print(response["text_output"], end="")
    """

    __slots__ = ("_events",)

    def __init__(self, events: Generator[dict[str, Any], None, None]) -> None:
        self._events = events

    def __iter__(self) -> GenerateStream:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._events)

    def close(self) -> None:
        """Stop reading and close the connection (no-op when the stream has ended)."""
        self._events.close()

    def __enter__(self) -> GenerateStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncGenerateStream(AsyncIterator[dict[str, Any]]):
    """The responses of ``AsyncClient.generate_stream``: the async twin of
    :class:`GenerateStream`.

    Example::

        async with client.generate_stream("llm", {"text_input": "Hi"}) as stream:
            async for response in stream:
                print(response["text_output"], end="")
    """

    __slots__ = ("_events",)

    def __init__(self, events: AsyncGenerator[dict[str, Any], None]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncGenerateStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop reading and close the connection (no-op when the stream has ended)."""
        await self._events.aclose()

    async def __aenter__(self) -> AsyncGenerateStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
