"""Decode a captured binary-extension body offline, request or response: the JSON header
pretty-printed, each binary section (tensor, datatype, shape, byte range) and the decoded
tensors' values.

FILE is the body alone (give --header-length N, the Inference-Header-Content-Length; a body
that is all JSON needs none), or a saved HTTP message (`curl -i ... > response.http`), whose
headers say it. `-` reads stdin.

examples:
  kserve-v2 decode response.http
  kserve-v2 decode body.bin --header-length 231
  kserve-v2 decode request.bin --header-length 231 --json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kserve_v2.cli import _common, _tensors

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("output",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the body or saved HTTP message; - for stdin")
    parser.add_argument(
        "--header-length",
        type=int,
        metavar="N",
        help="length of the JSON header (Inference-Header-Content-Length)",
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--request", dest="kind", action="store_const", const="request")
    kind.add_argument("--response", dest="kind", action="store_const", const="response")


def run(args: argparse.Namespace) -> int:
    import json

    from kserve_v2.cli._httpmsg import looks_like_http, parse_http_message
    from kserve_v2.cli.dump import describe_body
    from kserve_v2.rest import codec

    if args.header_length is not None and args.header_length < 0:
        raise _common.CLIError(f"--header-length must be >= 0, got {args.header_length}")
    data = sys.stdin.buffer.read() if args.file == "-" else _common.read_file(args.file)
    name = "stdin" if args.file == "-" else args.file
    if not data.strip():
        raise _common.CLIError(f"{name} is empty")
    if data.lstrip().startswith((b">>", b"<<")):
        raise _common.CLIError(
            f"{name} looks like --dump output, which is not a body",
            hint="save a body with `curl -i ... > response.http` or `kserve-v2 encode --body FILE`",
        )
    header_length = args.header_length
    length_from = "--header-length"
    kind = args.kind
    first_line = ""
    headers: dict[str, str] = {}
    if looks_like_http(data):
        message = parse_http_message(data)
        first_line, headers, data = message.first_line, message.headers, message.body
        kind = kind or ("request" if message.is_request else "response")
        if header_length is None and codec.HEADER_LENGTH.lower() in headers:
            length_from = codec.HEADER_LENGTH
            text = headers[codec.HEADER_LENGTH.lower()].strip()
            if not text.isdigit():
                raise _common.CLIError(f"{length_from}: {text!r} is not a length")
            header_length = int(text)
    if header_length is None:
        try:
            json.loads(data)
        except ValueError:
            raise _common.CLIError(
                "the body is not all JSON: give --header-length N (its "
                "Inference-Header-Content-Length), or a saved HTTP message"
            ) from None
    elif header_length > len(data):
        raise _common.CLIError(
            f"{length_from} {header_length} is larger than the body ({len(data)} bytes)"
        )
    head = data if header_length is None else data[:header_length]
    try:
        header = json.loads(head)
    except ValueError as exc:
        raise _common.CLIError(f"the JSON header does not parse: {exc}") from None
    if not isinstance(header, dict):
        raise _common.CLIError("the JSON header is not an object")
    kind = kind or ("request" if "inputs" in header else "response")
    style = _common.Style(_common.wants_color(args, sys.stdout))
    fields, values = _decode_as(kind, name, data, header_length, header, style)
    description = describe_body(data, {}, header_length=header_length)
    record: dict[str, Any] = {
        "kind": kind,
        "content_length": len(data),
        "header_length": header_length,
        "header": header,
    }
    if first_line:
        record["http"] = {"first_line": first_line, "headers": headers}
    record.update(fields)
    size = f"{len(data)} B" + (f", JSON header {header_length} B" if header_length else "")
    lines = [style(f"{kind} body ({size})", "bold")]
    if first_line:
        lines.append(first_line)
    lines += description[1:] if header_length else description
    lines += ["", style("decoded", "bold"), *values]
    _common.emit(args, record, "\n".join(lines))
    return 0


def _decode_request(
    data: bytes, header_length: int | None, header: dict[str, Any], style: _common.Style
) -> tuple[dict[str, Any], list[str]]:
    """The inputs of a request body: for the JSON record, and as lines of text."""
    from kserve_v2.errors import ProtocolError
    from kserve_v2.rest import codec

    if "inputs" not in header:  # the codec would say "'inputs' must be an array, got None"
        also = ", and an 'outputs' field" if "outputs" in header else ""
        raise ProtocolError(f"it has no 'inputs' field{also}")
    request = codec.decode_infer_request(data, header_length)
    inputs = [
        {
            "name": t.name,
            "datatype": t.datatype.value,
            "shape": list(t.shape),
            "data": _tensors.output_values(t.data),
            **({"shared_memory": vars_of(t.shared_memory)} if t.shared_memory else {}),
        }
        for t in request.inputs
    ]
    values = []
    for t in request.inputs:
        values.append(style(f"{t.name}  {t.datatype.value}  {list(t.shape)}", "cyan"))
        if t.data is not None:
            values.extend("  " + line for line in _tensors.format_values(t.data).splitlines())
        else:
            values.append(f"  (in shared memory: {t.shared_memory})")
    return {"inputs": inputs}, values


def _decode_response(
    data: bytes, header_length: int | None, header: dict[str, Any], style: _common.Style
) -> tuple[dict[str, Any], list[str]]:
    """The outputs of a response body: for the JSON record, and as lines of text."""
    from kserve_v2.errors import ProtocolError
    from kserve_v2.rest import codec

    # The response decoder takes a missing "outputs" for none, so a JSON request would
    # decode as an empty response: refuse what is plainly a request.
    if "outputs" not in header and "inputs" in header:
        raise ProtocolError("it has an 'inputs' field and no 'outputs'")
    result = codec.decode_infer_response(data, header_length)
    values = _tensors.result_text(result, style=style, title=False).splitlines()
    return _tensors.result_data(result), values


_DECODERS = {"request": _decode_request, "response": _decode_response}


def _decode_as(
    kind: str,
    name: str,
    data: bytes,
    header_length: int | None,
    header: dict[str, Any],
    style: _common.Style,
) -> tuple[dict[str, Any], list[str]]:
    """Decode the body as a ``kind`` (request or response). A body that does not decode is
    the file's fault, not a server's: say it does not decode as that kind, and whether it
    decodes as the other one (a captured response given with --request, say)."""
    from kserve_v2.errors import KServeError

    try:
        return _DECODERS[kind](data, header_length, header, style)
    except KServeError as exc:
        detail = getattr(exc, "message", None) or str(exc)
        # The codec names what it decoded ("inference request: ..."): said already.
        detail = detail.removeprefix(f"inference {kind}: ")
        error = f"{name} does not decode as an inference {kind}: {detail}"
    other = "response" if kind == "request" else "request"
    try:
        _DECODERS[other](data, header_length, header, style)
    except KServeError:
        raise _common.CLIError(error) from None
    raise _common.CLIError(
        error, hint=f"it decodes as an inference {other}: it may be a captured {other} (--{other})"
    ) from None


def vars_of(placement: Any) -> dict[str, Any]:
    return {
        "region": placement.region,
        "byte_size": placement.byte_size,
        "offset": placement.offset,
    }
