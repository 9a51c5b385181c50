"""``--dump``: every message on the wire, readable.

HTTP messages print as their request or status line and headers (credentials redacted), the
JSON header pretty-printed (long arrays elided), and each binary section of the binary-data
extension as tensor name, datatype, shape, byte range in the body and a preview of its values
(hex for BYTES). gRPC messages print in protobuf text form, their raw tensor contents
summarised the same way (byte ranges in the serialized message).

The formatting functions (:func:`describe_body`, :func:`pretty_json`) are shared with
``kserve-v2 decode``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, Final

from kserve_v2.cli.style import Style
from kserve_v2.hooks import WireMessage, redact_headers

__all__ = [
    "DumpPrinter",
    "describe_binary_sections",
    "describe_body",
    "describe_grpc_message",
    "pretty_json",
    "preview_tensor",
]

_HEADER_LENGTH: Final = "inference-header-content-length"
#: Elements of a JSON array shown before eliding the rest.
_JSON_ITEMS: Final = 16
#: Bytes of a BYTES tensor shown in hex.
_HEX_BYTES: Final = 32
_TEXT_LINES: Final = 30


# -- values ---------------------------------------------------------------------------------------


def _hex(data: bytes, limit: int = _HEX_BYTES) -> str:
    shown = data[:limit]
    text = " ".join(shown[i : i + 4].hex() for i in range(0, len(shown), 4))
    return text + (f" … (+{len(data) - limit} B)" if len(data) > limit else "")


def preview_tensor(datatype: str, shape: Sequence[int], data: bytes | memoryview) -> str:
    """A short preview of a binary tensor's values: a few numbers, or hex for BYTES."""
    raw = bytes(data)
    if datatype == "BYTES":
        return f"hex {_hex(raw)}" if raw else "(empty)"
    import numpy as np

    from kserve_v2.datatypes import DATATYPE_BY_NAME, deserialize
    from kserve_v2.errors import KServeError

    dt = DATATYPE_BY_NAME.get(datatype)
    if dt is None:
        return f"hex {_hex(raw)}"
    try:
        array = deserialize(raw, dt, shape)
    except KServeError as exc:
        return f"cannot decode ({exc}); hex {_hex(raw)}"
    with np.printoptions(threshold=8, edgeitems=3, linewidth=100000, precision=6):
        text = " ".join(np.array2string(array.reshape(-1), separator=" ").split())
    return text.replace("[ ", "[").replace(" ]", "]")


