"""gRPC codec without I/O: value objects <-> serialized protobuf messages.

Inference requests and responses go through the hand-written wire codec
(:mod:`kserve_v2.grpc.wire`) so tensors are not copied on the way: inputs are referenced until
the single join, outputs come back as numpy views on the received bytes. The small messages
(health, metadata) use the generated protobuf classes, imported on first use.

Example::

    >>> import numpy as np
    >>> from kserve_v2.messages import InferRequest
    >>> from kserve_v2.tensors import InferInput
    >>> from kserve_v2.grpc import codec
    >>> data = codec.encode_infer_request(
    ...     InferRequest("identity_fp32", (InferInput("INPUT0", np.ones((1, 2), np.float32)),)))
    >>> data[:15]
    b'\\n\\ridentity_fp32'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from kserve_v2.datatypes import (
    DATATYPE_BY_NAME,
    Datatype,
    deserialize,
    element_count,
    numpy_dtype,
    serialize,
)
from kserve_v2.errors import (
    MissingDependencyError,
    ProtocolError,
    ServerError,
)
from kserve_v2.grpc import wire
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
from kserve_v2.tensors import SharedMemoryPlacement

__all__ = [
    "REQUEST_FORMS",
    "FormKey",
    "RequestForms",
    "StreamEvent",
    "decode_infer_response",
    "decode_model_metadata",
    "decode_model_ready",
    "decode_server_live",
    "decode_server_metadata",
    "decode_server_ready",
    "decode_stream_response",
    "encode_infer_request",
    "encode_infer_request_parts",
    "generated",
    "output_placements",
    "parse_message",
    "request_form_key",
]

#: The typed ``InferTensorContents`` field that carries each datatype (FP16 and BF16 have none).
CONTENTS_FIELD: Final[dict[Datatype, str]] = {
    Datatype.BOOL: "bool_contents",
    Datatype.INT8: "int_contents",
    Datatype.INT16: "int_contents",
    Datatype.INT32: "int_contents",
    Datatype.INT64: "int64_contents",
    Datatype.UINT8: "uint_contents",
    Datatype.UINT16: "uint_contents",
    Datatype.UINT32: "uint_contents",
    Datatype.UINT64: "uint64_contents",
    Datatype.FP32: "fp32_contents",
    Datatype.FP64: "fp64_contents",
    Datatype.BYTES: "bytes_contents",
}


@functools.cache
def generated() -> ModuleType:
    """The generated ``grpc_service_pb2`` module (needs protobuf, the ``grpc`` extra)."""
    try:
        from kserve_v2.grpc._generated import grpc_service_pb2
    except ImportError as exc:
        raise MissingDependencyError("gRPC", "grpc", "protobuf") from exc
    return grpc_service_pb2


def parse_message(cls: Any, data: wire.BytesLike) -> Any:
    """``cls.FromString(data)`` with protobuf's decode error as :class:`ProtocolError`.

    ``data`` may be any bytes-like object: protobuf 4.x takes bytes and memoryviews but
    refuses a bytearray (TypeError), which is what the native transport gives."""
    from google.protobuf.message import DecodeError

    try:
        return cls.FromString(data if type(data) is bytes else memoryview(data))
    except DecodeError as exc:
        raise ProtocolError(
            f"malformed {cls.DESCRIPTOR.name}: {exc}", value=bytes(data[:80])
        ) from None


# ----------------------------------------------------------------------------- requests


def _request_fields(
    request: InferRequest,
) -> tuple[list[wire.InputFields], list[wire.RequestedOutputFields], list[wire.BytesLike]]:
    """The inputs, requested outputs and raw contents of ``request`` as the wire carries them.

    The parameter mappings are the request's own unless something is added to them.
    """
    inputs: list[wire.InputFields] = []
    raw: list[wire.BytesLike] = []
    for tensor in request.inputs:
        params: Mapping[str, ParameterValue] = tensor.parameters
        if tensor.shared_memory is not None:
            params = {**params, **tensor.shared_memory.as_parameters()}
        else:
            raw.append(tensor.wire_bytes())
        inputs.append((tensor.name, tensor.datatype._value_, tensor.shape, params))
    outputs: list[wire.RequestedOutputFields] = []
    for output in request.outputs:
        params = output.parameters
        if output.shared_memory is not None or output.class_count:
            added = dict(params)
            if output.shared_memory is not None:
                added.update(output.shared_memory.as_parameters())
            if output.class_count:
                added["classification"] = output.class_count
            params = added
        outputs.append((output.name, params))
    return inputs, outputs, raw


def encode_infer_request(request: InferRequest) -> bytes:
    """The serialized ``ModelInferRequest`` (the one copy of the tensor data is the join).

    Inputs in shared memory carry their ``shared_memory_*`` parameters and no raw contents;
    Triton takes ``raw_input_contents`` in the order of the inputs that have data. Requested
    outputs carry ``classification`` and shared-memory parameters; ``binary`` has no meaning
    on gRPC, where tensors are always binary.
    """
    return b"".join(encode_infer_request_parts(request))


def encode_infer_request_parts(request: InferRequest) -> tuple[wire.BytesLike, ...]:
    """:func:`encode_infer_request` not joined: the buffers whose concatenation is the
    message, the tensors among them as views of the caller's arrays (no copy at all)."""
    inputs, outputs, raw = _request_fields(request)
    return tuple(
        wire.encode_infer_request_fields(
            request.model_name,
            request.model_version,
            request.id,
            request.parameters,
            inputs,
            outputs,
            raw,
        )
    )


