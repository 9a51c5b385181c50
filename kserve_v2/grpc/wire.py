"""Hand-written protobuf wire codec for the inference messages on the hot path.

``inference.ModelInferRequest`` is encoded and ``inference.ModelInferResponse`` /
``inference.ModelStreamInferResponse`` are decoded here, without protobuf's generated
classes, because those copy every tensor several times. Tensor-sized copies made in
Python, measured with a 64 MiB FP32 tensor (grpcio adds one more each way in both cases,
into and out of its own slices):

=========================  =============================================  =================
path                       generated classes                              this module
=========================  =============================================  =================
request (numpy -> bytes)   3: ``tobytes()``, into the message, serialize  1: the final join
response (bytes -> numpy)  2: parsing, then reading the ``bytes`` field   0: views
=========================  =============================================  =================

* :func:`encode_infer_request_fields` returns the message as a list of buffers whose tensor
  entries *are* the caller's buffers (memoryviews, no copy); transports send them back to
  back, or join them once (the one copy) where grpcio's serializer must return one ``bytes``.
* :func:`decode_infer_response_fields` returns ``raw_output_contents`` as memoryview slices
  of the received buffer (no copy), ready for ``numpy.frombuffer``; the small fields are
  decoded into plain values.

Messages are plain tuples of their fields (:data:`InputFields`, :data:`InferResponseFields`,
...), not objects: the codec builds and reads one per call, and a frozen object per message
and tensor would cost more than the encoding itself.

The byte layout matches what the generated classes produce with
``SerializeToString(deterministic=True)`` (fields in number order, map entries in upb's
sorted order, packed ``shape``, key and value always written in map entries), so the two
can be compared byte for byte in tests. The decoder follows protobuf's parsing rules as upb
(protobuf's Python runtime) applies them: unknown fields of every wire type are skipped
(groups included, nested at most 100 deep like upb's limit; field number 0 is rejected
everywhere, also inside a group, where recent upb lets it pass), a field with an unexpected
wire type is treated as unknown, repeated scalars are accepted packed and unpacked,
non-repeated fields keep their last value and a repeated sub-message field's occurrences
are merged, ``string`` fields must be valid UTF-8, and a map entry that carries unknown
fields is left out of the map (upb keeps it as an unknown field of the parent). Anything
malformed raises :class:`~kserve_v2.errors.ProtocolError` naming the problem, the message
path and the byte offset.

This module imports neither protobuf nor numpy.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, SupportsIndex

from kserve_v2.errors import InvalidInputError, ProtocolError

__all__ = [
    "BytesLike",
    "InferResponseFields",
    "InputFields",
    "OutputTensorFields",
    "ParamValue",
    "RequestFraming",
    "RequestedOutputFields",
    "WireTensorContents",
    "decode_infer_response_fields",
    "decode_infer_response_span",
    "decode_stream_infer_response_fields",
    "decode_stream_message_fields",
    "encode_infer_request_fields",
    "split_infer_response",
    "stream_infer_response_span",
]

#: A parameter value as InferParameter carries it (bool, int64/uint64, double, string).
ParamValue = bool | int | float | str
#: Anything exposing the buffer protocol (numpy arrays included) is accepted at run time.
BytesLike = bytes | bytearray | memoryview

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_MASK64 = _UINT64_MAX
_MASK32 = (1 << 32) - 1
# Protobuf (C++, upb) refuses to parse messages of 2 GiB or more.
_MAX_MESSAGE_BYTES = (1 << 31) - 1
# upb's default recursion limit: sub-messages and groups may nest this deep.
_MAX_DEPTH = 100

# Wire types.
_VARINT, _I64, _LEN, _SGROUP, _EGROUP, _I32 = 0, 1, 2, 3, 4, 5


# --------------------------------------------------------------------------- structures


@dataclass(frozen=True, slots=True)
class WireTensorContents:
    """``InferTensorContents``: typed tensor elements, flattened in row-major order."""

    bool_contents: tuple[bool, ...] = ()
    int_contents: tuple[int, ...] = ()
    int64_contents: tuple[int, ...] = ()
    uint_contents: tuple[int, ...] = ()
    uint64_contents: tuple[int, ...] = ()
    fp32_contents: tuple[float, ...] = ()
    fp64_contents: tuple[float, ...] = ()
    bytes_contents: tuple[bytes, ...] = ()


# The messages as plain tuples of their fields (see the module docstring).

#: One ``InferInputTensor`` as (name, datatype, shape, parameters).
InputFields = tuple[str, str, Sequence[int], Mapping[str, ParamValue]]
#: One ``InferRequestedOutputTensor`` as (name, parameters).
RequestedOutputFields = tuple[str, Mapping[str, ParamValue]]
#: ``InferOutputTensor`` as (name, datatype, shape, parameters, contents); a parameter whose
#: InferParameter has no value set decodes to ``None``, and ``contents`` is ``None`` when the
#: field is absent (the usual case: the data is in raw_output_contents).
OutputTensorFields = tuple[
    str, str, tuple[int, ...], Mapping[str, ParamValue | None], WireTensorContents | None
]
#: ``ModelInferResponse`` as (model_name, model_version, id, parameters, outputs,
#: raw_output_contents); the raw contents are views of the received buffer, which they keep
#: alive (and alias: they must not outlive a bytearray or memoryview the caller reuses).
InferResponseFields = tuple[
    str,
    str,
    str,
    Mapping[str, ParamValue | None],
    Sequence[OutputTensorFields],
    Sequence[memoryview],
]


# ------------------------------------------------------------------------------ encoder
#
# Fields are built as small ``bytes`` and joined once per run of framing: one join costs less
# than growing a bytearray a byte at a time.

# The varints below 128 (the tags and lengths of a small message) as ready-made bytes.
_SMALL_VARINTS: Final = tuple(bytes((value,)) for value in range(0x80))


def _put_varint(out: bytearray, value: int) -> None:
    # value is already known to be in [0, 2**64).
    if value < 0x80:  # lengths, tags and dims of small messages: one byte
        out.append(value)
        return
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varint_bytes(value: int) -> bytes:
    # value is already known to be in [0, 2**64).
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    _put_varint(out, value)
    return bytes(out)


def _len_field(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field: its tag, the body's length, the body."""
    return tag + _varint_bytes(len(body)) + body