def pretty_json(value: Any, indent: int = 0) -> str:
    """JSON with objects indented and arrays of scalars kept on one line, elided past 16."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}  {json.dumps(k)}: {pretty_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value) or _flat_nested(value):
            return _inline_list(value)
        items = [f"{pad}  {pretty_json(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def _flat_nested(value: list[Any]) -> bool:
    """Nested arrays of scalars (tensor data): shown inline too."""
    return all(isinstance(v, list) and _flat_nested(v) for v in value if isinstance(v, list)) and (
        not any(isinstance(v, dict) for v in value)
    )


def _inline_list(value: list[Any]) -> str:
    flat: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, list):
            for item in v:
                walk(item)
        else:
            flat.append(v)

    walk(value)
    nested = any(isinstance(v, list) for v in value)
    if len(flat) <= _JSON_ITEMS and not nested:
        return json.dumps(value, ensure_ascii=False)
    if len(flat) <= _JSON_ITEMS:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    shown = ", ".join(json.dumps(v, ensure_ascii=False) for v in flat[:_JSON_ITEMS])
    return f"[{shown}, … ({len(flat)} values{', flattened' if nested else ''})]"


# -- HTTP bodies ----------------------------------------------------------------------------------


def describe_binary_sections(
    header: Mapping[str, Any], binary: memoryview, base: int
) -> Iterator[str]:
    """One line per binary section: the tensors of ``inputs`` (a request) or ``outputs`` (a
    response) whose ``binary_data_size`` parameter claims a part of ``binary``, in order;
    ``base`` is where the binary part starts in the body."""
    tensors = header.get("inputs") if "inputs" in header else header.get("outputs")
    offset = 0
    if isinstance(tensors, list):
        for index, tensor in enumerate(tensors):
            if not isinstance(tensor, dict):
                continue
            params = tensor.get("parameters")
            size = params.get("binary_data_size") if isinstance(params, dict) else None
            if not isinstance(size, int) or isinstance(size, bool):
                continue
            name = tensor.get("name", f"#{index}")
            datatype = str(tensor.get("datatype", "?"))
            shape = tensor.get("shape", [])
            shape = [int(d) for d in shape] if isinstance(shape, list) else []
            chunk = binary[offset : offset + size]
            where = f"bytes {base + offset}..{base + offset + size}"
            if len(chunk) < size:
                yield (
                    f"binary {name} {datatype} {shape}: {where} past the body's end "
                    f"({len(chunk)} B there)"
                )
                return
            yield (
                f"binary {name} {datatype} {shape} {where} ({size} B): "
                f"{preview_tensor(datatype, shape, chunk)}"
            )
            offset += size
    if offset < len(binary):
        yield (
            f"{len(binary) - offset} B after the tensors, claimed by none "
            f"(bytes {base + offset}..{base + len(binary)}): hex {_hex(bytes(binary[offset:]))}"
        )


def describe_body(
    body: bytes | memoryview,
    headers: Mapping[str, str],
    *,
    header_length: int | None = None,
) -> list[str]:
    """The lines describing an HTTP body: pretty JSON (and binary sections), or text."""
    view = memoryview(body).cast("B") if not isinstance(body, bytes) else memoryview(body)
    if not len(view):
        return []
    lower = {k.lower(): v for k, v in headers.items()}
    if header_length is None and _HEADER_LENGTH in lower:
        try:
            header_length = int(lower[_HEADER_LENGTH])
        except ValueError:
            header_length = None
    content_type = lower.get("content-type", "")
    if header_length == 0:
        return [f"raw binary tensor ({len(view)} B, header length 0): hex {_hex(bytes(view))}"]
    head = view if header_length is None else view[:header_length]
    try:
        obj = json.loads(bytes(head))
    except (UnicodeDecodeError, ValueError):
        obj = None
    lines: list[str] = []
    if obj is not None and (
        header_length is not None or "json" in content_type or bytes(head[:1]) == b"{"
    ):
        if header_length is not None:
            lines.append(
                f"JSON header: bytes 0..{header_length}; binary part: bytes "
                f"{header_length}..{len(view)}"
            )
        lines.extend(pretty_json(obj).splitlines())
        if header_length is not None and isinstance(obj, dict):
            lines.extend(describe_binary_sections(obj, view[header_length:], header_length))
        return lines
    try:
        text = bytes(view).decode("utf-8")
    except UnicodeDecodeError:
        return [f"{len(view)} B: hex {_hex(bytes(view), 64)}"]
    text_lines = text.splitlines()
    lines.extend(text_lines[:_TEXT_LINES])
    if len(text_lines) > _TEXT_LINES:
        lines.append(f"… ({len(text_lines) - _TEXT_LINES} more lines, {len(view)} B)")
    return lines


# -- gRPC messages --------------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def field_spans(buf: bytes, start: int, end: int, number: int) -> list[tuple[int, int]]:
    """Where the length-delimited field ``number`` of the message in ``buf[start:end]``
    keeps its contents, as (start, end) pairs in ``buf``; [] if the bytes do not parse."""
    spans = []
    pos = start
    try:
        while pos < end:
            tag, pos = _varint(buf, pos)
            kind = tag & 7
            if kind == 0:
                _, pos = _varint(buf, pos)
            elif kind == 1:
                pos += 8
            elif kind == 5:
                pos += 4
            elif kind == 2:
                length, pos = _varint(buf, pos)
                if tag >> 3 == number:
                    spans.append((pos, pos + length))
                pos += length
            else:
                return []
    except IndexError:
        return []
    return spans


def _message_class(method: str, direction: str) -> Any:
    """The generated class of a gRPC method's request or response, or None."""
    from kserve_v2.grpc import codec

    pb2 = codec.generated()
    service_name, _, method_name = method.strip("/").rpartition("/")
    service = pb2.DESCRIPTOR.services_by_name.get(service_name.rpartition(".")[2])
    if service is None:
        return None
    rpc = service.methods_by_name.get(method_name)
    if rpc is None:
        return None
    descriptor = rpc.input_type if direction == "send" else rpc.output_type
    return getattr(pb2, descriptor.name, None)


