"""REST bodies of the inference protocol, without I/O.

Requests become an :class:`EncodedBody`: headers plus a list of buffers (the JSON header, then
each binary tensor as a view of its array: tensor bytes are never copied into a joined body).
Response bodies (any bytes-like) decode into :class:`~kserve_v2.messages.InferResult` with
output arrays that are views on the received buffer where the datatype allows.

Requests and responses both have encoders and decoders, so captured traffic can be decoded and
the codec can be checked in both directions.

Example::

    >>> import numpy as np
    >>> from kserve_v2.messages import InferRequest
    >>> from kserve_v2.tensors import InferInput
    >>> body = encode_infer_request(InferRequest("m", (InferInput("x", np.ones(2, np.int8)),)))
    >>> body.headers
    (('Content-Type', 'application/octet-stream'), ('Inference-Header-Content-Length', '123'))
    >>> [bytes(p) for p in body.parts][1]
    b'\\x01\\x01'
"""

from __future__ import annotations

import codecs
import email.utils
import html
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final

import numpy.typing as npt

from kserve_v2.datatypes import (
    DATATYPE_BY_NAME,
    BytesLike,
    Datatype,
    deserialize,
    from_json_data,
    serialize,
    to_json_data,
)
from kserve_v2.errors import InvalidInputError, ProtocolError, ServerError
from kserve_v2.messages import (
    InferRequest,
    InferResult,
    ModelMetadata,
    OutputTensor,
    ServerMetadata,
    TensorMetadata,
    new_infer_result,
    new_output_tensor,
)
from kserve_v2.parameters import ParameterValue
from kserve_v2.tensors import InferInput, RequestedOutput, SharedMemoryPlacement, naming

__all__ = [
    "BINARY_REFUSED_HINT",
    "EncodedBody",
    "HEADER_LENGTH",
    "REFUSAL_STATUSES",
    "decode_infer_request",
    "decode_infer_response",
    "decode_json_object",
    "decode_model_metadata",
    "decode_server_metadata",
    "encode_infer_request",
    "encode_infer_response",
    "encode_json",
    "encode_raw_binary_request",
    "error_from_response",
    "header_length_of",
    "retry_after_seconds",
]

#: The binary-data extension's header giving the length of the JSON part of a body.
HEADER_LENGTH: Final = "Inference-Header-Content-Length"
JSON_TYPE: Final = "application/json"
BINARY_TYPE: Final = "application/octet-stream"
_HEADER_LENGTH_LOWER: Final = HEADER_LENGTH.lower()
# The scanner behind json.loads (a decoder with the default settings; typeshed omits it).
_SCAN_JSON: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
# What the encoder writes for a string (ensure_ascii=False: only '"', '\\' and controls escaped).
_json_str: Final = encode_basestring
_BINARY_DATA_FLAG: Final = {
    True: ',"parameters":{"binary_data":true}},',
    False: ',"parameters":{"binary_data":false}},',
}
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A ready HTTP body: its headers, the buffers to send back to back, and their total length."""

    headers: tuple[tuple[str, str], ...]
    parts: tuple[BytesLike, ...]
    length: int

    def join(self) -> bytes:
        """The whole body as one ``bytes`` (copies: for tests, dumps and small bodies)."""
        return b"".join(self.parts)


def encode_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON; NaN/infinity refused (JSON has no literal for them)."""
    try:
        return _DUMPS(obj).encode("utf-8")
    except ValueError as exc:
        raise InvalidInputError(f"value cannot be encoded as JSON: {exc}", value=obj) from None


def _tensor_entry(
    name: str,
    datatype: Datatype,
    shape: Sequence[int],
    array: npt.NDArray[Any] | None,
    wire: BytesLike | None,
    parameters: Mapping[str, ParameterValue],
    binary: bool,
    blobs: list[BytesLike],
    what: str = "tensor",
) -> dict[str, Any]:
    """One ``$request_input`` / ``$response_output`` object, appending its blob if binary;
    errors about its data name it as ``what`` (``"input"``, ``"tensor"``)."""
    # ``_value_`` is the member's plain attribute; ``.value`` goes through a slow descriptor.
    entry: dict[str, Any] = {"name": name, "shape": list(shape), "datatype": datatype._value_}
    params = dict(parameters)
    if array is not None or wire is not None:
        try:
            if binary:
                if wire is None:
                    assert array is not None
                    wire = serialize(array, datatype)
                params["binary_data_size"] = memoryview(wire).nbytes
                blobs.append(wire)
            else:
                assert array is not None
                entry["data"] = to_json_data(array, datatype)
        except InvalidInputError as exc:
            raise naming(what, name, exc) from None
    if params:
        entry["parameters"] = params
    return entry


