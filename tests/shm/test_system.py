"""Tests of kserve_v2.shm.system: POSIX shared-memory regions."""

from __future__ import annotations

import errno
import gc
import json
import os
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kserve_v2.datatypes import Datatype
from kserve_v2.errors import InvalidInputError, KServeError, MissingDependencyError, ProtocolError
from kserve_v2.shm import (
    SharedMemoryError,
    SharedMemoryRegion,
    SystemSharedMemoryRegion,
    system_register_body,
)
from kserve_v2.tensors import InferInput, SharedMemoryPlacement


def _exists(key: str) -> bool:
    # Linux exposes POSIX shared memory objects as files in /dev/shm.
    return os.path.exists("/dev/shm" + key)


@pytest.fixture
def region() -> Iterator[SystemSharedMemoryRegion]:
    with SystemSharedMemoryRegion.create("test_region", 256) as r:
        yield r


@pytest.fixture
def key() -> Iterator[str]:
    """A fresh key that the test may create; removed afterwards whatever happens."""
    k = f"/kserve_v2_test_{os.getpid()}_{os.urandom(4).hex()}"
    yield k
    if _exists(k):
        os.unlink("/dev/shm" + k)


# -- create / attach ---------------------------------------------------------------------------


def test_create_defaults(region: SystemSharedMemoryRegion) -> None:
    assert region.name == "test_region"
    assert region.key.startswith("/kserve_v2_")
    assert region.byte_size == 256
    assert region.owner is True
    assert region.closed is False
    assert region.kind == "system"
    assert _exists(region.key)
    assert os.stat("/dev/shm" + region.key).st_size == 256
    # fresh objects are zero-filled
    assert region.read_bytes() == bytes(256)
    assert isinstance(region, SharedMemoryRegion)


def test_create_random_keys_differ() -> None:
    with SystemSharedMemoryRegion.create("a", 8) as a, SystemSharedMemoryRegion.create("b", 8) as b:
        assert a.key != b.key


def test_create_with_key_and_mode(key: str) -> None:
    with SystemSharedMemoryRegion.create("r", 64, key, mode=0o640) as r:
        assert r.key == key
        assert os.stat("/dev/shm" + key).st_mode & 0o777 == 0o640
    assert not _exists(key)


def test_create_existing_key_is_invalid(region: SystemSharedMemoryRegion) -> None:
    with pytest.raises(InvalidInputError, match="already exists"):
        SystemSharedMemoryRegion.create("other", 16, region.key)
    # the failed create must not have removed the existing object
    assert _exists(region.key)


def test_attach_shares_memory(region: SystemSharedMemoryRegion) -> None:
    with SystemSharedMemoryRegion.attach("peer", region.key, 128) as peer:
        assert peer.owner is False
        assert peer.byte_size == 128
        region.write(b"hello")
        assert peer.read_bytes(0, 5) == b"hello"
        peer.write(b"world", offset=10)
        assert region.read_bytes(10, 5) == b"world"
    # closing the attached one leaves the object alone
    assert _exists(region.key)
    assert region.read_bytes(10, 5) == b"world"


def test_attach_default_size_is_object_size(region: SystemSharedMemoryRegion) -> None:
    with SystemSharedMemoryRegion.attach("peer", region.key) as peer:
        assert peer.byte_size == 256


def test_attach_errors(region: SystemSharedMemoryRegion, key: str) -> None:
    with pytest.raises(InvalidInputError, match="no shared memory object"):
        SystemSharedMemoryRegion.attach("x", key, 16)
    with pytest.raises(InvalidInputError, match="larger than"):
        SystemSharedMemoryRegion.attach("x", region.key, 257)
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
    with pytest.raises(InvalidInputError, match="empty"):
        SystemSharedMemoryRegion.attach("x", key)


