"""Triton's binary tensor data extension (HTTP/REST): binary sections, their parameters and
headers, the raw binary request, and the errors of inconsistent sizes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import numpy as np

from kserve_v2.conformance.cases.common import (
    DATATYPES,
    decode_rest,
    expect_client_error_status,
    expect_error_object,
    expect_json,
    output_array,
    same_array,
)
from kserve_v2.conformance.context import Context, RestResponse
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import BINARY, Level, Spec
from kserve_v2.datatypes import serialize_bytes_elements
from kserve_v2.tensors import InferInput

HTTP = ("http",)
EXT = "binary_tensor_data"
REQUEST = "Binary Tensor Request"
RAW = "Raw Binary Request"

NATIVE = Spec(
    BINARY,
    REQUEST,
    "All tensor data types are representable as binary data in the native size of the data type.",
)
BYTES_FORM = Spec(
    BINARY,
    REQUEST,
    "For BYTES type an element is represented by a 4-byte "
    "unsigned integer giving the length followed by the actual bytes.",
)
HEADER_LENGTH = Spec(
    BINARY,
    REQUEST,
    "If any binary data is present in the request or response the "
    "Inference-Header-Content-Length header must be provided to give the length of the JSON "
    "object, and Content-Length continues to give the full body length (as HTTP requires).",
)
SIZE_PARAM = Spec(
    BINARY,
    REQUEST,
    '"binary_data_size" : int64 parameter indicating the size of the tensor binary data, in bytes.',
)
BINARY_DATA = Spec(
    BINARY,
    REQUEST,
    '"binary_data" : bool parameter that is true if the output should be returned as binary '
    "data and false (or not given) if the tensor should be returned as JSON.",
)
BINARY_OUTPUT = Spec(
    BINARY,
    REQUEST,
    '"binary_data_output" : bool parameter that is true if all outputs should be returned as '
    "binary data and false (or not given) if the outputs should be returned as JSON.",
)
ORDER = Spec(
    BINARY,
    REQUEST,
    "When one or more tensors are communicated as binary data, the HTTP body of the request or "
    "response will contain the JSON inference request or response object followed by the binary "
    "tensor data in the same order as the order of the input or output tensors are specified in "
    "the JSON.",
)


def _input(name: str, datatype: str, shape: list[int], size: int) -> dict[str, Any]:
    return {
        "name": name,
        "shape": shape,
        "datatype": datatype,
        "parameters": {"binary_data_size": size},
    }


def _simple_json_inputs() -> list[dict[str, Any]]:
    """The ``simple`` model's two inputs, all ones, as JSON."""
    return [
        {"name": n, "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}
        for n in ("INPUT0", "INPUT1")
    ]


def _i32(values: Any) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


def _split(ctx: Context, response: RestResponse) -> tuple[dict[str, Any], bytes]:
    """The JSON header and the binary part of a binary-data response."""
    ctx.equal(response.status, 200, "status")
    length = response.headers.get("inference-header-content-length")
    ctx.check(
        length is not None,
        "the response carries binary data but no Inference-Header-Content-Length header",
    )
    assert length is not None
    ctx.check(
        length.isdigit() and int(length) <= len(response.body),
        f"Inference-Header-Content-Length {length!r} for a body of {len(response.body)} bytes",
    )
    head = response.body[: int(length)]
    try:
        header = json.loads(head)
    except ValueError as exc:
        ctx.fail(f"the first {length} bytes are not the JSON object: {exc}: {head[:200]!r}")
    ctx.check(isinstance(header, dict), "the JSON header is not an object")
    return header, response.body[int(length) :]


def _output(ctx: Context, header: dict[str, Any], name: str) -> dict[str, Any]:
    for out in header.get("outputs") or []:
        if isinstance(out, dict) and out.get("name") == name:
            return out
    ctx.fail(f"output {name!r} missing from {header!r:.300}")


def _binary_size(ctx: Context, output: dict[str, Any]) -> int | None:
    params = output.get("parameters")
    size = params.get("binary_data_size") if isinstance(params, dict) else None
    if size is None:
        return None
    ctx.check(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0,
        f"binary_data_size of {output.get('name')!r} is {size!r}",
    )
    return int(size)


def _sections(ctx: Context, header: dict[str, Any], binary: bytes) -> dict[str, bytes]:
    """Binary sections of the outputs, by name, in JSON order; the sizes must add up."""
    out: dict[str, bytes] = {}
    offset = 0
    for entry in header.get("outputs") or []:
        size = _binary_size(ctx, entry)
        if size is None:
            continue
        out[entry["name"]] = binary[offset : offset + size]
        offset += size
    ctx.equal(offset, len(binary), "bytes after the JSON header (sum of binary_data_size)")
    return out


# -- every datatype, through the project's client --------------------------------------------


def _roundtrip(datatype: str) -> None:
    sample = DATATYPES[datatype]

    @case(
        f"rest.binary.{datatype.lower()}",
        f"A {datatype} tensor sent and returned as binary data keeps its values",
        NATIVE,
        Level.MUST,
        protocols=HTTP,
        extension=EXT,
        models=(sample.model,),
    )
    def _(ctx: Context) -> None:
        result = ctx.http.infer(
            sample.model, [InferInput("INPUT0", sample.array, datatype=datatype)], binary=True
        )
        out = output_array(ctx, result, "OUTPUT0")
        ctx.check(
            same_array(out, sample.array),
            f"OUTPUT0 = {out.tolist()!r}, expected {sample.array.tolist()!r}",
        )


for _datatype in DATATYPES:
    _roundtrip(_datatype)


@case(
    "rest.binary.bytes-trailing-nul",
    "BYTES elements keep trailing NUL bytes and embedded non-UTF-8 bytes",
    BYTES_FORM,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_bytes",),
)
def _(ctx: Context) -> None:
    elements = [b"ab\x00", b"\x00", b"\xff\xfe\x00\x00"]
    blob = serialize_bytes_elements(elements)
    response = ctx.rest_infer(
        "identity_bytes",
        {
            "inputs": [_input("INPUT0", "BYTES", [1, 3], len(blob))],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        },
        [blob],
    )
    header, binary = _split(ctx, response)
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), blob, "OUTPUT0's binary section")