def _input_entry(tensor: InferInput, binary: bool, blobs: list[BytesLike]) -> dict[str, Any]:
    params: dict[str, ParameterValue] = dict(tensor.parameters)
    if tensor.shared_memory is not None:
        params.update(tensor.shared_memory.as_parameters())
        return _tensor_entry(
            tensor.name, tensor.datatype, tensor.shape, None, None, params, binary, blobs
        )
    if binary if tensor.binary is None else tensor.binary:
        return _tensor_entry(
            tensor.name,
            tensor.datatype,
            tensor.shape,
            None,
            tensor.wire_bytes(),
            params,
            True,
            blobs,
        )
    return _tensor_entry(
        tensor.name, tensor.datatype, tensor.shape, tensor.data, None, params, False, blobs, "input"
    )


def _output_entry(output: RequestedOutput, binary: bool) -> dict[str, Any]:
    params: dict[str, ParameterValue] = dict(output.parameters)
    if output.shared_memory is not None:
        params.update(output.shared_memory.as_parameters())
    elif output.binary is not None:
        params["binary_data"] = output.binary
    elif binary:
        params["binary_data"] = True
    if output.class_count:
        params["classification"] = output.class_count
    entry: dict[str, Any] = {"name": output.name}
    if params:
        entry["parameters"] = params
    return entry


def _finish(header: dict[str, Any], blobs: list[BytesLike]) -> EncodedBody:
    head = encode_json(header)
    if not blobs:
        return EncodedBody((("Content-Type", JSON_TYPE),), (head,), len(head))
    length = len(head) + sum(memoryview(b).nbytes for b in blobs)
    return EncodedBody(
        (("Content-Type", BINARY_TYPE), (HEADER_LENGTH, str(len(head)))),
        (head, *blobs),
        length,
    )


def _plain_binary_request(
    request: InferRequest, binary_inputs: bool, binary_outputs: bool
) -> EncodedBody | None:
    """The body of the usual request, with its JSON header written as text; ``None`` when the
    request has anything else (the general encoder then takes it).

    Usual: no request parameters, every input binary with no parameters and not in shared
    memory, every output asked for by name (and binary flag) only. The text is exactly what the
    general encoder produces for such a request (same keys in the same order, compact
    separators, strings escaped by the same function), at a fraction of the cost of building
    and dumping dicts.
    """
    if request.parameters or type(request.id) is not str or not request.inputs:
        return None
    text = ['{"id":', _json_str(request.id), ","] if request.id else ["{"]
    if not request.outputs and binary_outputs:
        text.append('"parameters":{"binary_data_output":true},')
    text.append('"inputs":[')
    blobs: list[BytesLike] = []
    length = 0
    for tensor in request.inputs:
        name = tensor.name
        shape = tensor.shape
        if (
            tensor.shared_memory is not None
            or tensor.parameters
            or not (binary if (binary := tensor.binary) is not None else binary_inputs)
            or type(name) is not str
        ):
            return None
        for dim in shape:
            if type(dim) is not int:
                return None
        wire = tensor.wire_bytes()
        size = wire.nbytes if type(wire) is memoryview else memoryview(wire).nbytes
        length += size
        blobs.append(wire)
        text += (
            '{"name":',
            _json_str(name),
            ',"shape":[',
            ",".join(map(str, shape)),
            '],"datatype":"',
            tensor.datatype._value_,
            '","parameters":{"binary_data_size":',
            str(size),
            "}},",
        )
    text[-1] = "}}]"  # the last input's closing, without its comma
    if request.outputs:
        text.append(',"outputs":[')
        for output in request.outputs:
            name = output.name
            flag = output.binary
            if (
                output.parameters
                or output.shared_memory is not None
                or output.class_count
                or type(name) is not str
                or (flag is not None and type(flag) is not bool)
            ):
                return None
            if flag is None and binary_outputs:
                flag = True
            if flag is None:
                text += ('{"name":', _json_str(name), "},")
            else:
                text += ('{"name":', _json_str(name), _BINARY_DATA_FLAG[flag])
        text[-1] = text[-1][:-1] + "]"  # drop the last output's comma
    text.append("}")
    try:
        head = "".join(text).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the general encoder says what is wrong
        return None
    return EncodedBody(
        (("Content-Type", BINARY_TYPE), (HEADER_LENGTH, str(len(head)))),
        (head, *blobs),
        len(head) + length,
    )