def test_full_dev_shm_is_a_clean_error(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    def no_space(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(SharedMemoryError, match="No space left") as info:
        SystemSharedMemoryRegion.create("r", 1 << 20, key)
    assert isinstance(info.value.__cause__, OSError)
    assert not _exists(key)  # the half-made object is removed
    # without preallocation the object is created lazily (and may SIGBUS later)
    with SystemSharedMemoryRegion.create("r", 1 << 20, key, preallocate=False) as r:
        assert r.byte_size == 1 << 20


def test_fallocate_unsupported_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(fd: int, offset: int, size: int) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    with SystemSharedMemoryRegion.create("r", 64) as r:
        r.write(b"fine")


def test_context_manager_closes_on_error() -> None:
    with pytest.raises(RuntimeError), SystemSharedMemoryRegion.create("r", 16) as r:
        raise RuntimeError("boom")
    assert r.closed
    assert not _exists(r.key)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_key",
    ["noslash", "/", "/a/b", "/" + "x" * 255, "/a\x00b", "", 5, None, b"/bytes"],
)
def test_bad_keys(bad_key: object) -> None:
    if bad_key is not None:
        with pytest.raises(InvalidInputError):
            SystemSharedMemoryRegion.create("r", 16, bad_key)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        SystemSharedMemoryRegion.attach("r", bad_key, 16)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        system_register_body(bad_key, 0, 16)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_name", ["", "a\x00b", 3, None])
def test_bad_names(bad_name: object) -> None:
    with pytest.raises(InvalidInputError):
        SystemSharedMemoryRegion.create(bad_name, 16)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_size", [0, -1, True, 1.5, "16", None])
def test_bad_sizes(bad_size: object) -> None:
    with pytest.raises(InvalidInputError):
        SystemSharedMemoryRegion.create("r", bad_size)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        system_register_body("/k", 0, bad_size)  # type: ignore[arg-type]


def test_numpy_integer_sizes_accepted() -> None:
    with SystemSharedMemoryRegion.create("r", np.int64(32)) as r:
        assert r.byte_size == 32
        assert type(r.byte_size) is int


@pytest.mark.parametrize(
    ("offset", "size"),
    [(-1, 1), (0, 257), (256, 1), (250, 7), (257, 0), (0, -1)],
)
def test_out_of_range_reads(region: SystemSharedMemoryRegion, offset: int, size: int) -> None:
    with pytest.raises(InvalidInputError):
        region.read_bytes(offset, size)


def test_in_range_edges(region: SystemSharedMemoryRegion) -> None:
    assert region.read_bytes(256, 0) == b""
    assert region.read_bytes(255) == b"\x00"
    assert region.write(b"", offset=256) == 0
    assert region.ndarray("FP32", 0, offset=256).shape == (0,)


def test_out_of_range_writes_do_not_write(region: SystemSharedMemoryRegion) -> None:
    with pytest.raises(InvalidInputError, match="past the end"):
        region.write(np.ones(65, np.float32))
    with pytest.raises(InvalidInputError, match="past the end"):
        region.write(b"x" * 10, offset=250)
    with pytest.raises(InvalidInputError):
        region.write(b"x", offset=-1)
    with pytest.raises(InvalidInputError, match="past the end"):
        region.write(np.array([b"a" * 200, b"b" * 60], dtype=object))
    assert region.read_bytes() == bytes(256)


# -- write / read ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype",
    [
        "bool",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    ],
)
def test_write_numeric_is_little_endian_c_order(
    region: SystemSharedMemoryRegion, dtype: str
) -> None:
    array = (np.arange(12) % 7).astype(dtype).reshape(3, 4)
    n = region.write(array, offset=8)
    assert n == array.nbytes
    assert region.read_bytes(8, n) == array.astype(np.dtype(dtype).newbyteorder("<")).tobytes()


