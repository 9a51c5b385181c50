"""Core protocol: inference over HTTP/REST in JSON form, and its error objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import (
    DATATYPES,
    JSON_DATATYPES,
    decode_rest,
    expect_client_error_status,
    expect_error_object,
    expect_json,
    output_array,
    same_array,
)
from kserve_v2.conformance.context import Context, RestResponse
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_REST, REQUIRED_API, Level, Spec
from kserve_v2.tensors import InferInput, RequestedOutput

HTTP = ("http",)

REQUEST = "Inference Request JSON Object"
RESPONSE = "Inference Response JSON Object"
ERROR_STATUS = Spec(
    OIP_REST,
    "Inference Response JSON Error Object",
    "A failed inference request must be indicated by an HTTP error status (typically 400).",
)
ERROR_OBJECT = Spec(
    OIP_REST,
    "Inference Response JSON Error Object",
    "The HTTP body must contain the *$inference_error_response* object.",
)
DATATYPE = Spec(
    OIP_REST,
    "Request Input",
    '"datatype" : The data-type of the input tensor elements as defined in [Tensor Data '
    "Types](#tensor-data-types).",
)
ROW_MAJOR = Spec(
    OIP_REST,
    "Tensor Data",
    "Tensor data must be presented in row-major order of the tensor elements.",
)
NATURAL = Spec(
    OIP_REST,
    "Tensor Data",
    "Tensor elements may be presented in their nature multi-dimensional representation, or as "
    "a flattened one-dimensional representation.",
)
SHAPE_DIMS = Spec(
    OIP_REST,
    "Request Input",
    '"shape" : The shape of the input tensor. Each dimension must be an integer representable '
    "as an unsigned 64-bit integer value.",
)
ID_ECHO = Spec(
    OIP_REST,
    REQUEST,
    "Optional, but if specified this identifier must be returned in the response.",
)
OUTPUTS_DEFAULT = Spec(
    OIP_REST,
    REQUEST,
    "Optional, if not specified all outputs produced by the model will be returned using "
    "default *$request_output* settings.",
)
PARAMETERS = Spec(
    OIP_REST,
    REQUEST,
    '"parameters" : An object containing zero or more parameters for this inference request '
    "expressed as key/value pairs.",
)
COERCE = Spec(
    OIP_REST,
    "Tensor Data",
    "The server can decide to coerce each element to the required type or return an error if "
    "an unexpected value is received.",
)


def _json_input(name: str, datatype: str, shape: list[int], data: Any) -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def _identity_json(
    ctx: Context, datatype: str, shape: list[int], data: Any, **extra: Any
) -> RestResponse:
    body = {"inputs": [_json_input("INPUT0", datatype, shape, data)], **extra}
    return ctx.rest("POST", f"v2/models/identity_{datatype.lower()}/infer", json_body=body)


# -- every datatype in JSON form, through the project's client ------------------------------


def _json_roundtrip(datatype: str) -> None:
    sample = DATATYPES[datatype]

    @case(
        f"rest.infer.json.{datatype.lower()}",
        f"A {datatype} tensor sent and returned as JSON keeps its values",
        DATATYPE,
        Level.MUST,
        protocols=HTTP,
        models=(sample.model,),
    )
    def _(ctx: Context) -> None:
        result = ctx.http.infer(
            sample.model, [InferInput("INPUT0", sample.array, datatype=datatype)], binary=False
        )
        out = output_array(ctx, result, "OUTPUT0")
        ctx.equal(result.output("OUTPUT0").datatype, datatype, "output datatype")
        ctx.check(
            same_array(out, sample.array),
            f"OUTPUT0 = {out.tolist()!r}, expected {sample.array.tolist()!r}",
        )


for _datatype in JSON_DATATYPES:
    _json_roundtrip(_datatype)


@case(
    "rest.infer.json.nested-data",
    "Tensor data in its natural multi-dimensional JSON form is accepted",
    NATURAL,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
    note="'may be presented' gives the client the choice, so a server must accept both forms.",
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "INT32", [2, 3], [[1, 2, 3], [4, 5, 6]])
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(out.tolist(), [[1, 2, 3], [4, 5, 6]], "OUTPUT0")


@case(
    "rest.infer.json.row-major",
    "Flat JSON data is read in row-major order",
    ROW_MAJOR,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "INT32", [3, 2], [1, 2, 3, 4, 5, 6])
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(out.tolist(), [[1, 2], [3, 4], [5, 6]], "OUTPUT0")


@case(
    "rest.infer.json.zero-size",
    "A tensor with a 0 dimension (no elements) is accepted and returned with its shape",
    SHAPE_DIMS,
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="0 is a valid unsigned dimension; an identity model returns the empty tensor.",
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "INT32", [0, 3], [])
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(list(out.shape), [0, 3], "OUTPUT0 shape")


@case(
    "rest.infer.json.single-element",
    "A single-element tensor (shape [1, 1]) round-trips",
    SHAPE_DIMS,
    Level.MUST,
    protocols=HTTP,
    models=("identity_fp64",),
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "FP64", [1, 1], [0.5])
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(out.tolist(), [[0.5]], "OUTPUT0")


@case(
    "rest.infer.json.response-fields",
    "Each response output has name, shape, datatype and data",
    Spec(
        OIP_REST,
        "Response Output",
        "The *$response_output* JSON describes an output from the model.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _identity_json(ctx, "INT32", [1, 2], [7, 8]))
    outputs = body.get("outputs") if isinstance(body, dict) else None
    ctx.check(isinstance(outputs, list) and outputs, f"no outputs array: {body!r:.300}")
    assert isinstance(outputs, list)
    out = outputs[0]
    ctx.check(isinstance(out, dict), f"output is not an object: {out!r}")
    ctx.equal(out.get("name"), "OUTPUT0", "name")
    ctx.equal(out.get("shape"), [1, 2], "shape")
    ctx.equal(out.get("datatype"), "INT32", "datatype")
    data = out.get("data")
    ctx.check(data in ([7, 8], [[7, 8]]), f"data: {data!r}")


@case(
    "rest.infer.json.content-type",
    "A JSON inference response comes with Content-Type: application/json",
    Spec(
        OIP_REST,
        "Inference Request Examples",
        "For the above request the inference server must return the “output0” output tensor.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="The example response shows Content-Type: application/json.",
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "INT32", [1, 1], [1])
    ctx.equal(response.status, 200, "status")
    ctx.check(
        response.content_type.startswith("application/json"),
        f"Content-Type is {response.content_type!r}",
    )


@case(
    "rest.infer.json.integer-for-float",
    "Integers given for an FP32 tensor are coerced, or refused with an error object",
    COERCE,
    Level.MAY,
    protocols=HTTP,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    response = _identity_json(ctx, "FP32", [1, 2], [1, 2])
    if response.status == 200:
        out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
        ctx.equal(out.tolist(), [[1.0, 2.0]], "coerced OUTPUT0")
    else:
        expect_error_object(ctx, response)


# -- id, names, versions, outputs --------------------------------------------------------


def _id_echo(ctx: Context, request_id: str, binary: bool) -> None:
    result = ctx.http.infer(
        "identity_int32",
        {"INPUT0": np.ones((1, 2), np.int32)},
        request_id=request_id,
        binary=binary,
    )
    ctx.equal(result.id, request_id, "id")


@case(
    "rest.infer.id-echo",
    'The request\'s "id" comes back in the response',
    ID_ECHO,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    _id_echo(ctx, "conformance-42", binary=False)


@case(
    "rest.infer.id-echo.binary",
    'The request\'s "id" comes back in a binary-data response too',
    ID_ECHO,
    Level.MUST,
    protocols=HTTP,
    extension="binary_tensor_data",
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    _id_echo(ctx, "conformance-43", binary=True)


@case(
    "rest.infer.id-absent",
    "Without a request id the response's id is absent or a string",
    Spec(OIP_REST, RESPONSE, '"id" : The "id" identifier given in the request, if any.'),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="The text does not say what comes back when the request had no id, and the schema "
    'gives "id" : $string; an absent id, an empty one and one the server made up (for '
    "tracing, as KServe and MLServer do) all fit it.",
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _identity_json(ctx, "INT32", [1, 1], [1]))
    ctx.check(isinstance(body.get("id", ""), str), f"id is not a string: {body.get('id')!r}")


@case(
    "rest.infer.model-name",
    '"model_name" is the name of the model used',
    Spec(OIP_REST, RESPONSE, '"model_name" : The name of the model used for inference.'),
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _identity_json(ctx, "INT32", [1, 1], [1]))
    ctx.equal(body.get("model_name"), "identity_int32", "model_name")


@case(
    "rest.infer.version-path",
    "POST v2/models/<m>/versions/<v>/infer runs that version",
    Spec(
        OIP_REST, REQUEST, "The model name and (optionally) version must be available in the URL."
    ),
    Level.MUST,
    protocols=HTTP,
    models=("versioned",),
    note="The 'versioned' model adds its version number to the input.",
)
def _(ctx: Context) -> None:
    for version in (1, 2):
        result = ctx.http.infer(
            "versioned", {"INPUT0": np.array([10], np.int32)}, version=version, binary=False
        )
        ctx.equal(
            output_array(ctx, result, "OUTPUT0").tolist(),
            [10 + version],
            f"OUTPUT0 of version {version}",
        )


@case(
    "rest.infer.model-version",
    '"model_version" is the version that ran',
    Spec(OIP_REST, RESPONSE, '"model_version" : The specific model version used for inference.'),
    Level.MUST,
    protocols=HTTP,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    body = {"inputs": [_json_input("INPUT0", "INT32", [1], [1])]}
    response = ctx.rest("POST", "v2/models/versioned/versions/2/infer", json_body=body)
    obj = expect_json(ctx, response)
    ctx.check(
        obj.get("model_version") in (None, "2"), f"model_version: {obj.get('model_version')!r}"
    )


@case(
    "rest.infer.version-default",
    "Without a version the server picks one (or answers an error object)",
    Spec(
        OIP_REST,
        REQUEST,
        "If a version is not provided the server may choose a version "
        "based on its own policies or return an error.",
    ),
    Level.MAY,
    protocols=HTTP,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    body = {"inputs": [_json_input("INPUT0", "INT32", [1], [10])]}
    response = ctx.rest("POST", "v2/models/versioned/infer", json_body=body)
    if response.status != 200:
        expect_error_object(ctx, response)
        return
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0").tolist()
    ctx.check(out in ([11], [12]), f"OUTPUT0 {out} is from neither version")


def _simple_inputs(batch: int = 1) -> dict[str, np.ndarray]:
    in0 = np.arange(16 * batch, dtype=np.int32).reshape(batch, 16)
    return {"INPUT0": in0, "INPUT1": np.full((batch, 16), 2, np.int32)}


@case(
    "rest.infer.outputs.all-by-default",
    'Without "outputs" every output is returned',
    OUTPUTS_DEFAULT,
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    result = ctx.http.infer("simple", _simple_inputs(), binary=False)
    ctx.equal(sorted(o.name for o in result.outputs), ["OUTPUT0", "OUTPUT1"], "outputs")
    ctx.equal(result.as_numpy("OUTPUT0")[0, :3].tolist(), [2, 3, 4], "OUTPUT0 = INPUT0 + INPUT1")


@case(
    "rest.infer.outputs.requested",
    "A requested output is returned",
    Spec(
        OIP_REST,
        "Inference Request Examples",
        "For the above request the inference server must return the “output0” output tensor.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    result = ctx.http.infer("simple", _simple_inputs(), outputs=["OUTPUT1"], binary=False)
    ctx.check("OUTPUT1" in [o.name for o in result.outputs], "OUTPUT1 missing")
    ctx.equal(result.as_numpy("OUTPUT1")[0, :3].tolist(), [-2, -1, 0], "OUTPUT1 = INPUT0 - INPUT1")


@case(
    "rest.infer.outputs.only-requested",
    "Only the requested outputs are returned",
    Spec(OIP_REST, REQUEST, '"outputs" : The output tensors requested for this inference.'),
    Level.PRACTICE,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    result = ctx.http.infer("simple", _simple_inputs(), outputs=["OUTPUT1"], binary=False)
    ctx.equal([o.name for o in result.outputs], ["OUTPUT1"], "outputs")


@case(
    "rest.infer.batch",
    "A batched input's shape and data cover the whole batch, and so do the outputs'",
    Spec(
        OIP_REST,
        "Request Input",
        "If the input is batched, the shape and data must represent "
        "the full shape and contents of the entire batch.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    inputs = _simple_inputs(batch=3)
    result = ctx.http.infer("simple", inputs, binary=False)
    expected = inputs["INPUT0"] + inputs["INPUT1"]
    ctx.check(
        same_array(output_array(ctx, result, "OUTPUT0"), expected),
        f"OUTPUT0 {result.as_numpy('OUTPUT0').shape} differs from the batch sum",
    )


# -- parameters and unknown fields ---------------------------------------------------------


@case(
    "rest.infer.parameters.request",
    "Request parameters of each kind (string, number, boolean) are accepted",
    PARAMETERS,
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="No parameter is standard; a server should accept (or ignore) ones it does not use.",
)
def _(ctx: Context) -> None:
    params = {"conformance_text": "x", "conformance_number": 3, "conformance_flag": True}
    response = _identity_json(ctx, "INT32", [1, 1], [5], parameters=params)
    ctx.equal(output_array(ctx, decode_rest(ctx, response), "OUTPUT0").tolist(), [[5]], "OUTPUT0")


@case(
    "rest.infer.parameters.input",
    "Input tensor parameters are accepted",
    Spec(
        OIP_REST,
        "Request Input",
        '"parameters" : An object containing zero or more '
        "parameters for this input expressed as key/value pairs.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    tensor = {**_json_input("INPUT0", "INT32", [1, 1], [5]), "parameters": {"conformance": 1}}
    response = ctx.rest("POST", "v2/models/identity_int32/infer", json_body={"inputs": [tensor]})
    ctx.equal(output_array(ctx, decode_rest(ctx, response), "OUTPUT0").tolist(), [[5]], "OUTPUT0")


@case(
    "rest.infer.parameters.output",
    "Requested-output parameters (an empty object) are accepted",
    Spec(
        OIP_REST,
        "Request Output",
        '"parameters" : An object containing zero or more '
        "parameters for this output expressed as key/value pairs.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = _identity_json(
        ctx, "INT32", [1, 1], [5], outputs=[{"name": "OUTPUT0", "parameters": {}}]
    )
    ctx.equal(output_array(ctx, decode_rest(ctx, response), "OUTPUT0").tolist(), [[5]], "OUTPUT0")


def _ok_or_error_object(ctx: Context, response: RestResponse) -> None:
    if response.status == 200:
        decode_rest(ctx, response)
        return
    expect_error_object(ctx, response)
    expect_client_error_status(ctx, response, "an unknown field")


@case(
    "rest.infer.unknown-field.request",
    "An unknown top-level field is ignored or refused with a 4xx error object",
    Spec(OIP_REST, "HTTP/REST", "#optional indicates an optional JSON field."),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="The schema lists the fields; the text says nothing of others. Either answer is "
    "fine, a crash (5xx) is not.",
)
def _(ctx: Context) -> None:
    _ok_or_error_object(ctx, _identity_json(ctx, "INT32", [1, 1], [5], conformance_unknown=1))


@case(
    "rest.infer.unknown-field.input",
    "An unknown field in a request input is ignored or refused with a 4xx error object",
    Spec(OIP_REST, "HTTP/REST", "#optional indicates an optional JSON field."),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    tensor = {**_json_input("INPUT0", "INT32", [1, 1], [5]), "conformance_unknown": 1}
    _ok_or_error_object(
        ctx, ctx.rest("POST", "v2/models/identity_int32/infer", json_body={"inputs": [tensor]})
    )


@case(
    "rest.infer.wrong-method",
    "GET on the inference endpoint is refused with a 4xx status",
    Spec(
        OIP_REST,
        "Inference",
        "An inference request is made with an HTTP POST to an inference endpoint.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
    note="HTTP answers a method the resource does not support with 405 (or another 4xx).",
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/models/identity_int32/infer")
    expect_client_error_status(ctx, response, "GET on the inference endpoint")


# -- errors ----------------------------------------------------------------------------------

ErrorRequest = Callable[[Context], RestResponse]


def _post(model: str, body: Any) -> ErrorRequest:
    def send(ctx: Context) -> RestResponse:
        return ctx.rest("POST", f"v2/models/{model}/infer", json_body=body)

    return send


def _post_raw(model: str, body: bytes) -> ErrorRequest:
    def send(ctx: Context) -> RestResponse:
        return ctx.rest(
            "POST",
            f"v2/models/{model}/infer",
            body=body,
            headers=[("Content-Type", "application/json")],
        )

    return send


def _i32(
    shape: list[int], data: Any, name: str = "INPUT0", datatype: str = "INT32"
) -> dict[str, Any]:
    return {"inputs": [_json_input(name, datatype, shape, data)]}


def _unknown_version(ctx: Context) -> RestResponse:
    ctx.need_versioning()
    return ctx.rest(
        "POST", "v2/models/identity_int32/versions/987/infer", json_body=_i32([1, 1], [1])
    )


#: kind -> (title, request, models, is the client at fault (so a 4xx is expected))
ERRORS: dict[str, tuple[str, ErrorRequest, tuple[str, ...], bool]] = {
    "unknown-model": (
        "Inference on an unknown model",
        _post("conformance_no_such_model", _i32([1, 1], [1])),
        (),
        True,
    ),
    "unknown-version": (
        "Inference on an unknown version",
        _unknown_version,
        ("identity_int32",),
        True,
    ),
    "bad-json": (
        "A body that is not valid JSON",
        _post_raw("identity_int32", b'{"inputs": [{"name": "INPUT0",'),
        ("identity_int32",),
        True,
    ),
    "not-an-object": (
        "A JSON body that is not an object",
        _post_raw("identity_int32", b"[1, 2, 3]"),
        ("identity_int32",),
        True,
    ),
    "missing-inputs": (
        'A request without "inputs"',
        _post("identity_int32", {"id": "x"}),
        ("identity_int32",),
        True,
    ),
    "datatype-mismatch": (
        "An input whose datatype is not the model's",
        _post("identity_int32", _i32([1, 2], [1.5, 2.5], datatype="FP32")),
        ("identity_int32",),
        True,
    ),
    "shape-data-mismatch": (
        "An input whose data does not fill its shape",
        _post("identity_int32", _i32([1, 3], [1, 2])),
        ("identity_int32",),
        True,
    ),
    "shape-rank-mismatch": (
        "An input whose rank is not the model's",
        _post("identity_int32", _i32([2], [1, 2])),
        ("identity_int32",),
        True,
    ),
    "unknown-input": (
        "An input the model does not have",
        _post("identity_int32", _i32([1, 1], [1], name="CONFORMANCE_NO_SUCH_INPUT")),
        ("identity_int32",),
        True,
    ),
    "missing-input": (
        "A request missing one of the model's inputs",
        _post("simple", {"inputs": [_json_input("INPUT0", "INT32", [1, 16], list(range(16)))]}),
        ("simple",),
        True,
    ),
    "unknown-output": (
        "A requested output the model does not have",
        _post(
            "identity_int32", {**_i32([1, 1], [1]), "outputs": [{"name": "CONFORMANCE_NO_SUCH"}]}
        ),
        ("identity_int32",),
        True,
    ),
    "unknown-datatype": (
        "An input with a datatype not in the table",
        _post("identity_int32", _i32([1, 1], [1], datatype="INT31")),
        ("identity_int32",),
        True,
    ),
    "lowercase-datatype": (
        "A datatype written in lower case (strings are case-sensitive)",
        _post("identity_int32", _i32([1, 1], [1], datatype="int32")),
        ("identity_int32",),
        True,
    ),
    "negative-dim": (
        "A negative dimension in an input's shape",
        _post("identity_int32", _i32([-1, 1], [1])),
        ("identity_int32",),
        True,
    ),
    "missing-data": (
        'An input with neither "data" nor binary data',
        _post(
            "identity_int32", {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32"}]}
        ),
        ("identity_int32",),
        True,
    ),
    "bad-element": (
        "A JSON element that is not of the tensor's type (a string for INT32)",
        _post("identity_int32", _i32([1, 1], ["one"])),
        ("identity_int32",),
        True,
    ),
    "model-failure": (
        "A request the model itself fails",
        _post("failing", _i32([1], [1])),
        ("failing",),
        False,
    ),
}


#: Requests the spec tells clients not to send but that a server can still read as meant:
#: refusing them is expected practice (see the README's requirement levels), not a MUST.
LENIENT: dict[str, tuple[Spec, str]] = {
    "lowercase-datatype": (
        Spec(REQUIRED_API, "HTTP/REST", "All strings in all contexts are case-sensitive."),
        '"int32" is not a datatype of the table, so the client is wrong; a server that reads it '
        "as INT32 still computes what the client meant, so it is expected to refuse it, not "
        "bound to.",
    ),
}


def _failed(ctx: Context, response: RestResponse, kind: str) -> RestResponse:
    """``response``, when the request failed; a request the server accepted is reported by
    ``rest.infer.error.<kind>`` alone, so the cases about the failure's form skip."""
    if response.status < 400:
        ctx.skip(
            f"the server accepted the request (HTTP {response.status}); "
            f"rest.infer.error.{kind} reports that"
        )
    return response


