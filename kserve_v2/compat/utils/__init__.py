"""tritonclient.utils: the exception, datatype conversions and BYTES serialisation.

Example::

    from kserve_v2.compat.utils import np_to_triton_dtype, serialize_byte_tensor

    np_to_triton_dtype(np.float32)                           # 'FP32'
    serialize_byte_tensor(np.array([b"ab"], dtype=object))   # array(b'\\x02\\x00\\x00\\x00ab', ...)
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import (
    Datatype,
    bf16_bits_to_float32,
    datatype_of,
    deserialize_bytes_elements,
    float32_to_bf16_bits,
    numpy_dtype,
)
from kserve_v2.errors import KServeError

__all__ = [
    "TRITON_RESERVED_REQUEST_PARAMS",
    "TRITON_RESERVED_REQUEST_PARAMS_PREFIX",
    "InferenceServerException",
    "deserialize_bf16_tensor",
    "deserialize_bytes_tensor",
    "np_to_triton_dtype",
    "raise_error",
    "serialize_bf16_tensor",
    "serialize_byte_tensor",
    "serialized_byte_size",
    "triton_to_np_dtype",
]

#: Request parameters that carry protocol fields; custom ``parameters=`` may not use them.
TRITON_RESERVED_REQUEST_PARAMS: Final = [
    "sequence_id",
    "sequence_start",
    "sequence_end",
    "priority",
    "timeout",
    "headers",
    "binary_data_output",
]
#: Parameter names with this prefix are reserved for Triton.
TRITON_RESERVED_REQUEST_PARAMS_PREFIX: Final = "triton_"


class InferenceServerException(KServeError):
    """An error from the server or the client: tritonclient's one exception.

    Also a :class:`kserve_v2.KServeError`; the native error it was translated from (if any)
    is its ``__cause__``.

    Args:
        msg: a brief description of the error.
        status: the error code: over gRPC ``"StatusCode.<NAME>"`` (as tritonclient reports
            grpcio's codes), over HTTP the response status as text, else ``None``.
        debug_details: further details, for debugging.

    Example::

        try:
            client.infer("missing", inputs)
        except InferenceServerException as e:
            print(e.status(), e.message())
    """

    def __init__(
        self, msg: str | None, status: str | None = None, debug_details: str | None = None
    ) -> None:
        super().__init__(msg)
        self._msg = msg
        self._status = status
        self._debug_details = debug_details

    def __str__(self) -> str:
        text = super().__str__() if self._msg is None else self._msg
        return text if self._status is None else f"[{self._status}] {text}"

    def message(self) -> str | None:
        """The message, or ``None``."""
        return self._msg

    def status(self) -> str | None:
        """The error code, or ``None``."""
        return self._status

    def debug_details(self) -> str | None:
        """Further details, or ``None``."""
        return self._debug_details


def raise_error(msg: str) -> NoReturn:
    """Raise :class:`InferenceServerException` with ``msg``."""
    raise InferenceServerException(msg=msg) from None


def np_to_triton_dtype(np_dtype: Any) -> str | None:
    """The wire datatype of a numpy dtype (or scalar type), or ``None`` if it has none.

    ``object``, ``bytes`` and ``str`` arrays are ``"BYTES"``.

    Example::

        np_to_triton_dtype(np.int32)          # 'INT32'
        np_to_triton_dtype(np.dtype(object))  # 'BYTES'
    """
    try:
        dtype = np.dtype(np_dtype)
        return datatype_of(dtype).value
    except (TypeError, ValueError):  # not a dtype, or one the protocol has no datatype for
        return None


def triton_to_np_dtype(dtype: str) -> Any:
    """The numpy scalar type of a wire datatype, or ``None`` for an unknown name.

    ``"BOOL"`` gives Python's ``bool`` (as tritonclient does), ``"BYTES"`` ``np.object_``,
    ``"BF16"`` ml_dtypes' ``bfloat16`` when installed, else ``np.float32``.
    """
    if dtype == "BOOL":
        return bool
    try:
        datatype = Datatype(dtype)
    except ValueError:
        return None
    return numpy_dtype(datatype).type


def _element_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8")


def serialize_byte_tensor(input_tensor: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """Serialise a BYTES tensor (object, bytes or str elements, C order) into its wire form:
    each element as a 4-byte little-endian length and its bytes.

    Returns a 0-d object array holding the serialised ``bytes`` (``.item()`` gives them), an
    empty object array for an empty tensor; other elements than ``bytes``/``str`` are written
    as their ``str()``.
    """
    if input_tensor.size == 0:
        return np.empty([0], dtype=object)
    if input_tensor.dtype.kind not in "OSU":
        raise_error("cannot serialize bytes tensor: invalid datatype")
    flat = np.asarray(input_tensor).reshape(-1, order="C")
    parts: list[bytes] = []
    for value in flat.tolist():
        data = _element_bytes(value)
        parts.append(len(data).to_bytes(4, "little"))
        parts.append(data)
    return np.asarray(b"".join(parts), dtype=object)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> npt.NDArray[Any]:
    """Parse a serialised BYTES tensor into a 1-D object array of ``bytes``."""
    try:
        elements = deserialize_bytes_elements(encoded_tensor)
    except KServeError as exc:
        raise InferenceServerException(msg=str(exc)) from exc
    out = np.empty(len(elements), dtype=object)
    out[:] = elements
    return out


def serialize_bf16_tensor(input_tensor: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """Round a float tensor to bfloat16 and serialise it (2 bytes an element, little-endian,
    C order); returns a 0-d object array holding the ``bytes``."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=object)
    if input_tensor.dtype.kind != "f" and input_tensor.dtype.name != "bfloat16":
        raise_error("cannot serialize bf16 tensor: invalid datatype")
    if input_tensor.dtype.name == "bfloat16":
        bits = np.ascontiguousarray(input_tensor).view(np.uint16)
    else:
        bits = float32_to_bf16_bits(input_tensor)
    return np.asarray(bits.astype("<u2").tobytes(), dtype=object)


def deserialize_bf16_tensor(encoded_tensor: bytes) -> npt.NDArray[Any]:
    """Parse serialised bfloat16 values into a 1-D float32 array (exact)."""
    bits = np.frombuffer(encoded_tensor, dtype="<u2")
    return bf16_bits_to_float32(bits)


def serialized_byte_size(tensor_value: npt.NDArray[Any]) -> int:
    """Bytes a tensor takes: ``nbytes`` for numbers, the elements' total length for object
    arrays (so the size of a :func:`serialize_byte_tensor` result)."""
    if tensor_value.dtype == np.object_:
        return sum(len(_element_bytes(v)) for v in tensor_value.reshape(-1).tolist())
    return int(tensor_value.nbytes)