def _bare_infer_response(body: bytes) -> bool:
    """Whether a message received on ModelStreamInfer is a bare ModelInferResponse."""
    from kserve_v2.errors import ProtocolError
    from kserve_v2.grpc.wire import decode_stream_message_fields

    try:
        return decode_stream_message_fields(body)[2]
    except ProtocolError:
        return False  # shown as what it claims to be, with the parser's complaint


def _scalar_text(field: Any, value: Any) -> str:
    if field.type == field.TYPE_BYTES:
        raw = bytes(value)
        if len(raw) > _HEX_BYTES:
            return f"<{len(raw)} bytes: {_hex(raw)}>"
        return json.dumps(raw.decode("latin-1"))
    if field.type == field.TYPE_STRING:
        return json.dumps(value, ensure_ascii=False)
    if field.type == field.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == field.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    return repr(value) if isinstance(value, float) else str(value)


def _text_lines(message: Any, indent: int, skip: frozenset[str]) -> Iterator[str]:
    """``message`` in protobuf text form; repeated scalars as ``[a, b]`` (elided past 16),
    map entries on one line, the fields in ``skip`` left out (described elsewhere)."""
    pad = "  " * indent
    for field, value in message.ListFields():
        if field.name in skip:
            continue
        repeated = _is_repeated(field)
        if field.type == field.TYPE_MESSAGE:
            entries = list(value.items()) if _is_map(field) else (value if repeated else [value])
            for entry in entries:
                if _is_map(field):
                    key, item = entry
                    inner = (
                        " ".join(_text_lines(item, 0, frozenset()))
                        if hasattr(item, "ListFields")
                        else _scalar_text(field.message_type.fields_by_name["value"], item)
                    )
                    value_text = f"{{ {inner} }}" if hasattr(item, "ListFields") else inner
                    yield f"{pad}{field.name} {{ key: {json.dumps(key)} value: {value_text} }}"
                    continue
                yield f"{pad}{field.name} {{"
                yield from _text_lines(entry, indent + 1, skip)
                yield f"{pad}}}"
        elif repeated:
            items = [_scalar_text(field, v) for v in value]
            shown = ", ".join(items[:_JSON_ITEMS])
            more = f", … ({len(items)} values)" if len(items) > _JSON_ITEMS else ""
            yield f"{pad}{field.name}: [{shown}{more}]"
        else:
            yield f"{pad}{field.name}: {_scalar_text(field, value)}"


def _is_repeated(field: Any) -> bool:
    # protobuf 7 dropped FieldDescriptor.label for is_repeated (added in 5.x).
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(field.label == field.LABEL_REPEATED)


def _is_map(field: Any) -> bool:
    options = field.message_type.GetOptions() if field.message_type is not None else None
    return bool(options is not None and options.map_entry)


def _raw_lines(
    message: Any, raw_field: str, tensors_field: str, buf: bytes, start: int, end: int
) -> Iterator[str]:
    """One line per raw tensor content of a request or response message."""
    raws = list(getattr(message, raw_field))
    if not raws:
        return
    number = message.DESCRIPTOR.fields_by_name[raw_field].number
    spans = field_spans(buf, start, end, number)
    tensors = list(getattr(message, tensors_field))
    for index, raw in enumerate(raws):
        tensor = tensors[index] if index < len(tensors) else None
        name = tensor.name if tensor is not None else "?"
        datatype = tensor.datatype if tensor is not None else "?"
        shape = list(tensor.shape) if tensor is not None else []
        where = f"bytes {spans[index][0]}..{spans[index][1]}" if index < len(spans) else ""
        yield (
            f"{raw_field}[{index}] {name} {datatype} {shape} {where} ({len(raw)} B): "
            f"{preview_tensor(datatype, shape, raw)}"
        )


