"""Tests of kserve_v2.shm.cuda: CUDA shared-memory regions.

Most tests drive the real ctypes wrapper (``_CudaRuntime``) over a fake ``libcudart`` whose
"device memory" is host memory, so the region logic is covered on machines without a GPU.
Tests marked ``cuda`` need a real GPU and are skipped without one.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import gc
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kserve_v2.errors import InvalidInputError, KServeError, MissingDependencyError
from kserve_v2.shm import (
    CudaError,
    CudaRuntimeNotFoundError,
    CudaSharedMemoryRegion,
    SharedMemoryError,
    SharedMemoryRegion,
    cuda_register_body,
    encode_raw_handle_rest,
    is_cuda_available,
)
from kserve_v2.shm import cuda as cuda_mod
from kserve_v2.tensors import SharedMemoryPlacement

HANDLE = bytes(range(64))
HANDLE_B64 = (
    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw=="
)

# -- pure protocol helpers ---------------------------------------------------------------------


def test_encode_raw_handle_rest_golden() -> None:
    assert encode_raw_handle_rest(HANDLE) == {"b64": HANDLE_B64}
    assert base64.b64decode(HANDLE_B64) == HANDLE
    assert encode_raw_handle_rest(bytearray(64)) == {"b64": "A" * 86 + "=="}


def test_cuda_register_body_golden() -> None:
    body = cuda_register_body(HANDLE, 1, 4096)
    assert json.dumps(body) == (
        f'{{"raw_handle": {{"b64": "{HANDLE_B64}"}}, "device_id": 1, "byte_size": 4096}}'
    )
    assert type(cuda_register_body(HANDLE, np.int64(0), np.uint32(8))["device_id"]) is int


@pytest.mark.parametrize(
    ("handle", "device_id", "byte_size"),
    [
        (HANDLE[:63], 0, 8),
        (HANDLE + b"\x00", 0, 8),
        (HANDLE_B64, 0, 8),
        (None, 0, 8),
        (HANDLE, -1, 8),
        (HANDLE, 0.5, 8),
        (HANDLE, 0, 0),
        (HANDLE, 0, -8),
        (HANDLE, True, 8),
    ],
)
def test_cuda_register_body_invalid(handle: object, device_id: object, byte_size: object) -> None:
    with pytest.raises(InvalidInputError):
        cuda_register_body(handle, device_id, byte_size)  # type: ignore[arg-type]


# -- library search ----------------------------------------------------------------------------


def test_runtime_not_found_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_mod, "_runtime", None)
    monkeypatch.setattr(cuda_mod, "_candidate_libraries", lambda: ["/nonexistent/libcudart.so.12"])
    with pytest.raises(CudaRuntimeNotFoundError) as info:
        CudaSharedMemoryRegion.create("r", 64)
    err = info.value
    assert str(err).startswith("CUDA runtime library not found: tried /nonexistent/libcudart.so.12")
    assert "nvidia-cuda-runtime-cu12" in str(err)
    assert err.tried == ["/nonexistent/libcudart.so.12"]
    assert isinstance(err, MissingDependencyError)
    assert isinstance(err, KServeError)
    assert isinstance(err, ImportError)
    assert is_cuda_available() is False


def test_load_runtime_skips_non_cuda_libraries() -> None:
    libc = ctypes.util.find_library("c") or "libc.so.6"
    with pytest.raises(CudaRuntimeNotFoundError) as info:
        cuda_mod._load_runtime([libc, "/nonexistent/libcudart.so"])
    assert info.value.tried == [libc, "/nonexistent/libcudart.so"]


def test_candidate_libraries_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    home = tmp_path / "cuda"
    (home / "lib64").mkdir(parents=True)
    (home / "lib64" / "libcudart.so.12").write_bytes(b"")
    explicit = tmp_path / "custom" / "libcudart.so"
    explicit.parent.mkdir()
    explicit.write_bytes(b"")
    monkeypatch.setenv("KSERVE_V2_CUDART", str(explicit))
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    candidates = cuda_mod._candidate_libraries()
    assert candidates[0] == str(explicit)
    assert candidates[1] == str(home / "lib64" / "libcudart.so.12")
    # bare names for the dynamic loader come after every existing path
    assert "libcudart.so.12" in candidates
    assert candidates.index("libcudart.so") > 1
    assert len(candidates) == len(set(candidates))


def test_import_does_not_load_cuda() -> None:
    code = (
        "import kserve_v2.shm, kserve_v2.shm.cuda as c; "
        "maps = open('/proc/self/maps').read(); "
        "print(c._runtime is None, 'libcudart' in maps)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]


def test_without_gpu_clear_error() -> None:
    """Where a CUDA runtime loads but no GPU/driver is usable, create() names the CUDA error."""
    try:
        runtime = cuda_mod._get_runtime()
    except CudaRuntimeNotFoundError:
        pytest.skip("no CUDA runtime library on this machine")
    if is_cuda_available():
        pytest.skip("a GPU is available")
    with pytest.raises(CudaError) as info:
        CudaSharedMemoryRegion.create("r", 64)
    err = info.value
    assert err.code != 0
    assert err.error_name.startswith("cudaError")
    assert err.error_name in str(err)
    assert f"({err.code})" in str(err)
    assert isinstance(err, SharedMemoryError)
    assert runtime.path


# -- a fake libcudart over host memory ---------------------------------------------------------

_ERROR_NAMES = {
    0: "cudaSuccess",
    1: "cudaErrorInvalidValue",
    2: "cudaErrorMemoryAllocation",
    101: "cudaErrorInvalidDevice",
}


class FakeCudart:
    """Stands in for the CDLL: plain functions, called with the Python-level arguments."""

    def __init__(self, devices: int = 2) -> None:
        self.devices = devices
        self.current = 0
        self.allocations: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail: dict[str, int] = {}

        def fn(name: str) -> Any:
            def wrapper(*args: Any) -> Any:
                self.calls.append((name, *args))
                if name in self.fail:
                    return self.fail[name]
                return getattr(self, "_" + name)(*args)

            wrapper.__name__ = name
            return wrapper

        for name in (
            "cudaGetDeviceCount",
            "cudaGetDevice",
            "cudaSetDevice",
            "cudaMalloc",
            "cudaFree",
            "cudaIpcGetMemHandle",
            "cudaMemcpy",
            "cudaStreamSynchronize",
        ):
            setattr(self, name, fn(name))

        # Plain functions (not methods), so that the wrapper can set argtypes/restype on them.
        def error_name(code: int) -> bytes:
            return _ERROR_NAMES.get(code, "cudaErrorUnknown").encode()

        def error_string(code: int) -> bytes:
            return b"fake error description"

        self.cudaGetErrorName = error_name
        self.cudaGetErrorString = error_string

    def _cudaGetDeviceCount(self, count: Any) -> int:
        count._obj.value = self.devices
        return 0

    def _cudaGetDevice(self, device: Any) -> int:
        device._obj.value = self.current
        return 0

    def _cudaSetDevice(self, device: int) -> int:
        if not 0 <= device < self.devices:
            return 101
        self.current = device
        return 0

    def _cudaMalloc(self, ptr: Any, size: int) -> int:
        buf = ctypes.create_string_buffer(size)
        self.allocations[ctypes.addressof(buf)] = buf
        ptr._obj.value = ctypes.addressof(buf)
        return 0

    def _cudaFree(self, ptr: int) -> int:
        return 0 if self.allocations.pop(ptr, None) is not None else 1

    def _cudaIpcGetMemHandle(self, handle: Any, ptr: int) -> int:
        ctypes.memmove(handle, HANDLE, 64)
        return 0

    def _cudaMemcpy(self, dst: int, src: int, size: int, kind: int) -> int:
        ctypes.memmove(dst, src, size)
        return 0

    def _cudaStreamSynchronize(self, stream: int) -> int:
        return 0


@pytest.fixture
def lib(monkeypatch: pytest.MonkeyPatch) -> FakeCudart:
    fake = FakeCudart()
    runtime = cuda_mod._CudaRuntime(fake, "fake")
    monkeypatch.setattr(cuda_mod, "_get_runtime", lambda: runtime)
    return fake


@pytest.fixture
def region(lib: FakeCudart) -> Iterator[CudaSharedMemoryRegion]:
    with CudaSharedMemoryRegion.create("gpu_region", 256, device_id=1) as r:
        yield r


def test_create(lib: FakeCudart, region: CudaSharedMemoryRegion) -> None:
    assert region.name == "gpu_region"
    assert region.byte_size == 256
    assert region.device_id == 1
    assert region.kind == "cuda"
    assert region.raw_handle == HANDLE
    assert region.device_ptr in lib.allocations
    assert not region.closed
    assert isinstance(region, SharedMemoryRegion)
    assert repr(region) == (
        "CudaSharedMemoryRegion(name='gpu_region', byte_size=256, device_id=1, open)"
    )
    assert ("cudaSetDevice", 1) in lib.calls
    # the caller's current device is restored
    assert lib.current == 0
    assert is_cuda_available()


def test_register_body_and_parameters(region: CudaSharedMemoryRegion) -> None:
    assert json.dumps(region.register_body()) == (
        f'{{"raw_handle": {{"b64": "{HANDLE_B64}"}}, "device_id": 1, "byte_size": 256}}'
    )
    assert region.tensor_parameters(16, offset=32) == {
        "shared_memory_region": "gpu_region",
        "shared_memory_byte_size": 16,
        "shared_memory_offset": 32,
    }
    with pytest.raises(InvalidInputError):
        region.tensor_parameters(300)
    assert region.placement(8, offset=248) == SharedMemoryPlacement("gpu_region", 8, 248)


def test_copy_round_trip(lib: FakeCudart, region: CudaSharedMemoryRegion) -> None:
    array = np.arange(12, dtype=">i4").reshape(3, 4).T  # big-endian, non-contiguous
    n = region.copy_from_host(array, offset=8)
    assert n == 48
    assert ("cudaMemcpy", region.device_ptr + 8) == lib.calls[-2][:2]
    assert lib.calls[-2][3:] == (48, 1)  # cudaMemcpyHostToDevice
    assert region.copy_to_host(48, 8) == np.ascontiguousarray(array).astype("<i4").tobytes()
    back = region.ndarray("INT32", (4, 3), offset=8)
    np.testing.assert_array_equal(back, array)
    back[0, 0] = 99  # a host copy, not a view
    assert region.ndarray("INT32", 1, offset=8)[0] == 0
    assert region.copy_to_host() == region.copy_to_host(256, 0)
    assert len(region.copy_to_host(offset=250)) == 6


def test_copy_buffers_and_bytes_tensors(region: CudaSharedMemoryRegion) -> None:
    assert region.copy_from_host(b"abc") == 3
    assert region.copy_from_host(memoryview(b"xyz")[1:], offset=3) == 2
    assert region.copy_to_host(5) == b"abcyz"
    words = np.array([b"ab", b"", "hé"], dtype=object)
    n = region.copy_from_host(words, offset=100)
    assert n == 4 + 2 + 4 + 4 + 3
    back = region.read_bytes_array(3, offset=100, byte_size=n)
    assert back.tolist() == [b"ab", b"", "hé".encode()]
    assert region.copy_from_host(np.zeros(0, np.float32), offset=256) == 0


def test_copy_bounds(region: CudaSharedMemoryRegion, lib: FakeCudart) -> None:
    calls = len(lib.calls)
    with pytest.raises(InvalidInputError, match="past the end"):
        region.copy_from_host(np.ones(65, np.float32))
    with pytest.raises(InvalidInputError):
        region.copy_from_host(b"x", offset=-1)
    with pytest.raises(InvalidInputError):
        region.copy_to_host(257)
    with pytest.raises(InvalidInputError):
        region.ndarray("FP64", 33)
    with pytest.raises(InvalidInputError):
        region.ndarray("BYTES", 1)
    with pytest.raises(InvalidInputError):
        region.copy_from_host([1, 2, 3])
    assert len(lib.calls) == calls  # nothing reached CUDA


class _DeviceArray:
    """An object exposing __cuda_array_interface__ over host memory (the fake's 'device')."""

    def __init__(self, array: np.ndarray, stream: int | None = None, strides: Any = None):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (array.ctypes.data, False),
            "strides": strides,
            "version": 3,
            "stream": stream,
        }