def test_write_non_contiguous_and_big_endian(region: SystemSharedMemoryRegion) -> None:
    base = np.arange(24, dtype=">i4").reshape(4, 6)
    view = base[::2, 1::2].T  # strided, transposed, big-endian
    n = region.write(view)
    assert n == view.size * 4
    expected = np.ascontiguousarray(view).astype("<i4").tobytes()
    assert region.read_bytes(0, n) == expected
    np.testing.assert_array_equal(region.ndarray("INT32", view.shape), view)


def test_write_fortran_order(region: SystemSharedMemoryRegion) -> None:
    array = np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))
    region.write(array)
    assert region.read_bytes(0, 48) == np.ascontiguousarray(array).tobytes()


def test_write_scalar_and_buffers(region: SystemSharedMemoryRegion) -> None:
    assert region.write(np.float32(1.0)) == 4
    assert region.read_bytes(0, 4) == b"\x00\x00\x80?"
    assert region.write(bytearray(b"abc"), 4) == 3
    assert region.write(memoryview(b"defg")[1:3], 7) == 2
    assert region.write(np.arange(2, dtype="<u2").data, 9) == 4
    assert region.read_bytes(4, 9) == b"abcef\x00\x00\x01\x00"


def test_write_bytes_tensor(region: SystemSharedMemoryRegion) -> None:
    array = np.array([[b"ab", b""], [b"\x00\xff", b"c"]], dtype=object)
    n = region.write(array, offset=3)
    golden = b"\x02\x00\x00\x00ab\x00\x00\x00\x00\x02\x00\x00\x00\x00\xff\x01\x00\x00\x00c"
    assert n == len(golden)
    assert region.read_bytes(3, n) == golden
    back = region.read_bytes_array((2, 2), offset=3, byte_size=n)
    assert back.dtype == object
    assert back.tolist() == [[b"ab", b""], [b"\x00\xff", b"c"]]


def test_write_string_arrays_as_bytes(region: SystemSharedMemoryRegion) -> None:
    n = region.write(np.array(["hé", "x"]))
    assert region.read_bytes(0, n) == b"\x03\x00\x00\x00h\xc3\xa9\x01\x00\x00\x00x"
    n = region.write(np.array([b"ab", b"c"], dtype="S2"))
    assert region.read_bytes(0, n) == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"
    n = region.write(np.array(["mixed", b"types"], dtype=object))
    assert region.read_bytes_array(2, byte_size=n).tolist() == [b"mixed", b"types"]