def describe_grpc_message(method: str, direction: str, body: bytes) -> list[str]:
    """A gRPC message in protobuf text form with raw tensor contents summarised."""
    from kserve_v2.errors import MissingDependencyError

    try:
        cls = _message_class(method, direction)
    except MissingDependencyError:
        cls = None
    if cls is None:
        return [f"{len(body)} B: hex {_hex(body, 64)}"] if body else []
    note = ""
    if cls.DESCRIPTOR.name == "ModelStreamInferResponse" and _bare_infer_response(body):
        # MLServer answers its streams with ModelInferResponse messages, told apart as the
        # client reads them: read as the other, the model name would pass for an error.
        from kserve_v2.grpc import codec

        cls = codec.generated().ModelInferResponse
        note = " (a bare one on a stream, as MLServer sends)"
    from google.protobuf.message import DecodeError

    try:
        message = cls.FromString(body)
    except DecodeError as exc:
        return [f"cannot parse as {cls.DESCRIPTOR.name} ({exc}): hex {_hex(body, 64)}"]
    skip = frozenset({"raw_input_contents", "raw_output_contents"})
    lines = [f"# {cls.DESCRIPTOR.name}{note}, {len(body)} B", *_text_lines(message, 0, skip)]
    inner, start, end = message, 0, len(body)
    if cls.DESCRIPTOR.name == "ModelStreamInferResponse" and message.HasField("infer_response"):
        number = cls.DESCRIPTOR.fields_by_name["infer_response"].number
        spans = field_spans(body, 0, len(body), number)
        inner = message.infer_response
        start, end = spans[0] if spans else (0, 0)
    if inner.DESCRIPTOR.name == "ModelInferRequest":
        lines.extend(_raw_lines(inner, "raw_input_contents", "inputs", body, start, end))
    elif inner.DESCRIPTOR.name == "ModelInferResponse":
        lines.extend(_raw_lines(inner, "raw_output_contents", "outputs", body, start, end))
    return lines


# -- the hook -------------------------------------------------------------------------------------


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class DumpPrinter:
    """A wire hook printing each message to ``stream`` (colours if ``color``)."""

    def __init__(self, stream: IO[str], *, color: bool = False) -> None:
        self.stream = stream
        self.style = Style(color)

    def __call__(self, message: WireMessage) -> None:
        lines = self.format(message)
        self.stream.write("\n".join(lines) + "\n\n")
        self.stream.flush()

    def format(self, message: WireMessage) -> list[str]:
        s = self.style
        body = b"".join(bytes(memoryview(b).cast("B")) for b in message.body)
        if message.protocol == "http":
            if message.direction == "send":
                first = s(f">> {message.method} {message.target} HTTP/1.1", "bold", "cyan")
            elif message.status is None:
                first = s(f"<< no response to {message.method} {message.target}", "bold", "red")
            else:
                status = int(message.status)
                color = "green" if 200 <= status < 300 else "red"
                first = s(f"<< HTTP/1.1 {status} {_reason(status)}", "bold", color)
                first += s(f"  ({message.method} {message.target})", "dim")
        else:
            arrow = ">>" if message.direction == "send" else "<<"
            first = s(f"{arrow} gRPC {message.target}", "bold", "magenta")
            if message.direction == "send" and message.method == "stream" and not body:
                first += s("  (stream opened)", "dim")
            if message.status is not None:
                color = "green" if message.status == "OK" else "red"
                first += " " + s(str(message.status), "bold", color)
        if message.elapsed is not None:
            first += s(f"  {message.elapsed * 1000:.2f} ms", "dim")
        lines = [first]
        if message.error is not None:
            lines.append("   " + s(f"error: {message.error}", "red"))
        headers = redact_headers(message.headers)
        lines.extend(f"   {s(k + ':', 'dim')} {v}" for k, v in headers)
        if message.protocol == "http":
            content = describe_body(body, dict(headers))
        else:
            content = describe_grpc_message(message.target, message.direction, body)
        if content:
            lines.append("")
            lines.extend("   " + line for line in content)
        return lines