@case(
    "rest.binary.bool-bytes",
    "BOOL elements are single bytes 1 (true) and 0 (false)",
    Spec(
        BINARY,
        REQUEST,
        "For BOOL type element true is a single byte with value 1 and false "
        "is a single byte with value 0.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_bool",),
)
def _(ctx: Context) -> None:
    response = ctx.rest_infer(
        "identity_bool",
        {
            "inputs": [_input("INPUT0", "BOOL", [1, 3], 3)],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        },
        [b"\x01\x00\x01"],
    )
    header, binary = _split(ctx, response)
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), b"\x01\x00\x01", "OUTPUT0 bytes")


@case(
    "rest.binary.little-endian",
    "Binary tensor data is little-endian and row-major, without padding",
    Spec(
        BINARY,
        REQUEST,
        "Tensor data represented as binary data is organized in "
        "little-endian byte order, row major, without stride or padding between elements.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int64",),
)
def _(ctx: Context) -> None:
    data = np.array([[1, 256], [65536, -2]], dtype="<i8").tobytes()
    response = ctx.rest_infer(
        "identity_int64",
        {
            "inputs": [_input("INPUT0", "INT64", [2, 2], len(data))],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        },
        [data],
    )
    header, binary = _split(ctx, response)
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), data, "OUTPUT0 bytes")
    ctx.equal(_output(ctx, header, "OUTPUT0").get("shape"), [2, 2], "OUTPUT0 shape")


def _identity_binary(ctx: Context, **params: Any) -> RestResponse:
    header: dict[str, Any] = {"inputs": [_input("INPUT0", "INT32", [1, 2], 8)]}
    header.update(params)
    return ctx.rest_infer("identity_int32", header, [_i32([3, 4])])


@case(
    "rest.binary.response-header-length",
    "A binary response gives the JSON length in Inference-Header-Content-Length",
    HEADER_LENGTH,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_binary(
        ctx, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    )
    header, binary = _split(ctx, response)
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), _i32([3, 4]), "OUTPUT0 bytes")