@pytest.mark.parametrize(
    "bad",
    [
        np.array([1 + 2j]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.array([1, None], dtype=object),
        [1, 2, 3],
        "text",
        12,
    ],
)
def test_write_unsupported(region: SystemSharedMemoryRegion, bad: object) -> None:
    with pytest.raises(InvalidInputError):
        region.write(bad)  # type: ignore[arg-type]


def test_write_device_array_hint(region: SystemSharedMemoryRegion) -> None:
    class FakeDeviceArray:
        __cuda_array_interface__: dict[str, object] = {}  # noqa: RUF012

    with pytest.raises(InvalidInputError, match="device tensors"):
        region.write(FakeDeviceArray())  # type: ignore[arg-type]


def test_read_bytes_array_truncated(region: SystemSharedMemoryRegion) -> None:
    region.write(b"\x05\x00\x00\x00abc")
    with pytest.raises(ProtocolError, match="claims 5 bytes"):
        region.read_bytes_array(1, byte_size=7)
    region.write(b"\x05\x00\x00\x00abc", offset=249)
    with pytest.raises(ProtocolError, match="claims 5 bytes"):
        region.read_bytes_array(1, offset=249)  # unbounded: the region's end stops it
    region.write(b"\x01\x00\x00\x00a")
    with pytest.raises(ProtocolError):
        region.read_bytes_array(2, byte_size=5)
    region.write(b"\x01\x00\x00\x00a", offset=251)
    with pytest.raises(ProtocolError, match="ends after 1 of 2"):
        region.read_bytes_array(2, offset=251)


def test_read_bytes_array_exact_vs_unbounded(region: SystemSharedMemoryRegion) -> None:
    n = region.write(np.array([b"ab", b"c"], dtype=object))
    region.write(b"trailing", offset=n)
    # unbounded: reads two elements and ignores what follows
    assert region.read_bytes_array(2).tolist() == [b"ab", b"c"]
    # bounded: the tensor must fill byte_size exactly
    assert region.read_bytes_array(2, byte_size=n).tolist() == [b"ab", b"c"]
    with pytest.raises(ProtocolError, match="trailing"):
        region.read_bytes_array(2, byte_size=n + 1)


def test_write_bf16_from_float32(region: SystemSharedMemoryRegion) -> None:
    x = np.array([1.0, -2.5, 1.00390625], dtype=np.float32)
    n = region.write(x, datatype="BF16")
    assert n == 6
    # bfloat16 is the upper half of float32, rounded to nearest even (0x3F808000 -> 0x3F80)
    assert region.read_bytes(0, 6) == b"\x80\x3f\x20\xc0\x80\x3f"
    with pytest.raises(InvalidInputError, match="does not match"):
        region.write(np.ones(2, np.int32), datatype="FP32")
    with pytest.raises(InvalidInputError):
        region.write(b"raw", datatype="BYTES")
    assert region.write(np.ones(2, np.int32), datatype=Datatype.INT32) == 8


def test_write_bf16_from_float16(region: SystemSharedMemoryRegion) -> None:
    # Rounded like any float: 1 + 2**-8 + 2**-10 is past the tie, it rounds up to 1 + 2**-7.
    x = np.array([1.0, -2.5, 1 + 2**-8 + 2**-10], dtype=np.float16)
    assert region.write(x, datatype="BF16") == 6
    assert region.read_bytes(0, 6) == b"\x80\x3f\x20\xc0\x81\x3f"


def test_bf16_view(region: SystemSharedMemoryRegion) -> None:
    try:
        import ml_dtypes
    except ImportError:
        with pytest.raises(MissingDependencyError, match="ml_dtypes"):
            region.ndarray("BF16", 2)
        return
    region.write(np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16))
    assert region.ndarray("BF16", 2).tolist() == [1.0, 2.0]


# -- ndarray views -----------------------------------------------------------------------------


def test_ndarray_is_a_zero_copy_view(region: SystemSharedMemoryRegion) -> None:
    view = region.ndarray(np.float32, (2, 3), offset=16)
    assert view.flags.writeable
    view[:] = [[1, 2, 3], [4, 5, 6]]
    assert region.read_bytes(16, 24) == np.arange(1, 7, dtype="<f4").tobytes()
    region.write(np.full(6, 9, np.float32), offset=16)
    assert view.tolist() == [[9.0] * 3] * 2


@pytest.mark.parametrize(
    ("wire", "numpy_dtype"),
    [
        ("BOOL", "?"),
        ("UINT8", "u1"),
        ("UINT16", "<u2"),
        ("UINT32", "<u4"),
        ("UINT64", "<u8"),
        ("INT8", "i1"),
        ("INT16", "<i2"),
        ("INT32", "<i4"),
        ("INT64", "<i8"),
        ("FP16", "<f2"),
        ("FP32", "<f4"),
        ("FP64", "<f8"),
        (Datatype.INT16, "<i2"),
        ("float32", "<f4"),
        (np.uint16, "<u2"),
    ],
)
def test_ndarray_wire_names(region: SystemSharedMemoryRegion, wire: str, numpy_dtype: str) -> None:
    assert region.ndarray(wire, (2,)).dtype == np.dtype(numpy_dtype)


def test_ndarray_is_little_endian_even_if_asked_big(region: SystemSharedMemoryRegion) -> None:
    region.write(np.array([1], "<i4"))
    view = region.ndarray(">i4", 1)
    assert view.dtype == np.dtype("<i4")
    assert view[0] == 1


