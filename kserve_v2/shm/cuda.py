"""CUDA shared-memory regions for Triton's CUDA shared memory extension.

A region is device memory from ``cudaMalloc`` whose CUDA IPC handle (``cudaIpcGetMemHandle``,
64 bytes) is registered with the server; the server opens the handle and reads inputs from /
writes outputs to the same device memory.

The CUDA runtime (``libcudart``) is loaded with :mod:`ctypes` the first time a region is
created, so importing this module never needs CUDA. It is searched, in order, at
``$KSERVE_V2_CUDART`` (a full path), under ``$CUDA_HOME`` / ``$CUDA_PATH``, in the
``nvidia-cuda-runtime-cu12`` (or CUDA 13 ``nvidia-cuda-runtime``) wheel, and finally by the
dynamic loader (``LD_LIBRARY_PATH``, ldconfig cache). When none loads,
:class:`CudaRuntimeNotFoundError` says what was tried.

Example::

    import numpy as np
    from kserve_v2.shm import CudaSharedMemoryRegion

    with CudaSharedMemoryRegion.create("input0", 1024, device_id=0) as region:
        n = region.copy_from_host(np.arange(16, dtype=np.float32))
        body = region.register_body()   # {"raw_handle": {"b64": ...}, "device_id": 0, ...}
        params = region.tensor_parameters(n)
        # ... register, infer ...
        y = region.ndarray("FP32", (16,), offset=512)   # host copy of an output

The pure functions :func:`encode_raw_handle_rest` and :func:`cuda_register_body` build the
REST forms without touching CUDA.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import ctypes.util
import importlib
import importlib.util
import math
import os
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NoReturn

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import Datatype, deserialize
from kserve_v2.errors import InvalidInputError, MissingDependencyError
from kserve_v2.parameters import ParameterValue
from kserve_v2.shm.common import (
    DTypeSpec,
    SharedMemoryError,
    as_int,
    check_name,
    check_range,
    check_shape,
    check_size,
    check_span,
    host_bytes,
    placement,
    read_bytes_tensor,
    resolve_datatype,
)
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = [
    "CUDA_IPC_HANDLE_SIZE",
    "CudaError",
    "CudaRuntimeNotFoundError",
    "CudaSharedMemoryRegion",
    "cuda_register_body",
    "encode_raw_handle_rest",
    "is_cuda_available",
]

#: Size of a ``cudaIpcMemHandle_t`` in bytes.
CUDA_IPC_HANDLE_SIZE = 64

# cudaMemcpyKind
_HOST_TO_DEVICE = 1
_DEVICE_TO_HOST = 2
_DEFAULT = 4  # direction inferred from the pointers (unified addressing)

# DLPack device types
_KDL_CPU = 1
_KDL_CUDA = 2
_KDL_CUDA_HOST = 3


class CudaError(SharedMemoryError):
    """A CUDA runtime call failed.

    Attributes:
        function: the runtime function, e.g. ``"cudaMalloc"``.
        code: the ``cudaError_t`` value.
        error_name: its name from ``cudaGetErrorName``, e.g. ``"cudaErrorMemoryAllocation"``.
    """

    def __init__(self, function: str, code: int, error_name: str, description: str) -> None:
        detail = f": {description}" if description else ""
        super().__init__(f"{function} failed with {error_name} ({code}){detail}")
        self.function = function
        self.code = code
        self.error_name = error_name


class CudaRuntimeNotFoundError(MissingDependencyError):
    """No loadable CUDA runtime library (``libcudart``) was found.

    ``tried`` lists the paths and names that were attempted.
    """

    def __init__(self, tried: list[str]) -> None:
        message = (
            "CUDA runtime library not found: tried "
            + (", ".join(tried) if tried else "nothing")
            + ". Install the CUDA toolkit and set CUDA_HOME, `pip install "
            "nvidia-cuda-runtime-cu12`, or set KSERVE_V2_CUDART to the library's path"
        )
        # Bypass MissingDependencyError's pip-extra message: no extra provides a driver.
        ImportError.__init__(self, message, name="cudart")
        self.message = message
        self.extra = ""
        self.tried = tried


# ---------------------------------------------------------------------------------------------
# pure protocol helpers
# ---------------------------------------------------------------------------------------------


def _check_handle(handle: object) -> bytes:
    if not isinstance(handle, (bytes, bytearray, memoryview)):
        raise InvalidInputError(
            f"raw_handle must be bytes, not {type(handle).__name__}", value=handle
        )
    raw = bytes(handle)
    if len(raw) != CUDA_IPC_HANDLE_SIZE:
        raise InvalidInputError(
            f"raw_handle must be {CUDA_IPC_HANDLE_SIZE} bytes (a cudaIpcMemHandle_t), "
            f"got {len(raw)}",
            value=raw,
        )
    return raw


def encode_raw_handle_rest(handle: bytes | bytearray | memoryview) -> dict[str, str]:
    """The REST (JSON) form of a raw CUDA IPC handle: ``{"b64": <standard base64>}``.

    Example::

        >>> encode_raw_handle_rest(bytes(64))["b64"][:8]
        'AAAAAAAA'
    """
    return {"b64": base64.b64encode(_check_handle(handle)).decode("ascii")}


def cuda_register_body(
    handle: bytes | bytearray | memoryview, device_id: int, byte_size: int
) -> dict[str, Any]:
    """The REST body of ``POST v2/cudasharedmemory/region/{name}/register``.

    The gRPC ``CudaSharedMemoryRegisterRequest`` carries the raw 64 handle bytes instead of
    the base64 object, plus ``name``.

    Example::

        >>> cuda_register_body(bytes(64), 0, 1024)["device_id"]
        0
    """
    device = as_int(device_id, "device_id")
    if device < 0:
        raise InvalidInputError(f"device_id must not be negative, got {device}", value=device_id)
    return {
        "raw_handle": encode_raw_handle_rest(handle),
        "device_id": device,
        "byte_size": check_size(byte_size),
    }


# ---------------------------------------------------------------------------------------------
# the runtime library
# ---------------------------------------------------------------------------------------------


def _library_names() -> list[str]:
    if sys.platform == "win32":  # pragma: no cover
        return ["cudart64_13.dll", "cudart64_12.dll", "cudart64_110.dll"]
    return ["libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"]


def _candidate_libraries() -> list[str]:
    """Where to look for libcudart, most specific first; existing paths, then bare names."""
    names = _library_names()
    candidates: list[str] = []
    explicit = os.environ.get("KSERVE_V2_CUDART")
    if explicit:
        candidates.append(explicit)
    roots = [os.environ.get(var) for var in ("CUDA_HOME", "CUDA_PATH")]
    # The toolkit's default prefix, for hosts where ldconfig does not know about it.
    roots.append("/usr/local/cuda")
    for root in roots:
        if not root:
            continue
        for sub in ("lib64", "lib", "bin", os.path.join("targets", "x86_64-linux", "lib")):
            candidates.extend(os.path.join(root, sub, name) for name in names)
    # The pip wheels put the library in site-packages/nvidia/<pkg>/lib; find_spec only
    # locates the package (no CUDA code runs).
    for package in ("nvidia.cuda_runtime", "nvidia.cu13"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            for sub in ("lib", "bin"):
                candidates.extend(os.path.join(location, sub, name) for name in names)
    candidates = [c for c in candidates if os.path.exists(c)]
    candidates.extend(names)  # the dynamic loader's own search
    found = ctypes.util.find_library("cudart")
    if found:
        candidates.append(found)
    return list(dict.fromkeys(candidates))


class _CudaRuntime:
    """Typed wrappers around the few libcudart functions a region needs."""

    def __init__(self, lib: Any, path: str) -> None:
        self.lib = lib
        self.path = path
        c_int, c_void_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
        prototypes: dict[str, list[Any]] = {
            "cudaGetDeviceCount": [ctypes.POINTER(c_int)],
            "cudaGetDevice": [ctypes.POINTER(c_int)],
            "cudaSetDevice": [c_int],
            "cudaMalloc": [ctypes.POINTER(c_void_p), c_size_t],
            "cudaFree": [c_void_p],
            "cudaIpcGetMemHandle": [ctypes.c_char_p, c_void_p],
            "cudaMemcpy": [c_void_p, c_void_p, c_size_t, c_int],
            "cudaStreamSynchronize": [c_void_p],
        }
        for fn, argtypes in prototypes.items():
            func = getattr(lib, fn)
            func.argtypes = argtypes
            func.restype = c_int
        for fn in ("cudaGetErrorName", "cudaGetErrorString"):
            func = getattr(lib, fn)
            func.argtypes = [c_int]
            func.restype = ctypes.c_char_p

    def check(self, function: str, code: int) -> None:
        if code != 0:
            raise CudaError(
                function,
                code,
                self._text("cudaGetErrorName", code),
                self._text("cudaGetErrorString", code),
            )

    def _text(self, fn: str, code: int) -> str:
        raw = getattr(self.lib, fn)(code)
        return raw.decode("utf-8", "replace") if raw else f"cudaError {code}"

    def device_count(self) -> int:
        count = ctypes.c_int(0)
        self.check("cudaGetDeviceCount", self.lib.cudaGetDeviceCount(ctypes.byref(count)))
        return count.value

    def get_device(self) -> int:
        device = ctypes.c_int(0)
        self.check("cudaGetDevice", self.lib.cudaGetDevice(ctypes.byref(device)))
        return device.value

    def set_device(self, device_id: int) -> None:
        self.check("cudaSetDevice", self.lib.cudaSetDevice(device_id))

    @contextlib.contextmanager
    def on_device(self, device_id: int) -> Iterator[None]:
        """Make ``device_id`` current, then restore the caller's device (torch/cupy users)."""
        previous = self.get_device()
        if previous != device_id:
            self.set_device(device_id)
        try:
            yield
        finally:
            if previous != device_id:
                self.set_device(previous)

    def malloc(self, size: int) -> int:
        ptr = ctypes.c_void_p()
        self.check("cudaMalloc", self.lib.cudaMalloc(ctypes.byref(ptr), size))
        if not ptr.value:
            raise CudaError("cudaMalloc", 0, "cudaSuccess", "returned a null pointer")
        return ptr.value

    def free(self, ptr: int) -> None:
        self.check("cudaFree", self.lib.cudaFree(ptr))

    def ipc_get_mem_handle(self, ptr: int) -> bytes:
        handle = ctypes.create_string_buffer(CUDA_IPC_HANDLE_SIZE)
        self.check("cudaIpcGetMemHandle", self.lib.cudaIpcGetMemHandle(handle, ptr))
        return handle.raw

    def memcpy(self, dst: int, src: int, size: int, kind: int) -> None:
        self.check("cudaMemcpy", self.lib.cudaMemcpy(dst, src, size, kind))

    def stream_synchronize(self, stream: int) -> None:
        self.check("cudaStreamSynchronize", self.lib.cudaStreamSynchronize(stream))


