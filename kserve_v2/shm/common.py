"""What both kinds of shared-memory region share: argument checks, BYTES layout, placements,
and the error the operating system or CUDA runtime raises (:class:`SharedMemoryError`)."""

from __future__ import annotations

import contextlib
import math
import operator
import struct
from collections.abc import Iterable
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import (
    Datatype,
    datatype_of,
    deserialize,
    numpy_dtype,
    rounds_to_bf16,
    serialize,
)
from kserve_v2.errors import (
    InvalidInputError,
    KServeError,
    MissingDependencyError,
    ProtocolError,
)
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = [
    "BYTES_LENGTH",
    "DTypeSpec",
    "MAX_KEY_BYTES",
    "SharedMemoryError",
    "WriteSource",
    "as_int",
    "check_datatype",
    "check_key",
    "check_name",
    "check_offset",
    "check_range",
    "check_span",
    "check_shape",
    "check_size",
    "deserialize_bytes_prefix",
    "host_bytes",
    "placement",
    "plain_buffer",
    "read_bytes_tensor",
    "resolve_datatype",
    "view_dtype",
]

#: What :meth:`SystemSharedMemoryRegion.write` accepts: a numpy array (any wire datatype,
#: object/str/bytes arrays become BYTES) or any bytes-like object, copied verbatim.
WriteSource = Union["npt.NDArray[Any]", bytes, bytearray, memoryview]


#: A datatype as accepted by ``ndarray()``: a wire datatype (``"FP32"``, ``Datatype.INT64``,
#: ``"BF16"``, ...) or anything ``numpy.dtype()`` accepts.
DTypeSpec = Union[str, Datatype, "npt.DTypeLike"]


# POSIX allows names of up to NAME_MAX (255) bytes, including the leading slash.
MAX_KEY_BYTES = 255


BYTES_LENGTH = struct.Struct("<I")


class SharedMemoryError(KServeError):
    """The operating system or the CUDA runtime refused a shared-memory operation.

    Raised for failures the caller could not have prevented by passing other arguments:
    permission denied, no space left in ``/dev/shm``, ``mmap`` failure, CUDA errors.
    The OS error, when there is one, is in ``__cause__``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def as_int(value: object, what: str) -> int:
    # bool is an int subclass, but True as a size or offset is always a bug.
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be an integer, not bool", value=value)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidInputError(
            f"{what} must be an integer, not {type(value).__name__}", value=value
        ) from None


def check_size(value: object, what: str = "byte_size") -> int:
    size = as_int(value, what)
    if size <= 0:
        raise InvalidInputError(f"{what} must be positive, got {size}", value=value)
    return size


def check_offset(value: object, what: str = "offset") -> int:
    offset = as_int(value, what)
    if offset < 0:
        raise InvalidInputError(f"{what} must not be negative, got {offset}", value=value)
    return offset


def check_range(offset: object, size: object, limit: int, region: str) -> tuple[int, int]:
    """Validate ``[offset, offset + size)`` against a region of ``limit`` bytes."""
    off = check_offset(offset)
    n = as_int(size, "size")
    if n < 0:
        raise InvalidInputError(f"size must not be negative, got {n}", value=size)
    if off + n > limit:
        raise InvalidInputError(
            f"range [{off}, {off + n}) is past the end of region {region!r} ({limit} bytes)",
            value=(off, n),
        )
    return off, n


def check_span(offset: object, size: int | None, limit: int, region: str) -> tuple[int, int]:
    """:func:`check_range` for ``size`` bytes at ``offset``, ``size`` defaulting to the rest
    of the region after ``offset``."""
    off = check_offset(offset)
    n = limit - off if size is None else size
    return check_range(off, n, limit, region)


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidInputError(f"region name must be a str, not {type(name).__name__}", value=name)
    if not name:
        raise InvalidInputError("region name must not be empty", value=name)
    if "\x00" in name:
        raise InvalidInputError("region name must not contain NUL", value=name)
    return name


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInputError(
            f"shared memory key must be a str, not {type(key).__name__}", value=key
        )
    # shm_open portably wants "/name" with no other slash; Triton passes the key to
    # shm_open unchanged, so a key that works here works there.
    if not key.startswith("/"):
        raise InvalidInputError(f"shared memory key must start with '/', got {key!r}", value=key)
    if len(key) < 2 or "/" in key[1:]:
        raise InvalidInputError(
            f"shared memory key must be '/' followed by a name without '/', got {key!r}",
            value=key,
        )
    if "\x00" in key:
        raise InvalidInputError("shared memory key must not contain NUL", value=key)
    if len(key.encode("utf-8", "surrogateescape")) > MAX_KEY_BYTES:
        raise InvalidInputError(
            f"shared memory key is longer than {MAX_KEY_BYTES} bytes", value=key
        )
    return key


def check_shape(shape: object) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, Iterable) or isinstance(shape, (str, bytes)):
        raise InvalidInputError("shape must be a sequence of integers", value=shape)
    dims = tuple(as_int(d, "shape dimension") for d in shape)
    if any(d < 0 for d in dims):
        raise InvalidInputError(f"shape dimensions must not be negative: {dims}", value=shape)
    return dims


def resolve_datatype(dtype: DTypeSpec) -> tuple[Datatype, np.dtype[Any] | None]:
    """The wire datatype for ``dtype`` and, when given as a numpy dtype, that dtype."""
    if isinstance(dtype, str):
        with contextlib.suppress(InvalidInputError):
            return Datatype.parse(dtype), None
    try:
        np_dtype = np.dtype(dtype)
    except TypeError as exc:
        raise InvalidInputError(f"unknown datatype {dtype!r}", value=dtype) from exc
    return datatype_of(np_dtype), np_dtype


def view_dtype(dtype: DTypeSpec) -> np.dtype[Any]:
    """The little-endian numpy dtype that views ``dtype``'s wire layout in place."""
    datatype, given = resolve_datatype(dtype)
    if datatype is Datatype.BYTES:
        raise InvalidInputError(
            "BYTES tensors have no fixed layout to view; use read_bytes_array()", value=dtype
        )
    if datatype is Datatype.BF16:
        if given is not None:
            return given  # ml_dtypes.bfloat16 itself
        bf16 = numpy_dtype(Datatype.BF16)
        if bf16.name != "bfloat16":  # datatypes falls back to float32 without ml_dtypes
            raise MissingDependencyError("BF16 views of shared memory", "bf16", "ml_dtypes")
        return bf16
    return numpy_dtype(datatype)


