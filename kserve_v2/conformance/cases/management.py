"""Triton's management extensions over REST and gRPC: model configuration, model repository,
statistics, trace and logging settings.

Cases that change the server put it back: uploaded models are unloaded, model-level trace
settings cleared, log settings restored. Global trace settings are never changed.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from kserve_v2.conformance.cases.common import (
    expect_client_error_status,
    expect_error_object,
    expect_grpc_error,
    expect_json,
    output_array,
)
from kserve_v2.conformance.context import Context, RestResponse, RpcError
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import (
    LOGGING,
    MODEL_CONFIG,
    REPOSITORY,
    STATISTICS,
    TRACE,
    Level,
    Spec,
)

HTTP = ("http",)
GRPC = ("grpc",)
BOTH = ("http", "grpc")

# -- model configuration ---------------------------------------------------------------------

CONFIG_OK = Spec(
    MODEL_CONFIG,
    "HTTP/REST",
    "A successful model configuration request is indicated by a 200 HTTP status code.",
)
CONFIG_FAIL = Spec(
    MODEL_CONFIG,
    "HTTP/REST",
    "A failed model configuration request must be "
    "indicated by an HTTP error status (typically 400).",
)
CONFIG_EXT = "model_configuration"


def _json_object(ctx: Context, response: Any, what: str, limit: int) -> dict[str, Any]:
    """The 200 response's body, which must be a JSON object (``what`` it is, for the
    failure message, which shows at most ``limit`` characters of the body)."""
    body = expect_json(ctx, response)
    ctx.check(isinstance(body, dict), f"{what} not a JSON object: {body!r:.{limit}}")
    return dict(body)


def _config(ctx: Context, path: str) -> dict[str, Any]:
    return _json_object(ctx, ctx.rest("GET", path), "the configuration is", 200)


@case(
    "rest.config.get",
    "GET v2/models/<m>/config answers the model's configuration",
    CONFIG_OK,
    Level.MUST,
    protocols=HTTP,
    extension=CONFIG_EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    ctx.equal(_config(ctx, "v2/models/simple/config").get("name"), "simple", "name")


@case(
    "rest.config.version",
    "GET v2/models/<m>/versions/<v>/config answers that version's",
    Spec(
        MODEL_CONFIG,
        "HTTP/REST",
        "The versions portion of the URL is optional; if not "
        "provided Triton will return model configuration for the highest-numbered version of "
        "the model.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=CONFIG_EXT,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    ctx.equal(
        _config(ctx, "v2/models/versioned/versions/1/config").get("name"), "versioned", "name"
    )


@case(
    "rest.config.model-config-json",
    "The configuration is the JSON form of ModelConfig (inputs, outputs, max_batch_size)",
    Spec(
        MODEL_CONFIG,
        "HTTP/REST",
        "The contents of the response will be the JSON "
        "representation of the model's configuration described by the [ModelConfig message "
        "from model_config.proto](https://github.com/triton-inference-server/common/blob/main/"
        "protobuf/model_config.proto).",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=CONFIG_EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    body = _config(ctx, "v2/models/simple/config")
    ctx.equal(body.get("max_batch_size"), 8, "max_batch_size")
    inputs = body.get("input")
    ctx.check(isinstance(inputs, list), f"input: {inputs!r:.200}")
    assert isinstance(inputs, list)
    ctx.equal(sorted(i.get("name") for i in inputs), ["INPUT0", "INPUT1"], "input names")
    ctx.equal({i.get("data_type") for i in inputs}, {"TYPE_INT32"}, "input data_type")


@case(
    "rest.config.unknown-model",
    "The configuration of an unknown model is an error object",
    CONFIG_FAIL,
    Level.MUST,
    protocols=HTTP,
    extension=CONFIG_EXT,
)
def _(ctx: Context) -> None:
    expect_error_object(ctx, ctx.rest("GET", "v2/models/conformance_no_such_model/config"))


@case(
    "rest.config.unknown-model.status-4xx",
    "The configuration of an unknown model answers a 4xx status",
    CONFIG_FAIL,
    Level.PRACTICE,
    protocols=HTTP,
    extension=CONFIG_EXT,
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", "v2/models/conformance_no_such_model/config")
    expect_client_error_status(ctx, response, "an unknown model")


@case(
    "grpc.config.get",
    "ModelConfig answers the model's configuration",
    Spec(MODEL_CONFIG, "GRPC", "The request and response messages for ModelConfig are:"),
    Level.MUST,
    protocols=GRPC,
    extension=CONFIG_EXT,
    models=("simple",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelConfig", ctx.pb.ModelConfigRequest(name="simple"))
    ctx.equal(response.config.name, "simple", "config.name")
    ctx.equal(response.config.max_batch_size, 8, "config.max_batch_size")


@case(
    "grpc.config.unknown-model",
    "ModelConfig of an unknown model ends with an error status",
    Spec(
        MODEL_CONFIG,
        "GRPC",
        "Errors are indicated by the google.rpc.Status returned for the request.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=CONFIG_EXT,
)
def _(ctx: Context) -> None:
    expect_grpc_error(
        ctx, ctx.rpc("ModelConfig", ctx.pb.ModelConfigRequest(name="conformance_no_such_model"))
    )


@case(
    "cross.config.same",
    "The configuration is the same over HTTP and gRPC",
    Spec(
        MODEL_CONFIG,
        "GRPC",
        "Where the ModelConfig message is defined in "
        "[model_config.proto](https://github.com/triton-inference-server/common/blob/main/"
        "protobuf/model_config.proto).",
    ),
    Level.PRACTICE,
    protocols=BOTH,
    extension=CONFIG_EXT,
    models=("simple",),
    note="Both protocols return the same ModelConfig message, as JSON or protobuf.",
)
def _(ctx: Context) -> None:
    rest, grpc = ctx.http.model_config("simple"), ctx.grpc.model_config("simple")
    for key in ("name", "max_batch_size", "backend"):
        ctx.equal(grpc.get(key), rest.get(key), key)
    ctx.equal(
        [i.get("name") for i in grpc.get("input", [])],
        [i.get("name") for i in rest.get("input", [])],
        "input names",
    )


# -- model repository --------------------------------------------------------------------------

REPO = "model_repository"
INDEX_OK = Spec(
    REPOSITORY, "Index", "A successful index request is indicated by a 200 HTTP status code."
)
LOAD_OK = Spec(REPOSITORY, "Load", "A successful load request is indicated by a 200 HTTP status.")
LOAD_FAIL = Spec(
    REPOSITORY,
    "Load",
    "A failed load request must be indicated by an HTTP error status (typically 400).",
)

UPLOAD_SOURCE = b"""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("OUTPUT0", (data * 2).astype(np.int32))]))
        return out
