"""System (POSIX) shared-memory regions for Triton's system shared memory extension.

A region is a POSIX shared-memory object (``shm_open``) mapped into this process. The server
is told the object's *key* at registration and maps the same object itself, so tensors placed
in the region never travel over the socket.

Example::

    import numpy as np
    from kserve_v2.shm import SystemSharedMemoryRegion

    x = np.arange(16, dtype=np.float32)
    with SystemSharedMemoryRegion.create("input0", 1024) as region:
        n = region.write(x)                  # one copy, into the mapping
        body = region.register_body()        # {"key": "/kserve_v2_...", "offset": 0, ...}
        inp = InferInput("x", datatype="FP32", shape=(16,), shared_memory=region.placement(n))
        out = RequestedOutput("y", shared_memory=region.placement(64, offset=512))
        # ... register, infer ...
        y = region.ndarray("FP32", (16,), offset=512)   # zero-copy view of the output

Lifetime rules:

* ``create`` makes the region's *owner*: ``close()``, garbage collection and interpreter exit
  unmap it and unlink the key. ``attach`` maps an existing object and never unlinks it
  (only an explicit ``unlink()`` does).
* Only the process that created a region unlinks it automatically: a forked child that
  inherits the object does not remove the key when it exits.
* ``close()`` never fails because numpy arrays or memoryviews from :meth:`ndarray` or
  :attr:`buffer` are still alive. The region is marked closed at once (and the key is
  unlinked, for an owner), while the mapping itself stays valid until the last such view
  is garbage collected, at which point it is unmapped. So a view can never point at
  unmapped memory, and a ``with`` block may hand results out as views.

Data in a region is laid out as the protocol sends it: little-endian, C order, and BYTES
elements each preceded by a 4-byte little-endian length.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import math
import mmap
import os
import secrets
import sys
import weakref
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import (
    Datatype,
    rounds_to_bf16,
)
from kserve_v2.errors import (
    InvalidInputError,
    KServeError,
)
from kserve_v2.parameters import ParameterValue
from kserve_v2.shm.common import (
    DTypeSpec,
    SharedMemoryError,
    WriteSource,
    as_int,
    check_datatype,
    check_key,
    check_name,
    check_offset,
    check_range,
    check_shape,
    check_size,
    check_span,
    host_bytes,
    placement,
    read_bytes_tensor,
    view_dtype,
)
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = ["SharedMemoryError", "SystemSharedMemoryRegion", "system_register_body"]


# ---------------------------------------------------------------------------------------------
# validation helpers (shared with kserve_v2.shm.cuda)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# host-side sources (shared with kserve_v2.shm.cuda)
# ---------------------------------------------------------------------------------------------


def system_register_body(key: str, offset: int, byte_size: int) -> dict[str, Any]:
    """The REST body of ``POST v2/systemsharedmemory/region/{name}/register``.

    The gRPC ``SystemSharedMemoryRegisterRequest`` carries the same three fields plus
    ``name``.

    Example::

        >>> system_register_body("/kserve_v2_in", 0, 1024)
        {'key': '/kserve_v2_in', 'offset': 0, 'byte_size': 1024}
    """
    return {
        "key": check_key(key),
        "offset": check_offset(offset),
        "byte_size": check_size(byte_size),
    }


# ---------------------------------------------------------------------------------------------
# OS layer
# ---------------------------------------------------------------------------------------------

_posixshmem: Any
try:
    # The C module behind multiprocessing.shared_memory, without its resource_tracker (which
    # would unlink regions behind the owner's back and warn about "leaks" at exit).
    _posixshmem = importlib.import_module("_posixshmem")
except ImportError:  # pragma: no cover - Windows and unusual builds
    _posixshmem = None

_DEV_SHM = "/dev/shm"


def _shm_open(key: str, flags: int, mode: int) -> int:
    if _posixshmem is not None:
        fd: int = _posixshmem.shm_open(key, flags, mode)
        return fd
    if os.path.isdir(_DEV_SHM):  # pragma: no cover - fallback for builds without _posixshmem
        return os.open(_DEV_SHM + key, flags | getattr(os, "O_NOFOLLOW", 0), mode)
    raise SharedMemoryError(  # pragma: no cover
        f"POSIX shared memory is not available on this platform ({sys.platform})"
    )


def _shm_unlink(key: str) -> None:
    if _posixshmem is not None:
        _posixshmem.shm_unlink(key)
    else:  # pragma: no cover
        os.unlink(_DEV_SHM + key)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


def _unlink_quietly(key: str, identity: tuple[int, int] | None = None) -> None:
    """Unlink ``key`` if it still names the object ``identity`` describes.

    Once someone else unlinked our object, the key may name a newer object of another
    process; that one must survive our cleanup.
    """
    if identity is not None:
        try:
            fd = _shm_open(key, os.O_RDONLY, 0)
        except FileNotFoundError:
            return  # already gone: nothing left to clean up
        except OSError:
            pass  # cannot check (e.g. a write-only mode): unlink as asked
        else:
            try:
                if _identity(fd) != identity:
                    return
            finally:
                os.close(fd)
    with contextlib.suppress(OSError):
        _shm_unlink(key)


def _os_error(action: str, key: str, exc: OSError) -> KServeError:
    if isinstance(exc, FileExistsError):
        return InvalidInputError(f"shared memory key {key!r} already exists", value=key)
    if isinstance(exc, FileNotFoundError):
        return InvalidInputError(f"no shared memory object with key {key!r}", value=key)
    return SharedMemoryError(f"cannot {action} shared memory {key!r}: {exc.strerror or exc}")


class _Mapping:
    """The OS resources of a region, kept apart so that the finalizer does not hold the region."""

    __slots__ = ("identity", "key", "mm", "pid", "unlink_on_close", "view")

    def __init__(
        self, mm: mmap.mmap, key: str, identity: tuple[int, int], unlink_on_close: bool
    ) -> None:
        self.mm: mmap.mmap | None = mm
        # Every view handed out is a slice of this one, so releasing it never fails; live
        # slices keep the mapping itself alive (see close()).
        self.view: memoryview | None = memoryview(mm)
        self.key = key
        self.identity = identity
        self.unlink_on_close = unlink_on_close
        # Only the creating process unlinks automatically (not a forked child at its exit).
        self.pid = os.getpid()

    def release(self) -> None:
        view, mm = self.view, self.mm
        self.view = None
        self.mm = None
        if view is not None:
            # Only slices of it are handed out, so this cannot fail; if it did, mm.close()
            # below would fail too and the unmap is deferred as usual.
            with contextlib.suppress(BufferError):
                view.release()
        if mm is not None:
            # BufferError: views from ndarray()/buffer are still alive. Dropping our reference
            # defers the munmap to the moment the last of them is collected (mmap's
            # dealloc), so no view ever points at unmapped memory.
            with contextlib.suppress(BufferError):
                mm.close()
        if self.unlink_on_close and os.getpid() == self.pid:
            self.unlink_on_close = False
            _unlink_quietly(self.key, self.identity)


# ---------------------------------------------------------------------------------------------
# the region
# ---------------------------------------------------------------------------------------------


class SystemSharedMemoryRegion:
    """A POSIX shared-memory region mapped into this process.

    Build one with :meth:`create` (new object, this process owns it) or :meth:`attach`
    (existing object). ``name`` is the region's name towards the server, ``key`` the OS
    name of the shared-memory object (``"/..."``), ``byte_size`` the mapped size.

    Example::

        with SystemSharedMemoryRegion.create("in0", 64) as region:
            region.write(np.ones(4, np.float32))
            region.read_bytes(0, 4)     # b'\\x00\\x00\\x80?'
    """

    kind: ClassVar[str] = "system"

    def __init__(
        self,
        name: str,
        key: str,
        byte_size: int,
        mm: mmap.mmap,
        identity: tuple[int, int],
        owner: bool,
    ) -> None:
        # Internal: use create() or attach().
        self._name = name
        self._key = key
        self._byte_size = byte_size
        self._owner = owner
        self._unlinked = False
        self._mapping = _Mapping(mm, key, identity, unlink_on_close=owner)
        self._finalizer = weakref.finalize(self, self._mapping.release)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        name: str,
        byte_size: int,
        key: str | None = None,
        *,
        mode: int = 0o600,
        preallocate: bool = True,
    ) -> SystemSharedMemoryRegion:
        """Create a new shared-memory object of ``byte_size`` bytes and map it.

        ``key`` defaults to a random ``"/kserve_v2_<hex>"``; an explicit key that already
        exists raises :class:`InvalidInputError` (use :meth:`attach` for existing objects).
        ``mode`` gives the object's permission bits: the server process must be able to
        open it read-write (e.g. ``0o666`` when it runs as another user).
        With ``preallocate`` the pages are reserved up front (``posix_fallocate``), so a
        full ``/dev/shm`` fails here with :class:`SharedMemoryError` instead of killing the
        process with SIGBUS on first write.

        The returned region owns the object: closing it (or losing the last reference to
        it) unmaps and unlinks it.

        Example::

            region = SystemSharedMemoryRegion.create("output0", 4096)
            region.key   # '/kserve_v2_3f2a...'
        """
        name = check_name(name)
        size = check_size(byte_size)
        mode = as_int(mode, "mode")
        if key is not None:
            return cls._create(name, check_key(key), size, mode, preallocate)
        for _ in range(16):
            try:
                return cls._create(
                    name, f"/kserve_v2_{secrets.token_hex(8)}", size, mode, preallocate
                )
            except InvalidInputError:  # the random key exists: try another
                continue
        raise SharedMemoryError("cannot find an unused shared memory key")  # pragma: no cover

    @classmethod
    def _create(
        cls, name: str, key: str, size: int, mode: int, preallocate: bool
    ) -> SystemSharedMemoryRegion:
        try:
            fd = _shm_open(key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode)
        except OSError as exc:
            raise _os_error("create", key, exc) from exc
        try:
            try:
                identity = _identity(fd)
                os.ftruncate(fd, size)
                if preallocate and hasattr(os, "posix_fallocate"):
                    _fallocate(fd, size)
                mm = mmap.mmap(
                    fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE
                )
            except OSError as exc:
                _unlink_quietly(key)
                raise _os_error("create", key, exc) from exc
            except BaseException:
                _unlink_quietly(key)
                raise
        finally:
            # mmap keeps its own duplicate of the descriptor.
            os.close(fd)
        return cls(name, key, size, mm, identity, owner=True)

    @classmethod
    def attach(cls, name: str, key: str, byte_size: int | None = None) -> SystemSharedMemoryRegion:
        """Map an existing shared-memory object (one this process did not create).

        ``byte_size`` defaults to the object's size and must not exceed it. The region does
        not own the object: ``close()`` and garbage collection only unmap it.

        Example::

            peer = SystemSharedMemoryRegion.attach("in0", "/kserve_v2_3f2a...", 64)
        """
        name = check_name(name)
        key = check_key(key)
        size = None if byte_size is None else check_size(byte_size)
        try:
            fd = _shm_open(key, os.O_RDWR, 0)
        except OSError as exc:
            raise _os_error("open", key, exc) from exc
        try:
            identity = _identity(fd)
            actual = os.fstat(fd).st_size
            if size is None:
                if actual == 0:
                    raise InvalidInputError(f"shared memory object {key!r} is empty", value=key)
                size = actual
            elif size > actual:
                raise InvalidInputError(
                    f"byte_size {size} is larger than shared memory object {key!r} "
                    f"({actual} bytes)",
                    value=byte_size,
                )
            try:
                mm = mmap.mmap(
                    fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE
                )
            except OSError as exc:
                raise _os_error("map", key, exc) from exc
        finally:
            os.close(fd)
        return cls(name, key, size, mm, identity, owner=False)

    # -- properties --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The region's name towards the server."""
        return self._name

    @property
    def key(self) -> str:
        """The OS key of the shared-memory object (what ``shm_open`` takes)."""
        return self._key

    @property
    def byte_size(self) -> int:
        """The mapped size in bytes."""
        return self._byte_size

    @property
    def owner(self) -> bool:
        """True when this object created the region and unlinks it on close."""
        return self._owner

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the region was finalized)."""
        return not self._finalizer.alive

    @property
    def buffer(self) -> memoryview:
        """A writable memoryview of the whole region (zero copy)."""
        return self._view()[:]

    def _view(self) -> memoryview:
        view = self._mapping.view
        if view is None or not self._finalizer.alive:
            raise InvalidInputError(f"shared memory region {self._name!r} is closed")
        return view

    # -- data --------------------------------------------------------------------------------

    def write(
        self, data: WriteSource, offset: int = 0, *, datatype: str | Datatype | None = None
    ) -> int:
        """Copy ``data`` into the region at ``offset``; return the number of bytes written.

        A numpy array is written in its wire form: C order and little-endian whatever its
        memory layout, in a single copy; arrays of object/str/bytes dtype are written as
        BYTES (each element preceded by its 4-byte little-endian length). ``datatype``
        optionally names the wire datatype, which must match the array's, except that
        float arrays (float16/32/64) may be written as ``"BF16"`` (rounded). Other bytes-like
        objects are copied verbatim.

        Example::

            n = region.write(np.array([b"ab", b"c"], dtype=object))   # n == 11
            InferInput("TEXT", datatype="BYTES", shape=(2,), shared_memory=region.placement(n))
        """
        view = self._view()
        if isinstance(data, np.generic):
            data = np.asarray(data)
        if isinstance(data, np.ndarray):
            wire = check_datatype(data, datatype)
            # Fixed-size, no conversion needed (float16 as BF16 is the same size, but rounded).
            if wire.itemsize == data.dtype.itemsize and not rounds_to_bf16(data.dtype, wire):
                dtype = data.dtype
                layout = dtype.newbyteorder("<") if dtype.kind in "iuf" else dtype
                off, n = check_range(offset, data.nbytes, self._byte_size, self._name)
                if n:
                    target = np.frombuffer(view[off : off + n], dtype=layout)
                    # One pass straight into the mapping: copyto handles strides and byte
                    # swapping at once, where serializing first would copy twice.
                    np.copyto(target.reshape(data.shape), data, casting="equiv")
                return n
        source = host_bytes(data, datatype)  # BYTES, BF16 from float, plain buffers
        off, n = check_range(offset, source.nbytes, self._byte_size, self._name)
        view[off : off + n] = source
        return n

    def ndarray(
        self, dtype: DTypeSpec, shape: int | Iterable[int], offset: int = 0
    ) -> npt.NDArray[Any]:
        """A writable numpy **view** of part of the region (zero copy).

        ``dtype`` is a wire datatype (``"FP32"``, ``"BOOL"``; ``"BF16"`` needs ``ml_dtypes``)
        or a numpy dtype; the view is always little-endian, as the protocol lays data out.
        Use it to read outputs the server wrote, or to build inputs in place. BYTES tensors
        have no fixed layout: use :meth:`read_bytes_array`.

        The view stays valid after :meth:`close` (see the module docstring), but it is then
        no longer the server's memory for an owned region, whose key was unlinked.

        Example::

            out = region.ndarray("FP32", (2, 8), offset=64)
            inp = region.ndarray(np.int64, 4)
            inp[:] = [1, 2, 3, 4]
        """
        view = self._view()
        layout = view_dtype(dtype)
        dims = check_shape(shape)
        off, n = check_range(offset, math.prod(dims) * layout.itemsize, self._byte_size, self._name)
        return np.frombuffer(view[off : off + n], dtype=layout).reshape(dims)

    def read_bytes(self, offset: int = 0, size: int | None = None) -> bytes:
        """A copy of ``size`` bytes at ``offset`` (``size`` defaults to the rest of the region).

        Example::

            header = region.read_bytes(0, 16)
        """
        view = self._view()
        off, n = check_span(offset, size, self._byte_size, self._name)
        return bytes(view[off : off + n])

    def read_bytes_array(
        self, shape: int | Iterable[int], offset: int = 0, byte_size: int | None = None
    ) -> npt.NDArray[Any]:
        """Decode a BYTES tensor of ``shape`` at ``offset`` into an object array of bytes.

        With ``byte_size`` the tensor must fill exactly that many bytes; without it, the
        elements are read from ``offset`` on and may end anywhere before the region's end.
        Malformed data raises :class:`~kserve_v2.errors.ProtocolError`.

        Example::

            words = region.read_bytes_array((2,), offset=0)   # array([b'ab', b'c'], ...)
        """
        view = self._view()
        dims = check_shape(shape)
        off, n = check_span(offset, byte_size, self._byte_size, self._name)
        return read_bytes_tensor(
            view[off : off + n], dims, byte_size is not None, f"region {self._name!r}"
        )

    # -- protocol helpers --------------------------------------------------------------------

    def register_body(self) -> dict[str, Any]:
        """The REST register body for this whole region (offset 0).

        Example::

            region.register_body()   # {'key': '/kserve_v2_...', 'offset': 0, 'byte_size': 64}
        """
        return system_register_body(self._key, 0, self._byte_size)

    def placement(self, byte_size: int | None = None, offset: int = 0) -> SharedMemoryPlacement:
        """Where a tensor at ``[offset, offset + byte_size)`` of this region lives.

        Pass it as ``shared_memory=`` of an input or requested output. ``byte_size``
        defaults to the rest of the region after ``offset``; the range must fit.

        Example::

            n = region.write(x)
            InferInput("x", datatype="FP32", shape=x.shape, shared_memory=region.placement(n))
            RequestedOutput("y", shared_memory=region.placement(offset=n))
        """
        return placement(self._name, self._byte_size, byte_size, offset)

    def tensor_parameters(
        self, byte_size: int | None = None, offset: int = 0
    ) -> dict[str, ParameterValue]:
        """The ``shared_memory_*`` parameters of :meth:`placement`.

        Example::

            region.tensor_parameters(64, offset=128)
            # {'shared_memory_region': 'in0', 'shared_memory_byte_size': 64,
            #  'shared_memory_offset': 128}
        """
        return self.placement(byte_size, offset).as_parameters()

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap the region and, for an owner, unlink its key. Idempotent.

        Never raises because views are alive: the unmap is then deferred until the last
        view is garbage collected (the key is still unlinked at once).
        """
        self._finalizer()

    def unlink(self) -> None:
        """Remove the key now, whoever created it; the mapping stays usable until close().

        Idempotent for this region; a key that is already gone is not an error.
        """
        if self._unlinked or (self._owner and not self._mapping.unlink_on_close):
            return  # already unlinked, here or by close()
        self._unlinked = True
        self._mapping.unlink_on_close = False
        _unlink_quietly(self._key, self._mapping.identity)

    def __enter__(self) -> SystemSharedMemoryRegion:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[str, str, int]]:
        # A pickled region (e.g. sent to a multiprocessing worker) arrives attached, not owned.
        return (SystemSharedMemoryRegion.attach, (self._name, self._key, self._byte_size))

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"SystemSharedMemoryRegion(name={self._name!r}, key={self._key!r}, "
            f"byte_size={self._byte_size}, owner={self._owner}, {state})"
        )


def _fallocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        # Filesystems without fallocate support: fall back to lazy allocation.
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return
        raise