def _utf8(value: object, what: str) -> bytes:
    if type(value) is str and value.isascii():  # the common case, no checks needed
        return value.encode("ascii")
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a str, not {type(value).__name__}", value=value)
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{what} is not encodable as UTF-8: {exc}", value=value) from exc


def _string_field(tag: bytes, value: object, what: str) -> bytes:
    if type(value) is str and len(value) < 0x80 and value.isascii():  # the common case
        if not value:
            return b""  # proto3: an empty string is the default and is not written
        return tag + _SMALL_VARINTS[len(value)] + value.encode("ascii")
    data = _utf8(value, what)
    return _len_field(tag, data) if data else b""


def _int64(value: object, what: str) -> int:
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value  # fast path: isinstance() against a Protocol is very slow
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be an integer, not a bool", value=value)
    if not isinstance(value, SupportsIndex):
        raise InvalidInputError(
            f"{what} must be an integer, not {type(value).__name__}", value=value
        )
    number = operator.index(value)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise InvalidInputError(f"{what} {number} does not fit in int64", value=value)
    return number


def _encode_param_value(value: object, what: str) -> bytes:
    """InferParameter bytes for one value (the oneof member chosen from its type)."""
    if isinstance(value, bool):
        return b"\x08\x01" if value else b"\x08\x00"  # bool_param = 1
    if isinstance(value, str):
        # string_param = 3, written even when empty (oneof presence)
        return _len_field(b"\x1a", _utf8(value, what))
    if isinstance(value, float):
        return b"\x21" + struct.pack("<d", value)  # double_param = 4
    if not isinstance(value, SupportsIndex):  # int, numpy integers
        raise InvalidInputError(
            f"{what} must be a bool, int, float or str, not {type(value).__name__}",
            value=value,
        )
    number = operator.index(value)
    if _INT64_MIN <= number <= _INT64_MAX:
        # int64_param = 2, negative values as 10-byte two's complement
        return b"\x10" + _varint_bytes(number & _MASK64)
    if _INT64_MAX < number <= _UINT64_MAX:
        return b"\x28" + _varint_bytes(number)  # uint64_param = 5, only what int64 cannot hold
    raise InvalidInputError(
        f"{what} = {number} is outside the int64/uint64 range of InferParameter",
        value=value,
    )


def _parameters_field(tag: bytes, params: Mapping[str, ParamValue], what: str) -> bytes:
    """Every entry of a ``map<string, InferParameter>`` field (b"" for an empty map)."""
    if not params:
        return b""
    entries = []
    for key, value in params.items():
        key_bytes = _utf8(key, f"{what} key")
        entries.append((key_bytes, _encode_param_value(value, f"{what}[{key!r}]")))
    # The order of upb's deterministic serializer, so that tests can compare bytes: by key
    # bytes, except that a key which is a prefix of another comes after it ("ab" before
    # "a", "" last). Appending 0xFF, a byte UTF-8 never contains, gives exactly that order.
    # (C++ puts prefixes first; the order carries no meaning on the wire.)
    entries.sort(key=lambda entry: entry[0] + b"\xff")
    # Key = 1 and value = 2 are always written in a map entry, even when empty.
    return b"".join(
        _len_field(tag, _len_field(b"\x0a", key_bytes) + _len_field(b"\x12", value_bytes))
        for key_bytes, value_bytes in entries
    )


def _input_field(
    name: object,
    datatype: object,
    shape: Sequence[int],
    params: Mapping[str, ParamValue],
    labels: _Labels,
    where: str,
) -> bytes:
    body = [
        _string_field(b"\x0a", name, labels.field(where, "name")),
        _string_field(b"\x12", datatype, labels.field(where, "datatype")),
    ]
    if shape:
        packed = bytearray()  # repeated int64 is packed in proto3
        shape_label = labels.field(where, "shape")
        for d, dim in enumerate(shape):
            _put_varint(packed, _int64(dim, labels.item(shape_label, d)) & _MASK64)
        body.append(_len_field(b"\x1a", bytes(packed)))
    body.append(_parameters_field(b"\x22", params, labels.field(where, "parameters")))
    return _len_field(b"\x2a", b"".join(body))  # inputs = 5


def _output_field(
    name: object, params: Mapping[str, ParamValue], labels: _Labels, where: str
) -> bytes:
    body = _string_field(b"\x0a", name, labels.field(where, "name"))
    body += _parameters_field(b"\x12", params, labels.field(where, "parameters"))
    return _len_field(b"\x32", body)  # outputs = 6


