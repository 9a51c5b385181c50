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
* :func:`region_call`: the (un)register call for a region object, system or CUDA.

What ``generate_stream`` returns lives with each client:
:class:`~kserve_v2.client.sync.GenerateStream`, :class:`~kserve_v2.client.aio.AsyncGenerateStream`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from kserve_v2.errors import InvalidInputError

if TYPE_CHECKING:
    from kserve_v2.arguments import Headers
    from kserve_v2.backend import Backend, Call
    from kserve_v2.rest.paths import QueryParams
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

__all__ = ["region_call"]

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
    query: QueryParams | None = None,
    timeout: float | None = None,
) -> Call[None, IO, AIO]:
    """The register (or unregister) call for a region object, system or CUDA."""
    # Imported here: the facades import this module, and most programs never touch shm.
    from kserve_v2.shm import CudaSharedMemoryRegion, SystemSharedMemoryRegion

    if isinstance(region, SystemSharedMemoryRegion):
        if not register:
            return backend.unregister_system_shared_memory(
                region.name, headers=headers, query=query, timeout=timeout
            )
        return backend.register_system_shared_memory(
            region.name, region.key, region.byte_size, headers=headers, query=query, timeout=timeout
        )
    if isinstance(region, CudaSharedMemoryRegion):
        if not register:
            return backend.unregister_cuda_shared_memory(
                region.name, headers=headers, query=query, timeout=timeout
            )
        return backend.register_cuda_shared_memory(
            region.name,
            region.raw_handle,
            region.device_id,
            region.byte_size,
            headers=headers,
            query=query,
            timeout=timeout,
        )
    raise InvalidInputError(
        "region must be a SystemSharedMemoryRegion or CudaSharedMemoryRegion, "
        f"got {type(region).__name__}",
        value=region,
    )


# ---------------------------------------------------------------------------------------------
# model repository, trace and log settings