def test_copy_from_cuda_array_interface(lib: FakeCudart, region: CudaSharedMemoryRegion) -> None:
    source = _DeviceArray(np.arange(8, dtype=np.float32), stream=2)
    assert region.copy_from_host(source, offset=4) == 32
    assert ("cudaStreamSynchronize", 2) in lib.calls
    assert lib.calls[-2][-1] == 4  # cudaMemcpyDefault: device to device
    np.testing.assert_array_equal(region.ndarray("FP32", 8, offset=4), source.array)
    c_strides = _DeviceArray(np.ones((2, 3), np.int16), strides=(6, 2))
    assert region.copy_from_host(c_strides) == 12
    with pytest.raises(InvalidInputError, match="C-contiguous"):
        region.copy_from_host(_DeviceArray(np.ones((2, 3), np.int16), strides=(2, 4)))
    with pytest.raises(InvalidInputError, match="big-endian"):
        region.copy_from_host(_DeviceArray(np.ones(3, ">f4")))
    with pytest.raises(InvalidInputError, match="past the end"):
        region.copy_from_host(_DeviceArray(np.ones(300, np.uint8)))
    assert region.copy_from_host(_DeviceArray(np.ones(3, ">u1"))) == 3


def test_copy_from_cpu_dlpack(region: CudaSharedMemoryRegion) -> None:
    class CpuTensor:
        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.array.__dlpack_device__()

    array = np.arange(5, dtype=np.int64)
    assert region.copy_from_host(CpuTensor(array)) == 40
    np.testing.assert_array_equal(region.ndarray("INT64", 5), array)