# Encoded inputs and outputs without parameters, by (name, datatype, shape) and by name: a
# client sends the same few tensors again and again. Only exact str and int values are used
# as keys, so a hit is the encoding of an equal value of the same type (1.0 and True are
# equal to 1 but are no dimension). Cleared when full, for callers whose shapes never repeat.
_FIELD_CACHE_SIZE: Final = 1024
_input_field_cache: dict[tuple[str, str, tuple[int, ...]], bytes] = {}
_output_field_cache: dict[str, bytes] = {}


def encode_infer_request_fields(
    model_name: str,
    model_version: str,
    id: str,
    parameters: Mapping[str, ParamValue],
    inputs: Sequence[InputFields],
    outputs: Sequence[RequestedOutputFields],
    raw_input_contents: Sequence[BytesLike],
) -> list[BytesLike]:
    """Encode a ``ModelInferRequest`` of the given fields without copying the tensor data.

    Returns the buffers to send back to back: small framing buffers interleaved with the
    caller's ``raw_input_contents`` (as memoryviews of them). Raises
    :class:`~kserve_v2.errors.InvalidInputError` for values the message cannot carry:
    non-UTF-8 strings, shape dimensions outside int64, integer parameters outside
    int64/uint64, parameter values of other types, non-contiguous buffers, or a message of
    2 GiB or more.
    """
    try:
        return _encode_fields(
            model_name,
            model_version,
            id,
            parameters,
            inputs,
            outputs,
            raw_input_contents,
            _NO_LABELS,
        )
    except InvalidInputError:
        # Labels such as "inputs[1].shape[0]" cost a formatted string per field on every
        # request; they are built only to say precisely what was wrong.
        return _encode_fields(
            model_name,
            model_version,
            id,
            parameters,
            inputs,
            outputs,
            raw_input_contents,
            _Labels(),
        )


class RequestFraming:
    """The bytes of an encoded ``ModelInferRequest`` around its raw tensors.

    A request that differs from the one encoded only in its tensors' bytes (same fields 1 to
    6, raw contents of the same sizes) is these bytes around its own tensors: reusing them
    skips the encoder. Made from what :func:`encode_infer_request_fields` returned for raw
    contents of ``sizes`` (framing buffers, each non-empty tensor after one of them);
    raises ``ValueError`` if the tensor buffers among them are not of those sizes.

    Example::

        >>> fields = encode_infer_request_fields("m", "", "", {}, [], [], [b"ab"])
        >>> b"".join(RequestFraming(fields, [2]).parts([b"cd"]))
        b'\\n\\x01m:\\x02cd'
    """

    __slots__ = ("_framing", "_slots", "_tail")

    def __init__(self, parts: Sequence[BytesLike], sizes: Sequence[int]) -> None:
        slots = tuple(i for i, size in enumerate(sizes) if size)
        framing = parts[0::2]
        tensors = parts[1::2]
        if len(tensors) != len(slots) or not all(type(f) is bytes for f in framing):
            raise ValueError("not the encoder's buffers for raw contents of these sizes")
        for tensor, slot in zip(tensors, slots, strict=True):
            if memoryview(tensor).nbytes != sizes[slot]:
                raise ValueError("not the encoder's buffers for raw contents of these sizes")
        self._slots = slots
        self._framing: tuple[bytes, ...] = tuple(framing[: len(slots)])  # type: ignore[arg-type]
        self._tail: bytes | None = framing[-1] if len(framing) > len(slots) else None  # type: ignore[assignment]

    def parts(self, raw_input_contents: Sequence[BytesLike]) -> list[BytesLike]:
        """The message's buffers with these raw contents (of the sizes given when made),
        not copied."""
        parts: list[BytesLike] = []
        for framing, slot in zip(self._framing, self._slots):  # noqa: B905 (equal by design)
            parts.append(framing)
            parts.append(raw_input_contents[slot])
        if self._tail is not None:
            parts.append(self._tail)
        return parts


class _Labels:
    """Field labels for error messages (the encoder's slow, precise mode)."""

    def item(self, what: str, index: int) -> str:
        return f"{what}[{index}]"

    def field(self, where: str, name: str) -> str:
        return f"{where}.{name}"


class _NoLabels(_Labels):
    """The fast mode: constant labels (an error makes the encoder run again with labels)."""

    def item(self, what: str, index: int) -> str:
        return what

    def field(self, where: str, name: str) -> str:
        return name


_NO_LABELS: Final = _NoLabels()


