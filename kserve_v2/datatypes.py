"""The protocol's tensor datatypes and their binary and JSON forms.

Binary form (binary-data extension, gRPC ``raw_*_contents``, shared memory): little-endian,
row-major, no padding. ``BOOL`` is one byte (0 or 1); ``BYTES`` is each element as a 4-byte
little-endian unsigned length followed by the bytes; ``BF16`` is the upper half of an IEEE
float32.

Example::

    >>> import numpy as np
    >>> from kserve_v2.datatypes import Datatype, datatype_of, serialize, deserialize
    >>> datatype_of(np.zeros(3, np.float32))
    <Datatype.FP32: 'FP32'>
    >>> bytes(serialize(np.array([b"ab"], dtype=object), Datatype.BYTES))
    b'\\x02\\x00\\x00\\x00ab'
    >>> deserialize(b"\\x01\\x00\\x00\\x00z", Datatype.BYTES, (1,))
    array([b'z'], dtype=object)
"""

from __future__ import annotations

import codecs
import enum
import math
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kserve_v2.errors import InvalidInputError, ProtocolError

__all__ = [
    "BytesLike",
    "DATATYPE_BY_NAME",
    "Datatype",
    "bf16_bits_to_float32",
    "datatype_of",
    "deserialize",
    "element_count",
    "float32_to_bf16_bits",
    "from_json_data",
    "numpy_dtype",
    "rounds_to_bf16",
    "serialize",
    "serialize_bytes_elements",
    "deserialize_bytes_elements",
    "serialized_size",
    "to_json_data",
    "to_str_array",
]

BytesLike = bytes | bytearray | memoryview


@enum.unique
class Datatype(str, enum.Enum):
    """A tensor element type, spelled as on the wire."""

    #: one byte, 0 or 1
    BOOL = "BOOL"
    UINT8 = "UINT8"
    UINT16 = "UINT16"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    #: IEEE half precision
    FP16 = "FP16"
    FP32 = "FP32"
    FP64 = "FP64"
    #: variable-length byte strings, each prefixed by its 4-byte length
    BYTES = "BYTES"
    #: bfloat16: the upper 16 bits of a float32
    BF16 = "BF16"

    @property
    def itemsize(self) -> int | None:
        """Bytes per element on the wire, or ``None`` for ``BYTES``."""
        return _ITEMSIZE[self]

    @classmethod
    def parse(cls, value: str | Datatype) -> Datatype:
        """The datatype named ``value``; :class:`InvalidInputError` if there is none."""
        try:
            return DATATYPE_BY_NAME[value]
        except (KeyError, TypeError):
            raise InvalidInputError(
                f"unknown datatype {value!r}; expected one of {', '.join(DATATYPE_BY_NAME)}",
                value=value,
            ) from None

    def __str__(self) -> str:
        return self.value


#: Wire name -> datatype; ``.get(name)`` is the decoders' allocation-free lookup.
DATATYPE_BY_NAME: Final[Mapping[str, Datatype]] = {d.value: d for d in Datatype}

# Little-endian wire dtypes; BYTES and BF16 have none (they need conversion).
_WIRE_DTYPE: Final[dict[Datatype, np.dtype[Any]]] = {
    Datatype.BOOL: np.dtype(np.bool_),
    Datatype.UINT8: np.dtype("u1"),
    Datatype.UINT16: np.dtype("<u2"),
    Datatype.UINT32: np.dtype("<u4"),
    Datatype.UINT64: np.dtype("<u8"),
    Datatype.INT8: np.dtype("i1"),
    Datatype.INT16: np.dtype("<i2"),
    Datatype.INT32: np.dtype("<i4"),
    Datatype.INT64: np.dtype("<i8"),
    Datatype.FP16: np.dtype("<f2"),
    Datatype.FP32: np.dtype("<f4"),
    Datatype.FP64: np.dtype("<f8"),
}
_ITEMSIZE: Final[dict[Datatype, int | None]] = {
    **{d: t.itemsize for d, t in _WIRE_DTYPE.items()},
    Datatype.BYTES: None,
    Datatype.BF16: 2,
}
_BY_KIND_SIZE: Final[dict[tuple[str, int], Datatype]] = {
    (t.kind, t.itemsize): d for d, t in _WIRE_DTYPE.items()
}
_LENGTH_PREFIX = struct.Struct("<I")
_MAX_BYTES_ELEMENT = 0xFFFFFFFF
_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