@case(
    "rest.binary.response-content-length",
    "Content-Length of a binary response is the whole body's length",
    HEADER_LENGTH,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_binary(
        ctx, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    )
    length = response.headers.get("content-length")
    if length is None:
        ctx.check(
            "chunked" in response.headers.get("transfer-encoding", ""),
            "neither Content-Length nor chunked transfer coding",
        )
        return
    ctx.equal(int(length), len(response.body), "Content-Length")


@case(
    "rest.binary.response-size-parameter",
    'Binary outputs carry binary_data_size and no "data"',
    SIZE_PARAM,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_binary(
        ctx, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    )
    header, _binary = _split(ctx, response)
    out = _output(ctx, header, "OUTPUT0")
    ctx.equal(_binary_size(ctx, out), 8, "binary_data_size")
    ctx.check("data" not in out, 'a binary output also has "data"')


@case(
    "rest.binary.response-content-type",
    "A binary response comes with Content-Type: application/octet-stream",
    HEADER_LENGTH,
    Level.PRACTICE,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
    note="The extension's examples show application/octet-stream for binary bodies.",
)
def _(ctx: Context) -> None:
    response = _identity_binary(
        ctx, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}]
    )
    ctx.check(
        response.content_type.startswith("application/octet-stream"),
        f"Content-Type is {response.content_type!r}",
    )


#: The two inputs the order cases send to 'simple' (which adds and subtracts them).
SIMPLE_INPUTS: Final = {
    "INPUT0": np.arange(16, dtype="<i4").reshape(1, 16),
    "INPUT1": np.full((1, 16), 2, "<i4"),
}


def _infer_simple(ctx: Context, order: tuple[str, str], **fields: Any) -> RestResponse:
    """'simple' with both inputs binary, in this ``order``, and these other body ``fields``."""
    body = {"inputs": [_input(name, "INT32", [1, 16], 64) for name in order], **fields}
    return ctx.rest_infer("simple", body, [SIMPLE_INPUTS[name].tobytes() for name in order])


@case(
    "rest.binary.output-order",
    "Binary output sections follow the order of the outputs in the JSON",
    ORDER,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    in0, in1 = SIMPLE_INPUTS["INPUT0"], SIMPLE_INPUTS["INPUT1"]
    response = _infer_simple(
        ctx,
        ("INPUT0", "INPUT1"),
        outputs=[
            {"name": "OUTPUT1", "parameters": {"binary_data": True}},
            {"name": "OUTPUT0", "parameters": {"binary_data": True}},
        ],
    )
    header, binary = _split(ctx, response)
    sections = _sections(ctx, header, binary)
    ctx.equal(sections.get("OUTPUT0"), (in0 + in1).tobytes(), "OUTPUT0 section")
    ctx.equal(sections.get("OUTPUT1"), (in0 - in1).tobytes(), "OUTPUT1 section")


@case(
    "rest.binary.input-order",
    "Binary input sections are read in the order of the inputs in the JSON",
    ORDER,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    in0, in1 = SIMPLE_INPUTS["INPUT0"], SIMPLE_INPUTS["INPUT1"]
    response = _infer_simple(ctx, ("INPUT1", "INPUT0"))
    result = decode_rest(ctx, response)
    ctx.check(
        same_array(output_array(ctx, result, "OUTPUT1"), in0 - in1),
        "OUTPUT1 is not INPUT0 - INPUT1: the sections were read out of order",
    )


@case(
    "rest.binary.json-in-binary-out",
    "JSON inputs with an output requested as binary_data come back binary",
    BINARY_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    body = {
        "inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "INT32", "data": [5, 6]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
    }
    header, binary = _split(ctx, ctx.rest_infer("identity_int32", body))
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), _i32([5, 6]), "OUTPUT0 bytes")


@case(
    "rest.binary.binary-in-json-out",
    "A binary input with the output requested as binary_data false comes back as JSON",
    BINARY_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_binary(
        ctx, outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}]
    )
    body = expect_json(ctx, response)
    out = _output(ctx, body, "OUTPUT0")
    ctx.check(out.get("data") in ([3, 4], [[3, 4]]), f"OUTPUT0 data: {out.get('data')!r}")


@case(
    "rest.binary.output-default-json",
    "A binary input with the output requested by name only comes back as JSON",
    BINARY_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _identity_binary(ctx, outputs=[{"name": "OUTPUT0"}]))
    ctx.check("data" in _output(ctx, body, "OUTPUT0"), "OUTPUT0 has no JSON data")