_runtime_lock = threading.Lock()
_runtime: _CudaRuntime | None = None


def _load_runtime(candidates: list[str] | None = None) -> _CudaRuntime:
    tried: list[str] = []
    for candidate in _candidate_libraries() if candidates is None else candidates:
        tried.append(candidate)
        try:
            lib = ctypes.CDLL(candidate)
            return _CudaRuntime(lib, candidate)
        except (OSError, AttributeError):
            # Not there, wrong architecture, or not a CUDA runtime: keep looking.
            continue
    raise CudaRuntimeNotFoundError(tried)


def _get_runtime() -> _CudaRuntime:
    """The process-wide runtime, loaded on first use (a failed search is retried next time)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = _load_runtime()
        return _runtime


def is_cuda_available() -> bool:
    """True when a CUDA runtime loads and reports at least one device.

    Example::

        if is_cuda_available():
            region = CudaSharedMemoryRegion.create("in0", 1 << 20)
    """
    try:
        return _get_runtime().device_count() > 0
    except (CudaRuntimeNotFoundError, CudaError):
        return False


# ---------------------------------------------------------------------------------------------
# the region
# ---------------------------------------------------------------------------------------------


class _Allocation:
    """The device memory of a region, kept apart so that the finalizer does not hold it."""

    __slots__ = ("device_id", "pid", "ptr", "runtime")

    def __init__(self, runtime: _CudaRuntime, ptr: int, device_id: int) -> None:
        self.runtime = runtime
        self.ptr: int | None = ptr
        self.device_id = device_id
        # CUDA cannot be used in a forked child: only the allocating process frees.
        self.pid = os.getpid()

    def release(self, raise_errors: bool = False) -> None:
        ptr, self.ptr = self.ptr, None
        if ptr is None or os.getpid() != self.pid:
            return
        try:
            with self.runtime.on_device(self.device_id):
                self.runtime.free(ptr)
        except CudaError:
            # From the GC or at interpreter exit the runtime may already be shutting down
            # (cudaErrorCudartUnloading); an exception there could not be handled anyway.
            if raise_errors:
                raise


class CudaSharedMemoryRegion:
    """Device memory on one GPU, shareable with the server through its CUDA IPC handle.

    Build one with :meth:`create`. ``close()`` (or garbage collection) frees the memory;
    unregister the region from the server first.

    Example::

        with CudaSharedMemoryRegion.create("out0", 4096, device_id=0) as region:
            region.raw_handle        # 64 bytes, for gRPC registration
            region.register_body()   # REST registration body
    """

    kind: ClassVar[str] = "cuda"

    def __init__(
        self,
        name: str,
        byte_size: int,
        device_id: int,
        allocation: _Allocation,
        raw_handle: bytes,
    ) -> None:
        # Internal: use create().
        self._name = name
        self._byte_size = byte_size
        self._device_id = device_id
        self._allocation = allocation
        self._raw_handle = raw_handle
        self._finalizer = weakref.finalize(self, allocation.release)

    @classmethod
    def create(cls, name: str, byte_size: int, device_id: int = 0) -> CudaSharedMemoryRegion:
        """Allocate ``byte_size`` bytes on GPU ``device_id`` and get their IPC handle.

        The caller's current CUDA device is restored afterwards. Raises
        :class:`CudaRuntimeNotFoundError` without a CUDA runtime and :class:`CudaError`
        (with the ``cudaError_t`` code and name) when a CUDA call fails, e.g. without a
        driver or GPU.

        Example::

            region = CudaSharedMemoryRegion.create("in0", 1 << 20, device_id=1)
        """
        name = check_name(name)
        size = check_size(byte_size)
        device = as_int(device_id, "device_id")
        if device < 0:
            raise InvalidInputError(
                f"device_id must not be negative, got {device}", value=device_id
            )
        runtime = _get_runtime()
        with runtime.on_device(device):
            ptr = runtime.malloc(size)
            try:
                handle = runtime.ipc_get_mem_handle(ptr)
            except BaseException:
                runtime.free(ptr)
                raise
        return cls(name, size, device, _Allocation(runtime, ptr, device), handle)

    # -- properties --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The region's name towards the server."""
        return self._name

    @property
    def byte_size(self) -> int:
        """The allocated size in bytes."""
        return self._byte_size

    @property
    def device_id(self) -> int:
        """The GPU the memory lives on."""
        return self._device_id

    @property
    def raw_handle(self) -> bytes:
        """The 64-byte ``cudaIpcMemHandle_t`` (gRPC sends it as is; REST base64-encodes it)."""
        return self._raw_handle

    @property
    def device_ptr(self) -> int:
        """The device address of the region's first byte (for cupy/torch interop)."""
        return self._ptr()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the region was finalized)."""
        return not self._finalizer.alive

    def _ptr(self) -> int:
        ptr = self._allocation.ptr
        if ptr is None or not self._finalizer.alive:
            raise InvalidInputError(f"CUDA shared memory region {self._name!r} is closed")
        return ptr

    # -- data --------------------------------------------------------------------------------

    def copy_from_host(
        self, data: object, offset: int = 0, *, datatype: str | Datatype | None = None
    ) -> int:
        """Copy ``data`` into the region at ``offset``; return the number of bytes copied.

        ``data`` is a numpy array, written in its wire form (object/str/bytes arrays as
        BYTES; ``datatype="BF16"`` rounds float16/32/64 arrays), a bytes-like object, or a
        device tensor: anything with ``__cuda_array_interface__`` (cupy, torch, numba) or
        ``__dlpack__`` (CUDA tensors through cupy, CPU tensors through numpy). Device
        tensors must be C-contiguous and are copied device to device as they are.

        Example::

            region.copy_from_host(np.ones((2, 3), np.float32))
            region.copy_from_host(torch_tensor.cuda(), offset=256)
        """
        ptr = self._ptr()
        if not isinstance(data, (np.ndarray, np.generic, bytes, bytearray, memoryview)):
            if hasattr(data, "__cuda_array_interface__"):
                return self._copy_from_device(data.__cuda_array_interface__, offset)
            if hasattr(data, "__dlpack__") and hasattr(data, "__dlpack_device__"):
                device_type = int(data.__dlpack_device__()[0])
                if device_type == _KDL_CUDA:
                    return self._copy_from_device(_cupy_from_dlpack(data), offset)
                if device_type in (_KDL_CPU, _KDL_CUDA_HOST):
                    data = np.from_dlpack(data)  # zero copy
                else:
                    raise InvalidInputError(
                        f"cannot copy from a DLPack tensor on device type {device_type}",
                        value=device_type,
                    )
        source = host_bytes(data, datatype)
        off, n = check_range(offset, source.nbytes, self._byte_size, self._name)
        if n:
            # A read-only numpy view is enough to get the address of any host buffer.
            host = np.frombuffer(source, dtype=np.uint8)
            runtime = self._allocation.runtime
            with runtime.on_device(self._device_id):
                runtime.memcpy(ptr + off, host.ctypes.data, n, _HOST_TO_DEVICE)
        return n

    def _copy_from_device(self, interface: dict[str, Any], offset: int) -> int:
        shape = tuple(int(d) for d in interface["shape"])
        typestr = str(interface["typestr"])
        if typestr.startswith(">") and typestr[2:] != "1":
            # Device data is copied as is, and the protocol is little-endian.
            raise InvalidInputError(
                f"big-endian device tensors ({typestr}) cannot be sent", value=typestr
            )
        itemsize = np.dtype(typestr).itemsize
        strides = interface.get("strides")
        if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
            raise InvalidInputError(
                "device tensors must be C-contiguous; call .contiguous() / "
                "cupy.ascontiguousarray() first",
                value=strides,
            )
        src = int(interface["data"][0] or 0)
        off, n = check_range(offset, math.prod(shape) * itemsize, self._byte_size, self._name)
        if n:
            runtime = self._allocation.runtime
            with runtime.on_device(self._device_id):
                # __cuda_array_interface__ v3: the producer's pending work is on "stream".
                stream = interface.get("stream")
                if isinstance(stream, int) and stream:
                    runtime.stream_synchronize(stream)
                runtime.memcpy(self._ptr() + off, src, n, _DEFAULT)
        return n

    def copy_to_host(self, size: int | None = None, offset: int = 0) -> bytes:
        """A host copy of ``size`` bytes at ``offset`` (default: the rest of the region).

        Example::

            raw = region.copy_to_host(16)
        """
        off, n = check_span(offset, size, self._byte_size, self._name)
        return self._download(off, n).tobytes()

    def _download(self, offset: int, size: int) -> npt.NDArray[np.uint8]:
        out = np.empty(size, dtype=np.uint8)
        self._copy_into(out, offset)
        return out

    def _copy_into(self, out: npt.NDArray[Any], offset: int) -> None:
        ptr = self._ptr()
        if out.nbytes:
            runtime = self._allocation.runtime
            with runtime.on_device(self._device_id):
                runtime.memcpy(out.ctypes.data, ptr + offset, out.nbytes, _DEVICE_TO_HOST)

    def ndarray(
        self, dtype: DTypeSpec, shape: int | Iterable[int], offset: int = 0
    ) -> npt.NDArray[Any]:
        """A host **copy** of a tensor stored in the region (one device-to-host copy).

        ``dtype`` is a wire datatype (``"FP32"``, ``Datatype.INT8``, ...) or numpy dtype; the
        result has the dtype :func:`kserve_v2.datatypes.numpy_dtype` gives (BF16 comes back as
        float32 without ``ml_dtypes``). BYTES tensors are read with :meth:`read_bytes_array`.

        Example::

            out = region.ndarray("FP32", (2, 8), offset=64)
        """
        datatype, _ = resolve_datatype(dtype)
        if datatype.itemsize is None:
            raise InvalidInputError(
                "BYTES tensors have no fixed layout; use read_bytes_array()", value=dtype
            )
        dims = check_shape(shape)
        off, n = check_range(
            offset, math.prod(dims) * datatype.itemsize, self._byte_size, self._name
        )
        # Decoded in place: numeric results are views on the one downloaded buffer.
        return deserialize(self._download(off, n).data, datatype, dims)

    def read_bytes_array(
        self, shape: int | Iterable[int], offset: int = 0, byte_size: int | None = None
    ) -> npt.NDArray[Any]:
        """Decode a BYTES tensor of ``shape`` at ``offset`` (a host copy).

        With ``byte_size`` the tensor must fill exactly that many bytes (and only those are
        copied); without it, the rest of the region is copied and the elements may end
        anywhere in it.

        Example::

            words = region.read_bytes_array(3, byte_size=n)
        """
        dims = check_shape(shape)
        off, n = check_span(offset, byte_size, self._byte_size, self._name)
        return read_bytes_tensor(
            self._download(off, n).data, dims, byte_size is not None, f"region {self._name!r}"
        )

    # -- protocol helpers --------------------------------------------------------------------

    def register_body(self) -> dict[str, Any]:
        """The REST register body for this region.

        Example::

            region.register_body()
            # {'raw_handle': {'b64': '...'}, 'device_id': 0, 'byte_size': 4096}
        """
        return cuda_register_body(self._raw_handle, self._device_id, self._byte_size)

    def placement(self, byte_size: int | None = None, offset: int = 0) -> SharedMemoryPlacement:
        """Where a tensor at ``[offset, offset + byte_size)`` of this region lives.

        Pass it as ``shared_memory=`` of an input or requested output. ``byte_size``
        defaults to the rest of the region after ``offset``; the range must fit.

        Example::

            n = region.copy_from_host(x)
            InferInput("x", datatype="FP32", shape=x.shape, shared_memory=region.placement(n))
        """
        return placement(self._name, self._byte_size, byte_size, offset)

    def tensor_parameters(
        self, byte_size: int | None = None, offset: int = 0
    ) -> dict[str, ParameterValue]:
        """The ``shared_memory_*`` parameters of :meth:`placement`."""
        return self.placement(byte_size, offset).as_parameters()

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Free the device memory (``cudaFree``). Idempotent; CUDA errors are raised."""
        if self._finalizer.detach() is not None:
            self._allocation.release(raise_errors=True)

    def __enter__(self) -> CudaSharedMemoryRegion:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "CudaSharedMemoryRegion cannot be pickled: send raw_handle, device_id and "
            "byte_size instead"
        )

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"CudaSharedMemoryRegion(name={self._name!r}, byte_size={self._byte_size}, "
            f"device_id={self._device_id}, {state})"
        )


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides: list[int] = []
    step = itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def _cupy_from_dlpack(tensor: object) -> dict[str, Any]:
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:
        raise MissingDependencyError("copying CUDA DLPack tensors", "cupy", "cupy") from exc
    interface: dict[str, Any] = cupy.from_dlpack(tensor).__cuda_array_interface__
    return interface
