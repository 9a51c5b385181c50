"""Core protocol: health (server live, server ready, model ready) over REST and gRPC."""

from __future__ import annotations

from kserve_v2.conformance.cases.common import expect_grpc_error
from kserve_v2.conformance.context import Context, RpcError
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_GRPC, OIP_REST, REQUIRED_API, Level, Spec

HTTP = ("http",)
GRPC = ("grpc",)

STATUS_BOOL = Spec(
    REQUIRED_API,
    "Health",
    "A 200 status code indicates true and a 4xx status code indicates false.",
)
EMPTY_BODY = Spec(REQUIRED_API, "Health", "The HTTP response body should be empty.")
GRPC_HEALTH = Spec(
    OIP_GRPC,
    "Health",
    "For each of these endpoints errors are indicated by the google.rpc.Status returned for "
    "the request.",
)
CONFLICT = (
    "The OIP document gives a JSON body where the older Predict Protocol v2 document "
    "(required_api.md) says the body should be empty; no server can satisfy both, so both are "
    "checked as SHOULD."
)

_ENDPOINTS = {
    "live": ("v2/health/live", "Server Live"),
    "ready": ("v2/health/ready", "Server Ready"),
}


def _status_case(name: str, path: str) -> None:
    @case(
        f"rest.health.{name}.status-200",
        f"GET {path} answers 200 on a running server",
        STATUS_BOOL,
        Level.MUST,
        protocols=HTTP,
    )
    def _(ctx: Context) -> None:
        response = ctx.rest("GET", path)
        ctx.equal(response.status, 200, f"GET {path} status")

    @case(
        f"rest.health.{name}.empty-body",
        f"GET {path} answers with an empty body",
        EMPTY_BODY,
        Level.SHOULD,
        protocols=HTTP,
        note=CONFLICT,
    )
    def _(ctx: Context) -> None:
        response = ctx.rest("GET", path)
        ctx.check(not response.body.strip(), f"the body is not empty: {response.body[:200]!r}")


for _name, (_path, _section) in _ENDPOINTS.items():
    _status_case(_name, _path)