def test_ndarray_shapes(region: SystemSharedMemoryRegion) -> None:
    assert region.ndarray("INT8", 5).shape == (5,)
    assert region.ndarray("INT8", ()).shape == ()
    assert region.ndarray("INT8", [2, 0, 3]).shape == (2, 0, 3)
    assert region.ndarray("INT8", (np.int64(4),)).shape == (4,)


@pytest.mark.parametrize(
    ("dtype", "shape", "offset"),
    [
        ("FP32", (65,), 0),
        ("FP32", (1,), 253),
        ("FP32", (-1,), 0),
        ("FP32", "4", 0),
        ("FP32", (1.5,), 0),
        ("BYTES", (1,), 0),
        (object, (1,), 0),
        ("COMPLEX", (1,), 0),
        ("fp32", (1,), 0),
        (np.complex64, (1,), 0),
        ("FP32", (1,), -4),
    ],
)
def test_ndarray_invalid(
    region: SystemSharedMemoryRegion, dtype: object, shape: object, offset: int
) -> None:
    with pytest.raises(InvalidInputError):
        region.ndarray(dtype, shape, offset)  # type: ignore[arg-type]


def test_buffer_is_writable_view(region: SystemSharedMemoryRegion) -> None:
    buf = region.buffer
    assert len(buf) == 256
    assert not buf.readonly
    buf[0:2] = b"hi"
    assert region.read_bytes(0, 2) == b"hi"
    buf.release()


# -- protocol helpers --------------------------------------------------------------------------


def test_register_body_golden(key: str) -> None:
    with SystemSharedMemoryRegion.create("in0", 1024, key) as r:
        body = r.register_body()
    assert json.dumps(body) == f'{{"key": "{key}", "offset": 0, "byte_size": 1024}}'


def test_system_register_body_golden() -> None:
    body = system_register_body("/kserve_v2_in", 16, 4096)
    assert json.dumps(body) == '{"key": "/kserve_v2_in", "offset": 16, "byte_size": 4096}'
    assert type(system_register_body("/k", np.uint64(1), np.int32(2))["offset"]) is int
    with pytest.raises(InvalidInputError):
        system_register_body("/k", -1, 16)


def test_tensor_parameters(region: SystemSharedMemoryRegion) -> None:
    assert region.tensor_parameters() == {
        "shared_memory_region": "test_region",
        "shared_memory_byte_size": 256,
    }
    assert json.dumps(region.tensor_parameters(64, offset=128)) == (
        '{"shared_memory_region": "test_region", "shared_memory_byte_size": 64, '
        '"shared_memory_offset": 128}'
    )
    assert region.tensor_parameters(offset=200)["shared_memory_byte_size"] == 56
    with pytest.raises(InvalidInputError):
        region.tensor_parameters(64, offset=193)
    with pytest.raises(InvalidInputError):
        region.tensor_parameters(0)


def test_placement(region: SystemSharedMemoryRegion) -> None:
    assert region.placement() == SharedMemoryPlacement("test_region", 256, 0)
    assert region.placement(16, offset=8) == SharedMemoryPlacement("test_region", 16, 8)
    assert region.placement(offset=250).byte_size == 6
    with pytest.raises(InvalidInputError):
        region.placement(16, offset=241)
    with pytest.raises(InvalidInputError):
        region.placement(offset=-1)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    n = region.write(x)
    inp = InferInput("x", datatype="FP32", shape=x.shape, shared_memory=region.placement(n))
    assert inp.shared_memory == SharedMemoryPlacement("test_region", 24, 0)


# -- lifetime ----------------------------------------------------------------------------------


def test_close_owner_unlinks_and_is_idempotent() -> None:
    r = SystemSharedMemoryRegion.create("r", 32)
    r.close()
    assert r.closed
    assert not _exists(r.key)
    r.close()
    assert "closed" in repr(r)
    with pytest.raises(InvalidInputError, match="closed"):
        r.read_bytes()
    with pytest.raises(InvalidInputError, match="closed"):
        r.write(b"x")
    with pytest.raises(InvalidInputError, match="closed"):
        r.ndarray("INT8", 1)
    with pytest.raises(InvalidInputError, match="closed"):
        _ = r.buffer