# ---------------------------------------------------------------------- request forms
#
# Most callers send one model the same request over and over with new tensor values: the
# same arrays' names, dtypes and shapes, the same outputs. Such a request's bytes are its
# form's framing (made once by the full path) around its tensors' bytes, which skips building
# the InferRequest and encoding it: a sixth of the client's CPU for a small request (45 -> 38
# µs per request against an in-process server).

#: A request's form (see :func:`request_form_key`).
FormKey = tuple[object, ...]


def request_form_key(
    model: object, version: object, inputs: object, outputs: object
) -> FormKey | None:
    """The form of ``infer(model, inputs, outputs=outputs, version=version)`` (no other
    argument) when that call's request is a function of it and of the arrays' bytes:
    ``inputs`` a dict of numpy arrays, ``outputs`` None or a list or tuple of names, ``version``
    a str or an int. The form is the model, version and output names, then each input's name,
    dtype and shape. None for a call of any other kind.

    A key says nothing of validity: a form is kept only once the full path built and encoded
    its request (:meth:`RequestForms.learn`), so a key that fails validation is never found.
    """
    if type(inputs) is not dict or type(model) is not str:
        return None
    kind = type(version)
    if kind is not str and kind is not int:  # not bool: True == 1 would find version 1's form
        return None
    names: tuple[str, ...] | None = None
    if outputs is not None:
        if type(outputs) is not list and type(outputs) is not tuple:
            return None
        for name in outputs:
            if type(name) is not str:
                return None
        names = tuple(outputs)
    key: list[object] = [model, version, names]
    for name, array in inputs.items():
        if type(array) is not np.ndarray:
            return None
        key += (name, array.dtype, array.shape)
    return tuple(key)


@dataclass(frozen=True, slots=True)
class _RequestForm:
    """A request form's datatypes (in input order) and framing; ``direct`` says of each
    input whether its arrays are their own wire bytes once C-contiguous (the wire dtype
    already, not empty): then no :func:`serialize` is needed."""

    datatypes: tuple[Datatype, ...]
    framing: wire.RequestFraming
    direct: tuple[bool, ...]

    @classmethod
    def of(
        cls, key: FormKey, request: InferRequest, parts: tuple[wire.BytesLike, ...]
    ) -> _RequestForm | None:
        """The form ``key`` of ``request`` (encoded as ``parts``); None if its bytes depend on
        more than its tensors' sizes (parameters, shared memory, BYTES), or if it holds BF16
        (a fixed size too, but its conversion is left to the full path: rare in this form)."""
        if request.id or request.parameters:
            return None
        for output in request.outputs:
            if output.parameters or output.shared_memory is not None or output.class_count:
                return None
        datatypes: list[Datatype] = []
        sizes: list[int] = []
        for tensor in request.inputs:
            datatype = tensor.datatype
            if (
                tensor.parameters
                or tensor.shared_memory is not None
                or datatype.itemsize is None
                or datatype is Datatype.BF16
            ):
                return None
            datatypes.append(datatype)
            sizes.append(memoryview(tensor.wire_bytes()).nbytes)
        try:
            framing = wire.RequestFraming(parts, sizes)
        except ValueError:
            return None
        # The key holds each input's name, dtype and shape, after the model, version, outputs.
        direct = tuple(
            dtype == numpy_dtype(datatype) and isinstance(shape, tuple) and element_count(shape) > 0
            for dtype, shape, datatype in zip(key[4::3], key[5::3], datatypes, strict=True)
        )
        return cls(tuple(datatypes), framing, direct)


