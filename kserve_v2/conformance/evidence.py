"""Evidence: what a case sent and what came back, readable in a report.

Each request/response pair is an :class:`Exchange`. Bodies are kept as previews: JSON is
pretty-printed, the binary sections of a binary-data body are decoded tensor by tensor using
the JSON header's ``binary_data_size`` parameters, and gRPC messages are shown in protobuf
text format with their raw tensor contents decoded. Credentials are redacted.

Example::

    >>> from kserve_v2.conformance.evidence import http_body_preview
    >>> body = b'{"outputs":[{"name":"O","datatype":"INT32","shape":[2],'
    >>> body += b'"parameters":{"binary_data_size":8}}]}'
    >>> print(http_body_preview({"inference-header-content-length": str(len(body))},
    ...                         [body + bytes([1, 0, 0, 0, 2, 0, 0, 0])]))  # doctest: +ELLIPSIS
    {
      "outputs": [
    ...
    [binary section 1: output 'O', INT32 [2], 8 bytes] [1, 2]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kserve_v2.datatypes import (
    DATATYPE_BY_NAME,
    BytesLike,
    Datatype,
    deserialize,
    deserialize_bytes_elements,
    numpy_dtype,
)
from kserve_v2.hooks import redact_headers

__all__ = [
    "BODY_LIMIT",
    "format_json",
    "Exchange",
    "Message",
    "grpc_message_preview",
    "http_body_preview",
]

#: Longest body preview kept per message, in characters.
BODY_LIMIT: Final = 4000
# Bytes of a body looked at when building a preview (bigger bodies are cut).
_SCAN_LIMIT: Final = 256 * 1024
# Elements of a decoded tensor shown.
_ELEMENTS: Final = 16


@dataclass(frozen=True, slots=True)
class Message:
    """One side of an exchange. ``line`` is ``"POST /v2/models/m/infer"`` or ``"200 OK"``
    for HTTP, the RPC's full name or its status code for gRPC."""

    line: str
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "headers": [list(h) for h in self.headers], "body": self.body}


@dataclass(frozen=True, slots=True)
class Exchange:
    """A request and its response (``None`` when none came: ``error`` says what happened)."""

    protocol: str
    request: Message
    response: Message | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "request": self.request.to_json(),
            "response": None if self.response is None else self.response.to_json(),
            "error": self.error,
        }

    def render(self) -> str:
        """Plain-text form, for terminals, pytest and Markdown."""
        lines = [f">> {self.protocol.upper()} {self.request.line}"]
        lines += [f"   {k}: {v}" for k, v in self.request.headers]
        if self.request.body:
            lines += ["   " + line for line in self.request.body.splitlines()]
        if self.response is not None:
            lines.append(f"<< {self.response.line}")
            lines += [f"   {k}: {v}" for k, v in self.response.headers]
            if self.response.body:
                lines += ["   " + line for line in self.response.body.splitlines()]
        if self.error:
            lines.append(f"!! {self.error}")
        return "\n".join(lines)


def headers_of(
    headers: Iterable[tuple[str, str]] | Mapping[str, str],
) -> tuple[tuple[str, str], ...]:
    """Headers as redacted pairs."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple(redact_headers([(str(k), str(v)) for k, v in items]))


def _cut(text: str, limit: int = BODY_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text)} characters)"


def _join(parts: Sequence[BytesLike], limit: int = _SCAN_LIMIT) -> tuple[bytes, int]:
    total = sum(memoryview(p).nbytes for p in parts)
    out = bytearray()
    for part in parts:
        if len(out) >= limit:
            break
        out += memoryview(part).cast("B")[: limit - len(out)]
    return bytes(out), total


def _text(data: bytes) -> str:
    return data.decode("utf-8", "backslashreplace")


def _pretty_json(data: bytes) -> str | None:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return format_json(obj)


def format_json(obj: Any, indent: str = "") -> str:
    """JSON, indented, with arrays of plain values kept on one line (shapes, data)."""
    inner = indent + "  "
    if isinstance(obj, dict) and obj:
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {format_json(v, inner)}"
            for k, v in obj.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and any(isinstance(v, dict | list) for v in obj):
        items = [inner + format_json(v, inner) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def _elements(buf: bytes, datatype: str, shape: Sequence[int] | None) -> str:
    """The first elements of a tensor's binary form, or why they cannot be shown."""
    dtype = DATATYPE_BY_NAME.get(datatype)
    if dtype is None:
        return f"(unknown datatype {datatype!r}) {buf[:32]!r}"
    try:
        if shape is not None and all(type(d) is int and d >= 0 for d in shape):
            count = 1
            for dim in shape:
                count *= dim
        elif dtype is Datatype.BYTES:
            count = len(deserialize_bytes_elements(buf))
        else:
            count = len(buf) // (2 if dtype is Datatype.BF16 else numpy_dtype(dtype).itemsize)
        flat = deserialize(buf, dtype, (count,))
    except Exception as exc:  # any decoding problem is evidence, not a crash of the report
        return f"(cannot decode as {datatype}: {exc}) {buf[:32]!r}"
    values = flat.reshape(-1)[:_ELEMENTS].tolist()
    more = " ..." if flat.size > _ELEMENTS else ""
    return f"{values}{more}"