def _error_cases(
    kind: str, title: str, send: ErrorRequest, models: tuple[str, ...], client_fault: bool
) -> None:
    spec, note = LENIENT.get(kind, (ERROR_STATUS, ""))

    @case(
        f"rest.infer.error.{kind}",
        f"{title}: an HTTP error status",
        spec,
        Level.PRACTICE if kind in LENIENT else Level.MUST,
        protocols=HTTP,
        models=models,
        note=note,
    )
    def _(ctx: Context) -> None:
        response = send(ctx)
        ctx.check(
            response.status >= 400,
            f"expected an error status, got {response.status}: {response.body[:200]!r}",
        )

    @case(
        f"rest.infer.error.{kind}.error-object",
        f'{title}: the body is {{"error": <string>}}',
        ERROR_OBJECT,
        Level.MUST,
        protocols=HTTP,
        models=models,
    )
    def _(ctx: Context) -> None:
        expect_error_object(ctx, _failed(ctx, send(ctx), kind))

    if client_fault:

        @case(
            f"rest.infer.error.{kind}.status-4xx",
            f"{title}: a 4xx status, the client's error",
            ERROR_STATUS,
            Level.PRACTICE,
            protocols=HTTP,
            models=models,
            note="'typically 400': the request is wrong, so a 4xx status (400, 404, ...) is "
            "expected; a 5xx says the server failed.",
        )
        def _(ctx: Context) -> None:
            expect_client_error_status(ctx, _failed(ctx, send(ctx), kind), title)