def test_cuda_error_carries_code_and_name(lib: FakeCudart) -> None:
    lib.fail["cudaMalloc"] = 2
    with pytest.raises(CudaError) as info:
        CudaSharedMemoryRegion.create("r", 64)
    err = info.value
    assert err.function == "cudaMalloc"
    assert (err.code, err.error_name) == (2, "cudaErrorMemoryAllocation")
    assert str(err) == (
        "cudaMalloc failed with cudaErrorMemoryAllocation (2): fake error description"
    )
    assert lib.current == 0


def test_ipc_failure_frees_memory(lib: FakeCudart) -> None:
    lib.fail["cudaIpcGetMemHandle"] = 1
    with pytest.raises(CudaError, match="cudaIpcGetMemHandle"):
        CudaSharedMemoryRegion.create("r", 64)
    assert lib.allocations == {}


def test_invalid_device(lib: FakeCudart) -> None:
    with pytest.raises(CudaError, match="cudaErrorInvalidDevice"):
        CudaSharedMemoryRegion.create("r", 64, device_id=5)
    with pytest.raises(InvalidInputError):
        CudaSharedMemoryRegion.create("r", 64, device_id=-1)
    with pytest.raises(InvalidInputError):
        CudaSharedMemoryRegion.create("r", 0)
    with pytest.raises(InvalidInputError):
        CudaSharedMemoryRegion.create("", 8)