class RequestForms:
    """The request forms seen (:func:`request_form_key` -> framing), at most :attr:`SIZE`
    (cleared when full, for callers whose shapes never repeat). Shared by every client of the
    process: a form depends on nothing but its key.

    Example::

        key = request_form_key("simple", "", inputs, None)
        parts = REQUEST_FORMS.parts(key, inputs.values())
        if parts is None:  # not seen yet: the full path, once
            request = build_infer_request("simple", inputs)
            parts = encode_infer_request_parts(request)
            REQUEST_FORMS.learn(key, request, parts)
    """

    SIZE: Final = 256

    def __init__(self) -> None:
        self._forms: dict[FormKey, _RequestForm | None] = {}

    def parts(
        self, key: FormKey, arrays: Iterable[npt.NDArray[Any]]
    ) -> tuple[wire.BytesLike, ...] | None:
        """The encoded request of form ``key`` with these arrays (the form's inputs, in
        order), the tensors as views of them where no conversion is due; None if the form is
        not known (or cannot be reused)."""
        form = self._forms.get(key)
        if form is None:
            return None
        contiguous = np.ascontiguousarray
        raws = [
            contiguous(array).data.cast("B") if direct else serialize(array, datatype)
            for array, datatype, direct in zip(arrays, form.datatypes, form.direct)  # noqa: B905
        ]
        return tuple(form.framing.parts(raws))

    def learn(self, key: FormKey, request: InferRequest, parts: tuple[wire.BytesLike, ...]) -> None:
        """Keep the form of ``request``, built and encoded (as ``parts``) from a call of
        form ``key`` by the full path."""
        if key in self._forms:
            return
        if len(self._forms) >= self.SIZE:
            self._forms.clear()
        # A form that cannot be reused is kept as None: not examined again.
        self._forms[key] = _RequestForm.of(key, request, parts)

    def clear(self) -> None:
        self._forms.clear()


REQUEST_FORMS: Final = RequestForms()


# ---------------------------------------------------------------------------- responses


def _parameters(params: Mapping[str, ParameterValue | None]) -> dict[str, ParameterValue]:
    # An InferParameter with no member set carries nothing a caller could use.
    return {key: value for key, value in params.items() if value is not None}


