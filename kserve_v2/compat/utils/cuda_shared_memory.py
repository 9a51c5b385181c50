"""tritonclient.utils.cuda_shared_memory: GPU memory shared with the server, on
:class:`kserve_v2.shm.CudaSharedMemoryRegion` (the CUDA runtime through ``ctypes``: no
cuda-python needed; importing this module works without a GPU, creating a region does not).

Example::

    import kserve_v2.compat.utils.cuda_shared_memory as cudashm

    handle = cudashm.create_shared_memory_region("input_data", 128, 0)
    cudashm.set_shared_memory_region(handle, [input0, input1])
    client.register_cuda_shared_memory("input_data", cudashm.get_raw_handle(handle), 0, 128)
    ...
    cudashm.destroy_shared_memory_region(handle)
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kserve_v2.errors import KServeError
from kserve_v2.shm import CudaSharedMemoryRegion

__all__ = [
    "CudaSharedMemoryException",
    "CudaSharedMemoryRegion",
    "allocated_shared_memory_regions",
    "as_shared_memory_tensor",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "get_raw_handle",
    "set_shared_memory_region",
    "set_shared_memory_region_from_dlpack",
]


class CudaSharedMemoryException(Exception):
    """A CUDA shared-memory operation failed (the native error is the ``__cause__``)."""


_ALLOCATED: list[CudaSharedMemoryRegion] = []
_LOCK = threading.Lock()


def _fail(what: str, exc: KServeError) -> CudaSharedMemoryException:
    error = CudaSharedMemoryException(f"unable to {what}: {exc}")
    error.__cause__ = exc
    return error


def create_shared_memory_region(
    triton_shm_name: str, byte_size: int, device_id: int
) -> CudaSharedMemoryRegion:
    """Allocate ``byte_size`` bytes on GPU ``device_id``; returns the region's handle."""
    try:
        region = CudaSharedMemoryRegion.create(triton_shm_name, byte_size, device_id)
    except KServeError as exc:
        raise _fail("create the CUDA shared memory region", exc) from exc
    with _LOCK:
        _ALLOCATED.append(region)
    return region


def get_raw_handle(cuda_shm_handle: CudaSharedMemoryRegion) -> bytes:
    """The region's CUDA IPC handle, base64-encoded (what ``register_cuda_shared_memory``
    takes)."""
    return base64.b64encode(cuda_shm_handle.raw_handle)


def _host_bytes(array: npt.NDArray[Any]) -> bytes | npt.NDArray[Any]:
    # As for system regions: object arrays (serialised BYTES tensors) as their bytes.
    if array.dtype == np.object_:
        return b"".join(
            v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in array.reshape(-1)
        )
    return array


def set_shared_memory_region(
    cuda_shm_handle: CudaSharedMemoryRegion, input_values: Sequence[npt.NDArray[Any]]
) -> None:
    """Copy the host arrays of ``input_values`` into the region, one after another."""
    if not isinstance(input_values, list | tuple):
        raise CudaSharedMemoryException(
            "input_values must be specified as a list/tuple of numpy arrays"
        )
    position = 0
    try:
        for value in input_values:
            position += cuda_shm_handle.copy_from_host(_host_bytes(np.asarray(value)), position)
    except KServeError as exc:
        raise _fail("set the CUDA shared memory region", exc) from exc


def set_shared_memory_region_from_dlpack(
    cuda_shm_handle: CudaSharedMemoryRegion, input_values: Sequence[Any]
) -> None:
    """Copy device (or host) tensors, anything with ``__dlpack__`` or
    ``__cuda_array_interface__``, into the region one after another."""
    position = 0
    try:
        for value in input_values:
            position += cuda_shm_handle.copy_from_host(value, position)
    except KServeError as exc:
        raise _fail("set the CUDA shared memory region", exc) from exc


def get_contents_as_numpy(
    cuda_shm_handle: CudaSharedMemoryRegion, datatype: Any, shape: Sequence[int]
) -> npt.NDArray[Any]:
    """A host copy of the tensor of ``datatype`` (numpy dtype; ``np.object_`` for BYTES) and
    ``shape`` at the start of the region."""
    try:
        dtype = np.dtype(datatype)
        if dtype == np.object_:
            return cuda_shm_handle.read_bytes_array(list(shape))
        return cuda_shm_handle.ndarray(dtype, list(shape))
    except KServeError as exc:
        raise _fail("read the CUDA shared memory region", exc) from exc


class _DeviceTensor:
    """A view of device memory that cupy, torch and numba take through
    ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, pointer: int, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (pointer, False),
            "strides": None,
            "version": 3,
        }


def as_shared_memory_tensor(
    cuda_shm_handle: CudaSharedMemoryRegion, datatype: str, shape: Sequence[int]
) -> Any:
    """The region's memory as a device tensor of wire ``datatype`` and ``shape`` (no copy),
    for ``cupy.asarray`` / ``torch.as_tensor``: an object with ``__cuda_array_interface__``
    (tritonclient returns a DLPack tensor)."""
    from kserve_v2.compat.utils import triton_to_np_dtype

    scalar = triton_to_np_dtype(datatype)
    if scalar is None or datatype == "BYTES":
        raise CudaSharedMemoryException(f"datatype {datatype} has no fixed-size layout")
    dtype = np.dtype(scalar)
    dims = tuple(int(d) for d in shape)
    if int(np.prod(dims)) * dtype.itemsize > cuda_shm_handle.byte_size:
        raise CudaSharedMemoryException("the tensor does not fit in the region")
    return _DeviceTensor(cuda_shm_handle.device_ptr, dtype, dims)


def allocated_shared_memory_regions() -> list[CudaSharedMemoryRegion]:
    """The handles of the regions allocated and not destroyed."""
    with _LOCK:
        return list(_ALLOCATED)


def destroy_shared_memory_region(cuda_shm_handle: CudaSharedMemoryRegion) -> None:
    """Free the region's GPU memory (unregister it from the server first)."""
    with _LOCK:
        if cuda_shm_handle in _ALLOCATED:
            _ALLOCATED.remove(cuda_shm_handle)
    try:
        cuda_shm_handle.close()
    except KServeError as exc:
        raise _fail("destroy the CUDA shared memory region", exc) from exc
