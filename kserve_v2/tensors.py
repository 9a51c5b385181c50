"""Tensors of a request: inputs to send and outputs to ask for.

Example::

    >>> import numpy as np
    >>> from kserve_v2.tensors import InferInput, RequestedOutput
    >>> InferInput("INPUT0", np.arange(16, dtype=np.int32).reshape(1, 16))
    InferInput(name='INPUT0', datatype='INT32', shape=(1, 16))
    >>> InferInput("TEXT", ["hello", "world"])          # lists of str are BYTES
    InferInput(name='TEXT', datatype='BYTES', shape=(2,))
    >>> RequestedOutput("probs", class_count=3)
    RequestedOutput(name='probs', class_count=3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import (
    BytesLike,
    Datatype,
    datatype_of,
    element_count,
    from_json_data,
    numpy_dtype,
    rounds_to_bf16,
    serialize,
)
from kserve_v2.errors import InvalidInputError
from kserve_v2.parameters import ParameterValue, validate_parameters

__all__ = ["InferInput", "RequestedOutput", "SharedMemoryPlacement"]


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{what} name must be a non-empty string, got {name!r}", value=name)
    return name


def _check_binary(binary: object, name: str) -> bool | None:
    if binary is not None and not isinstance(binary, bool):
        raise InvalidInputError(
            f"{name!r}: binary must be True, False or None, got {binary!r}", value=binary
        )
    return binary


def _check_shape(shape: object) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence | np.ndarray):
        raise InvalidInputError(f"shape must be a sequence of integers, got {shape!r}", value=shape)
    dims: list[int] = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 0:
            raise InvalidInputError(
                f"shape dimensions must be non-negative integers, got {list(shape)!r}",
                value=shape,
            )
        dims.append(int(dim))
    return tuple(dims)


@dataclass(frozen=True, slots=True)
class SharedMemoryPlacement:
    """Where a tensor lives in a registered shared-memory region.

    ``region`` is the name the region was registered under; ``byte_size`` and ``offset`` are in
    bytes.
    """

    region: str
    byte_size: int
    offset: int = 0

    def __post_init__(self) -> None:
        _check_name(self.region, "shared-memory region")
        for field, value in (("byte_size", self.byte_size), ("offset", self.offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"shared-memory {field} must be a non-negative integer, got {value!r}",
                    value=value,
                )

    def as_parameters(self) -> dict[str, ParameterValue]:
        """The ``shared_memory_*`` parameters that carry this placement on the wire."""
        params: dict[str, ParameterValue] = {
            "shared_memory_region": self.region,
            "shared_memory_byte_size": self.byte_size,
        }
        if self.offset:
            params["shared_memory_offset"] = self.offset
        return params


# Native-order numpy dtypes of the fixed-size datatypes (BF16 has none without ml_dtypes).
_NUMERIC_DATATYPES: Final = {
    numpy_dtype(d): d for d in Datatype if d not in (Datatype.BYTES, Datatype.BF16)
}


def _array_from_data(
    data: Any, datatype: Datatype | None, name: str
) -> tuple[npt.NDArray[Any], Datatype]:
    """Normalise user data to an array whose dtype fits ``datatype`` (inferred if None);
    errors name the input ``name``."""
    if isinstance(data, np.ndarray):
        found = datatype_of(data)
        if datatype is None:
            return data, found
        if found is datatype or rounds_to_bf16(data.dtype, datatype):
            return data, datatype
        raise InvalidInputError(
            f"input {name!r}: array of dtype {data.dtype} does not match datatype "
            f"{datatype.value}; "
            f"convert it first (e.g. arr.astype(...)) so no value changes silently",
            value=data.dtype,
        )
    if isinstance(data, (bytes, str)):
        data = [data]
        scalar_bytes = True
    else:
        scalar_bytes = False
    if isinstance(data, np.generic):
        return _array_from_data(np.asarray(data), datatype, name)
    if datatype is None:
        try:
            probe = np.asarray(data)
        except ValueError as exc:  # ragged nesting, among others
            raise InvalidInputError(
                f"input {name!r}: cannot make a tensor of this data: {exc}", value=data
            ) from None
        if probe.dtype.kind in "SU":
            datatype = Datatype.BYTES
        elif probe.dtype.kind == "O":
            raise InvalidInputError(
                f"input {name!r}: cannot infer a datatype from this data; pass "
                "datatype=... explicitly",
                value=data,
            )
        else:
            datatype = datatype_of(probe)
        shape = probe.shape
    else:
        shape = _nested_shape(data)
    array = from_json_data(data, datatype, shape, name=name, error=InvalidInputError)
    if scalar_bytes:
        array = array.reshape(())
    return array, datatype


def naming(what: str, name: str, exc: InvalidInputError) -> InvalidInputError:
    """``exc`` (about the data of one tensor, from the datatype codecs) saying which tensor:
    ``what`` is ``"input"`` or ``"tensor"``."""
    return InvalidInputError(f"{what} {name!r}: {exc}", value=exc.value)


def _tensor_of(
    name: str, data: Any, datatype: Datatype | None, shape: Sequence[int] | None
) -> tuple[npt.NDArray[Any], Datatype, tuple[int, ...]]:
    """The array, datatype and shape of an input holding ``data`` (see :class:`InferInput`)."""
    array, found = _array_from_data(data, datatype, name)
    if shape is None:
        return array, found, tuple(int(d) for d in array.shape)
    wanted = _check_shape(shape)
    if element_count(wanted) != array.size:
        raise InvalidInputError(
            f"input {name!r}: shape {list(wanted)} needs {element_count(wanted)} "
            f"element(s), data has {array.size}",
            value=wanted,
        )
    if wanted != array.shape:
        array = array.reshape(wanted)
    return array, found, wanted


def _nested_shape(data: Any) -> tuple[int, ...]:
    shape: list[int] = []
    while isinstance(data, list | tuple):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return tuple(shape)


class InferInput:
    """One input tensor of an inference request.

    Args:
        name: the model's input name.
        data: a numpy array, nested lists/tuples of numbers, bools or strings, a ``bytes`` or
            ``str`` scalar, or ``None`` when the tensor comes from shared memory.
        datatype: the wire datatype (``"FP32"`` or :class:`Datatype`); inferred from ``data``
            when omitted (numpy dtype; ``int`` lists give INT64, ``float`` lists FP64).
            A numpy array must already have the matching dtype: nothing is cast silently.
        shape: the tensor shape; defaults to ``data``'s. A different shape with the same number
            of elements reshapes the data.
        binary: send in binary form (``True``), as JSON (``False``) or as the client decides
            (``None``). Ignored by gRPC, which is always binary.
        parameters: custom input parameters.
        shared_memory: place the input in a registered shared-memory region instead of
            sending data.

    An input can be reused: :meth:`set_data` replaces its data (and with it the datatype and
    shape), :meth:`set_shared_memory` moves it into a shared-memory region and back, so a hot
    loop builds it once. Change it only between calls: a call in flight reads its data (with
    no copy) until the request is sent.

    Inputs compare and hash by identity: an input is a builder that holds the caller's array
    without copying it and caches its wire form, so its value can change after it is built,
    and a value equality could not keep a hash consistent with it.
    """

    __slots__ = (
        "_array",
        "_wire",
        "binary",
        "datatype",
        "name",
        "parameters",
        "shape",
        "shared_memory",
    )

    name: str
    datatype: Datatype
    shape: tuple[int, ...]
    binary: bool | None
    parameters: dict[str, ParameterValue]
    shared_memory: SharedMemoryPlacement | None
    _array: npt.NDArray[Any] | None
    _wire: BytesLike | None

    def __init__(
        self,
        name: str,
        data: Any = None,
        *,
        datatype: str | Datatype | None = None,
        shape: Sequence[int] | None = None,
        binary: bool | None = None,
        parameters: Mapping[str, ParameterValue] | None = None,
        shared_memory: SharedMemoryPlacement | None = None,
        allow_reserved: bool = False,
    ) -> None:
        if (
            type(data) is np.ndarray
            and datatype is None
            and shape is None
            and parameters is None
            and shared_memory is None
            and type(name) is str
            and name
            and (binary is None or type(binary) is bool)
        ):
            # Fast path for the common call (a plain numeric array, nothing else): every check
            # the general path makes is implied by the dtype lookup.
            fast = _NUMERIC_DATATYPES.get(data.dtype)
            if fast is not None:
                self.name = name
                self.datatype = fast
                self.shape = data.shape
                self.binary = binary
                self.parameters = {}
                self.shared_memory = None
                self._array = data
                self._wire = None
                return
        self.name = _check_name(name, "input")
        dt = None if datatype is None else Datatype.parse(datatype)
        self.binary = _check_binary(binary, name)
        self.parameters = validate_parameters(
            parameters, where="input", allow_reserved=allow_reserved
        )
        self.shared_memory = shared_memory
        self._wire = None
        if data is None:
            if shared_memory is None:
                raise InvalidInputError(f"input {name!r} needs data or a shared-memory placement")
            if dt is None or shape is None:
                raise InvalidInputError(
                    f"input {name!r} in shared memory needs an explicit datatype and shape"
                )
            self.datatype = dt
            self.shape = _check_shape(shape)
            self._array = None
            return
        if shared_memory is not None:
            raise InvalidInputError(
                f"input {name!r}: give either data or a shared-memory placement, not both"
            )
        self._array, self.datatype, self.shape = _tensor_of(name, data, dt, shape)

    def set_data(
        self,
        data: Any,
        *,
        datatype: str | Datatype | None = None,
        shape: Sequence[int] | None = None,
    ) -> None:
        """Replace the tensor's data, so that one input serves call after call.

        ``data``, ``datatype`` and ``shape`` mean what they mean to the constructor and are
        checked the same way: the datatype is inferred from ``data`` unless given, the shape
        is ``data``'s unless given. A shared-memory placement is dropped (the input carries
        data again); the name, ``binary`` and ``parameters`` stay. A bad argument raises
        :class:`~kserve_v2.InvalidInputError` and leaves the input as it was.

        Example::

            x = InferInput("INPUT0", np.zeros((1, 4), np.float32))
            for batch in batches:                 # float32 arrays of any shape
                x.set_data(batch)
                client.infer("identity_fp32", [x])
        """
        if data is None:
            raise InvalidInputError(
                f"input {self.name!r}: set_data needs data; use set_shared_memory for a "
                "shared-memory placement"
            )
        dt = None if datatype is None else Datatype.parse(datatype)
        self._array, self.datatype, self.shape = _tensor_of(self.name, data, dt, shape)
        self.shared_memory = None
        self._wire = None

    def set_shared_memory(
        self,
        region: str | SharedMemoryPlacement,
        byte_size: int | None = None,
        offset: int = 0,
        *,
        datatype: str | Datatype | None = None,
        shape: Sequence[int] | None = None,
    ) -> None:
        """Place the tensor in a registered shared-memory region instead of sending data.

        ``region`` is the name the region was registered under, with ``byte_size`` and
        ``offset`` in bytes, or a ready :class:`SharedMemoryPlacement` (such as
        ``region.placement(n)`` of :mod:`kserve_v2.shm`) without them. The datatype and shape
        stay as they are unless given (the data they described now lives in the region).
        :meth:`set_data` turns the input back into one that carries data. A bad argument
        raises :class:`~kserve_v2.InvalidInputError` and leaves the input as it was.

        Example::

            x = InferInput("INPUT0", np.zeros((1, 4), np.float32))
            n = region.write(batch)                               # a SystemSharedMemoryRegion
            x.set_shared_memory(region.name, n, shape=batch.shape)
            client.infer("identity_fp32", [x])
        """
        if isinstance(region, SharedMemoryPlacement):
            if byte_size is not None or offset:
                raise InvalidInputError(
                    f"input {self.name!r}: give a SharedMemoryPlacement, or a region name "
                    "with byte_size and offset, not both"
                )
            placement = region
        else:
            if byte_size is None:
                raise InvalidInputError(
                    f"input {self.name!r}: set_shared_memory needs the byte_size of the tensor "
                    "in the region"
                )
            placement = SharedMemoryPlacement(region, byte_size, offset)
        dt = self.datatype if datatype is None else Datatype.parse(datatype)
        dims = self.shape if shape is None else _check_shape(shape)
        self.datatype, self.shape, self.shared_memory = dt, dims, placement
        self._array = None
        self._wire = None

    @property
    def data(self) -> npt.NDArray[Any] | None:
        """The tensor's data as given (after normalisation), or ``None`` for shared memory."""
        return self._array

    def wire_bytes(self) -> BytesLike:
        """The binary wire form, computed once (a view of the array when no conversion is due)."""
        if self._wire is None:
            if self._array is None:
                raise InvalidInputError(f"input {self.name!r} lives in shared memory: no data")
            try:
                self._wire = serialize(self._array, self.datatype)
            except InvalidInputError as exc:
                raise naming("input", self.name, exc) from None
        return self._wire

    def __repr__(self) -> str:
        extra = f", shared_memory={self.shared_memory!r}" if self.shared_memory else ""
        return (
            f"InferInput(name={self.name!r}, datatype={self.datatype.value!r}, "
            f"shape={self.shape!r}{extra})"
        )