def _encode_fields(
    model_name: str,
    model_version: str,
    id: str,
    parameters: Mapping[str, ParamValue],
    inputs: Sequence[InputFields],
    outputs: Sequence[RequestedOutputFields],
    raw_input_contents: Sequence[BytesLike],
    labels: _Labels,
) -> list[BytesLike]:
    """The message as framing and tensor buffers."""
    parts = [  # fields 1 to 4
        _string_field(b"\x0a", model_name, "model_name"),
        _string_field(b"\x12", model_version, "model_version"),
        _string_field(b"\x1a", id, "id"),
        _parameters_field(b"\x22", parameters, "parameters"),
    ]
    for i, (name, datatype, shape, params) in enumerate(inputs):  # 5
        if not params and type(name) is str and type(datatype) is str and type(shape) is tuple:
            for dim in shape:
                if type(dim) is not int:
                    break
            else:  # a cacheable key (see the caches above)
                key = (name, datatype, shape)
                field = _input_field_cache.get(key)
                if field is None:
                    field = _input_field(
                        name, datatype, shape, {}, labels, labels.item("inputs", i)
                    )
                    if len(_input_field_cache) >= _FIELD_CACHE_SIZE:
                        _input_field_cache.clear()
                    _input_field_cache[key] = field
                parts.append(field)
                continue
        parts.append(_input_field(name, datatype, shape, params, labels, labels.item("inputs", i)))
    for i, (name, params) in enumerate(outputs):  # 6
        if not params and type(name) is str:
            field = _output_field_cache.get(name)
            if field is None:
                field = _output_field(name, {}, labels, labels.item("outputs", i))
                if len(_output_field_cache) >= _FIELD_CACHE_SIZE:
                    _output_field_cache.clear()
                _output_field_cache[name] = field
        else:
            field = _output_field(name, params, labels, labels.item("outputs", i))
        parts.append(field)

    buffers: list[BytesLike] = []
    total = 0
    for i, raw in enumerate(raw_input_contents):  # 7
        try:
            view = memoryview(raw)
        except TypeError:
            raise InvalidInputError(
                f"raw_input_contents[{i}] must be a bytes-like object, not {type(raw).__name__}",
                value=raw,
            ) from None
        if not view.c_contiguous:
            raise InvalidInputError(
                f"raw_input_contents[{i}] is not C-contiguous; copy it first", value=raw
            )
        size = view.nbytes  # not len(): a typed view's len() counts elements
        parts.append(b"\x3a" + _varint_bytes(size))
        if size:  # the framing so far goes before the tensor, then the tensor itself
            framing = b"".join(parts)
            buffers.append(framing)
            buffers.append(view)
            total += len(framing) + size
            parts = []
    framing = b"".join(parts)
    if framing:
        buffers.append(framing)
        total += len(framing)
    if total > _MAX_MESSAGE_BYTES:
        raise InvalidInputError(
            f"ModelInferRequest would be {total} bytes; protobuf messages must stay under 2 GiB"
            " (send large tensors through shared memory)",
            value=total,
        )
    return buffers


# ------------------------------------------------------------------------------ decoder
#
# Every function takes the buffer, a position and the end of the enclosing message, and
# checks each read against that end, so a length that overruns its parent is an error
# rather than a read into the next field. `buf` is the received bytes (fast indexing) and
# `view` a memoryview of it (zero-copy slicing); both are the same memory.

_Buffer = bytes | bytearray | memoryview


def _fail(problem: str, where: str, offset: int) -> ProtocolError:
    return ProtocolError(f"malformed {where}: {problem} at byte {offset}")