for _kind, (_title, _send, _models, _fault) in ERRORS.items():
    _error_cases(_kind, _title, _send, _models, _fault)


@case(
    "rest.infer.error.model-failure.message",
    "The model's own error message reaches the client",
    Spec(
        OIP_REST,
        "Inference Response JSON Error Object",
        "“error” : The descriptive message for the error.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    models=("failing",),
)
def _(ctx: Context) -> None:
    message = expect_error_object(ctx, _post("failing", _i32([1], [1]))(ctx))
    ctx.check("deliberate error" in message, f"error message {message!r} lost the model's text")


@case(
    "rest.infer.error.content-type",
    "Error objects come with Content-Type: application/json",
    ERROR_OBJECT,
    Level.PRACTICE,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    for kind in ("unknown-model", "datatype-mismatch", "bad-json"):
        response = ERRORS[kind][1](ctx)
        ctx.check(
            response.content_type.startswith("application/json"),
            f"{kind}: Content-Type is {response.content_type!r}",
        )


@case(
    "rest.infer.error.server-keeps-serving",
    "After a run of bad requests the server still answers good ones",
    Spec(
        REQUIRED_API,
        "Server Live",
        "The “server live” API indicates if the inference server "
        "is able to receive and respond to metadata and inference requests.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    for kind in ("bad-json", "shape-data-mismatch", "negative-dim"):
        ERRORS[kind][1](ctx)
    ctx.equal(ctx.rest("GET", "v2/health/live").status, 200, "live status")
    result = ctx.http.infer("identity_int32", {"INPUT0": np.ones((1, 1), np.int32)}, binary=False)
    ctx.equal(result.as_numpy("OUTPUT0").tolist(), [[1]], "OUTPUT0")


@case(
    "rest.infer.outputs.request-object",
    "An output requested by a $request_output object with only a name comes back as JSON",
    Spec(
        OIP_REST,
        "Request Output",
        "The *$request_output* JSON is used to request which output "
        "tensors should be returned from the model.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    result = ctx.http.infer(
        "identity_int32",
        {"INPUT0": np.ones((1, 2), np.int32)},
        outputs=[RequestedOutput("OUTPUT0")],
        binary=False,
    )
    ctx.equal(result.as_numpy("OUTPUT0").tolist(), [[1, 1]], "OUTPUT0")