def check_datatype(array: npt.NDArray[Any], datatype: str | Datatype | None) -> Datatype:
    """The datatype ``array`` is written as; an explicit one must match (or be BF16 from float)."""
    found = datatype_of(array)
    if datatype is None:
        return found
    wanted = Datatype.parse(datatype)
    if found is wanted or rounds_to_bf16(array.dtype, wanted):
        return wanted
    raise InvalidInputError(
        f"array of dtype {array.dtype} does not match datatype {wanted.value}", value=array.dtype
    )


def deserialize_bytes_prefix(
    data: memoryview, shape: tuple[int, ...], where: str
) -> npt.NDArray[np.object_]:
    """Decode the first ``prod(shape)`` BYTES elements of ``data``, ignoring what follows.

    Unlike :func:`kserve_v2.datatypes.deserialize` the end of the tensor is not known here
    (a region holds more than one tensor), so trailing bytes are not an error.
    """
    count = math.prod(shape)
    out = np.empty(count, dtype=object)
    pos = 0
    end = len(data)
    for i in range(count):
        if pos + BYTES_LENGTH.size > end:
            raise ProtocolError(f"BYTES tensor in {where} ends after {i} of {count} elements")
        (length,) = BYTES_LENGTH.unpack_from(data, pos)
        pos += BYTES_LENGTH.size
        if pos + length > end:
            raise ProtocolError(
                f"BYTES element {i} in {where} claims {length} bytes, only {end - pos} remain"
            )
        out[i] = bytes(data[pos : pos + length])
        pos += length
    return out.reshape(shape)


def read_bytes_tensor(
    data: memoryview, shape: tuple[int, ...], exact: bool, where: str
) -> npt.NDArray[Any]:
    if exact:
        return deserialize(data, Datatype.BYTES, shape)
    return deserialize_bytes_prefix(data, shape, where)


def host_bytes(data: object, datatype: str | Datatype | None = None) -> memoryview:
    """The wire bytes of ``data`` as a flat unsigned-byte view (copying only if needed)."""
    if isinstance(data, np.generic):
        data = np.asarray(data)
    if isinstance(data, np.ndarray):
        wire = serialize(data, check_datatype(data, datatype))
        view = memoryview(wire)
        return view if view.format == "B" and view.ndim == 1 else view.cast("B")
    if datatype is not None:
        raise InvalidInputError("datatype applies to numpy arrays only", value=datatype)
    return plain_buffer(data)


def plain_buffer(data: object) -> memoryview:
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        hint = ""
        if hasattr(data, "__cuda_array_interface__") or hasattr(data, "__dlpack__"):
            hint = " (copy device tensors to the host first, or use a CUDA region)"
        raise InvalidInputError(
            f"cannot write {type(data).__name__}: expected a numpy array or a bytes-like "
            f"object{hint}",
            value=type(data).__name__,
        ) from None
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def placement(region: str, limit: int, byte_size: int | None, offset: int) -> SharedMemoryPlacement:
    off = check_offset(offset)
    size = limit - off if byte_size is None else check_size(byte_size)
    check_range(off, size, limit, region)
    return SharedMemoryPlacement(region, size, off)
