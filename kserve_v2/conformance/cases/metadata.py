"""Core protocol: server and model metadata over REST and gRPC."""

from __future__ import annotations

import re
from typing import Any

from kserve_v2.conformance.cases.common import (
    expect_client_error_status,
    expect_error_object,
    expect_grpc_error,
    expect_json,
)
from kserve_v2.conformance.context import Context, RestResponse
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_GRPC, OIP_REST, Level, Spec

HTTP = ("http",)
GRPC = ("grpc",)

DATATYPE_NAMES = frozenset(
    "BOOL UINT8 UINT16 UINT32 UINT64 INT8 INT16 INT32 INT64 FP16 FP32 FP64 BYTES BF16".split()  # noqa: SIM905
)

SERVER_OK = Spec(
    OIP_REST,
    "Server Metadata Response JSON Object",
    "A successful server metadata request is indicated by a 200 HTTP status code.",
)
MODEL_OK = Spec(
    OIP_REST,
    "Model Metadata Response JSON Object",
    "A successful model metadata request is indicated by a 200 HTTP status code.",
)
MODEL_ERROR = Spec(
    OIP_REST,
    "Model Metadata Response JSON Error Object",
    "A failed model metadata request must be indicated by an HTTP error status (typically 400).",
)
MODEL_ERROR_BODY = Spec(
    OIP_REST,
    "Model Metadata Response JSON Error Object",
    "The HTTP body must contain the *$metadata_model_error_response* object.",
)
GRPC_MODEL_META = Spec(
    OIP_GRPC,
    "Model Metadata",
    "The per-model metadata API provides information about a model.",
)
GRPC_MODEL_ERRORS = Spec(
    OIP_GRPC,
    "Model Metadata",
    "The OK code indicates success and other codes indicate failure.",
)
PLATFORM = Spec(OIP_REST, "Platforms", "Platform names use the format “<project>_<format>”.")
VARIABLE = Spec(
    OIP_REST, "Model Metadata Response JSON Object", "Variable-size dimensions are specified as -1."
)


def _server_metadata(ctx: Context) -> dict[str, Any]:
    body = expect_json(ctx, ctx.rest("GET", "v2"))
    ctx.check(isinstance(body, dict), f"the body is not a JSON object: {body!r:.200}")
    return dict(body)


@case(
    "rest.metadata.server.status-200",
    "GET v2 answers 200 with a JSON object",
    SERVER_OK,
    Level.MUST,
    protocols=HTTP,
)
def _(ctx: Context) -> None:
    _server_metadata(ctx)


@case(
    "rest.metadata.server.name",
    'Server metadata has a string "name"',
    Spec(
        OIP_REST,
        "Server Metadata Response JSON Object",
        "“name” : A descriptive name for the server.",
    ),
    Level.MUST,
    protocols=HTTP,
)
def _(ctx: Context) -> None:
    body = _server_metadata(ctx)
    ctx.check(isinstance(body.get("name"), str) and body["name"], f"name: {body.get('name')!r}")


@case(
    "rest.metadata.server.version",
    'Server metadata has a string "version"',
    Spec(OIP_REST, "Server Metadata Response JSON Object", '"version" : The server version.'),
    Level.MUST,
    protocols=HTTP,
)
def _(ctx: Context) -> None:
    body = _server_metadata(ctx)
    ctx.check(isinstance(body.get("version"), str), f"version: {body.get('version')!r}")


@case(
    "rest.metadata.server.extensions",
    'Server metadata has "extensions", an array of strings',
    Spec(
        OIP_REST,
        "Server Metadata Response JSON Object",
        "“extensions” : The extensions supported by the server.",
    ),
    Level.MUST,
    protocols=HTTP,
)
def _(ctx: Context) -> None:
    body = _server_metadata(ctx)
    ext = body.get("extensions")
    ctx.check(
        isinstance(ext, list) and all(isinstance(e, str) for e in ext),
        f"extensions is not an array of strings: {ext!r:.200}",
    )