def encode_infer_request(
    request: InferRequest, *, binary_inputs: bool = True, binary_outputs: bool = True
) -> EncodedBody:
    """Encode an inference request body.

    ``binary_inputs`` / ``binary_outputs`` are the defaults for tensors whose own ``binary`` is
    ``None``; every datatype has a JSON form, FP16 and BF16 included (JSON numbers). With no
    outputs named, ``binary_outputs`` sets the request-level ``binary_data_output``.
    """
    plain = _plain_binary_request(request, binary_inputs, binary_outputs)
    if plain is not None:
        return plain
    return _encode_infer_request(request, binary_inputs, binary_outputs)


def _encode_infer_request(
    request: InferRequest, binary_inputs: bool, binary_outputs: bool
) -> EncodedBody:
    """The general request encoder: a dict per tensor, dumped as JSON."""
    header: dict[str, Any] = {}
    if request.id:
        header["id"] = request.id
    params: dict[str, ParameterValue] = dict(request.parameters)
    if not request.outputs and binary_outputs:
        params["binary_data_output"] = True
    if params:
        header["parameters"] = params
    blobs: list[BytesLike] = []
    header["inputs"] = [_input_entry(t, binary_inputs, blobs) for t in request.inputs]
    if request.outputs:
        header["outputs"] = [_output_entry(o, binary_outputs) for o in request.outputs]
    return _finish(header, blobs)


def encode_raw_binary_request(tensor: InferInput) -> EncodedBody:
    """The binary-data extension's raw form: the tensor bytes alone, header length 0.

    Only for models with a single input whose metadata the server can deduce from the size.
    """
    wire = tensor.wire_bytes()
    return EncodedBody(
        (("Content-Type", BINARY_TYPE), (HEADER_LENGTH, "0")), (wire,), memoryview(wire).nbytes
    )


def encode_infer_response(result: InferResult, *, binary: bool = True) -> EncodedBody:
    """Encode a response body the way a server would (tests, fixtures, the CLI)."""
    header: dict[str, Any] = {"model_name": result.model_name}
    if result.model_version:
        header["model_version"] = result.model_version
    if result.id:
        header["id"] = result.id
    if result.parameters:
        header["parameters"] = dict(result.parameters)
    blobs: list[BytesLike] = []
    header["outputs"] = [
        _tensor_entry(
            t.name, Datatype.parse(t.datatype), t.shape, t.data, None, t.parameters, binary, blobs
        )
        for t in result.outputs
    ]
    return _finish(header, blobs)


# ---------------------------------------------------------------------------------------------
# decoding


def decode_json_object(data: BytesLike, what: str = "body") -> dict[str, Any]:
    """Parse a JSON object; anything else raises :class:`ProtocolError` saying what was wrong."""
    # Fast path for the usual body, an object with nothing around it: the decoder's scanner
    # called directly skips json.loads' checks and whitespace matching, and plain UTF-8 is
    # cheaper than "utf-8-sig". Anything else (a BOM, whitespace, errors) takes the full path.
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError:
        text = ""
    if text[:1] == "{" and text[-1] == "}":
        try:
            obj, end = _SCAN_JSON(text, 0)
        except (ValueError, StopIteration, RecursionError):
            pass
        else:
            if end == len(text):
                return obj  # type: ignore[no-any-return]  # "{" always scans to a dict
    return _decode_json_object(data, what)