@case(
    "rest.binary.mixed-inputs",
    "One input binary and one in JSON in the same request",
    Spec(
        BINARY,
        REQUEST,
        "The first parameter is used in `$request_input` and "
        "`$response_output` to indicate that the input or output tensor is communicated as "
        "binary data:",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    in0 = np.arange(16, dtype="<i4").reshape(1, 16)
    response = ctx.rest_infer(
        "simple",
        {
            "inputs": [
                _input("INPUT0", "INT32", [1, 16], 64),
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
            ]
        },
        [in0.tobytes()],
    )
    result = decode_rest(ctx, response)
    ctx.check(same_array(output_array(ctx, result, "OUTPUT0"), in0 + 1), "OUTPUT0 != INPUT0 + 1")


@case(
    "rest.binary.binary-data-output",
    "binary_data_output true (no outputs listed) returns every output binary",
    BINARY_OUTPUT,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    body = {
        "parameters": {"binary_data_output": True},
        "inputs": _simple_json_inputs(),
    }
    header, binary = _split(ctx, ctx.rest_infer("simple", body))
    sections = _sections(ctx, header, binary)
    ctx.equal(sorted(sections), ["OUTPUT0", "OUTPUT1"], "outputs in binary form")


@case(
    "rest.binary.binary-data-output.listed-outputs",
    "binary_data_output true also applies to outputs listed without binary_data",
    BINARY_OUTPUT,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("identity_int32",),
    note='"all outputs": the request-level flag covers listed outputs unless they say '
    'otherwise (\'If "binary_data" is specified on an output it overrides this '
    "setting.').",
)
def _(ctx: Context) -> None:
    body = {
        "parameters": {"binary_data_output": True},
        "inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "INT32", "data": [5, 6]}],
        "outputs": [{"name": "OUTPUT0"}],
    }
    response = ctx.rest_infer("identity_int32", body)
    ctx.check(
        "inference-header-content-length" in response.headers,
        "OUTPUT0 came back as JSON although binary_data_output is true",
    )
    header, binary = _split(ctx, response)
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), _i32([5, 6]), "OUTPUT0 bytes")


@case(
    "rest.binary.binary-data-override",
    "binary_data false on an output overrides binary_data_output true",
    Spec(BINARY, REQUEST, 'If "binary_data" is specified on an output it overrides this setting.'),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    body = {
        "parameters": {"binary_data_output": True},
        "inputs": _simple_json_inputs(),
        "outputs": [
            {"name": "OUTPUT0", "parameters": {"binary_data": False}},
            {"name": "OUTPUT1", "parameters": {"binary_data": True}},
        ],
    }
    header, binary = _split(ctx, ctx.rest_infer("simple", body))
    ctx.check("data" in _output(ctx, header, "OUTPUT0"), "OUTPUT0 is not JSON")
    ctx.equal(sorted(_sections(ctx, header, binary)), ["OUTPUT1"], "outputs in binary form")


# -- errors ----------------------------------------------------------------------------------

SendBody = Callable[[Context], RestResponse]


def _bad(
    header: dict[str, Any] | bytes,
    blobs: list[bytes],
    length: int | str | None = -1,
    model: str = "identity_int32",
) -> SendBody:
    def send(ctx: Context) -> RestResponse:
        return ctx.rest_infer(model, header, blobs, header_length=length)

    return send


_HEAD = {"inputs": [_input("INPUT0", "INT32", [1, 2], 8)]}
_HEAD_BYTES = json.dumps(_HEAD).encode()

#: kind -> (title, request, cited sentence)
ERRORS: dict[str, tuple[str, SendBody, Spec]] = {
    "size-beyond-body": (
        "binary_data_size larger than the bytes sent",
        _bad({"inputs": [_input("INPUT0", "INT32", [1, 3], 12)]}, [_i32([1, 2])]),
        SIZE_PARAM,
    ),
    "size-below-shape": (
        "binary_data_size smaller than the shape needs",
        _bad({"inputs": [_input("INPUT0", "INT32", [1, 2], 4)]}, [_i32([1])]),
        SIZE_PARAM,
    ),
    "size-above-shape": (
        "binary_data_size larger than the shape needs",
        _bad({"inputs": [_input("INPUT0", "INT32", [1, 2], 12)]}, [_i32([1, 2, 3])]),
        SIZE_PARAM,
    ),
    "header-length-beyond-body": (
        "Inference-Header-Content-Length beyond the body",
        _bad(_HEAD_BYTES, [_i32([1, 2])], len(_HEAD_BYTES) + 100),
        HEADER_LENGTH,
    ),
    "header-length-not-a-number": (
        "Inference-Header-Content-Length that is not a number",
        _bad(_HEAD_BYTES, [_i32([1, 2])], "twelve"),
        HEADER_LENGTH,
    ),
    "header-length-cuts-json": (
        "Inference-Header-Content-Length shorter than the JSON object",
        _bad(_HEAD_BYTES, [_i32([1, 2])], len(_HEAD_BYTES) - 5),
        HEADER_LENGTH,
    ),
    "trailing-bytes": (
        "Bytes after the last binary section",
        _bad(_HEAD, [_i32([1, 2]), b"\x00\x01\x02"]),
        HEADER_LENGTH,
    ),
    "bytes-bad-length-prefix": (
        "A BYTES element whose length prefix runs past its section",
        _bad(
            {"inputs": [_input("INPUT0", "BYTES", [1, 1], 6)]},
            [b"\x10\x00\x00\x00ab"],
            model="identity_bytes",
        ),
        BYTES_FORM,
    ),
    "bytes-count-mismatch": (
        "BYTES elements fewer than the shape holds",
        _bad(
            {"inputs": [_input("INPUT0", "BYTES", [1, 2], 6)]},
            [b"\x02\x00\x00\x00ab"],
            model="identity_bytes",
        ),
        BYTES_FORM,
    ),
}


def _error_cases(kind: str, title: str, send: SendBody, spec: Spec) -> None:
    model = "identity_bytes" if kind.startswith("bytes") else "identity_int32"

    @case(
        f"rest.binary.error.{kind}",
        f"{title}: an error status and error object",
        spec,
        Level.MUST,
        protocols=HTTP,
        extension=EXT,
        models=(model,),
        note="A body whose sizes do not add up cannot be read as the sender meant it; the "
        "server must refuse it with the protocol's error object.",
    )
    def _(ctx: Context) -> None:
        expect_error_object(ctx, send(ctx), title)

    @case(
        f"rest.binary.error.{kind}.status-4xx",
        f"{title}: a 4xx status",
        spec,
        Level.PRACTICE,
        protocols=HTTP,
        extension=EXT,
        models=(model,),
        note="The sizes are the client's mistake, so a 4xx status is expected.",
    )
    def _(ctx: Context) -> None:
        expect_client_error_status(ctx, send(ctx), title)


for _kind, (_title, _send, _spec) in ERRORS.items():
    _error_cases(_kind, _title, _send, _spec)


# -- the raw binary request --------------------------------------------------------------------

RAW_HEADER = Spec(
    BINARY,
    RAW,
    "To send a raw binary request, the Inference-Header-Content-Length header must be provided "
    "with value 0 to indicate that the request body doesn't include the inference header.",
)


def _raw_request(ctx: Context, model: str, body: bytes) -> RestResponse:
    return ctx.rest(
        "POST",
        f"v2/models/{model}/infer",
        body=body,
        headers=[
            ("Inference-Header-Content-Length", "0"),
            ("Content-Type", "application/octet-stream"),
        ],
    )


@case(
    "rest.binary.raw-request",
    "A raw binary request (header length 0) is inferred",
    RAW_HEADER,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("classify",),
    note="'classify' has one FP32 input with one variable dimension: a qualified model.",
)
def _(ctx: Context) -> None:
    data = np.array([0.5, 1.5, 2.5, 3.5], dtype="<f4")
    result = decode_rest(ctx, _raw_request(ctx, "classify", data.tobytes()))
    ctx.check(same_array(output_array(ctx, result, "OUTPUT0"), data), "OUTPUT0 != INPUT0")


@case(
    "rest.binary.raw-request.binary-outputs",
    "The outputs of a raw binary request come back in binary form",
    Spec(
        BINARY,
        RAW,
        "Additionally, all the model output will be requested to be returned "
        "in binary tensor form as described in the previous section.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=("classify",),
)
def _(ctx: Context) -> None:
    data = np.array([0.5, 1.5], dtype="<f4").tobytes()
    header, binary = _split(ctx, _raw_request(ctx, "classify", data))
    ctx.equal(_sections(ctx, header, binary).get("OUTPUT0"), data, "OUTPUT0 bytes")


@case(
    "rest.binary.raw-request.unqualified-model",
    "A raw binary request to a model with two inputs is refused with an error object",
    Spec(BINARY, RAW, "Below is the constraints for the qualified models:"),
    Level.PRACTICE,
    protocols=HTTP,
    extension=EXT,
    models=("simple",),
    note="Only models with one input qualify; the server cannot know how to split the body.",
)
def _(ctx: Context) -> None:
    expect_error_object(ctx, _raw_request(ctx, "simple", bytes(128)))