def test_close_attached_does_not_unlink(region: SystemSharedMemoryRegion) -> None:
    peer = SystemSharedMemoryRegion.attach("peer", region.key)
    peer.close()
    assert peer.closed
    assert _exists(region.key)


def test_close_with_live_views_defers_unmap() -> None:
    r = SystemSharedMemoryRegion.create("r", 64)
    view = r.ndarray("INT32", 4)
    buf = r.buffer
    sub = buf[8:16]
    r.write(np.arange(4, dtype=np.int32))
    r.close()  # must not raise BufferError
    assert r.closed
    assert not _exists(r.key)  # the key goes at once
    # the mapping outlives the region while views exist: still readable and writable
    assert view.tolist() == [0, 1, 2, 3]
    view[0] = 42
    assert bytes(buf[0:4]) == b"\x2a\x00\x00\x00"
    assert bytes(sub) == bytes(buf[8:16])
    del view, buf, sub
    gc.collect()


def test_unlink(key: str) -> None:
    owner = SystemSharedMemoryRegion.create("r", 16, key)
    peer = SystemSharedMemoryRegion.attach("p", key)
    peer.unlink()  # explicit unlink works for non-owners too
    assert not _exists(key)
    peer.write(b"still mapped")
    assert owner.read_bytes(0, 12) == b"still mapped"
    # a new object under the same key must not be removed by the old regions
    newcomer = SystemSharedMemoryRegion.create("n", 16, key)
    peer.unlink()
    owner.unlink()
    owner.close()
    peer.close()
    assert _exists(key)
    newcomer.close()
    assert not _exists(key)


def test_owner_unlink_then_close() -> None:
    r = SystemSharedMemoryRegion.create("r", 16)
    r.unlink()
    assert not _exists(r.key)
    assert not r.closed
    r.write(b"ok")
    r.close()


def test_gc_finalizes_owned_region() -> None:
    r = SystemSharedMemoryRegion.create("r", 16)
    key = r.key
    del r
    gc.collect()
    assert not _exists(key)


def test_gc_never_unlinks_attached_region(region: SystemSharedMemoryRegion) -> None:
    peer = SystemSharedMemoryRegion.attach("peer", region.key)
    del peer
    gc.collect()
    assert _exists(region.key)


def test_gc_with_live_view_keeps_memory_valid() -> None:
    r = SystemSharedMemoryRegion.create("r", 16)
    key = r.key
    view = r.ndarray("UINT8", 16)
    del r
    gc.collect()
    assert not _exists(key)
    view[:] = 7  # still mapped: no crash
    assert int(view.sum()) == 7 * 16


def test_pickle_gives_attached_copy(region: SystemSharedMemoryRegion) -> None:
    region.write(b"pickled")
    copy = pickle.loads(pickle.dumps(region))
    try:
        assert isinstance(copy, SystemSharedMemoryRegion)
        assert copy.owner is False
        assert (copy.name, copy.key, copy.byte_size) == (region.name, region.key, 256)
        assert copy.read_bytes(0, 7) == b"pickled"
    finally:
        copy.close()
    assert _exists(region.key)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_does_not_unlink(region: SystemSharedMemoryRegion) -> None:
    owned = SystemSharedMemoryRegion.create("owned", 16)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                owned.close()
                del owned
                gc.collect()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert _exists(owned.key)
    finally:
        owned.close()
    assert not _exists(owned.key)


def test_repr(key: str) -> None:
    with SystemSharedMemoryRegion.create("in0", 8, key) as r:
        assert repr(r) == (
            f"SystemSharedMemoryRegion(name='in0', key='{key}', byte_size=8, owner=True, open)"
        )