def _decode_json_object(data: BytesLike, what: str) -> dict[str, Any]:
    """The general path of :func:`decode_json_object`, with its error messages."""
    try:
        # Decoding the view directly saves a copy into bytes; a leading BOM is tolerated.
        obj = json.loads(str(data, "utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"{what} is not valid JSON: {exc}", value=bytes(data[:200])) from None
    except RecursionError:
        raise ProtocolError(f"{what} nests JSON too deeply", value=bytes(data[:200])) from None
    if not isinstance(obj, dict):
        raise ProtocolError(
            f"{what} must be a JSON object, got {type(obj).__name__}", value=bytes(data[:200])
        )
    return obj


def _split_body(body: BytesLike, header_length: str | int | None) -> tuple[memoryview, memoryview]:
    view = memoryview(body)
    if type(body) is not bytearray and not isinstance(body, bytes):  # those are flat bytes
        view = view.cast("B")
    if header_length is None:
        return view, view[len(view) :]
    # Only decimal digits: int() would also take "1_0", "+5" and non-ASCII digits.
    digits = header_length.strip() if isinstance(header_length, str) else None
    try:
        if type(header_length) is int:
            length = header_length
        elif digits is not None and digits.isascii() and digits.isdigit():
            length = int(digits)
        else:
            raise ValueError(header_length)
    except ValueError:  # also int()'s limit on the number of digits
        raise ProtocolError(
            f"{HEADER_LENGTH} is not an integer: {header_length!r:.40}", value=header_length
        ) from None
    if not 0 <= length <= len(view):
        raise ProtocolError(
            f"{HEADER_LENGTH} {length} is outside the {len(view)}-byte body", value=length
        )
    return view[:length], view[length:]


def _expect(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(
            f"{what}: field {key!r} must be {_kind_name(kind)}, got {value!r:.80}", value=value
        )
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {
            str: "a string",
            int: "an integer",
            list: "an array",
            dict: "an object",
            bool: "a boolean",
        }.get(k, k.__name__)
        for k in kinds
    )


def _parameters(obj: Mapping[str, Any], what: str) -> dict[str, ParameterValue]:
    params = obj.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ProtocolError(f"{what}: 'parameters' must be an object", value=params)
    for key, value in params.items():
        if not isinstance(value, bool | int | float | str):
            raise ProtocolError(
                f"{what}: parameter {key!r} must be a string, number or boolean, got "
                f"{type(value).__name__}",
                value=value,
            )
    return params


def _where(what: str, index: int, name: object = None) -> str:
    """Names an entry in error messages (built only when something is wrong)."""
    return f"{what}[{index}]" if name is None else f"{what}[{index}] ({name!r})"


_PARAMETER_TYPES: Final = frozenset({bool, int, float, str})  # what JSON decoding yields


def _checked_parameters(
    params: object, what: str, index: int, name: str
) -> dict[str, ParameterValue]:
    if type(params) is not dict:
        raise ProtocolError(
            f"{_where(what, index, name)}: 'parameters' must be an object", value=params
        )
    for key, value in params.items():
        if type(value) not in _PARAMETER_TYPES:
            raise ProtocolError(
                f"{_where(what, index, name)}: parameter {key!r} must be a string, number or "
                f"boolean, got {type(value).__name__}",
                value=value,
            )
    return params


_NO_PLACEMENTS: Final[Mapping[str, SharedMemoryPlacement]] = {}


def _decode_tensors(
    entries: object,
    binary: memoryview,
    what: str,
    *,
    placements: Mapping[str, SharedMemoryPlacement] = _NO_PLACEMENTS,
) -> list[OutputTensor]:
    """The tensor entries of a body, each as an :class:`OutputTensor` (requests' inputs too).

    Every entry must carry data, binary data or a shared-memory region, except those named in
    ``placements`` (outputs the request placed in shared memory): those decode with
    ``data=None`` and the placement's ``shared_memory_*`` parameters filled in.
    """
    # The hot path of every response: one pass, plain type checks, error text built only on
    # failure, and the result objects built straight away (no intermediate records).
    if type(entries) is not list:
        raise ProtocolError(f"{what} must be an array, got {type(entries).__name__}")
    out: list[OutputTensor] = []
    offset = 0
    available = len(binary)
    for index, entry in enumerate(entries):
        if type(entry) is not dict:
            raise ProtocolError(
                f"{_where(what, index)} must be an object, got {type(entry).__name__}"
            )
        name: str = entry.get("name")  # type: ignore[assignment]  # checked next
        if type(name) is not str:
            _expect(entry, "name", str, _where(what, index))
        raw_datatype = entry.get("datatype")
        datatype = DATATYPE_BY_NAME.get(raw_datatype) if type(raw_datatype) is str else None
        if datatype is None:
            _expect(entry, "datatype", str, _where(what, index, name))
            raise ProtocolError(f"{_where(what, index, name)}: unknown datatype {raw_datatype!r}")
        shape: list[int] = entry.get("shape")  # type: ignore[assignment]  # checked next
        if type(shape) is not list:
            _expect(entry, "shape", list, _where(what, index, name))
        for dim in shape:
            if type(dim) is not int or dim < 0:
                raise ProtocolError(
                    f"{_where(what, index, name)}: shape dimensions must be non-negative "
                    f"integers, got {shape!r:.80}",
                    value=shape,
                )
        raw_params = entry.get("parameters")
        params = {} if raw_params is None else _checked_parameters(raw_params, what, index, name)
        data: npt.NDArray[Any] | None = None
        size = params.pop("binary_data_size", None) if params else None
        if size is not None:
            if type(size) is not int or size < 0:
                raise ProtocolError(
                    f"{_where(what, index, name)}: binary_data_size must be a non-negative integer",
                    value=size,
                )
            end = offset + size
            if end > available:
                raise ProtocolError(
                    f"{_where(what, index, name)}: binary_data_size {size} at offset {offset} "
                    f"runs past the {available} bytes of binary data",
                    value=size,
                )
            try:
                data = deserialize(binary[offset:end], datatype, shape)
            except ProtocolError as exc:
                raise ProtocolError(f"{_where(what, index, name)}: {exc.message}") from None
            offset = end
        elif "data" in entry:
            data = from_json_data(entry["data"], datatype, shape, name=name)
        elif name in placements:
            params = {**placements[name].as_parameters(), **params}
        elif "shared_memory_region" not in params:
            raise ProtocolError(
                f"{_where(what, index, name)} carries no data, binary data or shared-memory region"
            )
        out.append(new_output_tensor(name, datatype._value_, tuple(shape), data, params))
    if len(out) > 1:
        _check_unique_names([tensor.name for tensor in out], what)
    if offset != available:
        raise ProtocolError(
            f"binary data is {available} bytes but the {what} account for {offset}",
            value=available,
        )
    return out


def _check_unique_names(names: list[str], what: str) -> None:
    """Raise ProtocolError when a tensor name comes twice (which tensor would be meant?)."""
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ProtocolError(f"{what} name {name!r} more than once", value=name)
        seen.add(name)


def _optional_str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(f"{what}: field {key!r} must be a string, got {value!r:.80}")
    return value


def decode_infer_response(
    body: BytesLike,
    header_length: str | int | None = None,
    *,
    shared_memory: Mapping[str, SharedMemoryPlacement] | None = None,
) -> InferResult:
    """Decode an inference response body.

    ``header_length`` is the ``Inference-Header-Content-Length`` header's value, or ``None``
    when the response had none (pure JSON). Binary outputs become views on ``body``.

    ``shared_memory`` maps the names of outputs the request placed in shared memory to their
    placement: Triton answers those with no data and no parameters, so they decode with
    ``data=None`` and the placement's ``shared_memory_*`` parameters filled in.
    """
    head, binary = _split_body(body, header_length)
    obj = decode_json_object(head, "inference response")
    outputs = _decode_tensors(
        obj.get("outputs", []), binary, "outputs", placements=shared_memory or _NO_PLACEMENTS
    )
    model_name = obj.get("model_name", "")
    model_version = obj.get("model_version", "")
    request_id = obj.get("id", "")
    if type(model_name) is not str or type(model_version) is not str or type(request_id) is not str:
        # Absent, null or not a string: _optional_str says which (in this order).
        model_name = _optional_str(obj, "model_name", "inference response")
        model_version = _optional_str(obj, "model_version", "inference response")
        request_id = _optional_str(obj, "id", "inference response")
    parameters = obj.get("parameters")
    return new_infer_result(
        model_name,
        model_version,
        request_id,
        {} if parameters is None else _parameters(obj, "inference response"),
        tuple(outputs),
    )


def decode_infer_request(
    body: BytesLike, header_length: str | int | None = None, *, model_name: str = ""
) -> InferRequest:
    """Decode a captured inference request body (the CLI, tests, test servers).

    A raw binary request (header length 0) cannot be decoded without the model's metadata and
    raises :class:`ProtocolError`.
    """
    if header_length is not None and str(header_length).strip() == "0":
        raise ProtocolError("raw binary request: its tensor needs the model's metadata to decode")
    head, binary = _split_body(body, header_length)
    obj = decode_json_object(head, "inference request")
    tensors = _decode_tensors(_expect(obj, "inputs", list, "inference request"), binary, "inputs")
    inputs = []
    for t in tensors:
        datatype = DATATYPE_BY_NAME[t.datatype]
        parameters = dict(t.parameters)
        try:
            if t.data is None:
                placement = _shared_memory_placement(parameters, f"input {t.name!r}")
                inputs.append(
                    InferInput(
                        t.name,
                        None,
                        datatype=datatype,
                        shape=t.shape,
                        parameters=parameters,
                        shared_memory=placement,
                        allow_reserved=True,
                    )
                )
            else:
                inputs.append(
                    InferInput(
                        t.name,
                        t.data,
                        datatype=datatype,
                        parameters=parameters,
                        allow_reserved=True,
                    )
                )
        except (InvalidInputError, TypeError, ValueError) as exc:
            raise ProtocolError(f"input {t.name!r}: {exc}") from None
    outputs = []
    raw_outputs = obj.get("outputs", [])
    if not isinstance(raw_outputs, list):
        raise ProtocolError("inference request: 'outputs' must be an array")
    for index, entry in enumerate(raw_outputs):
        where = f"outputs[{index}]"
        if not isinstance(entry, dict):
            raise ProtocolError(f"{where} must be an object")
        name = _expect(entry, "name", str, where)
        params = _parameters(entry, where)
        placement = _shared_memory_placement(params, where)
        binary_flag = params.pop("binary_data", None)
        if binary_flag is not None and not isinstance(binary_flag, bool):
            raise ProtocolError(f"{where}: binary_data must be a boolean", value=binary_flag)
        class_count = params.pop("classification", 0)
        if type(class_count) is not int:
            raise ProtocolError(f"{where}: classification must be an integer", value=class_count)
        try:
            outputs.append(
                RequestedOutput(
                    name,
                    binary=binary_flag,
                    class_count=class_count,
                    parameters=params,
                    shared_memory=placement,
                    allow_reserved=True,
                )
            )
        except InvalidInputError as exc:
            raise ProtocolError(f"{where}: {exc}") from None
    return InferRequest(
        model_name=model_name,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        id=_optional_str(obj, "id", "inference request"),
        parameters=_parameters(obj, "inference request"),
    )


def _shared_memory_placement(
    params: dict[str, ParameterValue], where: str
) -> SharedMemoryPlacement | None:
    """Take the ``shared_memory_*`` parameters out of ``params`` (None without a region)."""
    if "shared_memory_region" not in params:
        return None
    region = params.pop("shared_memory_region")
    byte_size = params.pop("shared_memory_byte_size", 0)
    offset = params.pop("shared_memory_offset", 0)
    if not isinstance(region, str) or type(byte_size) is not int or type(offset) is not int:
        raise ProtocolError(
            f"{where}: shared_memory_region must be a string, shared_memory_byte_size and "
            "shared_memory_offset integers",
            value=(region, byte_size, offset),
        )
    try:
        return SharedMemoryPlacement(region, byte_size, offset)
    except InvalidInputError as exc:
        raise ProtocolError(f"{where}: {exc.message}") from None


def header_length_of(headers: Mapping[str, str]) -> str | None:
    """The ``Inference-Header-Content-Length`` value from lower-cased response headers."""
    return headers.get(_HEADER_LENGTH_LOWER)


# ---------------------------------------------------------------------------------------------
# error bodies
#
# The protocol's error body is {"error": "<message>"} (Triton, KServe, MLServer's own errors),
# but servers built on FastAPI also answer {"detail": "<message>"} (HTTPException) and, for a
# body that fails validation, 422 {"detail": [{"loc": [...], "msg": "...", "input": ...}]},
# whose "input" echoes the request (tensor bytes included); a crash gives text/plain "Internal
# Server Error", a proxy an HTML page. The message keeps the server's words and drops the rest.

#: Added to the message when a request sent with Triton's binary tensor extension to a server
#: that does not list it (``binary_tensor_data``) is refused.
BINARY_REFUSED_HINT: Final = (
    "this server may not support Triton's binary tensor extension; try binary=False"
)
#: Statuses with which servers refuse a body they cannot parse (FastAPI: 422; MLServer: 500 when
#: the bytes are not UTF-8; others 400 or 415); not 404 (unknown model) and the like.
REFUSAL_STATUSES: Final = frozenset({400, 415, 422, 500})
# Characters kept of a message found in a known error shape (the whole body stays in
# ServerError.body); Triton's longest messages are under 1,000 characters.
_MESSAGE_LIMIT: Final = 2000
# Characters kept of a body of no known shape (text, HTML, other JSON), whitespace collapsed.
_TEXT_LIMIT: Final = 500
# Bytes of a body looked at at all: error bodies are small, a huge one is cut unread.
_BODY_LIMIT: Final = 1 << 20
# FastAPI validation errors listed in the message (the rest are counted).
_VALIDATION_ITEMS: Final = 5
# Control characters that plain text does not contain: their presence means binary data.
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HTML_START: Final = re.compile(r"\s*<(?:!doctype\s+html|html|head|body|title|h1)\b", re.I)
_HTML_TITLE: Final = re.compile(r"<(title|h1)\b[^>]*>(.*?)</\1\s*>", re.I | re.S)
_HTML_SKIP: Final = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_HTML_TAG: Final = re.compile(r"<[^>]*>")


def error_from_response(
    status: int,
    body: BytesLike,
    reason: str = "",
    *,
    binary_refused_hint: bool = False,
    headers: Mapping[str, str] | None = None,
) -> ServerError:
    """The :class:`ServerError` for a non-success response, with the server's own message.

    The message is taken from the error shapes servers really send: the protocol's
    ``{"error": "..."}``, FastAPI's ``{"detail": "..."}`` and validation errors ``{"detail":
    [{"loc": ..., "msg": ...}]}`` (locations and messages only: their ``input`` echoes the
    request), ``{"message": "..."}``, plain text and HTML (the page's title, else its text).
    Long messages are cut; a body that is not text (tensor bytes) is never quoted. The whole
    body stays in :attr:`ServerError.body`.

    ``binary_refused_hint``: the request used Triton's binary tensor extension and the server
    did not advertise it; a refusal (400, 415, 422, 500) then says so and suggests
    ``binary=False``. ``headers`` (lower-case names): the response's, for its
    ``Retry-After`` (:attr:`ServerError.retry_after`, see :func:`retry_after_seconds`).

    Example::

        >>> error_from_response(422, b'{"detail":[{"loc":["body"],"msg":"bad","input":"\\u0000"}]}')
        ServerError('[HTTP 422] body: bad')
    """
    raw = bytes(body)
    message = _error_message(raw[:_BODY_LIMIT], len(raw))
    if not message:
        message = reason or f"HTTP status {status} with no error message"
    elif message.startswith("("):  # only a remark on the body: the status says what happened
        message = f"{reason or f'HTTP status {status}'} {message}"
    if binary_refused_hint and status in REFUSAL_STATUSES:
        message = f"{message} ({BINARY_REFUSED_HINT})"
    retry_after = headers.get("retry-after") if headers else None
    return ServerError(
        message,
        http_status=status,
        body=raw,
        retry_after=None if retry_after is None else retry_after_seconds(retry_after),
    )


# Longer than this, a delay in seconds is "a very long time" (inf), not a number to sleep.
_RETRY_AFTER_DIGITS: Final = 12


def retry_after_seconds(value: str, now: float | None = None) -> float | None:
    """The wait an HTTP ``Retry-After`` value asks for, in seconds (RFC 9110 section 10.2.3):
    a number of seconds, or an HTTP date (its distance from ``now``, a Unix time, default
    the current one; 0 for a date past). None for a value that is neither, which is then
    ignored; ``math.inf`` for more digits than any real wait has.

    Example::

        >>> retry_after_seconds("120"), retry_after_seconds("soon")
        (120.0, None)
        >>> retry_after_seconds("Thu, 01 Jan 1970 00:02:00 GMT", now=60.0)
        60.0
    """
    text = value.strip()
    if text.isascii() and text.isdigit():
        return math.inf if len(text) > _RETRY_AFTER_DIGITS else float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT; "-0000" parses without a zone
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, wait)


def _error_message(raw: bytes, size: int) -> str:
    """The message in an error body ("" when there is none; "(...)" for a remark only)."""
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=size == len(raw))
    if "\ufffd" in text or _CONTROL.search(text):
        return f"(the {size}-byte body is binary, not shown)"
    if text.lstrip()[:1] in ("{", '"'):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            obj = None
        found = _message_of(obj)
        if found is not None:  # "" (an empty message): the reason phrase says it all
            return _cut(found, _MESSAGE_LIMIT)
    if _HTML_START.match(text):
        title = _HTML_TITLE.search(text)
        text = title.group(2) if title else _HTML_TAG.sub(" ", _HTML_SKIP.sub(" ", text))
        text = html.unescape(text)
    return _cut(" ".join(text.split()), _TEXT_LIMIT, size - len(raw))


