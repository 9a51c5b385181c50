"""tritonclient.utils.shared_memory: system (POSIX) shared-memory regions, on
:class:`kserve_v2.shm.SystemSharedMemoryRegion`.

Example::

    import kserve_v2.compat.utils.shared_memory as shm

    handle = shm.create_shared_memory_region("input_data", "/input_simple", 128)
    shm.set_shared_memory_region(handle, [input0, input1])
    client.register_system_shared_memory("input_data", "/input_simple", 128)
    ...
    output = shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=64)
    shm.destroy_shared_memory_region(handle)

As in tritonclient, BYTES tensors go in serialised (``serialize_byte_tensor``): object
arrays are written as their elements' bytes, back to back.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kserve_v2.errors import KServeError
from kserve_v2.shm import SystemSharedMemoryRegion

__all__ = [
    "SharedMemoryException",
    "SharedMemoryRegion",
    "create_shared_memory_region",
    "destroy_shared_memory_region",
    "get_contents_as_numpy",
    "mapped_shared_memory_regions",
    "set_shared_memory_region",
]


class SharedMemoryException(Exception):
    """A shared-memory operation failed (the native error is the ``__cause__``)."""


class SharedMemoryRegion:
    """The handle of a mapped region: its Triton name, its key and the mapping
    (``region``, a :class:`kserve_v2.shm.SystemSharedMemoryRegion`)."""

    def __init__(self, triton_shm_name: str, shm_key: str) -> None:
        self._triton_shm_name = triton_shm_name
        self._shm_key = shm_key
        self.region: SystemSharedMemoryRegion | None = None

    def _mapped(self) -> SystemSharedMemoryRegion:
        if self.region is None or self.region.closed:
            raise SharedMemoryException("the shared memory region was destroyed")
        return self.region

    def __repr__(self) -> str:
        return f"SharedMemoryRegion({self._triton_shm_name!r}, {self._shm_key!r})"


# Handles mapped by this process, by key: the last one destroyed unlinks the key.
_MAPPED: dict[str, list[SharedMemoryRegion]] = {}
_LOCK = threading.Lock()


def create_shared_memory_region(
    triton_shm_name: str, shm_key: str, byte_size: int, create_only: bool = False
) -> SharedMemoryRegion:
    """Map ``byte_size`` bytes of the shared-memory object ``shm_key``, creating it if needed
    (``create_only``: it must not exist yet); returns the region's handle."""
    handle = SharedMemoryRegion(triton_shm_name, shm_key)
    with _LOCK:
        try:
            handle.region = SystemSharedMemoryRegion.create(triton_shm_name, byte_size, shm_key)
        except KServeError as exc:
            if create_only:
                raise SharedMemoryException("unable to create the shared memory region") from exc
            try:  # the key exists: map it, as tritonclient does
                handle.region = SystemSharedMemoryRegion.attach(triton_shm_name, shm_key, byte_size)
            except KServeError:
                raise SharedMemoryException("unable to create the shared memory region") from exc
        _MAPPED.setdefault(shm_key, []).append(handle)
    return handle


def _as_bytes(array: npt.NDArray[Any]) -> bytes | npt.NDArray[Any]:
    """What a value writes: numbers in their wire form, object arrays as their elements'
    bytes back to back (a ``serialize_byte_tensor`` result is one element)."""
    if array.dtype == np.object_ or array.dtype.kind in "SU":
        parts = []
        for value in array.reshape(-1).tolist():
            parts.append(value.encode("utf-8") if isinstance(value, str) else bytes(value))
        return b"".join(parts)
    return array


def set_shared_memory_region(
    shm_handle: SharedMemoryRegion, input_values: Sequence[npt.NDArray[Any]], offset: int = 0
) -> None:
    """Copy the arrays of ``input_values`` into the region, one after another from
    ``offset``."""
    if not isinstance(input_values, list | tuple):
        raise SharedMemoryException(
            "input_values must be specified as a list/tuple of numpy arrays"
        )
    region = shm_handle._mapped()
    position = offset
    try:
        for value in input_values:
            position += region.write(_as_bytes(np.asarray(value)), position)
    except KServeError as exc:
        raise SharedMemoryException("unable to set the shared memory region") from exc


def get_contents_as_numpy(
    shm_handle: SharedMemoryRegion, datatype: Any, shape: Sequence[int], offset: int = 0
) -> npt.NDArray[Any]:
    """The tensor of ``datatype`` (a numpy dtype; ``np.object_`` for BYTES) and ``shape`` at
    ``offset``: a view of the region for numbers, a copy for BYTES."""
    region = shm_handle._mapped()
    try:
        dtype = np.dtype(datatype)
        if dtype == np.object_ or dtype.kind in "SU":
            return region.read_bytes_array(list(shape), offset)
        return region.ndarray(dtype, list(shape), offset)
    except KServeError as exc:
        raise SharedMemoryException(f"unable to read the shared memory region: {exc}") from exc


def mapped_shared_memory_regions() -> list[str]:
    """The keys of the regions this process has mapped and not destroyed."""
    with _LOCK:
        return list(_MAPPED)


def destroy_shared_memory_region(shm_handle: SharedMemoryRegion) -> None:
    """Unmap the region; the last handle of a key also removes the key."""
    with _LOCK:
        handles = _MAPPED.get(shm_handle._shm_key, [])
        if shm_handle in handles:
            handles.remove(shm_handle)
        last = not handles
        if last:
            _MAPPED.pop(shm_handle._shm_key, None)
        region, shm_handle.region = shm_handle.region, None
    if region is not None:
        if last:
            region.unlink()
        region.close()