def _binary_sections(header: Any, binary: bytes, total_binary: int) -> list[str]:
    lines: list[str] = []
    if not isinstance(header, dict):
        return lines
    offset = 0
    index = 0
    for key in ("inputs", "outputs"):
        entries = header.get(key)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            params = entry.get("parameters")
            size = params.get("binary_data_size") if isinstance(params, dict) else None
            if not isinstance(size, int) or isinstance(size, bool):
                continue
            index += 1
            name = entry.get("name")
            datatype = str(entry.get("datatype"))
            shape = entry.get("shape") if isinstance(entry.get("shape"), list) else None
            what = f"{key[:-1]} {name!r}, {datatype} {shape}, {size} bytes"
            if offset + size > total_binary:
                lines.append(
                    f"[binary section {index}: {what}] only {max(total_binary - offset, 0)} "
                    "bytes left in the body"
                )
                offset += size
                continue
            chunk = binary[offset : offset + size]
            shown = _elements(chunk, datatype, shape) if len(chunk) == size else "(not shown)"
            lines.append(f"[binary section {index}: {what}] {shown}")
            offset += size
    if offset < total_binary:
        lines.append(f"[{total_binary - offset} bytes after the last binary section]")
    return lines


def http_body_preview(headers: Mapping[str, str], parts: Sequence[BytesLike]) -> str:
    """A readable preview of an HTTP body; ``headers`` has lower-case names."""
    data, total = _join(parts)
    if total == 0:
        return ""
    length = headers.get("inference-header-content-length")
    if length is not None:
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n == 0:
            return f"[raw binary body, {total} bytes] {data[:64]!r}"
        if 0 < n <= len(data):
            head = data[:n]
            pretty = _pretty_json(head)
            lines = [_cut(pretty if pretty is not None else _text(head))]
            header = json.loads(head) if pretty is not None else None
            lines += _binary_sections(header, data[n:], total - n)
            return "\n".join(lines)
    pretty = _pretty_json(data) if total == len(data) else None
    if pretty is not None:
        return _cut(pretty)
    text = _text(data)
    if total > len(data):
        text += f" ... ({total} bytes)"
    return _cut(text)


# ----------------------------------------------------------------------------------- gRPC

# Response message of each RPC whose name does not follow "<rpc>Response".
_RESPONSE_OF: Final = {"ModelStreamInfer": "ModelStreamInferResponse"}
_REQUEST_OF: Final = {"ModelStreamInfer": "ModelInferRequest"}


def _decode_raw(message: Any, tensors_field: str, raw_field: str) -> list[str]:
    lines = []
    tensors = list(getattr(message, tensors_field))
    for index, raw in enumerate(getattr(message, raw_field)):
        if index < len(tensors):
            tensor = tensors[index]
            what = f"{tensor.name!r}, {tensor.datatype} {list(tensor.shape)}"
            shown = _elements(bytes(raw), tensor.datatype, list(tensor.shape))
        else:
            what, shown = "(no tensor at this index)", repr(bytes(raw[:32]))
        lines.append(f"[{raw_field}[{index}]: {what}, {len(raw)} bytes] {shown}")
    return lines


def _text_format(message: Any) -> str:
    from google.protobuf import text_format

    return str(text_format.MessageToString(message, as_utf8=True))


def _describe_message(message: Any) -> str:
    name = message.DESCRIPTOR.name
    if name == "ModelInferRequest":
        copy = type(message)()
        copy.CopyFrom(message)
        del copy.raw_input_contents[:]
        lines = [_text_format(copy).rstrip()]
        lines += _decode_raw(message, "inputs", "raw_input_contents")
        return "\n".join(lines)
    if name == "ModelInferResponse":
        copy = type(message)()
        copy.CopyFrom(message)
        del copy.raw_output_contents[:]
        lines = [_text_format(copy).rstrip()]
        lines += _decode_raw(message, "outputs", "raw_output_contents")
        return "\n".join(lines)
    if name == "ModelStreamInferResponse":
        lines = []
        if message.error_message:
            lines.append(f"error_message: {message.error_message!r}")
        if message.HasField("infer_response"):
            inner = _describe_message(message.infer_response)
            lines.append("infer_response {\n" + _indent(inner) + "\n}")
        return "\n".join(lines)
    return _text_format(message).rstrip()


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def grpc_message_preview(rpc: str, data: BytesLike, *, response: bool) -> str:
    """Decode a serialized request or response of ``rpc`` (a method name, with or without the
    service prefix) for the report; undecodable bytes are shown as such."""
    from kserve_v2.grpc.codec import generated

    short = rpc.rsplit("/", 1)[-1]
    table = _RESPONSE_OF if response else _REQUEST_OF
    type_name = table.get(short, short + ("Response" if response else "Request"))
    raw = bytes(memoryview(data)[:_SCAN_LIMIT])
    cls = getattr(generated(), type_name, None)
    if cls is None:
        return f"[{len(raw)} bytes] {raw[:64]!r}"
    try:
        message = cls.FromString(raw)
    except Exception as exc:  # protobuf's DecodeError and friends: evidence, not a crash
        return f"[undecodable {type_name}: {exc}] {raw[:64]!r}"
    return _cut(_describe_message(message))


def describe_proto(message: Any) -> str:
    """A parsed protobuf message in the same readable form."""
    return _cut(_describe_message(message))