def _message_of(obj: object) -> str | None:
    """The message of a JSON error body of a known shape (maybe ""), else None."""
    if isinstance(obj, str):
        return obj.strip()
    if not isinstance(obj, dict):
        return None
    error = obj.get("error")
    if isinstance(error, dict):  # {"error": {"message": ...}} (OpenAI-style gateways)
        error = error.get("message")
    detail = obj.get("detail")
    if isinstance(detail, list):
        detail = _validation_message(detail)
    for found in (error, detail, obj.get("message")):
        if isinstance(found, str) and found.strip():
            return found
    if any(obj.get(key) == "" for key in ("error", "detail", "message")):
        return ""
    return None


def _validation_message(items: list[Any]) -> str | None:
    """FastAPI's validation errors as "loc: msg; ..." (never their ``input`` or ``ctx``)."""
    parts = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("msg"), str):
            continue
        if not item["msg"].strip():
            continue
        loc = item.get("loc")
        where = (
            ".".join(str(p) for p in loc)
            if isinstance(loc, list) and all(isinstance(p, str | int) for p in loc)
            else ""
        )
        parts.append(f"{where}: {item['msg']}" if where else item["msg"])
    if not parts:  # nothing to quote but the echoed request: say what kind of error it was
        return f"the request failed validation ({len(items)} error(s))" if items else None
    more = len(parts) - _VALIDATION_ITEMS
    text = "; ".join(parts[:_VALIDATION_ITEMS])
    return f"{text}; and {more} more" if more > 0 else text