@case(
    "rest.health.live.json-object",
    'GET v2/health/live answers the $live_server_response object {"live": true}',
    Spec(
        OIP_REST,
        "Server Live",
        "The server live endpoint returns the liveness probe response for the server.",
    ),
    Level.SHOULD,
    protocols=HTTP,
    note=CONFLICT,
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/health/live")
    body = response.json()
    ctx.check(
        isinstance(body, dict) and body.get("live") is True,
        f'expected {{"live": true}}, got {body!r:.200}',
    )


@case(
    "rest.health.ready.json-object",
    "GET v2/health/ready answers the $ready_server_response object",
    Spec(
        OIP_REST,
        "Server Ready",
        "The server ready endpoint returns the readiness probe response for the server.",
    ),
    Level.SHOULD,
    protocols=HTTP,
    note=CONFLICT + ' The schema names the field "live"; a boolean "ready" is accepted too.',
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/health/ready")
    body = response.json()
    ok = isinstance(body, dict) and (body.get("live") is True or body.get("ready") is True)
    ctx.check(ok, f'expected {{"live": true}} (or "ready"), got {body!r:.200}')


MODEL_READY_SPEC = Spec(
    OIP_REST,
    "API Definitions",
    "The “model ready” health API indicates if a specific model is ready for inferencing.",
)


@case(
    "rest.health.model-ready.status-200",
    "GET v2/models/<m>/ready answers 200 for a loaded model",
    STATUS_BOOL,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    ctx.equal(ctx.rest("GET", "v2/models/identity_int32/ready").status, 200, "status")


@case(
    "rest.health.model-ready.version-200",
    "GET v2/models/<m>/versions/<v>/ready answers 200 for a loaded version",
    Spec(
        REQUIRED_API,
        "Model Ready",
        "The model name and (optionally) version must be available in the URL.",
    ),
    Level.MUST,
    protocols=HTTP,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    for version in ("1", "2"):
        response = ctx.rest("GET", f"v2/models/versioned/versions/{version}/ready")
        ctx.equal(response.status, 200, f"version {version} status")


@case(
    "rest.health.model-ready.unknown-model-4xx",
    "GET v2/models/<unknown>/ready answers a 4xx status (false)",
    STATUS_BOOL,
    Level.MUST,
    protocols=HTTP,
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/models/conformance_no_such_model/ready")
    ctx.check(400 <= response.status < 500, f"expected a 4xx status, got {response.status}")


@case(
    "rest.health.model-ready.unknown-version-4xx",
    "GET v2/models/<m>/versions/<unknown>/ready answers a 4xx status (false)",
    STATUS_BOOL,
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    ctx.need_versioning()
    response = ctx.rest("GET", "v2/models/identity_int32/versions/987/ready")
    ctx.check(400 <= response.status < 500, f"expected a 4xx status, got {response.status}")


@case(
    "rest.health.model-ready.empty-body",
    "GET v2/models/<m>/ready answers with an empty body, ready or not",
    EMPTY_BODY,
    Level.SHOULD,
    protocols=HTTP,
    models=("identity_int32",),
    note=CONFLICT,
)
def _(ctx: Context) -> None:
    for path in ("v2/models/identity_int32/ready", "v2/models/conformance_no_such_model/ready"):
        response = ctx.rest("GET", path)
        ctx.check(
            not response.body.strip(), f"GET {path}: the body is not empty: {response.body[:200]!r}"
        )


@case(
    "rest.health.model-ready.json-object",
    "GET v2/models/<m>/ready answers the $ready_model_response object with the model's name",
    Spec(
        OIP_REST,
        "Model Ready",
        "The model ready endpoint returns the readiness probe "
        "response for the server along with the name of the model.",
    ),
    Level.SHOULD,
    protocols=HTTP,
    models=("identity_int32",),
    note=CONFLICT,
)
def _(ctx: Context) -> None:
    body = ctx.rest("GET", "v2/models/identity_int32/ready").json()
    ok = (
        isinstance(body, dict)
        and body.get("name") == "identity_int32"
        and body.get("ready") is True
    )
    ctx.check(ok, f'expected {{"name": "identity_int32", "ready": true}}, got {body!r:.200}')


@case(
    "rest.health.case-sensitive-model-name",
    "Model names are case-sensitive: a differently cased name is not the model",
    Spec(REQUIRED_API, "HTTP/REST", "All strings in all contexts are case-sensitive."),
    Level.MUST,
    protocols=HTTP,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/models/IDENTITY_INT32/ready")
    ctx.check(response.status != 200, "GET v2/models/IDENTITY_INT32/ready answered 200")


# -- gRPC ---------------------------------------------------------------------------------


def _grpc_server_health_case(rpc: str, section: str, quote: str) -> None:
    """ServerLive / ServerReady: OK, with its one boolean field true."""
    field = rpc.removeprefix("Server").lower()

    @case(
        f"grpc.health.server-{field}",
        f"{rpc} answers OK with {field} = true",
        Spec(OIP_GRPC, section, quote),
        Level.MUST,
        protocols=GRPC,
    )
    def _(ctx: Context) -> None:
        response = ctx.rpc_ok(rpc, getattr(ctx.pb, f"{rpc}Request")())
        ctx.check(getattr(response, field) is True, f"{field} is false")


_grpc_server_health_case(
    "ServerLive",
    "Server Live",
    "The ServerLive API indicates if the inference server is "
    "able to receive and respond to metadata and inference requests.",
)
_grpc_server_health_case(
    "ServerReady",
    "Server Ready",
    "The ServerReady API indicates if the server is ready for inferencing.",
)


@case(
    "grpc.health.model-ready",
    "ModelReady answers OK with ready = true for a loaded model",
    Spec(
        OIP_GRPC,
        "Model Ready",
        "The ModelReady API indicates if a specific model is ready for inferencing.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelReady", ctx.pb.ModelReadyRequest(name="identity_int32"))
    ctx.check(response.ready is True, "ready is false")


@case(
    "grpc.health.model-ready.version",
    "ModelReady with a version answers ready = true for each loaded version",
    Spec(
        OIP_GRPC,
        "Model Ready",
        "The ModelReady API indicates if a specific model is ready for inferencing.",
    ),
    Level.MUST,
    protocols=GRPC,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    for version in ("1", "2"):
        response = ctx.rpc_ok(
            "ModelReady", ctx.pb.ModelReadyRequest(name="versioned", version=version)
        )
        ctx.check(response.ready is True, f"version {version}: ready is false")


def _not_ready(ctx: Context, response: object, what: str) -> None:
    if isinstance(response, RpcError):
        return  # an error status: not ready, as the health section allows
    ctx.check(getattr(response, "ready", True) is False, f"{what}: ready is true")


@case(
    "grpc.health.model-ready.unknown-model",
    "ModelReady for an unknown model answers ready = false or an error status",
    GRPC_HEALTH,
    Level.MUST,
    protocols=GRPC,
)
def _(ctx: Context) -> None:
    response = ctx.rpc("ModelReady", ctx.pb.ModelReadyRequest(name="conformance_no_such_model"))
    _not_ready(ctx, response, "unknown model")


@case(
    "grpc.health.model-ready.unknown-version",
    "ModelReady for an unknown version answers ready = false or an error status",
    GRPC_HEALTH,
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    ctx.need_versioning()
    response = ctx.rpc("ModelReady", ctx.pb.ModelReadyRequest(name="identity_int32", version="987"))
    _not_ready(ctx, response, "unknown version")


@case(
    "grpc.health.case-sensitive-model-name",
    "Model names are case-sensitive over gRPC too",
    Spec(REQUIRED_API, "GRPC", "All strings in all contexts are case-sensitive."),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc("ModelReady", ctx.pb.ModelReadyRequest(name="IDENTITY_INT32"))
    _not_ready(ctx, response, "IDENTITY_INT32")


@case(
    "grpc.health.unknown-rpc",
    "An RPC the service does not define ends with an error status (UNIMPLEMENTED)",
    GRPC_HEALTH,
    Level.PRACTICE,
    protocols=GRPC,
    note="gRPC servers answer methods they do not implement with UNIMPLEMENTED.",
)
def _(ctx: Context) -> None:
    response = ctx.rpc("ConformanceNoSuchRpc", ctx.pb.ServerLiveRequest())
    error = expect_grpc_error(ctx, response, "an undefined RPC")
    ctx.equal(error.code, "UNIMPLEMENTED", "status code")