def test_errors_are_kserve_errors() -> None:
    with pytest.raises(KServeError):
        SystemSharedMemoryRegion.create("r", 0)
    with pytest.raises(ValueError, match="positive"):  # InvalidInputError is a ValueError
        SystemSharedMemoryRegion.create("r", 0)


# -- across processes --------------------------------------------------------------------------


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_region_shared_with_another_process(region: SystemSharedMemoryRegion) -> None:
    data = np.arange(10, dtype=np.float64).reshape(2, 5)
    n = region.write(data, offset=8)
    result = _run_python(
        f"""
        import numpy as np
        from kserve_v2.shm import SystemSharedMemoryRegion
        with SystemSharedMemoryRegion.attach("peer", {region.key!r}) as peer:
            got = peer.ndarray("FP64", (2, 5), offset=8).copy()
            peer.write(got * 2, offset=8 + {n})
            peer.write(np.array([b"from", b"child"], dtype=object), offset=200)
        print(got.sum())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert float(result.stdout) == 45.0
    np.testing.assert_array_equal(region.ndarray("FP64", (2, 5), offset=8 + n), data * 2)
    assert region.read_bytes_array(2, offset=200).tolist() == [b"from", b"child"]
    assert _exists(region.key)  # the child attached: it must not have unlinked


def test_no_resource_tracker_warnings_and_no_leaks() -> None:
    result = _run_python(
        """
        import gc
        import numpy as np
        from kserve_v2.shm import SystemSharedMemoryRegion

        closed = SystemSharedMemoryRegion.create("closed", 64)
        closed.write(np.ones(4, np.float32))
        closed.close()
        collected = SystemSharedMemoryRegion.create("collected", 64)
        at_exit = SystemSharedMemoryRegion.create("at_exit", 64)
        with_view = SystemSharedMemoryRegion.create("with_view", 64)
        view = with_view.ndarray("FP32", 16)
        with_view.close()
        attached = SystemSharedMemoryRegion.attach("attached", at_exit.key)
        print(closed.key, collected.key, at_exit.key, with_view.key)
        del collected
        gc.collect()
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    keys = result.stdout.split()
    assert len(keys) == 4
    assert [k for k in keys if _exists(k)] == []


# -- property-based round trip -----------------------------------------------------------------

_DTYPES = st.sampled_from(
    ["?", "u1", "<u2", ">u2", "<u4", "<u8", "i1", "<i2", ">i4", "<i8", "<f2", "<f4", ">f8"]
)
_REGION_SIZE = 1 << 16  # room for the largest drawn array (8**4 float64)


@st.composite
def _arrays_and_offsets(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    dtype = np.dtype(draw(_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=8))
    array = draw(hnp.arrays(dtype, shape))
    if draw(st.booleans()) and array.ndim >= 2:
        array = array.T  # non-contiguous source
    offset = draw(st.integers(0, _REGION_SIZE - array.nbytes))
    return array, offset


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_arrays_and_offsets())
def test_round_trip(case: tuple[np.ndarray, int]) -> None:
    array, offset = case
    with SystemSharedMemoryRegion.create("rt", _REGION_SIZE) as r:
        assert r.write(array, offset) == array.nbytes
        back = r.ndarray(array.dtype, array.shape, offset)
        assert back.dtype == array.dtype.newbyteorder("<") or array.dtype.itemsize == 1
        np.testing.assert_array_equal(back, array)
        del back


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=20),
    st.integers(0, 64),
)
def test_bytes_round_trip(elements: list[bytes], offset: int) -> None:
    array = np.empty(len(elements), dtype=object)
    array[:] = elements
    with SystemSharedMemoryRegion.create("rt", 2048) as r:
        n = r.write(array, offset)
        assert n == sum(len(e) + 4 for e in elements)
        assert r.read_bytes_array(len(elements), offset, n).tolist() == elements