@case(
    "rest.metadata.server.content-type",
    "Server metadata comes with Content-Type: application/json",
    SERVER_OK,
    Level.PRACTICE,
    protocols=HTTP,
    note="The specs show JSON bodies; a JSON content type lets clients and proxies tell.",
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2")
    ctx.check(
        response.content_type.startswith("application/json"),
        f"Content-Type is {response.content_type!r}",
    )


def _model_metadata(ctx: Context, path: str) -> dict[str, Any]:
    body = expect_json(ctx, ctx.rest("GET", path))
    ctx.check(isinstance(body, dict), f"the body is not a JSON object: {body!r:.200}")
    return dict(body)


def _tensor_list(ctx: Context, body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    tensors = body.get(key)
    ctx.check(isinstance(tensors, list), f"{key} is not an array: {tensors!r:.200}")
    assert isinstance(tensors, list)
    for tensor in tensors:
        ok = (
            isinstance(tensor, dict)
            and isinstance(tensor.get("name"), str)
            and isinstance(tensor.get("datatype"), str)
            and isinstance(tensor.get("shape"), list)
            and all(isinstance(d, int) and not isinstance(d, bool) for d in tensor["shape"])
        )
        ctx.check(ok, f"{key}: not a $metadata_tensor (name, datatype, shape): {tensor!r:.200}")
    return tensors


@case(
    "rest.metadata.model.status-200",
    "GET v2/models/<m> answers 200 with a JSON object",
    MODEL_OK,
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    _model_metadata(ctx, "v2/models/simple")


@case(
    "rest.metadata.model.name",
    'Model metadata "name" is the model\'s name',
    Spec(OIP_REST, "Model Metadata Response JSON Object", "“name” : The name of the model."),
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    ctx.equal(_model_metadata(ctx, "v2/models/simple").get("name"), "simple", "name")


@case(
    "rest.metadata.model.platform",
    'Model metadata has a string "platform"',
    Spec(
        OIP_REST,
        "Model Metadata Response JSON Object",
        "“platform” : The framework/backend for the model.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    platform = _model_metadata(ctx, "v2/models/simple").get("platform")
    ctx.check(isinstance(platform, str), f"platform: {platform!r}")


@case(
    "rest.metadata.model.platform-format",
    "The platform name has the form <project>_<format>",
    PLATFORM,
    Level.SHOULD,
    protocols=HTTP,
    models=("simple",),
    note="The platform is information only (Platforms section), so the format is checked as "
    "SHOULD.",
)
def _(ctx: Context) -> None:
    platform = _model_metadata(ctx, "v2/models/simple").get("platform")
    ctx.check(
        isinstance(platform, str) and re.fullmatch(r"[a-z0-9]+_[a-z0-9]+", platform),
        f"platform {platform!r} is not <project>_<format>",
    )


def _tensor_list_case(field: str, quote: str) -> None:
    """Model metadata's ``inputs`` / ``outputs``: $metadata_tensor objects, 'simple''s two."""
    word = field[:-1]  # "input", "output"

    @case(
        f"rest.metadata.model.{field}",
        f"Model metadata lists the {field} as $metadata_tensor objects",
        Spec(OIP_REST, "Model Metadata Response JSON Object", quote),
        Level.MUST,
        protocols=HTTP,
        models=("simple",),
    )
    def _(ctx: Context) -> None:
        tensors = _tensor_list(ctx, _model_metadata(ctx, "v2/models/simple"), field)
        names = sorted(t["name"] for t in tensors)
        ctx.equal(names, [f"{word.upper()}0", f"{word.upper()}1"], f"{word} names")


_tensor_list_case("inputs", "“inputs” : The inputs required by the model.")
_tensor_list_case("outputs", "“outputs” : The outputs produced by the model.")


@case(
    "rest.metadata.model.datatypes",
    "Tensor datatypes in model metadata are names from the Tensor Data Types table",
    Spec(
        OIP_REST,
        "Model Metadata Response JSON Object",
        '"datatype" : The data-type of the '
        "tensor elements as defined in [Tensor Data Types](#tensor-data-types).",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("identity_bytes", "identity_bool", "identity_fp64"),
)
def _(ctx: Context) -> None:
    expected = {"identity_bytes": "BYTES", "identity_bool": "BOOL", "identity_fp64": "FP64"}
    for model, datatype in expected.items():
        body = _model_metadata(ctx, f"v2/models/{model}")
        for tensor in _tensor_list(ctx, body, "inputs") + _tensor_list(ctx, body, "outputs"):
            ctx.check(
                tensor["datatype"] in DATATYPE_NAMES,
                f"{model}: datatype {tensor['datatype']!r} is not in the table",
            )
            ctx.equal(tensor["datatype"], datatype, f"{model} {tensor['name']} datatype")


@case(
    "rest.metadata.model.variable-dims",
    "Variable-size dimensions are reported as -1",
    VARIABLE,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    body = _model_metadata(ctx, "v2/models/identity_int32")
    for tensor in _tensor_list(ctx, body, "inputs"):
        ctx.equal(tensor["shape"], [-1, -1], f"shape of {tensor['name']}")


@case(
    "rest.metadata.model.versions",
    '"versions" lists the versions that may be requested, as strings',
    Spec(
        OIP_REST,
        "Model Metadata Response JSON Object",
        '"versions" : The model versions that '
        "may be explicitly requested via the appropriate endpoint.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    versions = _model_metadata(ctx, "v2/models/versioned").get("versions")
    ctx.check(
        isinstance(versions, list) and all(isinstance(v, str) for v in versions),
        f"versions is not an array of strings: {versions!r}",
    )
    assert isinstance(versions, list)
    ctx.equal(sorted(versions), ["1", "2"], "versions")


@case(
    "rest.metadata.model.version-path",
    "GET v2/models/<m>/versions/<v> answers the metadata of that model",
    Spec(
        OIP_REST,
        "Model Metadata",
        "The model name and (optionally) version must be available in the URL.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    body = _model_metadata(ctx, "v2/models/versioned/versions/2")
    ctx.equal(body.get("name"), "versioned", "name")


@case(
    "rest.metadata.model.content-type",
    "Model metadata comes with Content-Type: application/json",
    MODEL_OK,
    Level.PRACTICE,
    protocols=HTTP,
    models=("simple",),
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/models/simple")
    ctx.check(
        response.content_type.startswith("application/json"),
        f"Content-Type is {response.content_type!r}",
    )


def _metadata_error_cases(kind: str, path: str, title: str, models: tuple[str, ...]) -> None:
    def get(ctx: Context) -> RestResponse:
        if "/versions/" in path:
            ctx.need_versioning()
        return ctx.rest("GET", path)

    @case(
        f"rest.metadata.model.error.{kind}",
        f"{title}: an HTTP error status",
        MODEL_ERROR,
        Level.MUST,
        protocols=HTTP,
        models=models,
    )
    def _(ctx: Context) -> None:
        response = get(ctx)
        ctx.check(response.status >= 400, f"expected an error status, got {response.status}")

    @case(
        f"rest.metadata.model.error.{kind}.error-object",
        f'{title}: the body is {{"error": <string>}}',
        MODEL_ERROR_BODY,
        Level.MUST,
        protocols=HTTP,
        models=models,
    )
    def _(ctx: Context) -> None:
        expect_error_object(ctx, get(ctx))

    @case(
        f"rest.metadata.model.error.{kind}.status-4xx",
        f"{title}: a 4xx status (the client asked for something that is not there)",
        MODEL_ERROR,
        Level.PRACTICE,
        protocols=HTTP,
        models=models,
        note="'typically 400': an unknown name is the client's error, so a 4xx status "
        "(400 or 404) is expected, not 5xx.",
    )
    def _(ctx: Context) -> None:
        expect_client_error_status(ctx, get(ctx), title)


_metadata_error_cases(
    "unknown-model", "v2/models/conformance_no_such_model", "Metadata of an unknown model", ()
)
_metadata_error_cases(
    "unknown-version",
    "v2/models/identity_int32/versions/987",
    "Metadata of an unknown version",
    ("identity_int32",),
)


# -- gRPC ---------------------------------------------------------------------------------


@case(
    "grpc.metadata.server.fields",
    "ServerMetadata answers OK with a name, a version and the extensions",
    Spec(
        OIP_GRPC, "Server Metadata", "The ServerMetadata API provides information about the server."
    ),
    Level.MUST,
    protocols=GRPC,
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ServerMetadata", ctx.pb.ServerMetadataRequest())
    ctx.check(response.name, "name is empty")
    ctx.check(response.version, "version is empty")


@case(
    "grpc.metadata.model.fields",
    "ModelMetadata answers the model's name, platform, inputs and outputs",
    GRPC_MODEL_META,
    Level.MUST,
    protocols=GRPC,
    models=("simple",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelMetadata", ctx.pb.ModelMetadataRequest(name="simple"))
    ctx.equal(response.name, "simple", "name")
    ctx.equal(sorted(t.name for t in response.inputs), ["INPUT0", "INPUT1"], "inputs")
    ctx.equal(sorted(t.name for t in response.outputs), ["OUTPUT0", "OUTPUT1"], "outputs")
    for tensor in [*response.inputs, *response.outputs]:
        ctx.equal(tensor.datatype, "INT32", f"datatype of {tensor.name}")


@case(
    "grpc.metadata.model.variable-dims",
    "A variable-size dimension is represented by -1",
    Spec(OIP_GRPC, "Model Metadata", "A variable-size dimension is represented by a -1 value."),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelMetadata", ctx.pb.ModelMetadataRequest(name="identity_int32"))
    for tensor in response.inputs:
        ctx.equal(list(tensor.shape), [-1, -1], f"shape of {tensor.name}")


@case(
    "grpc.metadata.model.versions",
    "ModelMetadata lists the versions available on the server",
    Spec(OIP_GRPC, "Model Metadata", "The versions of the model available on the server."),
    Level.MUST,
    protocols=GRPC,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelMetadata", ctx.pb.ModelMetadataRequest(name="versioned"))
    ctx.equal(sorted(response.versions), ["1", "2"], "versions")


@case(
    "grpc.metadata.model.version",
    "ModelMetadata with a version answers that model",
    GRPC_MODEL_META,
    Level.MUST,
    protocols=GRPC,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok(
        "ModelMetadata", ctx.pb.ModelMetadataRequest(name="versioned", version="1")
    )
    ctx.equal(response.name, "versioned", "name")


@case(
    "grpc.metadata.model.platform-format",
    "The platform name has the form <project>_<format>",
    Spec(OIP_GRPC, "Platforms", "Platform names use the format “<project>_<format>”."),
    Level.SHOULD,
    protocols=GRPC,
    models=("simple",),
    note="The platform is information only, so the format is checked as SHOULD.",
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelMetadata", ctx.pb.ModelMetadataRequest(name="simple"))
    ctx.check(
        re.fullmatch(r"[a-z0-9]+_[a-z0-9]+", response.platform),
        f"platform {response.platform!r} is not <project>_<format>",
    )


@case(
    "grpc.metadata.model.error.unknown-model",
    "ModelMetadata of an unknown model ends with an error status",
    GRPC_MODEL_ERRORS,
    Level.MUST,
    protocols=GRPC,
)
def _(ctx: Context) -> None:
    expect_grpc_error(
        ctx, ctx.rpc("ModelMetadata", ctx.pb.ModelMetadataRequest(name="conformance_no_such_model"))
    )


@case(
    "grpc.metadata.model.error.unknown-model.not-found",
    "ModelMetadata of an unknown model ends with NOT_FOUND",
    GRPC_MODEL_ERRORS,
    Level.PRACTICE,
    protocols=GRPC,
    note="gRPC's NOT_FOUND is the code for 'some requested entity was not found'.",
)
def _(ctx: Context) -> None:
    error = expect_grpc_error(
        ctx, ctx.rpc("ModelMetadata", ctx.pb.ModelMetadataRequest(name="conformance_no_such_model"))
    )
    ctx.equal(error.code, "NOT_FOUND", "status code")


@case(
    "grpc.metadata.model.error.unknown-version",
    "ModelMetadata of an unknown version ends with an error status",
    GRPC_MODEL_ERRORS,
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    ctx.need_versioning()
    expect_grpc_error(
        ctx,
        ctx.rpc("ModelMetadata", ctx.pb.ModelMetadataRequest(name="identity_int32", version="987")),
    )