def _typed_contents(
    contents: wire.WireTensorContents, datatype: Datatype, shape: tuple[int, ...], where: str
) -> npt.NDArray[Any] | None:
    """The array held in typed ``contents``, or None when the datatype's field is empty."""
    field = CONTENTS_FIELD.get(datatype)
    values: tuple[Any, ...] = getattr(contents, field) if field is not None else ()
    others = [
        name for name in set(CONTENTS_FIELD.values()) if name != field and getattr(contents, name)
    ]
    if others:
        raise ProtocolError(f"{where}: {datatype.value} tensor carries {', '.join(sorted(others))}")
    if not values:
        return None
    count = element_count(shape)
    if len(values) != count:
        raise ProtocolError(
            f"{where}: shape {list(shape)} needs {count} element(s), contents has {len(values)}"
        )
    if datatype is Datatype.BYTES:
        out = np.empty(count, dtype=object)
        out[:] = list(values)
        return out.reshape(shape)
    dtype = numpy_dtype(datatype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = min(values), max(values)
        if low < info.min or high > info.max:
            bad = low if low < info.min else high
            raise ProtocolError(f"{where}: value {bad} is out of range for {datatype.value}")
    return np.array(values, dtype=dtype).reshape(shape)


def _where(index: int, name: str) -> str:
    return f"outputs[{index}] ({name!r})"


def _is_shm(params: Mapping[str, object]) -> bool:
    return "shared_memory_region" in params


#: Where a request asked the server to write outputs: output name -> placement.
Placements = Mapping[str, SharedMemoryPlacement]


def output_placements(request: InferRequest) -> dict[str, SharedMemoryPlacement]:
    """The shared-memory placements of ``request``'s requested outputs, by name."""
    return {o.name: o.shared_memory for o in request.outputs if o.shared_memory is not None}


def _check_unique_names(names: list[str]) -> None:
    """Raise ProtocolError when an output name comes twice (which tensor would be meant?)."""
    if len(set(names)) == len(names):
        return
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ProtocolError(f"inference response names output {name!r} more than once")
        seen.add(name)


def _infer_result(fields: wire.InferResponseFields, placements: Placements | None) -> InferResult:
    """The :class:`InferResult` of a decoded response's fields (see
    :func:`decode_infer_response`)."""
    model_name, model_version, id, parameters, outputs, raw_output_contents = fields
    if len(outputs) > 1:
        _check_unique_names([output[0] for output in outputs])
    placements = placements or {}
    raws: list[memoryview | None] = list(raw_output_contents)
    if raws and len(raws) != len(outputs):
        with_data = [i for i, out in enumerate(outputs) if not _is_shm(out[3])]
        if len(with_data) != len(raws):
            raise ProtocolError(
                f"inference response has {len(raws)} raw_output_contents for "
                f"{len(outputs)} output(s) ({len(with_data)} not in shared memory)"
            )
        paired: list[memoryview | None] = [None] * len(outputs)
        for index, raw in zip(with_data, raws, strict=True):
            paired[index] = raw
        raws = paired
    tensors: list[OutputTensor] = []
    for index, (name, datatype_name, shape, out_params, contents) in enumerate(outputs):
        # The error label is built only when something is wrong (this loop is per response).
        datatype = DATATYPE_BY_NAME.get(datatype_name)
        if datatype is None:
            raise ProtocolError(f"{_where(index, name)}: unknown datatype {datatype_name!r}")
        if shape and min(shape) < 0:
            raise ProtocolError(f"{_where(index, name)}: negative dimension in shape {list(shape)}")
        params = _parameters(out_params) if out_params else {}
        raw = raws[index] if index < len(raws) else None
        placement = placements.get(name)
        if placement is not None and (raw is None or not raw.nbytes):
            params = {**placement.as_parameters(), **params}
        data: npt.NDArray[Any] | None = None
        if raw is not None and not (_is_shm(params) and not raw.nbytes):
            try:
                data = deserialize(raw, datatype, shape)
            except ProtocolError as exc:
                raise ProtocolError(f"{_where(index, name)}: {exc.message}") from None
        elif contents is not None:
            data = _typed_contents(contents, datatype, shape, _where(index, name))
        if data is None and not _is_shm(params):
            if element_count(shape) and raw is None:
                raise ProtocolError(
                    f"{_where(index, name)} carries no data and is not in shared memory"
                )
            data = deserialize(b"", datatype, shape)
        tensors.append(new_output_tensor(name, datatype._value_, shape, data, params))
    return new_infer_result(
        model_name,
        model_version,
        id,
        _parameters(parameters) if parameters else {},
        tuple(tensors),
    )


def decode_infer_response(
    data: wire.BytesLike, placements: Placements | None = None
) -> InferResult:
    """Decode a serialized ``ModelInferResponse``: numeric outputs are views on ``data``.

    ``raw_output_contents`` pair with the outputs by position; when there are fewer of them
    than outputs, they pair with the outputs not written to shared memory, in order.
    Outputs without raw contents are read from typed ``contents``.

    Triton answers an output it wrote to shared memory with no parameters and an empty raw
    entry, so ``placements`` (the request's outputs in shared memory, see
    :func:`output_placements`) says which outputs those are; they come back with
    ``data=None`` and the placement's ``shared_memory_*`` parameters, as over REST.
    """
    if not placements and (type(data) is bytes or type(data) is bytearray):
        result = _decode_reusing(data, memoryview(data), 0, len(data), None)
        if result is not None:
            return result
    return _infer_result(wire.decode_infer_response_fields(data), placements)


# ------------------------------------------------------------------ repeated layouts
#
# A model answers with responses that differ only in their tensors' bytes and their id, so
# what fields 1 to 5 decode to (names, datatypes, shapes, parameters, all checked) is kept,
# keyed by those fields' bytes without the id (wire.split_infer_response). A response whose
# bytes match reads only its raw contents; anything unusual takes the full decoder, whose
# values and errors are the reference. A stream of small responses spends half its decoding
# time on those fields otherwise.


# An output of a layout: name, datatype name, shape, datatype, then what reading its raw
# contents takes (see _Layout).
_OutputLayout = tuple[str, str, tuple[int, ...], Datatype, "np.dtype[Any] | None", int, int]


@dataclass(frozen=True, slots=True)
class _Layout:
    """What a response's fields 1 to 5 but the id decode to: every output with raw contents
    and no parameters. Each output is kept with what reading its raw contents takes: the
    wire dtype, element count and byte size of a numeric one (None, 0, 0 for BYTES and BF16,
    which :func:`deserialize` converts)."""

    model_name: str
    model_version: str
    parameters: dict[str, ParameterValue]
    outputs: tuple[_OutputLayout, ...]

    @classmethod
    def of(cls, result: InferResult) -> _Layout | None:
        outputs: list[_OutputLayout] = []
        for tensor in result.outputs:
            if tensor.parameters or tensor.data is None:
                return None  # shared memory, or no data: decoded in full each time
            datatype = DATATYPE_BY_NAME[tensor.datatype]
            if datatype.itemsize is None or datatype is Datatype.BF16:
                outputs.append((tensor.name, tensor.datatype, tensor.shape, datatype, None, 0, 0))
            else:
                count = element_count(tensor.shape)
                wire_dtype = numpy_dtype(datatype)
                outputs.append(
                    (
                        tensor.name,
                        tensor.datatype,
                        tensor.shape,
                        datatype,
                        wire_dtype,
                        count,
                        count * wire_dtype.itemsize,
                    )
                )
        return cls(result.model_name, result.model_version, dict(result.parameters), tuple(outputs))

    def result(self, id: str, raws: list[memoryview]) -> InferResult | None:
        """The result for these raw contents, or None when they do not fit the layout (the
        full decoder then says what is wrong)."""
        if len(raws) != len(self.outputs):
            return None
        tensors = []
        frombuffer = np.frombuffer
        for (name, datatype_name, shape, datatype, wire_dtype, count, nbytes), raw in zip(
            self.outputs, raws, strict=True
        ):
            if wire_dtype is not None:
                if raw.nbytes != nbytes:
                    return None
                # The shape reshaped once already: the full decoder made this layout.
                data = frombuffer(raw, wire_dtype, count).reshape(shape)
            else:
                try:
                    data = deserialize(raw, datatype, shape)
                except ProtocolError:
                    return None
            tensors.append(new_output_tensor(name, datatype_name, shape, data, {}))
        parameters = dict(self.parameters) if self.parameters else {}
        return new_infer_result(self.model_name, self.model_version, id, parameters, tuple(tensors))


class _Layouts:
    """The known layouts (at most :attr:`SIZE`), and whether to look for one at all: a model
    whose outputs change shape from response to response (generated text, detections) would
    make every lookup miss and cost a third more than the full decoder alone, so after
    :attr:`MISSES` misses in a row the next :attr:`PAUSE` responses are decoded in full."""

    SIZE: Final = 64
    MISSES: Final = 16
    PAUSE: Final = 256

    __slots__ = ("known", "misses", "paused")

    def __init__(self) -> None:
        self.known: dict[bytes, _Layout] = {}
        self.misses = 0
        self.paused = 0

    def clear(self) -> None:
        self.known.clear()
        self.misses = self.paused = 0

    def missed(self) -> None:
        """A response without a known layout (thread races only cost lookups: the counts are
        a heuristic)."""
        self.misses += 1
        if self.misses >= self.MISSES:
            self.misses, self.paused = 0, self.PAUSE

    def learn(self, key: bytes, layout: _Layout) -> None:
        if len(self.known) >= self.SIZE:
            self.known.clear()
        self.known[key] = layout


_LAYOUTS: Final = _Layouts()


def _decode_reusing(
    buf: bytes | bytearray,
    view: memoryview,
    start: int,
    end: int,
    placements: Callable[[str], Placements | None] | None,
) -> InferResult | None:
    """The ``ModelInferResponse`` in ``buf[start:end]`` decoded through a known layout (and
    its layout learnt when new), or None for the full decoder. ``placements`` maps its id to
    outputs in shared memory, which only the full decoder handles."""
    layouts = _LAYOUTS
    if layouts.paused > 0:  # > 0: threads racing on the count may take it below zero
        layouts.paused -= 1
        return None
    split = wire.split_infer_response(buf, view, start, end)
    if split is None:
        layouts.missed()
        return None
    key, id_start, id_end, raws = split
    try:
        id = buf[id_start:id_end].decode()
    except UnicodeDecodeError:
        return None
    if placements is not None and placements(id):
        layouts.missed()
        return None
    layout = layouts.known.get(key)
    if layout is not None:
        layouts.misses = 0
        return layout.result(id, raws)
    layouts.missed()
    try:
        result = _infer_result(wire.decode_infer_response_span(buf, view, start, end), None)
    except ProtocolError:
        return None  # the caller's full decoder raises it, labelled as it labels it
    layout = _Layout.of(result)
    if layout is not None:
        layouts.learn(key, layout)
    return result


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One message of a stream: a result or the error for one request.

    ``final`` is Triton's ``triton_final_response`` flag (None when absent). ``bare``: the
    message was a bare ``ModelInferResponse`` (MLServer's stream), not a
    ``ModelStreamInferResponse``. ``complete`` says whether the request can expect no more
    responses: a final response, or one without the flag in a ``ModelStreamInferResponse``
    (an error: Triton rejected the request before running it). A bare response without the
    flag marks no end: its request ends with the stream.
    """

    request_id: str
    result: InferResult | None
    error: ServerError | None
    final: bool | None
    bare: bool = False

    @property
    def complete(self) -> bool:
        return not self.bare if self.final is None else self.final

    @property
    def empty_final(self) -> bool:
        """A response that only says the request is complete (no outputs, no error)."""
        return (
            self.error is None
            and self.final is True
            and self.result is not None
            and not self.result.outputs
        )


def _final_flag(parameters: Mapping[str, object]) -> bool | None:
    """Triton's ``triton_final_response`` flag among a response's parameters (None: absent)."""
    value = parameters.get("triton_final_response")
    return value if isinstance(value, bool) else None


def decode_stream_response(
    data: wire.BytesLike, placements: Callable[[str], Placements | None] | None = None
) -> StreamEvent:
    """Decode a message received on ``ModelStreamInfer``: a ``ModelStreamInferResponse``, or
    a bare ``ModelInferResponse`` as MLServer sends (see
    :func:`~kserve_v2.grpc.wire.decode_stream_message_fields`; the event's ``bare``).

    Triton repeats the request's id in ``infer_response`` of an error, which is how the error
    is matched to its request. ``placements`` maps a request id to that request's outputs in
    shared memory.
    """
    if type(data) is bytes or type(data) is bytearray:
        span = wire.stream_infer_response_span(data)
        if span is not None:
            result = _decode_reusing(data, memoryview(data), *span, placements)
            if result is not None:
                return StreamEvent(result.id, result, None, _final_flag(result.parameters))
    error_message, fields, bare = wire.decode_stream_message_fields(data)
    if fields is None:
        fields = ("", "", "", {}, [], [])
    request_id, final = fields[2], _final_flag(fields[3])
    if error_message:
        return StreamEvent(request_id, None, ServerError(error_message), final)
    placed = placements(request_id) if placements is not None else None
    return StreamEvent(request_id, _infer_result(fields, placed), None, final, bare)


# --------------------------------------------------------------------- health, metadata


def decode_server_live(data: wire.BytesLike) -> bool:
    return bool(parse_message(generated().ServerLiveResponse, data).live)


def decode_server_ready(data: wire.BytesLike) -> bool:
    return bool(parse_message(generated().ServerReadyResponse, data).ready)


def decode_model_ready(data: wire.BytesLike) -> bool:
    return bool(parse_message(generated().ModelReadyResponse, data).ready)


def decode_server_metadata(data: wire.BytesLike) -> ServerMetadata:
    msg = parse_message(generated().ServerMetadataResponse, data)
    return ServerMetadata(name=msg.name, version=msg.version, extensions=tuple(msg.extensions))


def _tensor_metadata(entries: Any) -> tuple[TensorMetadata, ...]:
    return tuple(
        TensorMetadata(t.name, t.datatype, tuple(int(d) for d in t.shape)) for t in entries
    )


def decode_model_metadata(data: wire.BytesLike) -> ModelMetadata:
    msg = parse_message(generated().ModelMetadataResponse, data)
    return ModelMetadata(
        name=msg.name,
        platform=msg.platform,
        versions=tuple(msg.versions),
        inputs=_tensor_metadata(msg.inputs),
        outputs=_tensor_metadata(msg.outputs),
    )