"""


def _upload_config(name: str) -> str:
    return json.dumps(
        {
            "name": name,
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [-1]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [-1]}],
        }
    )


def _index(ctx: Context, body: Any) -> list[dict[str, Any]]:
    obj = expect_json(ctx, ctx.rest("POST", "v2/repository/index", json_body=body))
    ctx.check(
        isinstance(obj, list) and all(isinstance(e, dict) for e in obj),
        f"the index is not an array of objects: {obj!r:.300}",
    )
    return list(obj)


@case(
    "rest.repository.index",
    "POST v2/repository/index answers 200 with an array",
    INDEX_OK,
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
)
def _(ctx: Context) -> None:
    _index(ctx, {})


@case(
    "rest.repository.index.lists-models",
    "The index lists the models the server serves",
    Spec(
        REPOSITORY,
        "Index",
        "The index API returns information about every model available "
        "in a model repository, even if it is not currently loaded into Triton.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
    models=("simple", "identity_int32"),
)
def _(ctx: Context) -> None:
    names = {e.get("name") for e in _index(ctx, {})}
    for model in ("simple", "identity_int32"):
        ctx.check(model in names, f"{model} is not in the index")


@case(
    "rest.repository.index.entry-fields",
    "Index entries have a string name and state, and a string version when given",
    Spec(
        REPOSITORY,
        "Index",
        "The response object, identified as `$repository_index_response`, "
        "is returned in the HTTP body for every successful request.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
)
def _(ctx: Context) -> None:
    for entry in _index(ctx, {}):
        ctx.check(isinstance(entry.get("name"), str), f"name: {entry!r:.200}")
        ctx.check(isinstance(entry.get("state"), str), f"state: {entry!r:.200}")
        ctx.check(isinstance(entry.get("version", ""), str), f"version: {entry!r:.200}")


@case(
    "rest.repository.index.reason",
    'Index entries carry "reason" (a string, empty when there is none)',
    Spec(
        REPOSITORY,
        "Index",
        "“reason” : The reason, if any, that the model is in the current state.",
    ),
    Level.SHOULD,
    protocols=HTTP,
    extension=REPO,
    note='The schema lists "reason" without #optional ("version" has it); \'if any\' reads '
    "as: empty when there is no reason. Checked as SHOULD since the text is loose.",
)
def _(ctx: Context) -> None:
    for entry in _index(ctx, {}):
        ctx.check(isinstance(entry.get("reason"), str), f"no string reason: {entry!r:.200}")


@case(
    "rest.repository.index.ready",
    '{"ready": true} lists only models ready for inferencing',
    Spec(
        REPOSITORY,
        "Index",
        '"ready" : Optional, default is false. If true return only models ready for inferencing.',
    ),
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    entries = _index(ctx, {"ready": True})
    ctx.check("identity_int32" in {e.get("name") for e in entries}, "identity_int32 missing")
    for entry in entries:
        ctx.check(
            ctx.http.is_model_ready(entry["name"], entry.get("version", "")),
            f"{entry['name']} is listed as ready but is not",
        )


# Triton answers every load and unload request with this error unless it was started with
# --model-control-mode=explicit (in modes "none", its default, and "poll"): HTTP 503 with
# {"error": "explicit model load / unload is not allowed if polling is enabled"}, gRPC
# UNAVAILABLE with the same message. The extension's text does not mention model-control modes;
# the answer says how the server was started, not how it implements the protocol, and a server
# that refuses every load cannot show what a load or unload case checks. So the cases skip on
# exactly that answer (that status and that message); any other answer is judged as usual.
LOAD_UNLOAD_REFUSAL = "explicit model load / unload is not allowed"
#: The start of the skip reason of a case whose load or unload request the server refused so.
LOAD_UNLOAD_REFUSED = (
    "the server does not allow explicit model load / unload (a setting of the server: Triton "
    "allows it only when started with --model-control-mode=explicit)"
)


def load_unload_refusal(answer: RestResponse | RpcError | Any) -> str | None:
    """The server's message when ``answer`` (to a load or unload request) is the refusal of a
    server not started to allow them (see :data:`LOAD_UNLOAD_REFUSAL`), else ``None``."""
    message: object = None
    if isinstance(answer, RpcError):
        if answer.code == "UNAVAILABLE":
            message = answer.message
    elif isinstance(answer, RestResponse) and answer.status == 503:
        try:
            obj = json.loads(answer.body)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            message = obj.get("error")
    if isinstance(message, str) and LOAD_UNLOAD_REFUSAL in message.lower():
        return message
    return None


def _skip_if_refused(ctx: Context, answer: Any) -> None:
    message = load_unload_refusal(answer)
    if message is not None:
        ctx.skip(f"{LOAD_UNLOAD_REFUSED}: {message!r}")


def _load(ctx: Context, name: str, body: Any = None) -> RestResponse:
    response = ctx.rest("POST", f"v2/repository/models/{name}/load", json_body=body)
    _skip_if_refused(ctx, response)
    return response


def _unload(ctx: Context, name: str, body: Any = None) -> RestResponse:
    response = ctx.rest("POST", f"v2/repository/models/{name}/unload", json_body=body)
    _skip_if_refused(ctx, response)
    return response


def _repository_rpc(ctx: Context, name: str, request: Any) -> Any:
    """``RepositoryModelLoad`` / ``RepositoryModelUnload``: the response or the
    :class:`RpcError`; skips the case on the refusal of a server that allows neither."""
    response = ctx.rpc(name, request)
    _skip_if_refused(ctx, response)
    return response


def _repository_rpc_ok(ctx: Context, name: str, request: Any) -> Any:
    response = _repository_rpc(ctx, name, request)
    if isinstance(response, RpcError):
        ctx.fail(f"{name} failed with {response.code}: {response.message}")
    return response


def _upload(ctx: Context, name: str) -> None:
    body = {
        "parameters": {
            "config": _upload_config(name),
            "file:1/model.py": base64.b64encode(UPLOAD_SOURCE).decode(),
        }
    }
    ctx.session.forget_model(name)
    ctx.cleanup(lambda: _unload(ctx, name))
    response = _load(ctx, name, body)
    ctx.equal(response.status, 200, f"load status ({response.body[:200]!r})")


@case(
    "rest.repository.load-unload",
    "A model loaded from an uploaded file and config serves, then unloads",
    LOAD_OK,
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
    note="Uploads a Python-backend model ('file:1/model.py' and a 'config').",
)
def _(ctx: Context) -> None:
    name = f"conformance_upload_{secrets.token_hex(3)}"
    _upload(ctx, name)
    ctx.check(ctx.http.is_model_ready(name), f"{name} is not ready after loading")
    result = ctx.http.infer(name, {"INPUT0": np.array([1, 2], np.int32)})
    ctx.equal(output_array(ctx, result, "OUTPUT0").tolist(), [2, 4], "OUTPUT0")
    response = _unload(ctx, name)
    ctx.equal(response.status, 200, "unload status")
    ctx.check(not ctx.http.is_model_ready(name), f"{name} is still ready after unloading")


@case(
    "rest.repository.load.reload",
    "Loading a model that is loaded (empty body) reloads it; it stays ready",
    Spec(
        REPOSITORY,
        "Load",
        "The load API requests that a model be loaded into Triton, or "
        "reloaded if the model is already loaded.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
    models=("identity_uint8",),
)
def _(ctx: Context) -> None:
    response = _load(ctx, "identity_uint8")
    ctx.equal(response.status, 200, f"load status ({response.body[:200]!r})")
    ctx.check(ctx.http.is_model_ready("identity_uint8"), "identity_uint8 is not ready")


@case(
    "rest.repository.load.unknown",
    "Loading a model that does not exist is an error object",
    LOAD_FAIL,
    Level.MUST,
    protocols=HTTP,
    extension=REPO,
)
def _(ctx: Context) -> None:
    expect_error_object(ctx, _load(ctx, "conformance_no_such_model"))


@case(
    "rest.repository.load.unknown.status-4xx",
    "Loading a model that does not exist answers a 4xx status",
    LOAD_FAIL,
    Level.PRACTICE,
    protocols=HTTP,
    extension=REPO,
    note="The client named a model the repository does not have: a 4xx (400 or 404).",
)
def _(ctx: Context) -> None:
    expect_client_error_status(ctx, _load(ctx, "conformance_no_such_model"), "an unknown model")


@case(
    "rest.repository.load.files-without-config",
    'Model files without a "config" parameter are refused with an error object',
    Spec(
        REPOSITORY,
        "Load",
        'Note that "config" parameter must be provided to serve as the '
        "model configuration of the override model directory.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    extension=REPO,
    note="The sentence binds the client; the server is expected to refuse.",
)
def _(ctx: Context) -> None:
    name = f"conformance_noconfig_{secrets.token_hex(3)}"
    ctx.cleanup(lambda: _unload(ctx, name))
    body = {"parameters": {"file:1/model.py": base64.b64encode(UPLOAD_SOURCE).decode()}}
    expect_error_object(ctx, _load(ctx, name, body))


@case(
    "rest.repository.unload.dependents",
    "unload_dependents is accepted by the unload API",
    Spec(
        REPOSITORY,
        "Unload",
        '"unload_dependents" : boolean parameter indicating that in '
        "addition to unloading the requested model, also unload any dependent model that was "
        "loaded along with the requested model.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="model_repository(unload_dependents)",
)
def _(ctx: Context) -> None:
    name = f"conformance_upload_{secrets.token_hex(3)}"
    _upload(ctx, name)
    response = _unload(ctx, name, {"parameters": {"unload_dependents": True}})
    ctx.equal(response.status, 200, f"unload status ({response.body[:200]!r})")
    ctx.check(not ctx.http.is_model_ready(name), f"{name} is still ready after unloading")


@case(
    "grpc.repository.index",
    "RepositoryIndex lists the models the server serves",
    Spec(
        REPOSITORY,
        "Index",
        "The RepositoryIndex API returns information about every model "
        "available in a model repository, even if it is not currently loaded into Triton.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=REPO,
    models=("simple",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("RepositoryIndex", ctx.pb.RepositoryIndexRequest())
    ctx.check("simple" in {m.name for m in response.models}, "simple is not in the index")


@case(
    "grpc.repository.load-unload",
    "RepositoryModelLoad with a config and a bytes file parameter loads; unload unloads",
    Spec(
        REPOSITORY,
        "Load",
        "The RepositoryModelLoad API requests that a model be loaded into "
        "Triton, or reloaded if the model is already loaded.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=REPO,
)
def _(ctx: Context) -> None:
    pb = ctx.pb
    name = f"conformance_upload_{secrets.token_hex(3)}"
    request = pb.RepositoryModelLoadRequest(model_name=name)
    request.parameters["config"].string_param = _upload_config(name)
    request.parameters["file:1/model.py"].bytes_param = UPLOAD_SOURCE
    ctx.cleanup(
        lambda: ctx.rpc("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name=name))
    )
    _repository_rpc_ok(ctx, "RepositoryModelLoad", request)
    result = ctx.grpc.infer(name, {"INPUT0": np.array([3], np.int32)})
    ctx.equal(output_array(ctx, result, "OUTPUT0").tolist(), [6], "OUTPUT0")
    _repository_rpc_ok(
        ctx, "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name=name)
    )
    ready = ctx.rpc("ModelReady", pb.ModelReadyRequest(name=name))
    ctx.check(getattr(ready, "ready", False) is False, f"{name} is still ready after unloading")


@case(
    "grpc.repository.load.unknown",
    "RepositoryModelLoad of a model that does not exist ends with an error status",
    Spec(
        REPOSITORY,
        "Load",
        "Errors are indicated by the google.rpc.Status returned for the request.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=REPO,
)
def _(ctx: Context) -> None:
    request = ctx.pb.RepositoryModelLoadRequest(model_name="conformance_no_such_model")
    expect_grpc_error(ctx, _repository_rpc(ctx, "RepositoryModelLoad", request))


@case(
    "cross.repository.index",
    "The index lists the same models over HTTP and gRPC",
    Spec(
        REPOSITORY,
        "Index",
        "The index API provides a way to determine which models can "
        "potentially be loaded by the Load API.",
    ),
    Level.PRACTICE,
    protocols=BOTH,
    extension=REPO,
)
def _(ctx: Context) -> None:
    rest = sorted((m.name, m.version, m.state) for m in ctx.http.repository_index())
    grpc = sorted((m.name, m.version, m.state) for m in ctx.grpc.repository_index())
    ctx.equal(grpc, rest, "index entries (name, version, state)")


# -- statistics ----------------------------------------------------------------------------------

STATS = "statistics"
STATS_OK = Spec(
    STATISTICS,
    "Statistics Response JSON Object",
    "A successful statistics request is indicated by a 200 HTTP status code.",
)
DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


def _stats(ctx: Context, path: str) -> list[dict[str, Any]]:
    body = expect_json(ctx, ctx.rest("GET", path))
    stats = body.get("model_stats") if isinstance(body, dict) else None
    ctx.check(isinstance(stats, list), f"no model_stats array: {body!r:.300}")
    assert isinstance(stats, list)
    return stats


def _one(ctx: Context, stats: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [s for s in stats if isinstance(s, dict) and s.get("name") == name]
    ctx.check(found, f"no statistics for {name}")
    return found[0]


@case(
    "rest.stats.all",
    'GET v2/models/stats answers {"model_stats": [...]} for every model',
    STATS_OK,
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("simple",),
)
def _(ctx: Context) -> None:
    _one(ctx, _stats(ctx, "v2/models/stats"), "simple")


@case(
    "rest.stats.model",
    "GET v2/models/<m>/stats answers the statistics of that model only",
    Spec(
        STATISTICS,
        "HTTP/REST",
        "If a specific model is given in the URL the versions "
        "portion of the URL is optional; if not provided Triton will return statistics for "
        "all versions of the specified model.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    stats = _stats(ctx, "v2/models/versioned/stats")
    ctx.equal({s.get("name") for s in stats}, {"versioned"}, "models")
    ctx.equal(sorted(str(s.get("version")) for s in stats), ["1", "2"], "versions")


@case(
    "rest.stats.version",
    "GET v2/models/<m>/versions/<v>/stats answers that version only",
    STATS_OK,
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("versioned",),
)
def _(ctx: Context) -> None:
    stats = _stats(ctx, "v2/models/versioned/versions/2/stats")
    ctx.equal([(s.get("name"), s.get("version")) for s in stats], [("versioned", "2")], "entries")


@case(
    "rest.stats.fields",
    "A $model_stat has the counts, the last inference time and the duration statistics",
    Spec(
        STATISTICS,
        "Statistics Response JSON Object",
        "Each `$model_stat` object gives the statistics for a specific model and version.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("simple",),
)
def _(ctx: Context) -> None:
    stat = _one(ctx, _stats(ctx, "v2/models/simple/stats"), "simple")
    for key in ("last_inference", "inference_count", "execution_count"):
        ctx.check(isinstance(stat.get(key), int), f"{key}: {stat.get(key)!r}")
    durations = stat.get("inference_stats")
    ctx.check(isinstance(durations, dict), f"inference_stats: {durations!r:.200}")
    assert isinstance(durations, dict)
    for key in DURATIONS:
        value = durations.get(key)
        ctx.check(
            isinstance(value, dict)
            and isinstance(value.get("count"), int)
            and isinstance(value.get("ns"), int),
            f"inference_stats.{key}: {value!r}",
        )
    ctx.check(isinstance(stat.get("batch_stats"), list), "batch_stats is not an array")


T = TypeVar("T")


def _settled(read: Callable[[], T], before: T, done: Callable[[T], bool]) -> T:
    """Read statistics until ``done`` says the request was counted, or 10 s passed: servers
    may update them just after the response is sent (Triton does)."""
    deadline = time.monotonic() + 10.0
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.02)
        value = read()
    return value


def _counts(stat: dict[str, Any]) -> tuple[int, int, int, int]:
    inference = stat.get("inference_stats") or {}
    return (
        int(stat.get("inference_count", -1)),
        int(stat.get("execution_count", -1)),
        int((inference.get("success") or {}).get("count", -1)),
        int((inference.get("fail") or {}).get("count", -1)),
    )


@case(
    "rest.stats.batch-counts",
    "A batch of 3 adds 3 to inference_count and 1 to execution_count",
    Spec(
        STATISTICS,
        "HTTP/REST",
        "Each inference in a batched request is counted as an individual inference.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("simple",),
    note="Assumes nothing else sends requests to 'simple' while the case runs.",
)
def _(ctx: Context) -> None:
    def read() -> tuple[int, int, int, int]:
        return _counts(_one(ctx, _stats(ctx, "v2/models/simple/stats"), "simple"))

    before = read()
    inputs = {"INPUT0": np.zeros((3, 16), np.int32), "INPUT1": np.ones((3, 16), np.int32)}
    ctx.http.infer("simple", inputs)
    after = _settled(read, before, lambda now: now[2] != before[2] and now[1] != before[1])
    ctx.equal(after[0] - before[0], 3, "inference_count increase")
    ctx.equal(after[1] - before[1], 1, "execution_count increase")
    ctx.equal(after[2] - before[2], 1, "inference_stats.success.count increase")


@case(
    "rest.stats.failures-counted",
    "A failed request adds 1 to inference_stats.fail",
    Spec(
        STATISTICS,
        "HTTP/REST",
        "“fail” : The count and cumulative duration for all failed inference requests.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
    models=("failing",),
)
def _(ctx: Context) -> None:
    def read() -> tuple[int, int, int, int]:
        return _counts(_one(ctx, _stats(ctx, "v2/models/failing/stats"), "failing"))

    before = read()
    body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": [1]}]}
    ctx.rest("POST", "v2/models/failing/infer", json_body=body)
    # Counted as a failure, or (wrongly) as a success: either way something moves.
    after = _settled(read, before, lambda now: now[2:] != before[2:])
    ctx.equal(after[3] - before[3], 1, "inference_stats.fail.count increase")


@case(
    "rest.stats.unknown-model",
    "Statistics of an unknown model are an error object",
    Spec(
        STATISTICS,
        "Statistics Response JSON Error Object",
        "A failed statistics request will be indicated by an HTTP error status (typically 400).",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=STATS,
)
def _(ctx: Context) -> None:
    expect_error_object(ctx, ctx.rest("GET", "v2/models/conformance_no_such_model/stats"))


@case(
    "grpc.stats.model",
    "ModelStatistics answers the statistics of one model",
    Spec(STATISTICS, "GRPC", "The ModelStatistics API returns model statistics."),
    Level.MUST,
    protocols=GRPC,
    extension=STATS,
    models=("simple",),
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("ModelStatistics", ctx.pb.ModelStatisticsRequest(name="simple"))
    ctx.equal({s.name for s in response.model_stats}, {"simple"}, "models")


@case(
    "grpc.stats.batch-counts",
    "A batch of 3 adds 3 to inference_count and 1 to execution_count",
    Spec(
        STATISTICS,
        "HTTP/REST",
        "Each inference in a batched request is counted as an individual inference.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=STATS,
    models=("simple",),
)
def _(ctx: Context) -> None:
    def counts() -> tuple[int, int, int]:
        response = ctx.rpc_ok("ModelStatistics", ctx.pb.ModelStatisticsRequest(name="simple"))
        stat = response.model_stats[0]
        return stat.inference_count, stat.execution_count, stat.inference_stats.success.count

    before = counts()
    ctx.grpc.infer(
        "simple", {"INPUT0": np.zeros((3, 16), np.int32), "INPUT1": np.ones((3, 16), np.int32)}
    )
    after = _settled(counts, before, lambda now: now[2] != before[2] and now[1] != before[1])
    ctx.equal(
        (after[0] - before[0], after[1] - before[1]),
        (3, 1),
        "inference_count and execution_count increases",
    )


@case(
    "grpc.stats.unknown-model",
    "ModelStatistics of an unknown model ends with an error status",
    Spec(
        STATISTICS,
        "GRPC",
        "Errors are indicated by the google.rpc.Status returned for the request.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=STATS,
)
def _(ctx: Context) -> None:
    request = ctx.pb.ModelStatisticsRequest(name="conformance_no_such_model")
    expect_grpc_error(ctx, ctx.rpc("ModelStatistics", request))


# -- trace ----------------------------------------------------------------------------------------

TRACE_OK = Spec(
    TRACE,
    "Trace Setting Response JSON Object",
    "A successful trace setting request is indicated by a 200 HTTP status code.",
)
TRACE_MODEL = "identity_int16"


def _settings(ctx: Context, response: Any) -> dict[str, Any]:
    return _json_object(ctx, response, "the settings are", 300)


@case(
    "rest.trace.get",
    "GET v2/trace/setting answers the settings, strings or string arrays",
    Spec(
        TRACE,
        "Trace Setting Response JSON Object",
        "Each `$trace_setting` JSON describes a "
        "“name”/”value” pair, where the “name” is the name of the trace setting and the "
        "“value” is a `$string representation` of the setting value, or an array of "
        "`$string` for some settings.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="trace",
)
def _(ctx: Context) -> None:
    settings = _settings(ctx, ctx.rest("GET", "v2/trace/setting"))
    for key, value in settings.items():
        ok = isinstance(value, str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        )
        ctx.check(ok, f"{key}: {value!r} is neither a string nor an array of strings")
    ctx.check(isinstance(settings.get("trace_level"), list), "trace_level is not an array")


@case(
    "rest.trace.model-get",
    "GET v2/models/<m>/trace/setting answers the model's settings",
    TRACE_OK,
    Level.MUST,
    protocols=HTTP,
    extension="trace",
    models=(TRACE_MODEL,),
)
def _(ctx: Context) -> None:
    _settings(ctx, ctx.rest("GET", f"v2/models/{TRACE_MODEL}/trace/setting"))


def _clear_model_trace(ctx: Context) -> None:
    ctx.rest("POST", f"v2/models/{TRACE_MODEL}/trace/setting", json_body={"trace_rate": None})


@case(
    "rest.trace.model-update",
    "POST v2/models/<m>/trace/setting updates that setting and answers the updated settings",
    Spec(
        TRACE,
        "HTTP/REST",
        "A HTTP POST request will modify the trace setting, and the "
        "endpoint will return the updated trace setting on success or an error in the case of "
        "failure.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="trace",
    models=(TRACE_MODEL,),
)
def _(ctx: Context) -> None:
    ctx.cleanup(lambda: _clear_model_trace(ctx))
    path = f"v2/models/{TRACE_MODEL}/trace/setting"
    updated = _settings(ctx, ctx.rest("POST", path, json_body={"trace_rate": "7"}))
    ctx.equal(updated.get("trace_rate"), "7", "trace_rate in the answer")
    ctx.equal(_settings(ctx, ctx.rest("GET", path)).get("trace_rate"), "7", "trace_rate read back")


@case(
    "rest.trace.model-clear",
    "A null value clears a model setting, which falls back to the global one",
    Spec(
        TRACE,
        "Trace Setting Request JSON Object",
        "In such case, the current global setting will be used.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="trace",
    models=(TRACE_MODEL,),
)
def _(ctx: Context) -> None:
    ctx.cleanup(lambda: _clear_model_trace(ctx))
    path = f"v2/models/{TRACE_MODEL}/trace/setting"
    global_rate = _settings(ctx, ctx.rest("GET", "v2/trace/setting")).get("trace_rate")
    ctx.rest("POST", path, json_body={"trace_rate": "9"})
    cleared = _settings(ctx, ctx.rest("POST", path, json_body={"trace_rate": None}))
    ctx.equal(cleared.get("trace_rate"), global_rate, "trace_rate after clearing")


@case(
    "rest.trace.invalid",
    "An invalid trace setting value is refused with an error object",
    Spec(
        TRACE,
        "Trace Setting Response JSON Error Object",
        "A failed trace setting request will be indicated by an HTTP error status (typically 400).",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    extension="trace",
    models=(TRACE_MODEL,),
    note="A trace level that does not exist cannot be applied; refusing it is expected.",
)
def _(ctx: Context) -> None:
    ctx.cleanup(
        lambda: ctx.rest(
            "POST", f"v2/models/{TRACE_MODEL}/trace/setting", json_body={"trace_level": None}
        )
    )
    response = ctx.rest(
        "POST",
        f"v2/models/{TRACE_MODEL}/trace/setting",
        json_body={"trace_level": ["CONFORMANCE_NO_SUCH_LEVEL"]},
    )
    expect_error_object(ctx, response)


@case(
    "grpc.trace.get",
    "TraceSetting with no settings answers the current settings",
    Spec(TRACE, "GRPC", "The Trace Setting API returns the latest trace settings."),
    Level.MUST,
    protocols=GRPC,
    extension="trace",
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("TraceSetting", ctx.pb.TraceSettingRequest())
    ctx.check("trace_level" in response.settings, f"no trace_level: {list(response.settings)}")


@case(
    "grpc.trace.model-update",
    "TraceSetting for a model updates and returns its settings",
    Spec(TRACE, "GRPC", "The Trace Setting API returns the latest trace settings."),
    Level.MUST,
    protocols=GRPC,
    extension="trace",
    models=(TRACE_MODEL,),
)
def _(ctx: Context) -> None:
    pb = ctx.pb
    clear = pb.TraceSettingRequest(model_name=TRACE_MODEL)
    clear.settings["trace_rate"].SetInParent()  # no value: back to the global setting
    ctx.cleanup(lambda: ctx.rpc("TraceSetting", clear))
    request = pb.TraceSettingRequest(model_name=TRACE_MODEL)
    request.settings["trace_rate"].value.append("11")
    response = ctx.rpc_ok("TraceSetting", request)
    ctx.equal(list(response.settings["trace_rate"].value), ["11"], "trace_rate")


# -- logging --------------------------------------------------------------------------------------

LOG_TYPES = {
    "log_info": bool,
    "log_warning": bool,
    "log_error": bool,
    "log_verbose_level": int,
    "log_format": str,
}


def _restored_log_verbose_level(ctx: Context) -> Any:
    """The current ``log_verbose_level``, put back when the case ends."""
    original = _settings(ctx, ctx.rest("GET", "v2/logging")).get("log_verbose_level", 0)
    ctx.cleanup(lambda: ctx.rest("POST", "v2/logging", json_body={"log_verbose_level": original}))
    return original


@case(
    "rest.logging.get",
    "GET v2/logging answers the log settings with their types",
    Spec(
        LOGGING,
        "Log Setting Response JSON Object",
        "A successful log setting request is indicated by a 200 HTTP status code.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="logging",
)
def _(ctx: Context) -> None:
    settings = _settings(ctx, ctx.rest("GET", "v2/logging"))
    for key, kind in LOG_TYPES.items():
        value = settings.get(key)
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        ctx.check(ok, f"{key}: {value!r} is not a {kind.__name__}")


@case(
    "rest.logging.update",
    "POST v2/logging changes one setting and answers every setting",
    Spec(
        LOGGING,
        "Example Usage",
        "Note that the current values for all parameter fields are "
        "returned even though `log_verbose_level` was the only parameter that was modified.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="logging",
)
def _(ctx: Context) -> None:
    original = _restored_log_verbose_level(ctx)
    updated = _settings(
        ctx,
        ctx.rest("POST", "v2/logging", json_body={"log_verbose_level": 1 if original != 1 else 2}),
    )
    ctx.equal(updated.get("log_verbose_level"), 1 if original != 1 else 2, "log_verbose_level")
    missing = [k for k in LOG_TYPES if k not in updated]
    ctx.check(not missing, f"the answer lacks {missing}")


@case(
    "rest.logging.negative-verbose",
    "A negative log_verbose_level is refused with an error object",
    Spec(
        LOGGING,
        "Log Setting Response JSON Object",
        'Attempting to set "log_verbose_level" to a number < 0 will result in an error.',
    ),
    Level.MUST,
    protocols=HTTP,
    extension="logging",
)
def _(ctx: Context) -> None:
    _restored_log_verbose_level(ctx)
    expect_error_object(ctx, ctx.rest("POST", "v2/logging", json_body={"log_verbose_level": -1}))


@case(
    "grpc.logging.get",
    "LogSettings with no settings answers the current settings",
    Spec(LOGGING, "GRPC", "The Log Setting API returns the latest log settings."),
    Level.MUST,
    protocols=GRPC,
    extension="logging",
)
def _(ctx: Context) -> None:
    response = ctx.rpc_ok("LogSettings", ctx.pb.LogSettingsRequest())
    for key in LOG_TYPES:
        ctx.check(key in response.settings, f"{key} missing: {list(response.settings)}")


@case(
    "grpc.logging.update",
    "LogSettings changes log_verbose_level and answers it",
    Spec(LOGGING, "GRPC", "The Log Setting API returns the latest log settings."),
    Level.MUST,
    protocols=GRPC,
    extension="logging",
)
def _(ctx: Context) -> None:
    pb = ctx.pb
    current = ctx.rpc_ok("LogSettings", pb.LogSettingsRequest())
    original = current.settings["log_verbose_level"].uint32_param
    restore = pb.LogSettingsRequest()
    restore.settings["log_verbose_level"].uint32_param = original
    ctx.cleanup(lambda: ctx.rpc("LogSettings", restore))
    wanted = 1 if original != 1 else 2
    request = pb.LogSettingsRequest()
    request.settings["log_verbose_level"].uint32_param = wanted
    response = ctx.rpc_ok("LogSettings", request)
    ctx.equal(response.settings["log_verbose_level"].uint32_param, wanted, "log_verbose_level")
