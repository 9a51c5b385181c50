"""Shared-memory regions for Triton's system and CUDA shared memory extensions.

* :class:`SystemSharedMemoryRegion`: a POSIX shared-memory object mapped here; the server
  opens the same object by its key.
* :class:`CudaSharedMemoryRegion`: GPU memory shared with the server through a CUDA IPC
  handle (its module is imported when first named here, the CUDA runtime loaded only when a
  region is created).

Both have ``name``, ``byte_size``, ``kind`` (``"system"`` / ``"cuda"``),
``register_body()`` (REST register body), ``placement(byte_size, offset)`` (a
:class:`~kserve_v2.tensors.SharedMemoryPlacement` for ``InferInput`` / ``RequestedOutput``)
and ``tensor_parameters(byte_size, offset)`` (the same as ``shared_memory_*`` parameters),
described by :class:`SharedMemoryRegion`.

Example::

    from kserve_v2.shm import SystemSharedMemoryRegion

    with SystemSharedMemoryRegion.create("in0", 1024) as region:
        n = region.write(np.arange(8, dtype=np.int32))
        region.tensor_parameters(n)
        # {'shared_memory_region': 'in0', 'shared_memory_byte_size': 32}
        InferInput("x", datatype="INT32", shape=(8,), shared_memory=region.placement(n))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kserve_v2.parameters import ParameterValue
from kserve_v2.tensors import SharedMemoryPlacement

if TYPE_CHECKING:
    from kserve_v2.shm.cuda import (
        CUDA_IPC_HANDLE_SIZE,
        CudaError,
        CudaRuntimeNotFoundError,
        CudaSharedMemoryRegion,
        cuda_register_body,
        encode_raw_handle_rest,
        is_cuda_available,
    )
    from kserve_v2.shm.system import (
        SharedMemoryError,
        SystemSharedMemoryRegion,
        system_register_body,
    )
else:
    from kserve_v2._lazy import lazy_exports

    # Loaded when first read: the CUDA bindings (ctypes, the runtime's lookup) only for
    # programs that use CUDA regions.
    _CUDA = (
        "CUDA_IPC_HANDLE_SIZE",
        "CudaError",
        "CudaRuntimeNotFoundError",
        "CudaSharedMemoryRegion",
        "cuda_register_body",
        "encode_raw_handle_rest",
        "is_cuda_available",
    )
    _SYSTEM = ("SharedMemoryError", "SystemSharedMemoryRegion", "system_register_body")
    __getattr__, __dir__ = lazy_exports(
        globals(),
        {
            **dict.fromkeys(_CUDA, "kserve_v2.shm.cuda"),
            **dict.fromkeys(_SYSTEM, "kserve_v2.shm.system"),
        },
    )

__all__ = [
    "CUDA_IPC_HANDLE_SIZE",
    "CudaError",
    "CudaRuntimeNotFoundError",
    "CudaSharedMemoryRegion",
    "SharedMemoryError",
    "SharedMemoryRegion",
    "SystemSharedMemoryRegion",
    "cuda_register_body",
    "encode_raw_handle_rest",
    "is_cuda_available",
    "system_register_body",
]


@runtime_checkable
class SharedMemoryRegion(Protocol):
    """What the client needs from any region, system or CUDA."""

    @property
    def name(self) -> str:
        """The region's name towards the server."""
        ...

    @property
    def byte_size(self) -> int:
        """The region's size in bytes."""
        ...

    @property
    def kind(self) -> str:
        """``"system"`` or ``"cuda"``."""
        ...

    def register_body(self) -> dict[str, Any]:
        """The REST register request body."""
        ...

    def placement(self, byte_size: int | None = None, offset: int = 0) -> SharedMemoryPlacement:
        """Where a tensor at ``[offset, offset + byte_size)`` of the region lives."""
        ...

    def tensor_parameters(
        self, byte_size: int | None = None, offset: int = 0
    ) -> dict[str, ParameterValue]:
        """The ``shared_memory_*`` parameters of a tensor placed in the region."""
        ...

    def close(self) -> None:
        """Release the region's resources."""
        ...