def _bfloat16_dtype() -> np.dtype[Any] | None:
    """ml_dtypes' bfloat16 when ml_dtypes is importable, else None (looked up once)."""
    global _BF16_DTYPE
    if _BF16_DTYPE is _UNSET:
        try:
            import ml_dtypes

            _BF16_DTYPE = np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            _BF16_DTYPE = None
    return _BF16_DTYPE  # type: ignore[return-value]


_UNSET: Final = object()
_BF16_DTYPE: object = _UNSET


def numpy_dtype(datatype: str | Datatype) -> np.dtype[Any]:
    """The numpy dtype of ``datatype`` (a :class:`Datatype` or its wire name): the dtype that
    results of that datatype come back as. Exported as ``kserve_v2.numpy_dtype``; the
    reverse is :func:`datatype_of`.

    ``BYTES`` gives ``object`` (elements are ``bytes``); ``BF16`` gives ml_dtypes' bfloat16 when
    ml_dtypes is installed, else ``float32``. An unknown name raises
    :class:`~kserve_v2.InvalidInputError`.

    Example::

        >>> numpy_dtype("FP32")
        dtype('float32')
        >>> numpy_dtype(Datatype.BYTES)
        dtype('O')
    """
    if type(datatype) is not Datatype:
        datatype = Datatype.parse(datatype)
    if datatype is Datatype.BYTES:
        return np.dtype(object)
    if datatype is Datatype.BF16:
        return _bfloat16_dtype() or np.dtype(np.float32)
    return _WIRE_DTYPE[datatype]


def datatype_of(array: npt.NDArray[Any] | np.dtype[Any]) -> Datatype:
    """The wire datatype of a numpy array or dtype. Exported as ``kserve_v2.datatype_of``;
    the reverse is :func:`numpy_dtype`.

    ``S``, ``U`` and ``object`` arrays are ``BYTES``; ml_dtypes' ``bfloat16`` is ``BF16``.
    Complex, datetime, structured and other dtypes raise :class:`InvalidInputError`.

    Example::

        >>> datatype_of(np.zeros(3, np.int64))
        <Datatype.INT64: 'INT64'>
        >>> datatype_of(np.dtype(np.float16)).value
        'FP16'
        >>> datatype_of(np.array(["a", "bc"])).value
        'BYTES'
    """
    dtype = array if isinstance(array, np.dtype) else array.dtype
    kind = dtype.kind
    if kind in "SUO":
        return Datatype.BYTES
    found = _BY_KIND_SIZE.get((kind, dtype.itemsize))
    if found is not None:
        return found
    if dtype.name == "bfloat16":
        return Datatype.BF16
    raise InvalidInputError(
        f"numpy dtype {dtype} has no datatype in the inference protocol "
        "(supported: bool, (u)int8-64, float16/32/64, bfloat16, bytes/str/object)",
        value=dtype,
    )


def rounds_to_bf16(dtype: np.dtype[Any], datatype: Datatype) -> bool:
    """Whether an array of ``dtype`` given as ``datatype`` is converted: a float array (float16
    to float64) named BF16 is rounded to bfloat16, the one conversion the client makes between
    datatypes; any other array must be of its datatype already."""
    return datatype is Datatype.BF16 and dtype.kind == "f"