def _varint(buf: _Buffer, pos: int, end: int, where: str) -> tuple[int, int]:
    if pos < end:
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
    start = pos
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _fail("truncated varint", where, start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            # Bits past 64 in a 10th byte are dropped, as protobuf does.
            return result & _MASK64, pos
        shift += 7
        if shift == 70:
            raise _fail("varint longer than 10 bytes", where, start)


def _tag(buf: _Buffer, pos: int, end: int, where: str) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    start = pos
    value, pos = _varint(buf, pos, end, where)
    # Tags are uint32 in at most 5 bytes (upb and C++ reject anything longer).
    if pos - start > 5 or value > _MASK32:
        raise _fail("invalid field tag", where, start)
    return value, pos


def _length(buf: _Buffer, pos: int, end: int, where: str) -> tuple[int, int]:
    start = pos
    size, pos = _varint(buf, pos, end, where)
    if size >= _MAX_MESSAGE_BYTES or size > end - pos:
        raise _fail(f"length {size} runs past the end of the enclosing message", where, start)
    return size, pos


def _skip(
    buf: _Buffer, pos: int, end: int, number: int, wire_type: int, depth: int, where: str
) -> int:
    """Skip the value of an unknown field of a message; its tag ended at ``pos``."""
    if number == 0:
        raise _fail("field number 0", where, pos - 1)
    return _skip_value(buf, pos, end, number, wire_type, depth, where)


def _skip_value(
    buf: _Buffer, pos: int, end: int, number: int, wire_type: int, depth: int, where: str
) -> int:
    if wire_type == _VARINT:
        return _varint(buf, pos, end, where)[1]
    if wire_type == _LEN:
        size, pos = _length(buf, pos, end, where)
        return pos + size
    if wire_type in (_I64, _I32):
        width = 8 if wire_type == _I64 else 4
        if end - pos < width:
            raise _fail(f"truncated {width * 8}-bit value", where, pos)
        return pos + width
    if wire_type == _SGROUP:
        return _skip_group(buf, pos, end, number, depth - 1, where)
    if wire_type == _EGROUP:
        raise _fail("end-group tag outside a group", where, pos - 1)
    raise _fail(f"invalid wire type {wire_type}", where, pos - 1)


def _skip_group(buf: _Buffer, pos: int, end: int, number: int, depth: int, where: str) -> int:
    if depth < 0:
        raise _fail("groups nested too deep", where, pos)
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag & 7 == _EGROUP:
            if tag >> 3 != number:
                raise _fail("end-group tag does not match its group", where, pos - 1)
            return pos
        if tag >> 3 == 0:
            # Invalid everywhere (protobuf 4.25's upb agrees); recent upb lets it pass
            # inside a skipped group.
            raise _fail("field number 0 inside a group", where, pos - 1)
        pos = _skip_value(buf, pos, end, tag >> 3, tag & 7, depth, where)
    raise _fail(f"group {number} has no end-group tag", where, end)


def _text(view: memoryview, pos: int, size: int, where: str) -> str:
    try:
        return str(view[pos : pos + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(f"invalid UTF-8 in a string field ({exc.reason})", where, pos) from None


def _enter(depth: int, where: str, pos: int) -> int:
    depth -= 1
    if depth < 0:
        raise _fail("messages nested too deep", where, pos)
    return depth


def _signed64(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & (1 << 31) else value


def _decode_param(
    buf: _Buffer,
    view: memoryview,
    pos: int,
    end: int,
    current: ParamValue | None,
    depth: int,
    where: str,
) -> ParamValue | None:
    """InferParameter; ``current`` is the value being merged into (a repeated value field)."""
    value = current
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag == 0x08:  # bool_param
            raw, pos = _varint(buf, pos, end, where)
            value = raw != 0
        elif tag == 0x10:  # int64_param
            raw, pos = _varint(buf, pos, end, where)
            value = _signed64(raw)
        elif tag == 0x1A:  # string_param
            size, pos = _length(buf, pos, end, where)
            value = _text(view, pos, size, where)
            pos += size
        elif tag == 0x21:  # double_param
            if end - pos < 8:
                raise _fail("truncated 64-bit value", where, pos)
            value = struct.unpack_from("<d", buf, pos)[0]
            pos += 8
        elif tag == 0x28:  # uint64_param
            value, pos = _varint(buf, pos, end, where)
        else:
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, depth, where)
    return value


def _decode_param_entry(
    buf: _Buffer,
    view: memoryview,
    pos: int,
    end: int,
    params: dict[str, ParamValue | None],
    depth: int,
    where: str,
) -> None:
    """One ``map<string, InferParameter>`` entry, inserted into ``params``."""
    key = ""
    value: ParamValue | None = None
    clean = True
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag == 0x0A:  # key
            size, pos = _length(buf, pos, end, where)
            key = _text(view, pos, size, where)
            pos += size
        elif tag == 0x12:  # value (repeated occurrences merge)
            size, pos = _length(buf, pos, end, where)
            value = _decode_param(
                buf, view, pos, pos + size, value, _enter(depth, where, pos), f"{where}.value"
            )
            pos += size
        else:
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, depth, where)
            clean = False
    # upb keeps an entry with unknown fields as an unknown field of the parent message
    # instead of inserting it; the generated classes then do not show it in the map.
    if clean:
        params[key] = value


class _Contents:
    """Mutable InferTensorContents while parsing (occurrences of the field merge)."""

    __slots__ = ("bools", "bytes_", "fp32", "fp64", "int32", "int64", "uint32", "uint64")

    def __init__(self) -> None:
        self.bools: list[bool] = []
        self.int32: list[int] = []
        self.int64: list[int] = []
        self.uint32: list[int] = []
        self.uint64: list[int] = []
        self.fp32: list[float] = []
        self.fp64: list[float] = []
        self.bytes_: list[bytes] = []

    def freeze(self) -> WireTensorContents:
        return WireTensorContents(
            tuple(self.bools),
            tuple(self.int32),
            tuple(self.int64),
            tuple(self.uint32),
            tuple(self.uint64),
            tuple(self.fp32),
            tuple(self.fp64),
            tuple(self.bytes_),
        )


def _packed_varints(buf: _Buffer, pos: int, end: int, where: str) -> list[int]:
    values: list[int] = []
    append = values.append
    while pos < end:
        byte = buf[pos]
        if byte < 0x80:
            append(byte)
            pos += 1
        else:
            value, pos = _varint(buf, pos, end, where)
            append(value)
    return values


def _decode_contents(
    buf: _Buffer, view: memoryview, pos: int, end: int, into: _Contents, depth: int, where: str
) -> None:
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        number, wire_type = tag >> 3, tag & 7
        if 1 <= number <= 5 and wire_type in (_VARINT, _LEN):
            values: list[int]
            if wire_type == _VARINT:
                value, pos = _varint(buf, pos, end, where)
                values = [value]
            else:  # packed
                size, pos = _length(buf, pos, end, where)
                values = _packed_varints(buf, pos, pos + size, where)
                pos += size
            if number == 1:
                into.bools.extend(v != 0 for v in values)
            elif number == 2:
                into.int32.extend(_signed32(v) for v in values)  # int32: low 32 bits
            elif number == 3:
                into.int64.extend(_signed64(v) for v in values)
            elif number == 4:
                into.uint32.extend(v & _MASK32 for v in values)
            else:
                into.uint64.extend(values)
        elif (number == 6 and wire_type in (_I32, _LEN)) or (
            number == 7 and wire_type in (_I64, _LEN)
        ):
            width, code = (4, "f") if number == 6 else (8, "d")
            target = into.fp32 if number == 6 else into.fp64
            if wire_type == _LEN:  # packed
                size, pos = _length(buf, pos, end, where)
                if size % width:
                    raise _fail(f"packed {code}-array of {size} bytes", where, pos)
                target.extend(struct.unpack_from(f"<{size // width}{code}", buf, pos))
                pos += size
            else:
                if end - pos < width:
                    raise _fail(f"truncated {width * 8}-bit value", where, pos)
                target.append(struct.unpack_from(f"<{code}", buf, pos)[0])
                pos += width
        elif tag == 0x42:  # bytes_contents
            size, pos = _length(buf, pos, end, where)
            into.bytes_.append(bytes(view[pos : pos + size]))
            pos += size
        else:
            pos = _skip(buf, pos, end, number, wire_type, depth, where)


def _decode_output(
    buf: _Buffer, view: memoryview, pos: int, end: int, depth: int, where: str
) -> OutputTensorFields:
    name = datatype = ""
    shape: list[int] = []
    parameters: dict[str, ParamValue | None] = {}
    contents: _Contents | None = None
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag == 0x0A:  # name
            size, pos = _length(buf, pos, end, where)
            name = _text(view, pos, size, where)
            pos += size
        elif tag == 0x12:  # datatype
            size, pos = _length(buf, pos, end, where)
            datatype = _text(view, pos, size, where)
            pos += size
        elif tag == 0x1A:  # shape, packed
            size, pos = _length(buf, pos, end, where)
            shape.extend(_signed64(v) for v in _packed_varints(buf, pos, pos + size, where))
            pos += size
        elif tag == 0x18:  # shape, unpacked
            value, pos = _varint(buf, pos, end, where)
            shape.append(_signed64(value))
        elif tag == 0x22:  # parameters entry
            size, pos = _length(buf, pos, end, where)
            _decode_param_entry(
                buf,
                view,
                pos,
                pos + size,
                parameters,
                _enter(depth, where, pos),
                f"{where}.parameters",
            )
            pos += size
        elif tag == 0x2A:  # contents
            size, pos = _length(buf, pos, end, where)
            if contents is None:
                contents = _Contents()
            _decode_contents(
                buf,
                view,
                pos,
                pos + size,
                contents,
                _enter(depth, where, pos),
                f"{where}.contents",
            )
            pos += size
        else:
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, depth, where)
    return (
        name,
        datatype,
        tuple(shape),
        parameters,
        None if contents is None else contents.freeze(),
    )


class _Response:
    """Mutable ModelInferResponse while parsing (a repeated infer_response merges)."""

    __slots__ = ("id", "model_name", "model_version", "outputs", "parameters", "raw")

    def __init__(self) -> None:
        self.model_name = ""
        self.model_version = ""
        self.id = ""
        self.parameters: dict[str, ParamValue | None] = {}
        self.outputs: list[OutputTensorFields] = []
        self.raw: list[memoryview] = []

    def fields(self) -> InferResponseFields:
        return (
            self.model_name,
            self.model_version,
            self.id,
            self.parameters,
            self.outputs,
            self.raw,
        )


def _decode_response(
    buf: _Buffer, view: memoryview, pos: int, end: int, into: _Response, depth: int, where: str
) -> None:
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag == 0x32:  # raw_output_contents: a view, not a copy
            size, pos = _length(buf, pos, end, where)
            into.raw.append(view[pos : pos + size])
            pos += size
        elif tag == 0x0A or tag == 0x12 or tag == 0x1A:  # model_name, model_version, id
            size, pos = _length(buf, pos, end, where)
            text = _text(view, pos, size, where)
            pos += size
            if tag == 0x0A:
                into.model_name = text
            elif tag == 0x12:
                into.model_version = text
            else:
                into.id = text
        elif tag == 0x22:  # parameters entry
            size, pos = _length(buf, pos, end, where)
            _decode_param_entry(
                buf,
                view,
                pos,
                pos + size,
                into.parameters,
                _enter(depth, where, pos),
                f"{where}.parameters",
            )
            pos += size
        elif tag == 0x2A:  # outputs
            size, pos = _length(buf, pos, end, where)
            into.outputs.append(
                _decode_output(
                    buf,
                    view,
                    pos,
                    pos + size,
                    _enter(depth, where, pos),
                    f"{where}.outputs[{len(into.outputs)}]",
                )
            )
            pos += size
        else:
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, depth, where)