def _cut(text: str, limit: int, unread: int = 0) -> str:
    """``text`` up to ``limit`` characters, at a space where one is near; says what was cut."""
    if len(text) <= limit and not unread:
        return text
    kept = text[:limit]
    space = kept.rfind(" ", limit * 4 // 5)
    if space > 0:
        kept = kept[:space]
    rest = len(text) - len(kept)
    more = f"{rest} more characters" if rest else ""
    if unread:
        more = f"{more} and " if more else ""
        more += f"{unread} bytes unread"
    return f"{kept} [... {more}]"


def _tensor_metadata(entries: object, what: str) -> tuple[TensorMetadata, ...]:
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise ProtocolError(f"model metadata: {what} must be an array")
    out = []
    for index, entry in enumerate(entries):
        where = f"model metadata {what}[{index}]"
        if not isinstance(entry, dict):
            raise ProtocolError(f"{where} must be an object")
        shape = _expect(entry, "shape", list, where)
        if not all(type(d) is int and d >= -1 for d in shape):
            raise ProtocolError(f"{where}: shape must hold integers >= -1, got {shape!r:.80}")
        out.append(
            TensorMetadata(
                _expect(entry, "name", str, where),
                _expect(entry, "datatype", str, where),
                tuple(shape),
            )
        )
    return tuple(out)


def _str_list(obj: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    values = obj.get(key)
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ProtocolError(f"{what}: {key!r} must be an array of strings", value=values)
    return tuple(values)


def decode_server_metadata(body: BytesLike) -> ServerMetadata:
    """Decode a server metadata response."""
    obj = decode_json_object(body, "server metadata")
    return ServerMetadata(
        name=_expect(obj, "name", str, "server metadata"),
        version=_optional_str(obj, "version", "server metadata"),
        extensions=_str_list(obj, "extensions", "server metadata"),
    )


def decode_model_metadata(body: BytesLike) -> ModelMetadata:
    """Decode a model metadata response."""
    obj = decode_json_object(body, "model metadata")
    return ModelMetadata(
        name=_expect(obj, "name", str, "model metadata"),
        platform=_optional_str(obj, "platform", "model metadata"),
        versions=_str_list(obj, "versions", "model metadata"),
        inputs=_tensor_metadata(obj.get("inputs"), "inputs"),
        outputs=_tensor_metadata(obj.get("outputs"), "outputs"),
    )