def test_close_frees_once(lib: FakeCudart) -> None:
    r = CudaSharedMemoryRegion.create("r", 64)
    ptr = r.device_ptr
    r.close()
    assert r.closed
    assert ptr not in lib.allocations
    r.close()
    assert [c for c in lib.calls if c[0] == "cudaFree"] == [("cudaFree", ptr)]
    with pytest.raises(InvalidInputError, match="closed"):
        r.copy_to_host(1)
    with pytest.raises(InvalidInputError, match="closed"):
        r.copy_from_host(b"x")
    with pytest.raises(InvalidInputError, match="closed"):
        _ = r.device_ptr
    assert "closed" in repr(r)


def test_close_raises_cuda_errors(lib: FakeCudart) -> None:
    r = CudaSharedMemoryRegion.create("r", 64)
    lib.fail["cudaFree"] = 1
    with pytest.raises(CudaError, match="cudaFree"):
        r.close()
    assert r.closed


def test_gc_frees(lib: FakeCudart) -> None:
    r = CudaSharedMemoryRegion.create("r", 64)
    ptr = r.device_ptr
    del r
    gc.collect()
    assert ptr not in lib.allocations


def test_gc_swallows_cuda_errors(lib: FakeCudart) -> None:
    # pytest turns unraisable exceptions into errors: a failing cudaFree in a finalizer
    # (e.g. the runtime unloading at exit) must stay silent.
    r = CudaSharedMemoryRegion.create("r", 64)
    lib.fail["cudaFree"] = 4
    del r
    gc.collect()


