"""Whether the server's extension list tells the truth: an extension that answers should be
advertised. (An advertised extension that is broken fails its own cases, whose messages say
that it is advertised.)

Each probe sends the extension's simplest request; a probe that cannot tell (its model is
missing) skips.
"""

from __future__ import annotations

from collections.abc import Callable

from kserve_v2.conformance.context import Context, RpcError
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import (
    BINARY,
    CLASSIFICATION,
    LOGGING,
    MODEL_CONFIG,
    REPOSITORY,
    SEQUENCE,
    SHM,
    STATISTICS,
    TRACE,
    Level,
    Spec,
)

Probe = Callable[[Context], bool]


def _get_ok(path: str) -> Probe:
    return lambda ctx: ctx.rest("GET", path).status == 200


def _post_ok(path: str, body: object) -> Probe:
    return lambda ctx: ctx.rest("POST", path, json_body=body).status == 200


def _rpc_ok(rpc: str, message: str, **fields: object) -> Probe:
    def probe(ctx: Context) -> bool:
        response = ctx.rpc(rpc, getattr(ctx.pb, message)(**fields))
        return not isinstance(response, RpcError)

    return probe


def _binary(ctx: Context) -> bool:
    head = (
        b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"INT32",'
        b'"parameters":{"binary_data_size":4}}]}'
    )
    response = ctx.rest_infer("identity_int32", head, [b"\x01\x00\x00\x00"])
    return response.status == 200


def _classification(ctx: Context) -> bool:
    body = {
        "inputs": [{"name": "INPUT0", "shape": [3], "datatype": "FP32", "data": [1, 3, 2]}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 1}}],
    }
    response = ctx.rest("POST", "v2/models/classify/infer", json_body=body)
    return response.status == 200 and b'"BYTES"' in response.body


def _sequence(ctx: Context) -> bool:
    body = {
        "parameters": {"sequence_id": 987654321, "sequence_start": True, "sequence_end": True},
        "inputs": [{"name": "INPUT", "shape": [1], "datatype": "INT32", "data": [1]}],
    }
    return ctx.rest("POST", "v2/models/sequence_accumulate/infer", json_body=body).status == 200


# No probe for the parameters extension: what it adds on the wire, custom request parameters
# reaching the model, is already the core protocol's "parameters" object ("A server can
# implement server-specific parameters to provide non-standard capabilities."), so a server
# that passes them on shows nothing of Triton's extension and is not failed for not listing it.

#: (extension, its document, probe protocol, probe, models the probe needs)
PROBES: list[tuple[str, str, str, Probe, tuple[str, ...]]] = [
    ("binary_tensor_data", BINARY, "http", _binary, ("identity_int32",)),
    ("classification", CLASSIFICATION, "http", _classification, ("classify",)),
    ("sequence", SEQUENCE, "http", _sequence, ("sequence_accumulate",)),
    ("system_shared_memory", SHM, "http", _get_ok("v2/systemsharedmemory/status"), ()),
    (
        "system_shared_memory",
        SHM,
        "grpc",
        _rpc_ok("SystemSharedMemoryStatus", "SystemSharedMemoryStatusRequest"),
        (),
    ),
    ("cuda_shared_memory", SHM, "http", _get_ok("v2/cudasharedmemory/status"), ()),
    (
        "cuda_shared_memory",
        SHM,
        "grpc",
        _rpc_ok("CudaSharedMemoryStatus", "CudaSharedMemoryStatusRequest"),
        (),
    ),
    ("model_configuration", MODEL_CONFIG, "http", _get_ok("v2/models/simple/config"), ("simple",)),
    (
        "model_configuration",
        MODEL_CONFIG,
        "grpc",
        _rpc_ok("ModelConfig", "ModelConfigRequest", name="simple"),
        ("simple",),
    ),
    ("model_repository", REPOSITORY, "http", _post_ok("v2/repository/index", {}), ()),
    (
        "model_repository",
        REPOSITORY,
        "grpc",
        _rpc_ok("RepositoryIndex", "RepositoryIndexRequest"),
        (),
    ),
    ("statistics", STATISTICS, "http", _get_ok("v2/models/stats"), ()),
    ("statistics", STATISTICS, "grpc", _rpc_ok("ModelStatistics", "ModelStatisticsRequest"), ()),
    ("trace", TRACE, "http", _get_ok("v2/trace/setting"), ()),
    ("trace", TRACE, "grpc", _rpc_ok("TraceSetting", "TraceSettingRequest"), ()),
    ("logging", LOGGING, "http", _get_ok("v2/logging"), ()),
    ("logging", LOGGING, "grpc", _rpc_ok("LogSettings", "LogSettingsRequest"), ()),
]

#: The sentence of each document that says the server reports the extension.
ADVERTISED = {
    BINARY: "Because this extension is supported, Triton reports “binary_tensor_data” in the "
    "extensions field of its Server Metadata.",
    CLASSIFICATION: "Because this extension is supported, Triton reports “classification” in "
    "the extensions field of its Server Metadata.",
    SEQUENCE: 'Because this extension is supported, Triton reports "sequence" in the extensions '
    "field of its Server Metadata.",
    SHM: "Because both of these extensions are supported, Triton reports “system_shared_memory” "
    'and "cuda_shared_memory" in the extensions field of its Server Metadata.',
    MODEL_CONFIG: "Because this extension is supported, Triton reports “model_configuration” in "
    "the extensions field of its Server Metadata.",
    REPOSITORY: "Because this extension is supported, Triton reports “model_repository” in the "
    "extensions field of the Server Metadata.",
    STATISTICS: "Because this extension is supported, Triton reports “statistics” in the "
    "extensions field of its Server Metadata.",
    TRACE: "Because this extension is supported, Triton reports “trace” in the extensions field "
    "of its Server Metadata.",
    LOGGING: 'Triton reports "logging" in the extensions field of its Server Metadata.',
}
SECTIONS = {
    BINARY: "Binary Tensor Data Extension",
    CLASSIFICATION: "Classification Extension",
    SEQUENCE: "Sequence Extension",
    SHM: "Shared-Memory Extension",
    MODEL_CONFIG: "Model Configuration Extension",
    REPOSITORY: "Model Repository Extension",
    STATISTICS: "Statistics Extension",
    TRACE: "Trace Extension",
    LOGGING: "Logging Extension",
}


def _probe_case(
    name: str, document: str, protocol: str, probe: Probe, models: tuple[str, ...]
) -> None:
    suffix = "" if protocol == "http" else ".grpc"
    spec = Spec(document, SECTIONS[document], ADVERTISED[document])

    @case(
        f"ext.{name.replace('_', '-')}.advertised{suffix}",
        f"An answering {name} extension is advertised ({protocol.upper()} probe)",
        spec,
        Level.SHOULD,
        protocols=(protocol,),
        models=models,
        note="Clients decide from the extensions list whether to use an extension; one that "
        "works but is not listed is invisible to them.",
    )
    def _(ctx: Context) -> None:
        if name in ctx.session.extensions():
            return
        if probe(ctx):
            ctx.fail(f"the server answers the {name} extension but does not advertise it")


for _probe in PROBES:
    _probe_case(*_probe)