# The usual response (Triton's, for one request) decoded with fewer checks per field, from
# bytes only. Each function gives up (None) on anything it does not expect, malformed input
# included, and the general functions above decode that part from its start: their results
# and errors are the reference, this is only a shortcut to the same values. A length byte
# read past the end of a message is checked against that end before anything is decoded.


def _decode_usual_output(buf: bytes | bytearray, pos: int, end: int) -> OutputTensorFields | None:
    """An output with only a name, a datatype and a packed shape, one-byte lengths."""
    name = datatype = ""
    shape: tuple[int, ...] = ()
    while pos < end:
        tag = buf[pos]
        size = buf[pos + 1]
        start = pos + 2
        pos = start + size
        if size >= 0x80 or pos > end:
            return None
        if tag == 0x0A:
            name = buf[start:pos].decode()
        elif tag == 0x12:
            datatype = buf[start:pos].decode()
        elif tag == 0x1A:
            dims = buf[start:pos]
            if dims.isascii():  # each dimension is one byte, < 128
                shape += tuple(dims)
            else:
                shape += tuple(_signed64(v) for v in _packed_varints(buf, start, pos, ""))
        else:
            return None
    return name, datatype, shape, {}, None


def _decode_usual_response(
    buf: bytes | bytearray, view: memoryview, pos: int = 0, end: int = -1
) -> InferResponseFields | None:
    """A ``ModelInferResponse`` (in ``buf[pos:end]``) with no unknown fields and one-byte
    tags."""
    model_name = model_version = id = ""
    parameters: dict[str, ParamValue | None] = {}
    outputs: list[OutputTensorFields] = []
    raw: list[memoryview] = []
    if end < 0:
        end = len(buf)
    try:  # IndexError: a read past the end; the others: the general decoder's errors
        while pos < end:
            tag = buf[pos]
            size = buf[pos + 1]
            if size < 0x80:
                start = pos + 2
                if start + size > end:
                    return None
            else:
                size, start = _length(buf, pos + 1, end, "")
            pos = start + size
            if tag == 0x32:  # raw_output_contents: a view, not a copy
                raw.append(view[start:pos])
            elif tag == 0x2A:
                output = _decode_usual_output(buf, start, pos)
                if output is None:
                    output = _decode_output(
                        buf,
                        view,
                        start,
                        pos,
                        _MAX_DEPTH - 1,
                        f"ModelInferResponse.outputs[{len(outputs)}]",
                    )
                outputs.append(output)
            elif tag == 0x0A:
                model_name = buf[start:pos].decode()
            elif tag == 0x12:
                model_version = buf[start:pos].decode()
            elif tag == 0x1A:
                id = buf[start:pos].decode()
            elif tag == 0x22:
                _decode_param_entry(buf, view, start, pos, parameters, _MAX_DEPTH - 1, "")
            else:
                return None
    except (IndexError, UnicodeDecodeError, ProtocolError):
        return None
    return model_name, model_version, id, parameters, outputs, raw