def test_not_picklable(region: CudaSharedMemoryRegion) -> None:
    with pytest.raises(TypeError, match="raw_handle"):
        pickle.dumps(region)


def test_forked_child_does_not_free(lib: FakeCudart) -> None:
    r = CudaSharedMemoryRegion.create("r", 64)
    r._allocation.pid = os.getpid() + 1  # as if inherited by a forked child
    ptr = r.device_ptr
    r.close()
    assert ptr in lib.allocations


# -- real GPU ----------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not is_cuda_available(), reason="needs a CUDA GPU")


@pytest.mark.cuda
@needs_gpu
def test_gpu_round_trip() -> None:
    with CudaSharedMemoryRegion.create("gpu", 1 << 20, device_id=0) as r:
        assert len(r.raw_handle) == 64
        assert r.raw_handle != bytes(64)
        array = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
        n = r.copy_from_host(array, offset=4096)
        assert n == array.nbytes
        np.testing.assert_array_equal(r.ndarray("FP32", (64, 64), offset=4096), array)
        assert r.copy_to_host(16, 4096) == array.tobytes()[:16]
        words = np.array([b"gpu", b"bytes"], dtype=object)
        m = r.copy_from_host(words)
        assert r.read_bytes_array(2, byte_size=m).tolist() == [b"gpu", b"bytes"]
        assert json.loads(json.dumps(r.register_body()))["byte_size"] == 1 << 20


@pytest.mark.cuda
@needs_gpu
def test_gpu_many_regions_freed() -> None:
    # Allocate and free more than fits at once: leaks would run out of memory or handles.
    for i in range(64):
        with CudaSharedMemoryRegion.create(f"r{i}", 64 << 20) as r:
            r.copy_from_host(b"x" * 16)


@pytest.mark.cuda
@needs_gpu
def test_gpu_copy_from_cupy() -> None:
    cupy = pytest.importorskip("cupy")
    source = cupy.arange(32, dtype=cupy.int32)
    with CudaSharedMemoryRegion.create("gpu", 1024) as r:
        assert r.copy_from_host(source, offset=64) == 128
        np.testing.assert_array_equal(r.ndarray("INT32", 32, offset=64), np.arange(32))


@pytest.mark.cuda
@needs_gpu
def test_gpu_copy_from_torch() -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(16, dtype=torch.float32, device="cuda")
    with CudaSharedMemoryRegion.create("gpu", 1024) as r:
        assert r.copy_from_host(source) == 64
        np.testing.assert_array_equal(r.ndarray("FP32", 16), np.arange(16, dtype=np.float32))
