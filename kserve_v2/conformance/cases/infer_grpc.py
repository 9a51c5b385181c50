"""Core protocol: ModelInfer over gRPC, with raw and typed tensor contents, and its errors.

Raw contents go through the project's client; typed ``InferTensorContents`` (which the client
does not send) and malformed requests are built with the generated protobuf messages and
sent through the transport's ``call_unary``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import (
    DATATYPES,
    GRPC_CONTENTS,
    decode_grpc,
    expect_grpc_error,
    output_array,
    same_array,
)
from kserve_v2.conformance.context import Context, RpcError
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_GRPC, REQUIRED_API, Level, Spec
from kserve_v2.tensors import InferInput

GRPC = ("grpc",)

INFER = "Inference"
REPRESENTATION = Spec(
    OIP_GRPC,
    INFER,
    'The data contained in an input tensor can be represented in "raw" bytes form or in the '
    "repeated type that matches the tensor's data type.",
)
RAW_SIZE = Spec(
    OIP_GRPC,
    INFER,
    "For each tensor, the size of this content must match what is expected by the tensor's "
    "shape and data type.",
)
NOT_BOTH = Spec(
    OIP_GRPC,
    INFER,
    "If this field is specified then InferInputTensor::contents must not be specified for any "
    "input tensor.",
)
ERRORS_SPEC = Spec(
    OIP_GRPC,
    INFER,
    "Errors are indicated by the google.rpc.Status returned for the request.",
)
ROW_MAJOR = Spec(
    OIP_GRPC,
    "Tensor Data",
    "In all representations tensor data must be flattened to a one-dimensional, row-major "
    "order of the tensor elements.",
)


def tensor(ctx: Context, name: str, datatype: str, shape: Sequence[int], **contents: Any) -> Any:
    """An ``InferInputTensor``; ``contents`` fills typed ``InferTensorContents`` fields."""
    message = ctx.pb.ModelInferRequest.InferInputTensor(
        name=name, datatype=datatype, shape=list(shape)
    )
    for field, values in contents.items():
        getattr(message.contents, field).extend(values)
    return message


def infer_request(
    ctx: Context, model: str, inputs: Sequence[Any], raw: Sequence[bytes] = (), **fields: Any
) -> Any:
    request = ctx.pb.ModelInferRequest(model_name=model, **fields)
    request.inputs.extend(inputs)
    request.raw_input_contents.extend(raw)
    return request


def _i32(values: Sequence[int]) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


# -- raw contents through the project's client -----------------------------------------------


def _raw_case(datatype: str) -> None:
    sample = DATATYPES[datatype]

    @case(
        f"grpc.infer.raw.{datatype.lower()}",
        f"A {datatype} tensor in raw_input_contents comes back with its values",
        REPRESENTATION,
        Level.MUST,
        protocols=GRPC,
        models=(sample.model,),
    )
    def _(ctx: Context) -> None:
        result = ctx.grpc.infer(
            sample.model, [InferInput("INPUT0", sample.array, datatype=datatype)]
        )
        out = output_array(ctx, result, "OUTPUT0")
        ctx.equal(result.output("OUTPUT0").datatype, datatype, "output datatype")
        ctx.check(
            same_array(out, sample.array),
            f"OUTPUT0 = {out.tolist()!r}, expected {sample.array.tolist()!r}",
        )


def _typed_case(datatype: str) -> None:
    sample = DATATYPES[datatype]
    field = GRPC_CONTENTS[datatype]

    @case(
        f"grpc.infer.typed.{datatype.lower()}",
        f"A {datatype} tensor in typed contents ({field}) comes back with its values",
        REPRESENTATION,
        Level.MUST,
        protocols=GRPC,
        models=(sample.model,),
        note="Servers must accept both representations: the client decides which to send.",
    )
    def _(ctx: Context) -> None:
        values = sample.array.reshape(-1).tolist()
        request = infer_request(
            ctx, sample.model, [tensor(ctx, "INPUT0", datatype, sample.shape, **{field: values})]
        )
        result = decode_grpc(ctx, ctx.rpc("ModelInfer", request))
        out = output_array(ctx, result, "OUTPUT0")
        ctx.check(
            same_array(out, sample.array),
            f"OUTPUT0 = {out.tolist()!r}, expected {sample.array.tolist()!r}",
        )


for _datatype in DATATYPES:
    _raw_case(_datatype)
for _datatype in GRPC_CONTENTS:
    _typed_case(_datatype)


@case(
    "grpc.infer.row-major",
    "Raw contents are read in row-major order",
    ROW_MAJOR,
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    request = infer_request(
        ctx, "identity_int32", [tensor(ctx, "INPUT0", "INT32", [3, 2])], [_i32([1, 2, 3, 4, 5, 6])]
    )
    out = output_array(ctx, decode_grpc(ctx, ctx.rpc("ModelInfer", request)), "OUTPUT0")
    ctx.equal(out.tolist(), [[1, 2], [3, 4], [5, 6]], "OUTPUT0")


@case(
    "grpc.infer.zero-size",
    "A tensor with a 0 dimension round-trips with its shape",
    REPRESENTATION,
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    request = infer_request(ctx, "identity_int32", [tensor(ctx, "INPUT0", "INT32", [0, 3])], [b""])
    out = output_array(ctx, decode_grpc(ctx, ctx.rpc("ModelInfer", request)), "OUTPUT0")
    ctx.equal(list(out.shape), [0, 3], "OUTPUT0 shape")


@case(
    "grpc.infer.single-element",
    "A single-element tensor (shape [1, 1]) round-trips",
    REPRESENTATION,
    Level.MUST,
    protocols=GRPC,
    models=("identity_fp64",),
)
def _(ctx: Context) -> None:
    result = ctx.grpc.infer("identity_fp64", {"INPUT0": np.array([[0.5]])})
    ctx.equal(output_array(ctx, result, "OUTPUT0").tolist(), [[0.5]], "OUTPUT0")


# -- response fields -------------------------------------------------------------------------


@case(
    "grpc.infer.id-echo",
    "The request id comes back in the response",
    Spec(
        OIP_GRPC,
        INFER,
        "Optional identifier for the request. If specified will be returned in the response.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    result = ctx.grpc.infer(
        "identity_int32", {"INPUT0": np.ones((1, 1), np.int32)}, request_id="conformance-42"
    )
    ctx.equal(result.id, "conformance-42", "id")


@case(
    "grpc.infer.model-name",
    "model_name is the model used",
    Spec(OIP_GRPC, INFER, "The name of the model used for inference."),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    result = ctx.grpc.infer("identity_int32", {"INPUT0": np.ones((1, 1), np.int32)})
    ctx.equal(result.model_name, "identity_int32", "model_name")


@case(
    "grpc.infer.version",
    "model_version selects the version, and the response names it",
    Spec(OIP_GRPC, INFER, "The version of the model used for inference."),
    Level.MUST,
    protocols=GRPC,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    for version in (1, 2):
        result = ctx.grpc.infer("versioned", {"INPUT0": np.array([10], np.int32)}, version=version)
        ctx.equal(
            output_array(ctx, result, "OUTPUT0").tolist(),
            [10 + version],
            f"OUTPUT0 of version {version}",
        )
        ctx.check(
            result.model_version in ("", str(version)),
            f"model_version {result.model_version!r} for version {version}",
        )


def _simple(batch: int = 1) -> dict[str, np.ndarray]:
    return {
        "INPUT0": np.arange(16 * batch, dtype=np.int32).reshape(batch, 16),
        "INPUT1": np.full((batch, 16), 2, np.int32),
    }


@case(
    "grpc.infer.outputs.all-by-default",
    "Without requested outputs every output is returned",
    Spec(
        OIP_GRPC,
        INFER,
        "Optional, if not specified all outputs produced by the model will be returned.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("simple",),
)
def _(ctx: Context) -> None:
    result = ctx.grpc.infer("simple", _simple())
    ctx.equal(sorted(o.name for o in result.outputs), ["OUTPUT0", "OUTPUT1"], "outputs")


@case(
    "grpc.infer.outputs.only-requested",
    "Only the requested outputs are returned",
    Spec(OIP_GRPC, INFER, "The requested output tensors for the inference."),
    Level.PRACTICE,
    protocols=GRPC,
    models=("simple",),
)
def _(ctx: Context) -> None:
    result = ctx.grpc.infer("simple", _simple(), outputs=["OUTPUT1"])
    ctx.equal([o.name for o in result.outputs], ["OUTPUT1"], "outputs")
    ctx.equal(result.as_numpy("OUTPUT1")[0, :2].tolist(), [-2, -1], "OUTPUT1")


@case(
    "grpc.infer.batch",
    "A batched input's shape and contents cover the whole batch, and so do the outputs'",
    Spec(OIP_GRPC, INFER, "The output tensors holding inference results."),
    Level.MUST,
    protocols=GRPC,
    models=("simple",),
)
def _(ctx: Context) -> None:
    inputs = _simple(batch=3)
    result = ctx.grpc.infer("simple", inputs)
    ctx.check(
        same_array(output_array(ctx, result, "OUTPUT0"), inputs["INPUT0"] + inputs["INPUT1"]),
        "OUTPUT0 differs from the batch sum",
    )


@case(
    "grpc.infer.raw-output.order",
    "raw_output_contents hold one entry per output, in the order of 'outputs'",
    Spec(
        OIP_GRPC,
        INFER,
        "To use the raw representation 'raw_output_contents' must be "
        "initialized with data for each tensor in the same order as 'outputs'.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("simple",),
)
def _(ctx: Context) -> None:
    inputs = _simple()
    request = infer_request(
        ctx,
        "simple",
        [tensor(ctx, "INPUT0", "INT32", [1, 16]), tensor(ctx, "INPUT1", "INT32", [1, 16])],
        [inputs["INPUT0"].tobytes(), inputs["INPUT1"].tobytes()],
    )
    response = ctx.rpc_ok("ModelInfer", request)
    raw = list(response.raw_output_contents)
    if not raw:
        return  # typed contents: nothing to order
    ctx.equal(len(raw), len(response.outputs), "number of raw_output_contents")
    expected = {"OUTPUT0": inputs["INPUT0"] + 2, "OUTPUT1": inputs["INPUT0"] - 2}
    for output, data in zip(response.outputs, raw, strict=True):
        got = np.frombuffer(data, "<i4").reshape(list(output.shape))
        ctx.check(
            same_array(got, expected[output.name]),
            f"raw_output_contents for {output.name} hold another output's data",
        )


@case(
    "grpc.infer.raw-output.no-typed-contents",
    "A response using raw_output_contents sets no typed contents",
    Spec(
        OIP_GRPC,
        INFER,
        "If this field is specified then InferOutputTensor::contents must "
        "not be specified for any output tensor.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    request = infer_request(
        ctx, "identity_int32", [tensor(ctx, "INPUT0", "INT32", [1, 2])], [_i32([1, 2])]
    )
    response = ctx.rpc_ok("ModelInfer", request)
    if response.raw_output_contents:
        for output in response.outputs:
            ctx.check(
                not output.HasField("contents") or not output.contents.ListFields(),
                f"output {output.name} has typed contents next to raw_output_contents",
            )


@case(
    "grpc.infer.parameters.request",
    "Request parameters of each kind (int64, bool, string) are accepted",
    Spec(OIP_GRPC, INFER, "Optional inference parameters."),
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    request = infer_request(
        ctx, "identity_int32", [tensor(ctx, "INPUT0", "INT32", [1, 1])], [_i32([5])]
    )
    request.parameters["conformance_int"].int64_param = 3
    request.parameters["conformance_bool"].bool_param = True
    request.parameters["conformance_text"].string_param = "x"
    out = output_array(ctx, decode_grpc(ctx, ctx.rpc("ModelInfer", request)), "OUTPUT0")
    ctx.equal(out.tolist(), [[5]], "OUTPUT0")


@case(
    "grpc.infer.parameters.input",
    "Input tensor parameters are accepted",
    Spec(OIP_GRPC, INFER, "Optional inference input tensor parameters."),
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    item = tensor(ctx, "INPUT0", "INT32", [1, 1])
    item.parameters["conformance"].int64_param = 1
    request = infer_request(ctx, "identity_int32", [item], [_i32([5])])
    out = output_array(ctx, decode_grpc(ctx, ctx.rpc("ModelInfer", request)), "OUTPUT0")
    ctx.equal(out.tolist(), [[5]], "OUTPUT0")


# -- errors ----------------------------------------------------------------------------------

ErrorRequest = Callable[[Context], Any]


def _identity(
    shape: Sequence[int],
    raw: Sequence[bytes],
    name: str = "INPUT0",
    datatype: str = "INT32",
    model: str = "identity_int32",
    **fields: Any,
) -> ErrorRequest:
    def build(ctx: Context) -> Any:
        if fields.get("model_version"):
            ctx.need_versioning()
        return infer_request(ctx, model, [tensor(ctx, name, datatype, shape)], raw, **fields)

    return build


def _typed_i32(
    shape: Sequence[int],
    values: Sequence[int],
    raw: Sequence[bytes] = (),
    field: str = "int_contents",
) -> ErrorRequest:
    def build(ctx: Context) -> Any:
        return infer_request(
            ctx, "identity_int32", [tensor(ctx, "INPUT0", "INT32", shape, **{field: values})], raw
        )

    return build


def _missing_input(ctx: Context) -> Any:
    return infer_request(
        ctx, "simple", [tensor(ctx, "INPUT0", "INT32", [1, 16])], [_i32(range(16))]
    )


def _raw_count(ctx: Context) -> Any:
    return infer_request(
        ctx,
        "simple",
        [tensor(ctx, "INPUT0", "INT32", [1, 16]), tensor(ctx, "INPUT1", "INT32", [1, 16])],
        [_i32(range(16))],
    )


def _unknown_output(ctx: Context) -> Any:
    request = _identity([1, 1], [_i32([1])])(ctx)
    request.outputs.add(name="CONFORMANCE_NO_SUCH")
    return request


#: kind -> (title, cited sentence, models, expected status code (None: any error))
ERRORS: dict[str, tuple[str, ErrorRequest, Spec, tuple[str, ...], str | None]] = {
    "unknown-model": (
        "Inference on an unknown model",
        _identity([1, 1], [_i32([1])], model="conformance_no_such_model"),
        ERRORS_SPEC,
        (),
        "NOT_FOUND",
    ),
    "unknown-version": (
        "Inference on an unknown version",
        _identity([1, 1], [_i32([1])], model_version="987"),
        ERRORS_SPEC,
        ("identity_int32",),
        "NOT_FOUND",
    ),
    "empty-model-name": (
        "Inference without a model name",
        _identity([1, 1], [_i32([1])], model=""),
        ERRORS_SPEC,
        (),
        None,
    ),
    "datatype-mismatch": (
        "An input whose datatype is not the model's",
        _identity([1, 1], [b"\x00\x00\x80\x3f"], datatype="FP32"),
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "shape-rank-mismatch": (
        "An input whose rank is not the model's",
        _identity([2], [_i32([1, 2])]),
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "unknown-input": (
        "An input the model does not have",
        _identity([1, 1], [_i32([1])], name="CONFORMANCE_NO_SUCH_INPUT"),
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "missing-input": (
        "A request missing one of the model's inputs",
        _missing_input,
        ERRORS_SPEC,
        ("simple",),
        "INVALID_ARGUMENT",
    ),
    "unknown-output": (
        "A requested output the model does not have",
        _unknown_output,
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "unknown-datatype": (
        "An input with a datatype not in the table",
        _identity([1, 1], [_i32([1])], datatype="INT31"),
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "lowercase-datatype": (
        "A datatype written in lower case (strings are case-sensitive)",
        _identity([1, 1], [_i32([1])], datatype="int32"),
        # "int32" can still be read as meant: refusing it is expected practice, not a MUST.
        Spec(REQUIRED_API, "GRPC", "All strings in all contexts are case-sensitive."),
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "negative-dim": (
        "A negative dimension in an input's shape",
        _identity([-1, 1], [_i32([1])]),
        ERRORS_SPEC,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "raw-size-mismatch": (
        "Raw contents shorter than the shape needs",
        _identity([1, 3], [_i32([1, 2])]),
        RAW_SIZE,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "raw-count-mismatch": (
        "Fewer raw_input_contents than inputs",
        _raw_count,
        RAW_SIZE,
        ("simple",),
        "INVALID_ARGUMENT",
    ),
    "typed-count-mismatch": (
        "Typed contents with more elements than the shape holds",
        _typed_i32([1, 2], [1, 2, 3]),
        Spec(
            OIP_GRPC, "Tensor Data", "The size must match what is expected by the tensor's shape."
        ),
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "typed-and-raw": (
        "Typed contents and raw_input_contents together",
        _typed_i32([1, 2], [1, 2], raw=[_i32([1, 2])]),
        NOT_BOTH,
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "typed-wrong-field": (
        "An INT32 tensor given in fp32_contents",
        _typed_i32([1, 2], [1, 2], field="fp32_contents"),
        Spec(OIP_GRPC, "Tensor Data", "Representation for INT8, INT16, and INT32 data types."),
        ("identity_int32",),
        "INVALID_ARGUMENT",
    ),
    "model-failure": (
        "A request the model itself fails",
        _identity([2], [_i32([1, 2])], model="failing"),
        ERRORS_SPEC,
        ("failing",),
        None,
    ),
}


def _error_cases(
    kind: str,
    title: str,
    build: ErrorRequest,
    spec: Spec,
    models: tuple[str, ...],
    code: str | None,
) -> None:
    must = spec is ERRORS_SPEC or kind in (
        "raw-size-mismatch",
        "raw-count-mismatch",
        "typed-count-mismatch",
    )

    @case(
        f"grpc.infer.error.{kind}",
        f"{title}: an error status",
        spec,
        Level.MUST if must else Level.PRACTICE,
        protocols=GRPC,
        models=models,
        note=""
        if must
        else "The sentence binds the client; a server is expected to refuse "
        "such a request rather than guess.",
    )
    def _(ctx: Context) -> None:
        expect_grpc_error(ctx, ctx.rpc("ModelInfer", build(ctx)), title)

    if code is not None:

        @case(
            f"grpc.infer.error.{kind}.code",
            f"{title}: status {code}",
            ERRORS_SPEC,
            Level.PRACTICE,
            protocols=GRPC,
            models=models,
            note=f"The spec names no codes; gRPC's {code} is the one that fits.",
        )
        def _(ctx: Context) -> None:
            response = ctx.rpc("ModelInfer", build(ctx))
            if not isinstance(response, RpcError):  # reported by grpc.infer.error.<kind>
                ctx.skip(f"the server accepted the request; grpc.infer.error.{kind} reports that")
            ctx.equal(response.code, code, "status code")


for _kind, (_title, _build, _spec, _models, _code) in ERRORS.items():
    _error_cases(_kind, _title, _build, _spec, _models, _code)


@case(
    "grpc.infer.error.model-failure.message",
    "The model's own error message reaches the client",
    ERRORS_SPEC,
    Level.PRACTICE,
    protocols=GRPC,
    models=("failing",),
)
def _(ctx: Context) -> None:
    error = ctx.rpc("ModelInfer", ERRORS["model-failure"][1](ctx))
    ctx.check(
        isinstance(error, RpcError) and "deliberate error" in error.message,
        f"the model's message is lost: {error!r:.300}",
    )