# Responses to one model's requests usually differ only in their tensors' bytes and their id:
# fields 1 to 5 but the id repeat byte for byte. The codec keeps what it decoded of those
# bytes (see kserve_v2.grpc.codec); the splitter below only finds them and the raw contents.

# Tags of ModelInferResponse's fields 1 to 5 (model_name, model_version, id, parameters,
# outputs), all length-delimited.
_LAYOUT_TAGS: Final = frozenset({0x0A, 0x12, 0x1A, 0x22, 0x2A})
#: Longest layout split off (a longer one is decoded in full each time).
MAX_LAYOUT_BYTES: Final = 1024


def split_infer_response(
    buf: bytes | bytearray, view: memoryview, start: int, end: int
) -> tuple[bytes, int, int, list[memoryview]] | None:
    """Split the ``ModelInferResponse`` in ``buf[start:end]`` as ``(layout, id_start, id_end,
    raws)``: ``layout`` is the bytes of its fields 1 to 5 without the id field (at most
    :data:`MAX_LAYOUT_BYTES`), the id's UTF-8 is ``buf[id_start:id_end]``, ``raws`` are views
    of its ``raw_output_contents``, which must all follow those fields.

    None when the message has any other shape (an unknown field, a second id, a field after
    the raw contents, a length past the end): the general decoder takes it.
    """
    pos = start
    id_field = id_start = id_end = layout_end = -1
    raws: list[memoryview] = []
    try:
        while pos < end:
            tag = buf[pos]
            size = buf[pos + 1]
            if size < 0x80:
                body = pos + 2
            else:
                size, body = _length(buf, pos + 1, end, "")
            if tag == 0x32:
                if layout_end < 0:
                    layout_end = pos
                    if layout_end - start > MAX_LAYOUT_BYTES:
                        return None
                raws.append(view[body : body + size])
            elif layout_end >= 0 or tag not in _LAYOUT_TAGS:
                return None  # a field after the raw contents, or an unknown one
            elif tag == 0x1A:
                if id_field >= 0:
                    return None  # merged ids: left to the general decoder
                id_field, id_start, id_end = pos, body, body + size
            pos = body + size
        if pos != end:
            return None  # a length past the end
    except (IndexError, ProtocolError):
        return None
    if layout_end < 0:
        layout_end = end
        if layout_end - start > MAX_LAYOUT_BYTES:
            return None
    if id_field < 0:
        return view[start:layout_end].tobytes(), 0, 0, raws
    layout = view[start:id_field].tobytes() + view[id_end:layout_end].tobytes()
    return layout, id_start, id_end, raws


def stream_infer_response_span(buf: bytes | bytearray) -> tuple[int, int] | None:
    """Where the ``infer_response`` of a ``ModelStreamInferResponse`` that has nothing else
    (every data response Triton streams) lies in ``buf``, or None."""
    end = len(buf)
    if end > 2 and buf[0] == 0x12:
        try:
            size, start = _length(buf, 1, end, "")
        except ProtocolError:
            return None
        if start + size == end:
            return start, end
    return None