class RequestedOutput:
    """An output the request asks for, and how it should come back.

    Args:
        name: the model's output name.
        binary: return in binary form (``True``), as JSON (``False``) or as the client decides.
        class_count: ask for the top-N classification strings ``"value:index[:label]"`` instead
            of the raw tensor (Triton's classification extension); 0 means off.
        parameters: custom output parameters.
        shared_memory: have the server write this output into a registered region.
    """

    __slots__ = ("binary", "class_count", "name", "parameters", "shared_memory")

    def __init__(
        self,
        name: str,
        *,
        binary: bool | None = None,
        class_count: int = 0,
        parameters: Mapping[str, ParameterValue] | None = None,
        shared_memory: SharedMemoryPlacement | None = None,
        allow_reserved: bool = False,
    ) -> None:
        if (
            type(name) is str
            and name
            and binary is None
            and class_count == 0
            and parameters is None
            and shared_memory is None
        ):
            # Fast path: an output asked for by name only (the common case) needs no checks.
            self.name = name
            self.binary = None
            self.class_count = 0
            self.parameters = {}
            self.shared_memory = None
            return
        self.name = _check_name(name, "output")
        if isinstance(class_count, bool) or not isinstance(class_count, int) or class_count < 0:
            raise InvalidInputError(
                f"output {name!r}: class_count must be a non-negative integer, got {class_count!r}",
                value=class_count,
            )
        self.binary = _check_binary(binary, name)
        self.class_count = class_count
        self.parameters = validate_parameters(
            parameters, where="output", allow_reserved=allow_reserved
        )
        self.shared_memory = shared_memory

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}"]
        if self.binary is not None:
            parts.append(f"binary={self.binary!r}")
        if self.class_count:
            parts.append(f"class_count={self.class_count}")
        if self.shared_memory:
            parts.append(f"shared_memory={self.shared_memory!r}")
        return f"RequestedOutput({', '.join(parts)})"
