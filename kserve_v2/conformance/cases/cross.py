"""Cross-protocol agreement: the same request over HTTP/REST and gRPC gives the same outputs,
the same metadata, and the same class of error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import DATATYPES, output_array, same_array
from kserve_v2.conformance.context import Context
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_GRPC, TRITON_INDEX, Level, Spec
from kserve_v2.errors import ServerError
from kserve_v2.messages import InferResult
from kserve_v2.tensors import InferInput, RequestedOutput

BOTH = ("http", "grpc")
FOLLOWS = Spec(
    OIP_GRPC,
    "gRPC",
    "The GRPC API closely follows the concepts defined in the "
    "[HTTP/REST](./inference_rest.md) API.",
)
NOTE = "The specs define one protocol in two encodings; a server should not answer differently."


@case(
    "cross.metadata.server",
    "Server metadata is the same over HTTP and gRPC",
    FOLLOWS,
    Level.PRACTICE,
    protocols=BOTH,
    note=NOTE,
)
def _(ctx: Context) -> None:
    rest, grpc = ctx.http.server_metadata(), ctx.grpc.server_metadata()
    ctx.equal(grpc.name, rest.name, "name")
    ctx.equal(grpc.version, rest.version, "version")
    ctx.equal(sorted(grpc.extensions), sorted(rest.extensions), "extensions")


def _metadata_case(model: str) -> None:
    @case(
        f"cross.metadata.model.{model}",
        f"Model metadata of {model} is the same on both",
        FOLLOWS,
        Level.PRACTICE,
        protocols=BOTH,
        models=(model,),
        note=NOTE,
    )
    def _(ctx: Context) -> None:
        rest, grpc = ctx.http.model_metadata(model), ctx.grpc.model_metadata(model)
        for field in ("name", "platform"):
            ctx.equal(getattr(grpc, field), getattr(rest, field), field)
        ctx.equal(sorted(grpc.versions), sorted(rest.versions), "versions")
        for field in ("inputs", "outputs"):
            ctx.equal(
                [(t.name, t.datatype, list(t.shape)) for t in getattr(grpc, field)],
                [(t.name, t.datatype, list(t.shape)) for t in getattr(rest, field)],
                field,
            )


for _model in ("simple", "versioned", "identity_bytes", "repeat_decoupled"):
    _metadata_case(_model)


def _same_results(ctx: Context, rest: InferResult, grpc: InferResult) -> None:
    ctx.equal(
        sorted(o.name for o in grpc.outputs), sorted(o.name for o in rest.outputs), "output names"
    )
    for output in rest.outputs:
        other = grpc.output(output.name)
        ctx.equal(other.datatype, output.datatype, f"{output.name} datatype")
        ctx.equal(list(other.shape), list(output.shape), f"{output.name} shape")
        ctx.check(
            same_array(grpc.as_numpy(output.name), np.asarray(rest.as_numpy(output.name))),
            f"{output.name}: gRPC {grpc.as_numpy(output.name).tolist()!r} != HTTP "
            f"{rest.as_numpy(output.name).tolist()!r}",
        )


def _infer_case(datatype: str) -> None:
    sample = DATATYPES[datatype]

    @case(
        f"cross.infer.{datatype.lower()}",
        f"A {datatype} inference gives the same output over HTTP and gRPC",
        FOLLOWS,
        Level.PRACTICE,
        protocols=BOTH,
        models=(sample.model,),
        note=NOTE,
    )
    def _(ctx: Context) -> None:
        inputs = [InferInput("INPUT0", sample.array, datatype=datatype)]
        try:
            rest = ctx.http.infer(sample.model, inputs)
        except ServerError as exc:
            # Without the binary data extension FP16 and BF16 travel as JSON numbers, which the
            # core protocol does not define: a server may refuse them.
            if (
                sample.json_data is None
                and "binary_tensor_data" not in ctx.session.extensions()
                and exc.http_status is not None
                and 400 <= exc.http_status < 500
            ):
                ctx.skip(
                    f"the server refuses {datatype} as JSON numbers (HTTP {exc.http_status}) "
                    'and has no binary tensor data extension; the text allows that: "fp16 '
                    'and bf16 are problematic to communicate explicitly"'
                )
            raise
        grpc = ctx.grpc.infer(sample.model, inputs)
        _same_results(ctx, rest, grpc)


for _datatype in DATATYPES:
    _infer_case(_datatype)


@case(
    "cross.infer.response-fields",
    "id, model_name and model_version agree",
    FOLLOWS,
    Level.PRACTICE,
    protocols=BOTH,
    models=("versioned",),
    note=NOTE,
)
def _(ctx: Context) -> None:
    inputs = {"INPUT0": np.array([1, 2], np.int32)}
    rest = ctx.http.infer("versioned", inputs, version=2, request_id="x-1")
    grpc = ctx.grpc.infer("versioned", inputs, version=2, request_id="x-1")
    for field in ("id", "model_name", "model_version"):
        ctx.equal(getattr(grpc, field), getattr(rest, field), field)
    _same_results(ctx, rest, grpc)


@case(
    "cross.infer.batch",
    "A batched inference agrees",
    FOLLOWS,
    Level.PRACTICE,
    protocols=BOTH,
    models=("simple",),
    note=NOTE,
)
def _(ctx: Context) -> None:
    inputs = {
        "INPUT0": np.arange(32, dtype=np.int32).reshape(2, 16),
        "INPUT1": np.full((2, 16), -3, np.int32),
    }
    _same_results(ctx, ctx.http.infer("simple", inputs), ctx.grpc.infer("simple", inputs))


@case(
    "cross.infer.classification",
    "Classification strings agree",
    FOLLOWS,
    Level.PRACTICE,
    protocols=BOTH,
    extension="classification",
    models=("classify",),
    note=NOTE,
)
def _(ctx: Context) -> None:
    scores = {"INPUT0": np.array([0.1, 0.9, 0.5, 0.7], np.float32)}
    outputs = [RequestedOutput("OUTPUT0", class_count=2)]
    rest = ctx.http.infer("classify", scores, outputs=outputs)
    grpc = ctx.grpc.infer("classify", scores, outputs=outputs)
    ctx.equal(
        [bytes(x) for x in output_array(ctx, grpc, "OUTPUT0").reshape(-1)],
        [bytes(x) for x in output_array(ctx, rest, "OUTPUT0").reshape(-1)],
        "classification strings",
    )


@case(
    "cross.health.model-ready",
    "Model readiness agrees, for a loaded and an unknown model",
    FOLLOWS,
    Level.PRACTICE,
    protocols=BOTH,
    models=("simple",),
    note=NOTE,
)
def _(ctx: Context) -> None:
    for model in ("simple", "conformance_no_such_model"):
        ctx.equal(
            ctx.grpc.is_model_ready(model), ctx.http.is_model_ready(model), f"readiness of {model}"
        )


# -- errors ----------------------------------------------------------------------------------------

#: gRPC status -> HTTP status, as Triton's table maps its error codes to both.
HTTP_OF_GRPC = {
    "INTERNAL": 500,
    "NOT_FOUND": 404,
    "UNAVAILABLE": 503,
    "UNIMPLEMENTED": 501,
    "UNKNOWN": 400,
    "INVALID_ARGUMENT": 400,
    "ALREADY_EXISTS": 400,
    "CANCELLED": 400,
}
TABLE = Spec(
    TRITON_INDEX,
    "Mapping Triton Server Error Codes to HTTP Status Codes",
    "This table maps various Triton Server error codes to their corresponding HTTP status codes.",
)

Call = Callable[[Any], InferResult]
I32 = np.ones((1, 2), np.int32)

ERRORS: dict[str, tuple[str, Call, tuple[str, ...]]] = {
    "unknown-model": (
        "an unknown model",
        lambda c: c.infer("conformance_no_such_model", {"INPUT0": I32}),
        (),
    ),
    "unknown-version": (
        "an unknown version",
        lambda c: c.infer("identity_int32", {"INPUT0": I32}, version=987),
        ("identity_int32",),
    ),
    "datatype-mismatch": (
        "an FP32 input for an INT32 model",
        lambda c: c.infer("identity_int32", {"INPUT0": np.ones((1, 2), np.float32)}),
        ("identity_int32",),
    ),
    "shape-rank-mismatch": (
        "a rank-1 input for a rank-2 model",
        lambda c: c.infer("identity_int32", {"INPUT0": np.ones(2, np.int32)}),
        ("identity_int32",),
    ),
    "unknown-input": (
        "an input the model does not have",
        lambda c: c.infer("identity_int32", {"CONFORMANCE_X": I32}),
        ("identity_int32",),
    ),
    "missing-input": (
        "a missing input",
        lambda c: c.infer("simple", {"INPUT0": np.ones((1, 16), np.int32)}),
        ("simple",),
    ),
    "unknown-output": (
        "an output the model does not have",
        lambda c: c.infer("identity_int32", {"INPUT0": I32}, outputs=["CONFORMANCE_X"]),
        ("identity_int32",),
    ),
    "model-failure": (
        "a request the model fails",
        lambda c: c.infer("failing", {"INPUT0": np.ones(2, np.int32)}),
        ("failing",),
    ),
}


def _error(ctx: Context, call: Call, protocol: str, what: str) -> ServerError:
    try:
        call(ctx.client(protocol))
    except ServerError as exc:
        return exc
    ctx.fail(f"{protocol}: {what} succeeded")


def _error_case(kind: str, what: str, call: Call, models: tuple[str, ...]) -> None:
    @case(
        f"cross.error.{kind}",
        f"{what[0].upper()}{what[1:]} fails on both protocols",
        FOLLOWS,
        Level.PRACTICE,
        protocols=BOTH,
        models=models,
        note=NOTE,
    )
    def _(ctx: Context) -> None:
        if kind == "unknown-version":
            ctx.need_versioning()
        _error(ctx, call, "http", what)
        _error(ctx, call, "grpc", what)

    @case(
        f"cross.error.{kind}.same-class",
        f"{what[0].upper()}{what[1:]}: the HTTP status matches the gRPC code",
        TABLE,
        Level.PRACTICE,
        protocols=BOTH,
        models=models,
        note="The table maps each Triton error code to an HTTP status; the gRPC code comes "
        "from the same error, so the two must correspond.",
    )
    def _(ctx: Context) -> None:
        if kind == "unknown-version":
            ctx.need_versioning()
        rest = _error(ctx, call, "http", what)
        grpc = _error(ctx, call, "grpc", what)
        code = grpc.grpc_code or "UNKNOWN"
        ctx.check(code in HTTP_OF_GRPC, f"gRPC code {code} is not in the table")
        ctx.equal(rest.http_status, HTTP_OF_GRPC[code], f"HTTP status for gRPC {code}")


for _kind, (_what, _call, _models) in ERRORS.items():
    _error_case(_kind, _what, _call, _models)