def _as_buffers(data: BytesLike) -> tuple[_Buffer, memoryview]:
    # What grpcio (bytes) and the native transport (bytearray) hand over: contiguous by
    # nature, and indexing them is faster than indexing a memoryview of the same memory.
    if type(data) is bytes or type(data) is bytearray:
        return data, memoryview(data)
    view = memoryview(data)
    if not view.c_contiguous:
        raise InvalidInputError("a message to decode must be a C-contiguous buffer", value=data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view, view


def decode_infer_response_fields(data: BytesLike) -> InferResponseFields:
    """Decode a serialized ``ModelInferResponse`` into its fields (:data:`InferResponseFields`).

    ``raw_output_contents`` are memoryview slices of ``data`` (no copy); everything else is
    decoded into plain Python values. Raises :class:`~kserve_v2.errors.ProtocolError` if
    ``data`` is not a valid encoding (and :class:`~kserve_v2.errors.InvalidInputError` if it
    is not a contiguous buffer).
    """
    buf, view = _as_buffers(data)
    return decode_infer_response_span(buf, view, 0, len(view))


def decode_infer_response_span(
    buf: _Buffer, view: memoryview, start: int, end: int
) -> InferResponseFields:
    """:func:`decode_infer_response_fields` of the message in ``buf[start:end]`` (``view``
    is a memoryview of ``buf``)."""
    if type(buf) is not memoryview:
        fields = _decode_usual_response(buf, view, start, end)
        if fields is not None:
            return fields
    response = _Response()
    _decode_response(buf, view, start, end, response, _MAX_DEPTH, "ModelInferResponse")
    return response.fields()


def decode_stream_infer_response_fields(
    data: BytesLike,
) -> tuple[str, InferResponseFields | None]:
    """Decode a serialized ``ModelStreamInferResponse`` as ``(error_message, response fields
    or None)``: the fields are ``None`` when ``infer_response`` is absent (Triton sends
    error-only messages that way).

    A message that is only an ``infer_response`` (every data response Triton streams) takes
    the same shortcut as :func:`decode_infer_response_fields`; anything else the general
    decoder.
    """
    buf, view = _as_buffers(data)
    fields = _usual_stream_response(buf, view)
    if fields is not None:
        return "", fields
    error_message, response = _decode_stream(buf, view)
    return error_message, None if response is None else response.fields()


def decode_stream_message_fields(
    data: BytesLike,
) -> tuple[str, InferResponseFields | None, bool]:
    """Decode a message received on ``ModelStreamInfer`` as ``(error_message, response
    fields or None, bare)``.

    The message is a ``ModelStreamInferResponse`` (Triton's extension, the only one that
    defines this RPC), decoded as :func:`decode_stream_infer_response_fields` does, or a bare
    ``ModelInferResponse`` (MLServer answers its stream with those; ``bare`` is then true):
    one with a top-level field that only ``ModelInferResponse`` has (``id`` = 3,
    ``parameters`` = 4, ``outputs`` = 5, ``raw_output_contents`` = 6, all length-delimited).
    Read as the other, its ``model_name`` (1) would pass for an ``error_message`` and its
    ``model_version`` (2) for an ``infer_response``.
    """
    buf, view = _as_buffers(data)
    fields = _usual_stream_response(buf, view)
    if fields is not None:
        return "", fields, False
    if _has_infer_response_field(buf, len(view)):
        try:
            return "", decode_infer_response_fields(data), True
        except ProtocolError as exc:
            raise ProtocolError(
                f"stream message with fields of a ModelInferResponse, not a "
                f"ModelStreamInferResponse, and not a valid ModelInferResponse either: {exc}",
                value=exc.value,
            ) from None
    error_message, response = _decode_stream(buf, view)
    return error_message, None if response is None else response.fields(), False


def _usual_stream_response(buf: _Buffer, view: memoryview) -> InferResponseFields | None:
    """The shortcut: a message that is only an ``infer_response`` (field 2), or None."""
    if type(buf) is not memoryview:
        span = stream_infer_response_span(buf)
        if span is not None:
            return _decode_usual_response(buf, view, *span)
    return None


# Tags of the length-delimited fields 3 to 6: what ModelInferResponse has and
# ModelStreamInferResponse has not.
_INFER_RESPONSE_ONLY_TAGS: Final = frozenset({0x1A, 0x22, 0x2A, 0x32})


def _has_infer_response_field(buf: _Buffer, end: int) -> bool:
    """Whether a top-level field of the message is one of :data:`_INFER_RESPONSE_ONLY_TAGS`
    (a malformed message is left to the stream decoder, which reports it)."""
    pos = 0
    try:
        while pos < end:
            tag, pos = _tag(buf, pos, end, "")
            if tag in _INFER_RESPONSE_ONLY_TAGS:
                return True
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, _MAX_DEPTH, "")
    except (ProtocolError, IndexError):
        return False
    return False


def _decode_stream(buf: _Buffer, view: memoryview) -> tuple[str, _Response | None]:
    end = len(view)
    where = "ModelStreamInferResponse"
    error_message = ""
    response: _Response | None = None
    pos = 0
    while pos < end:
        tag, pos = _tag(buf, pos, end, where)
        if tag == 0x0A:  # error_message
            size, pos = _length(buf, pos, end, where)
            error_message = _text(view, pos, size, where)
            pos += size
        elif tag == 0x12:  # infer_response (repeated occurrences merge)
            size, pos = _length(buf, pos, end, where)
            if response is None:
                response = _Response()
            _decode_response(
                buf,
                view,
                pos,
                pos + size,
                response,
                _enter(_MAX_DEPTH, where, pos),
                f"{where}.infer_response",
            )
            pos += size
        else:
            pos = _skip(buf, pos, end, tag >> 3, tag & 7, _MAX_DEPTH, where)
    return error_message, response