def element_count(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of ``shape`` (1 for a scalar shape ``()``)."""
    return math.prod(shape)


# ---------------------------------------------------------------------------------------------
# BF16


def float32_to_bf16_bits(values: npt.ArrayLike) -> npt.NDArray[np.uint16]:
    """Round float values to bfloat16 (round to nearest, ties to even) and return the bits.

    NaN stays NaN (quiet, sign kept); infinities stay infinite; values past the largest
    bfloat16 round to infinity, as IEEE rounding requires. Wider floats (float64) are rounded
    once, not through float32 first.
    """
    array = np.asarray(values)
    shape = array.shape
    # 1-D and typed constants throughout: numpy 1.x promotes 0-d arrays with Python ints by
    # value (uint64 + int -> float64), which would corrupt the bits.
    array = array.reshape(-1)
    if array.dtype.kind == "f" and array.dtype.itemsize > 4:
        bits = _to_float32_bits_round_to_odd(array).astype(np.uint64)
        f32 = bits.astype(np.uint32).view(np.float32)
    else:
        f32 = np.asarray(array, dtype=np.float32)
        bits = f32.view(np.uint32).astype(np.uint64)
    sixteen = np.uint64(16)
    # Adding 0x7FFF plus the lowest kept bit rounds half-way cases towards the even result.
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> sixteen) & np.uint64(1))) >> sixteen
    nan = np.isnan(f32)
    if nan.any():
        rounded = np.where(nan, (bits >> sixteen) | np.uint64(0x0040), rounded)
    out: npt.NDArray[np.uint16] = rounded.astype(np.uint16).reshape(shape)
    return out


def _to_float32_bits_round_to_odd(wide: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """float32 bits of wider floats, rounded to odd.

    Rounding to nearest twice (float64 -> float32 -> bfloat16) can land on a false tie; rounding
    to odd first keeps the information the second rounding needs, because float32 has more than
    two bits beyond bfloat16's precision.
    """
    with np.errstate(over="ignore"):
        nearest = wide.astype(np.float32)
    back = nearest.astype(wide.dtype)
    inexact = np.isfinite(wide) & (back != wide)
    # Float bits are sign and magnitude: one less is the next value towards zero.
    towards_zero = inexact & (np.abs(back) > np.abs(wide))
    bits: npt.NDArray[Any] = nearest.view(np.uint32) - towards_zero.astype(np.uint32)
    bits |= inexact.astype(np.uint32)
    return bits


def bf16_bits_to_float32(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """Widen bfloat16 bit patterns to float32 (exact)."""
    wide = np.asarray(bits).reshape(-1).astype(np.uint32) << np.uint32(16)
    out: npt.NDArray[np.float32] = wide.view(np.float32).reshape(np.shape(bits))
    return out


# ---------------------------------------------------------------------------------------------
# BYTES


def _as_bytes_element(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(
                f"BYTES element {value!r:.80} is not encodable as UTF-8 (lone surrogate)",
                value=value,
            ) from None
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidInputError(
        f"BYTES elements must be bytes or str, got {type(value).__name__}: {value!r:.80}",
        value=value,
    )


def serialize_bytes_elements(elements: Iterable[Any]) -> bytes:
    """Serialize BYTES elements: each as a 4-byte little-endian length and its bytes (the
    binary form of a BYTES tensor, e.g. to write into shared memory). Exported as
    ``kserve_v2.serialize_bytes_elements``; the reverse is :func:`deserialize_bytes_elements`.

    ``str`` elements are UTF-8 encoded. Elements longer than 2**32-1 bytes are rejected.
    The elements are taken in order: pass ``array.reshape(-1)`` for a many-dimensional array
    (row-major, as the protocol orders them).

    Example::

        >>> serialize_bytes_elements([b"ab", "\\u00e9"])
        b'\\x02\\x00\\x00\\x00ab\\x02\\x00\\x00\\x00\\xc3\\xa9'
    """
    pack = _LENGTH_PREFIX.pack
    parts: list[bytes] = []
    append = parts.append
    for value in elements:
        data = value if type(value) is bytes else _as_bytes_element(value)
        size = len(data)
        if size > _MAX_BYTES_ELEMENT:
            raise InvalidInputError(
                f"BYTES element of {size} bytes exceeds the protocol's 4 GiB limit", value=size
            )
        append(pack(size))
        append(data)
    return b"".join(parts)


def deserialize_bytes_elements(buffer: BytesLike, count: int | None = None) -> list[bytes]:
    """Parse length-prefixed BYTES elements; the buffer must be consumed exactly. Exported as
    ``kserve_v2.deserialize_bytes_elements``; the reverse is :func:`serialize_bytes_elements`.

    With ``count`` given, exactly that many elements must be present. A buffer that does not
    parse raises :class:`~kserve_v2.ProtocolError`. ``np.array(elements, dtype=object)`` (then
    ``.reshape(shape)``) makes the tensor; :func:`to_str_array` decodes it to ``str``.

    Example::

        >>> deserialize_bytes_elements(b"\\x02\\x00\\x00\\x00ab\\x00\\x00\\x00\\x00")
        [b'ab', b'']
    """
    view = memoryview(buffer).cast("B") if not isinstance(buffer, bytes) else buffer
    end = len(view)
    unpack_from = _LENGTH_PREFIX.unpack_from
    out: list[bytes] = []
    pos = 0
    while pos < end and (count is None or len(out) < count):
        if end - pos < 4:
            raise ProtocolError(
                f"BYTES tensor truncated: {end - pos} byte(s) left at offset {pos}, "
                "too few for a 4-byte length prefix"
            )
        (size,) = unpack_from(view, pos)
        pos += 4
        if size > end - pos:
            raise ProtocolError(
                f"BYTES element {len(out)} claims {size} bytes at offset {pos} "
                f"but only {end - pos} remain"
            )
        out.append(bytes(view[pos : pos + size]))
        pos += size
    if count is not None and len(out) != count:
        raise ProtocolError(f"BYTES tensor holds {len(out)} element(s), its shape needs {count}")
    if pos != end:
        raise ProtocolError(
            f"BYTES tensor has {end - pos} trailing byte(s) after its {len(out)} element(s)"
        )
    return out


def to_str_array(
    array: npt.NDArray[Any], encoding: str = "utf-8", *, name: str = ""
) -> npt.NDArray[Any]:
    """Decode a BYTES result (object array of ``bytes``) into an object array of ``str``.

    An unknown ``encoding``, or an element that is not text in it, raises
    :class:`~kserve_v2.InvalidInputError` naming the tensor (``name``) and the element's
    index; the raw ``bytes`` stay available in ``array``.
    """
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise InvalidInputError(f"unknown text encoding {encoding!r}", value=encoding) from None
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for i, value in enumerate(array.reshape(-1)):
        if not isinstance(value, bytes):
            flat[i] = str(value)
            continue
        try:
            flat[i] = value.decode(encoding)
        except UnicodeDecodeError as exc:
            where = tuple(int(n) for n in np.unravel_index(i, array.shape)) if array.ndim else ()
            preview = value if len(value) <= 32 else value[:32] + b"..."
            raise InvalidInputError(
                f"tensor {name!r} element {list(where)}: {preview!r} is not {encoding} text "
                f"({exc.reason} at byte {exc.start}); as_numpy() gives the raw bytes",
                value=value,
            ) from None
    return out


# ---------------------------------------------------------------------------------------------
# Binary form


def _byteswap_if_needed(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    order = array.dtype.byteorder
    if order == ">" or (order == "=" and not _LITTLE_ENDIAN_HOST):
        return array.astype(array.dtype.newbyteorder("<"))
    return array


def serialize(array: npt.NDArray[Any], datatype: Datatype) -> BytesLike:
    """The binary wire form of ``array`` as ``datatype``.

    Numeric tensors come back as a ``memoryview`` of the array's own memory when it is already
    C-contiguous and little-endian (no copy); otherwise one copy is made. ``BYTES`` and ``BF16``
    from float32 are always converted.
    """
    if datatype in _WIRE_DTYPE:  # fixed-size: the array's own bytes
        wire = np.ascontiguousarray(_byteswap_if_needed(array))
        try:
            return wire.data.cast("B")  # a quarter of the cost of a uint8 view's .data
        except (TypeError, ValueError):  # a zero in the shape, a dtype with no buffer format
            return wire.reshape(-1).view(np.uint8).data
    if datatype is Datatype.BYTES:
        # numpy's S dtype cannot hold trailing NULs (it strips them on access), which is why
        # results come back as object arrays; S input is taken at numpy's own value.
        return serialize_bytes_elements(array.reshape(-1).tolist())
    if array.dtype.name == "bfloat16":  # BF16
        wire = np.ascontiguousarray(array).view(np.uint16)
    else:
        wire = float32_to_bf16_bits(array)
    wire = _byteswap_if_needed(np.ascontiguousarray(wire))
    return wire.reshape(-1).view(np.uint8).data


def serialized_size(array: npt.NDArray[Any], datatype: Datatype) -> int:
    """Bytes ``array`` takes in binary form (BYTES elements counted with their prefixes)."""
    itemsize = datatype.itemsize
    if itemsize is not None:
        return int(array.size) * itemsize
    return len(serialize(array, datatype))


def deserialize(buffer: BytesLike, datatype: Datatype, shape: Sequence[int]) -> npt.NDArray[Any]:
    """Decode a binary tensor; numeric results are views on ``buffer`` (no copy).

    The buffer must hold exactly the bytes ``shape`` needs, else :class:`ProtocolError`.
    """
    count = math.prod(shape)
    wire = _WIRE_DTYPE.get(datatype)  # None for BYTES and BF16
    itemsize = _ITEMSIZE[datatype] if wire is None else wire.itemsize
    if itemsize is None:  # BYTES
        # Parse first: the elements present bound the allocation, not the (peer-given) shape.
        elements = deserialize_bytes_elements(buffer, count)
        out = np.empty(len(elements), dtype=object)
        out[:] = elements
        return _shaped(out, shape, datatype)
    nbytes = buffer.nbytes if type(buffer) is memoryview else memoryview(buffer).nbytes
    if nbytes != count * itemsize:
        raise ProtocolError(
            f"{datatype.value} tensor of shape {list(shape)} needs {count * itemsize} bytes, "
            f"got {nbytes}"
        )
    if wire is not None:
        # Positional arguments: numpy parses keywords slowly (0.3 µs of a small tensor's 1 µs).
        return _shaped(np.frombuffer(buffer, wire, count), shape, datatype)
    bits = np.frombuffer(buffer, dtype="<u2", count=count)  # BF16
    bf16 = _bfloat16_dtype()
    if bf16 is not None:
        return _shaped(bits.view(bf16), shape, datatype)
    return _shaped(bf16_bits_to_float32(bits), shape, datatype)


def _shaped(flat: npt.NDArray[Any], shape: Sequence[int], datatype: Datatype) -> npt.NDArray[Any]:
    """``flat`` reshaped; shapes numpy cannot represent (over 64 dimensions, dimensions past
    the address space, even with zero elements) are the peer's error, not a crash."""
    try:
        return flat.reshape(shape)
    except (ValueError, OverflowError):
        raise ProtocolError(
            f"{datatype.value} tensor shape {list(shape)!r:.120} cannot be represented",
            value=shape,
        ) from None


# ---------------------------------------------------------------------------------------------
# JSON form


def to_json_data(array: npt.NDArray[Any], datatype: Datatype) -> list[Any]:
    """The flat JSON list of ``array``'s elements.

    Integers stay exact Python ints (int64/uint64 never pass through float). FP16 and BF16 are
    JSON numbers holding exactly the values their binary form would carry (the protocol lets
    JSON carry them; whether a server accepts them is its own affair: Triton and KServe refuse,
    MLServer accepts). NaN and infinities are refused (JSON has no literal for them), as are
    BYTES that are not valid UTF-8.
    """
    flat = array.reshape(-1)
    if datatype is Datatype.BYTES:
        out: list[Any] = []
        for value in flat.tolist():
            data = _as_bytes_element(value)
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidInputError(
                    "BYTES element is not valid UTF-8 and cannot be sent as a JSON string; "
                    "send the tensor in binary form",
                    value=data[:80],
                ) from None
        return out
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        raise InvalidInputError(
            "NaN and infinity have no JSON representation; send the tensor in binary form",
            value=datatype,
        )
    if datatype is Datatype.BF16 or (datatype is Datatype.FP16 and flat.dtype != np.float16):
        # Rounded as the binary form would be, then widened exactly: the numbers sent are the
        # tensor's FP16/BF16 values, whatever float type held them.
        with np.errstate(over="ignore"):
            if datatype is Datatype.FP16:
                flat = flat.astype(np.float16)
            elif flat.dtype.name == "bfloat16":
                flat = flat.astype(np.float32)
            else:
                flat = bf16_bits_to_float32(float32_to_bf16_bits(flat))
        if not np.isfinite(flat).all():
            raise InvalidInputError(
                f"a value is too large for {datatype.value} (it would be infinity, which JSON "
                "cannot carry)",
                value=datatype,
            )
    return flat.tolist()  # type: ignore[no-any-return]


def _flatten(data: Any, shape: Sequence[int], name: str) -> list[Any]:
    """The elements of flat or nested tensor data, in row-major order.

    Data is either flat (a list of elements) or nested exactly as ``shape`` says (the protocol's
    natural form); nesting that is ragged or disagrees with the shape is refused. The walk is
    iterative and bounded by ``shape``, so hostile nesting cannot exhaust the stack.
    """
    if not isinstance(data, list | tuple):
        return [data]
    if not data or not isinstance(data[0], list | tuple):
        return list(data)
    level: list[Any] = [data]
    for dim in shape:
        below: list[Any] = []
        for item in level:
            if not isinstance(item, list | tuple) or len(item) != dim:
                raise ProtocolError(
                    f"tensor {name!r}: nested data does not have the shape {list(shape)!r:.80}"
                )
            below.extend(item)
        level = below
    return level


def _bad(name: str, datatype: Datatype, value: Any) -> ProtocolError:
    return ProtocolError(
        f"tensor {name!r}: {type(value).__name__} value {value!r:.60} is not a valid "
        f"{datatype.value} element",
        value=value,
    )


def from_json_data(
    data: Any,
    datatype: Datatype,
    shape: Sequence[int],
    *,
    name: str = "",
    error: type[Exception] = ProtocolError,
) -> npt.NDArray[Any]:
    """Build an array of ``shape`` from JSON tensor data (nested or flat lists).

    Every element must be of the datatype's JSON kind: integers for integer types (no silent
    truncation of floats), numbers for float types, booleans (or 0/1) for BOOL, strings for
    BYTES. Integers out of the datatype's range and element counts that do not match ``shape``
    raise ``error`` (the protocol error when decoding a peer's data).
    """
    try:
        return _from_json_data(data, datatype, shape, name)
    except ProtocolError as exc:
        if error is ProtocolError:
            raise
        raise error(exc.message) from None


def _from_json_data(
    data: Any, datatype: Datatype, shape: Sequence[int], name: str
) -> npt.NDArray[Any]:
    flat = _flatten(data, shape, name)
    count = element_count(shape)
    if len(flat) != count:
        raise ProtocolError(
            f"tensor {name!r}: shape {list(shape)!r:.80} needs {count} element(s), "
            f"data has {len(flat)}"
        )
    if datatype is Datatype.BYTES:
        out = np.empty(count, dtype=object)
        for i, value in enumerate(flat):
            if isinstance(value, str):
                try:
                    out[i] = value.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate ("\ud800" is valid JSON)
                    raise _bad(name, datatype, value) from None
            elif isinstance(value, bytes):
                out[i] = value
            else:
                raise _bad(name, datatype, value)
        return _shaped(out, shape, datatype)
    if datatype is Datatype.BOOL:
        for value in flat:
            if type(value) is not bool and not (type(value) is int and value in (0, 1)):
                raise _bad(name, datatype, value)
        return _shaped(np.array(flat, dtype=np.bool_), shape, datatype)
    wire = _WIRE_DTYPE.get(datatype)
    if datatype is Datatype.BF16 or (wire is not None and wire.kind == "f"):
        return _shaped(_floats_from_json(flat, datatype, name), shape, datatype)
    assert wire is not None
    info = np.iinfo(wire)
    for value in flat:
        if type(value) is not int:
            raise _bad(name, datatype, value)
    if flat and (min(flat) < info.min or max(flat) > info.max):
        bad = min(flat) if min(flat) < info.min else max(flat)
        raise ProtocolError(
            f"tensor {name!r}: value {bad} is out of range for {datatype.value}", value=bad
        )
    return _shaped(np.array(flat, dtype=wire), shape, datatype)


def _floats_from_json(flat: list[Any], datatype: Datatype, name: str) -> npt.NDArray[Any]:
    """A flat float array of ``datatype``; finite values too large for it are refused (they
    would silently become infinity)."""
    for value in flat:
        if type(value) not in (float, int):
            raise _bad(name, datatype, value)
    try:
        exact = np.array(flat, dtype=np.float64)
    except OverflowError:  # an integer beyond float64
        raise ProtocolError(
            f"tensor {name!r}: an integer is out of range for {datatype.value}"
        ) from None
    if datatype is Datatype.BF16:
        bits = float32_to_bf16_bits(exact)
        out = deserialize(bits.view(np.uint8).data, datatype, (len(flat),))
    else:
        with np.errstate(over="ignore"):
            out = exact.astype(_WIRE_DTYPE[datatype])
    overflowed = np.isinf(out) & ~np.isinf(exact)
    if overflowed.any():
        bad = exact[overflowed][0].item()
        raise ProtocolError(
            f"tensor {name!r}: value {bad!r} is out of range for {datatype.value}", value=bad
        )
    return out
