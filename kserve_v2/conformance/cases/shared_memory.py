"""Triton's system and CUDA shared-memory extensions over REST and gRPC.

Registering a region and passing tensors through it needs the server on this machine
(``Target.local``); status, unregister-all and the error answers work against any server.
CUDA regions need a GPU here and on the server; without one those cases are skipped.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import (
    expect_error_object,
    expect_grpc_error,
    expect_json,
    same_array,
)
from kserve_v2.conformance.context import Context
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import SHM, Level, Spec

HTTP = ("http",)
GRPC = ("grpc",)
SYS = "system_shared_memory"
CUDA = "cuda_shared_memory"

STATUS_OK = Spec(
    SHM, "Status", "A successful status request is indicated by a 200 HTTP status code."
)
REGISTER_OK = Spec(
    SHM, "Register", "A successful register request is indicated by a 200 HTTP status code."
)
REGISTER_FAIL = Spec(
    SHM,
    "Register",
    "A failed register request must be indicated by an HTTP error status (typically 400).",
)
UNREGISTER_ALL = Spec(
    SHM, "Unregister", "If REGION_NAME is not provided in the URL all regions are unregisered."
)
NO_DATA = Spec(
    SHM,
    "HTTP/REST",
    "When these parameters are set for a requested output tensor the returned "
    "`$response_output` must not define the “data” field.",
)
DATA_SET = Spec(SHM, "HTTP/REST", "If the “data” field is set Triton will return an error.")
BOTH_PARAMS = Spec(
    SHM, "Shared-Memory Extension", "If only one of the two is given Triton will return an error."
)
GRPC_ERRORS = Spec(
    SHM,
    "GRPC",
    "For all APIs, errors are indicated by the google.rpc.Status returned for the request.",
)


def _name() -> str:
    return f"conformance_{secrets.token_hex(4)}"


@contextmanager
def _region(ctx: Context, nbytes: int) -> Iterator[Any]:
    """A system shared-memory region of this process, unregistered and removed afterwards."""
    from kserve_v2.shm import SystemSharedMemoryRegion

    region = SystemSharedMemoryRegion.create(_name(), nbytes, mode=0o666)
    try:
        yield region
    finally:
        ctx.rest("POST", f"v2/systemsharedmemory/region/{region.name}/unregister")
        region.close()


def _register(ctx: Context, region: Any) -> None:
    response = ctx.rest(
        "POST",
        f"v2/systemsharedmemory/region/{region.name}/register",
        json_body={"key": region.key, "offset": 0, "byte_size": region.byte_size},
    )
    ctx.equal(response.status, 200, f"register status ({response.body[:200]!r})")


@contextmanager
def _registered_region(ctx: Context, nbytes: int) -> Iterator[Any]:
    """:func:`_region`, registered over REST (needs the server on this machine)."""
    ctx.need_local()
    with _region(ctx, nbytes) as region:
        _register(ctx, region)
        yield region


def _infer_refused(ctx: Context, parameters: dict[str, Any], **extra: Any) -> None:
    """An identity_fp32 request whose [1, 2] input has these shared-memory ``parameters`` (and
    the ``extra`` fields) must be refused with an error object."""
    item = {"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", **extra}
    body = {"inputs": [{**item, "parameters": parameters}]}
    expect_error_object(ctx, ctx.rest("POST", "v2/models/identity_fp32/infer", json_body=body))


def _status(ctx: Context, kind: str, region: str = "") -> list[Any]:
    path = f"v2/{kind}sharedmemory" + (f"/region/{region}" if region else "") + "/status"
    body = expect_json(ctx, ctx.rest("GET", path))
    ctx.check(isinstance(body, list), f"the status is not an array: {body!r:.300}")
    return list(body)


@dataclass(frozen=True)
class _Kind:
    """One of the two shared-memory extensions, as its cases name it."""

    path: str  # the REST path word and the case-id word: "system", "cuda"
    rpc: str  # the gRPC method prefix: "System", "Cuda"
    label: str  # how the extension's text names it: "system", "CUDA"
    extension: str
    # Spelled out whole, so that a reader (and the coverage test) finds each endpoint and RPC.
    unregister_all: str
    status_rpc: str
    unregister_rpc: str


SYSTEM = _Kind(
    "system",
    "System",
    "system",
    SYS,
    "v2/systemsharedmemory/unregister",
    "SystemSharedMemoryStatus",
    "SystemSharedMemoryUnregister",
)
CUDA_KIND = _Kind(
    "cuda",
    "Cuda",
    "CUDA",
    CUDA,
    "v2/cudasharedmemory/unregister",
    "CudaSharedMemoryStatus",
    "CudaSharedMemoryUnregister",
)


# The status and unregister-all cases are the same for both kinds; each is registered where its
# kind's cases stand, so that the reports keep their order.


def _rest_status_case(kind: _Kind, run: Callable[[Context], object]) -> None:
    @case(
        f"rest.shm.{kind.path}.status",
        f"GET v2/{kind.path}sharedmemory/status answers 200 with an array",
        STATUS_OK,
        Level.MUST,
        protocols=HTTP,
        extension=kind.extension,
    )
    def _(ctx: Context) -> None:
        run(ctx)


def _rest_unregister_all_case(kind: _Kind) -> None:
    @case(
        f"rest.shm.{kind.path}.unregister-all",
        f"POST v2/{kind.path}sharedmemory/unregister answers 200",
        UNREGISTER_ALL,
        Level.MUST,
        protocols=HTTP,
        extension=kind.extension,
    )
    def _(ctx: Context) -> None:
        response = ctx.rest("POST", kind.unregister_all)
        ctx.equal(response.status, 200, "status")


def _grpc_status_case(kind: _Kind) -> None:
    @case(
        f"grpc.shm.{kind.path}.status",
        f"{kind.rpc}SharedMemoryStatus answers OK",
        Spec(
            SHM,
            "Status",
            f"The {kind.label}-shared-memory status API provides information about "
            f"registered {kind.label} shared-memory regions.",
        ),
        Level.MUST,
        protocols=GRPC,
        extension=kind.extension,
    )
    def _(ctx: Context) -> None:
        ctx.rpc_ok(kind.status_rpc, getattr(ctx.pb, f"{kind.status_rpc}Request")())


def _grpc_unregister_all_case(kind: _Kind) -> None:
    @case(
        f"grpc.shm.{kind.path}.unregister-all",
        f"{kind.rpc}SharedMemoryUnregister with no name answers OK",
        Spec(
            SHM,
            "Unregister",
            f"The {kind.label}-shared-memory unregister API provides unregisters a "
            "shared-memory region from Triton.",
        ),
        Level.MUST,
        protocols=GRPC,
        extension=kind.extension,
    )
    def _(ctx: Context) -> None:
        ctx.rpc_ok(kind.unregister_rpc, getattr(ctx.pb, f"{kind.unregister_rpc}Request")())


# -- system, REST ---------------------------------------------------------------------------------


_rest_status_case(SYSTEM, lambda ctx: _status(ctx, "system"))


@case(
    "rest.shm.system.register-status-unregister",
    "A registered region is listed with its key, offset and size, and gone once unregistered",
    REGISTER_OK,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
)
def _(ctx: Context) -> None:
    ctx.need_local()
    with _region(ctx, 64) as region:
        _register(ctx, region)
        entries = [
            e
            for e in _status(ctx, "system")
            if isinstance(e, dict) and e.get("name") == region.name
        ]
        ctx.equal(len(entries), 1, f"status entries for {region.name}")
        entry = entries[0]
        ctx.equal(
            (entry.get("key"), entry.get("offset"), entry.get("byte_size")),
            (region.key, 0, 64),
            "key, offset, byte_size",
        )
        one = _status(ctx, "system", region.name)
        ctx.equal(
            [e.get("name") for e in one if isinstance(e, dict)],
            [region.name],
            "status of the one region",
        )
        response = ctx.rest("POST", f"v2/systemsharedmemory/region/{region.name}/unregister")
        ctx.equal(response.status, 200, "unregister status")
        names = [e.get("name") for e in _status(ctx, "system") if isinstance(e, dict)]
        ctx.check(region.name not in names, f"{region.name} still listed after unregister")


@case(
    "rest.shm.system.infer",
    "Inputs read from and outputs written to registered regions; outputs carry no data",
    NO_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    ctx.need_local()
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    with _region(ctx, 24) as rin, _region(ctx, 24) as rout:
        rin.write(data)
        _register(ctx, rin)
        _register(ctx, rout)
        body = {
            "inputs": [
                {
                    "name": "INPUT0",
                    "shape": [2, 3],
                    "datatype": "FP32",
                    "parameters": {"shared_memory_region": rin.name, "shared_memory_byte_size": 24},
                }
            ],
            "outputs": [
                {
                    "name": "OUTPUT0",
                    "parameters": {
                        "shared_memory_region": rout.name,
                        "shared_memory_byte_size": 24,
                    },
                }
            ],
        }
        obj = expect_json(ctx, ctx.rest("POST", "v2/models/identity_fp32/infer", json_body=body))
        out = (obj.get("outputs") or [{}])[0]
        ctx.check("data" not in out, 'the output written to shared memory also has "data"')
        got = np.frombuffer(bytes(rout.buffer[:24]), dtype="<f4").reshape(2, 3)
        ctx.check(same_array(got, data), f"the output region holds {got.tolist()}")


@case(
    "rest.shm.system.input-with-data",
    'An input in shared memory that also has "data" is refused with an error object',
    DATA_SET,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    with _registered_region(ctx, 8) as region:
        _infer_refused(
            ctx,
            {"shared_memory_region": region.name, "shared_memory_byte_size": 8},
            data=[1.0, 2.0],
        )


@case(
    "rest.shm.system.region-without-size",
    "shared_memory_region without shared_memory_byte_size is refused with an error object",
    BOTH_PARAMS,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    with _registered_region(ctx, 8) as region:
        _infer_refused(ctx, {"shared_memory_region": region.name})


@case(
    "rest.shm.system.unknown-region",
    "An input naming a region nobody registered is refused with an error object",
    Spec(
        SHM,
        "HTTP/REST",
        "Shared memory regions must be created by the client and then "
        "registered with Triton before they can be referenced with a “shared_memory_region” "
        "parameter.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    _infer_refused(ctx, {"shared_memory_region": _name(), "shared_memory_byte_size": 8})


@case(
    "rest.shm.system.register-bad-key",
    "Registering a key that does not exist is refused with an error object",
    REGISTER_FAIL,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
)
def _(ctx: Context) -> None:
    name = _name()
    response = ctx.rest(
        "POST",
        f"v2/systemsharedmemory/region/{name}/register",
        json_body={"key": f"/{name}_missing", "offset": 0, "byte_size": 64},
    )
    expect_error_object(ctx, response)


@case(
    "rest.shm.system.unknown-region-status",
    "The status of a region nobody registered is an error object",
    Spec(
        SHM,
        "Status",
        "A failed status request must be indicated by an HTTP error status (typically 400).",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    extension=SYS,
    note="A named region that does not exist: an error, or an empty array, are both "
    "defensible readings; an error object is what a failed status request looks like.",
)
def _(ctx: Context) -> None:
    response = ctx.rest("GET", f"v2/systemsharedmemory/region/{_name()}/status")
    if response.status == 200:
        ctx.equal(response.json(), [], "status of an unknown region")
    else:
        expect_error_object(ctx, response)


_rest_unregister_all_case(SYSTEM)


@case(
    "rest.shm.system.with-client",
    "The project's client round-trips a tensor through system shared memory",
    NO_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=SYS,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    ctx.need_local()
    from kserve_v2 import InferInput, RequestedOutput
    from kserve_v2.extensions import read_shared_memory_output

    data = np.arange(8, dtype=np.int32).reshape(2, 4)
    with _region(ctx, 32) as rin, _region(ctx, 32) as rout:
        rin.write(data)
        ctx.http.register_region(rin)
        ctx.http.register_region(rout)
        result = ctx.http.infer(
            "identity_int32",
            [
                InferInput(
                    "INPUT0",
                    None,
                    datatype="INT32",
                    shape=data.shape,
                    shared_memory=rin.placement(),
                )
            ],
            outputs=[RequestedOutput("OUTPUT0", shared_memory=rout.placement())],
        )
        got = read_shared_memory_output(result, "OUTPUT0", rout)
        ctx.check(same_array(got, data), f"OUTPUT0 = {np.asarray(got).tolist()}")


# -- system, gRPC ----------------------------------------------------------------------------------


_grpc_status_case(SYSTEM)


@case(
    "grpc.shm.system.register-status-unregister",
    "A region registered over gRPC is listed with its key and size, then unregistered",
    Spec(
        SHM,
        "Register",
        "The system-shared-memory register API is used to register a new "
        "shared-memory region with Triton.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=SYS,
)
def _(ctx: Context) -> None:
    ctx.need_local()
    from kserve_v2.shm import SystemSharedMemoryRegion

    name = _name()
    with SystemSharedMemoryRegion.create(name, 64, mode=0o666) as region:
        pb = ctx.pb
        ctx.cleanup(
            lambda: ctx.rpc(
                "SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name=name)
            )
        )
        ctx.rpc_ok(
            "SystemSharedMemoryRegister",
            pb.SystemSharedMemoryRegisterRequest(name=name, key=region.key, offset=0, byte_size=64),
        )
        status = ctx.rpc_ok(
            "SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name=name)
        )
        ctx.check(name in status.regions, f"{name} not in the status: {list(status.regions)}")
        entry = status.regions[name]
        ctx.equal(
            (entry.key, entry.offset, entry.byte_size),
            (region.key, 0, 64),
            "key, offset, byte_size",
        )
        ctx.rpc_ok(
            "SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(name=name)
        )
        status = ctx.rpc_ok("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest())
        ctx.check(name not in status.regions, f"{name} still listed after unregister")


@case(
    "grpc.shm.system.infer",
    "ModelInfer reads an input from and writes an output to registered regions",
    Spec(
        SHM,
        "GRPC",
        "When these parameters are set for a requested output tensor the "
        "“contents” field of the ModelInferResponse::InferOutputTensor will not be set in "
        "the inference response.",
    ),
    Level.MUST,
    protocols=GRPC,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    ctx.need_local()
    from kserve_v2.shm import SystemSharedMemoryRegion

    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    pb = ctx.pb
    with (
        SystemSharedMemoryRegion.create(_name(), 24, mode=0o666) as rin,
        SystemSharedMemoryRegion.create(_name(), 24, mode=0o666) as rout,
    ):
        rin.write(data)
        for region in (rin, rout):
            ctx.cleanup(
                functools.partial(
                    ctx.rpc,
                    "SystemSharedMemoryUnregister",
                    pb.SystemSharedMemoryUnregisterRequest(name=region.name),
                )
            )
            ctx.rpc_ok(
                "SystemSharedMemoryRegister",
                pb.SystemSharedMemoryRegisterRequest(
                    name=region.name, key=region.key, offset=0, byte_size=24
                ),
            )
        request = pb.ModelInferRequest(model_name="identity_fp32")
        item = request.inputs.add(name="INPUT0", datatype="FP32", shape=[2, 3])
        item.parameters["shared_memory_region"].string_param = rin.name
        item.parameters["shared_memory_byte_size"].int64_param = 24
        out = request.outputs.add(name="OUTPUT0")
        out.parameters["shared_memory_region"].string_param = rout.name
        out.parameters["shared_memory_byte_size"].int64_param = 24
        response = ctx.rpc_ok("ModelInfer", request)
        for output in response.outputs:
            ctx.check(not output.contents.ListFields(), "the output has typed contents")
        got = np.frombuffer(bytes(rout.buffer[:24]), dtype="<f4").reshape(2, 3)
        ctx.check(same_array(got, data), f"the output region holds {got.tolist()}")


@case(
    "grpc.shm.system.register-bad-key",
    "SystemSharedMemoryRegister with a key that does not exist ends with an error status",
    GRPC_ERRORS,
    Level.MUST,
    protocols=GRPC,
    extension=SYS,
)
def _(ctx: Context) -> None:
    name = _name()
    request = ctx.pb.SystemSharedMemoryRegisterRequest(
        name=name, key=f"/{name}_missing", offset=0, byte_size=64
    )
    expect_grpc_error(ctx, ctx.rpc("SystemSharedMemoryRegister", request))


_grpc_unregister_all_case(SYSTEM)


@case(
    "grpc.shm.system.unknown-region",
    "ModelInfer naming a region nobody registered ends with an error status",
    GRPC_ERRORS,
    Level.MUST,
    protocols=GRPC,
    extension=SYS,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    request = ctx.pb.ModelInferRequest(model_name="identity_fp32")
    item = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 2])
    item.parameters["shared_memory_region"].string_param = _name()
    item.parameters["shared_memory_byte_size"].int64_param = 8
    expect_grpc_error(ctx, ctx.rpc("ModelInfer", request))


# -- CUDA ----------------------------------------------------------------------------------------


_rest_status_case(CUDA_KIND, lambda ctx: _status(ctx, "cuda"))


@case(
    "rest.shm.cuda.register-bad-handle",
    "Registering a CUDA region with a handle that is not one is refused with an error object",
    Spec(
        SHM,
        "Register",
        "A failed register request must be indicated by an HTTP error status (typically 400).",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=CUDA,
)
def _(ctx: Context) -> None:
    response = ctx.rest(
        "POST",
        f"v2/cudasharedmemory/region/{_name()}/register",
        json_body={"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 64},
    )
    expect_error_object(ctx, response)


_rest_unregister_all_case(CUDA_KIND)


_grpc_status_case(CUDA_KIND)


@case(
    "grpc.shm.cuda.register-bad-handle",
    "CudaSharedMemoryRegister with a handle that is not one ends with an error status",
    GRPC_ERRORS,
    Level.MUST,
    protocols=GRPC,
    extension=CUDA,
)
def _(ctx: Context) -> None:
    request = ctx.pb.CudaSharedMemoryRegisterRequest(
        name=_name(), raw_handle=b"\x00" * 8, device_id=0, byte_size=64
    )
    expect_grpc_error(ctx, ctx.rpc("CudaSharedMemoryRegister", request))


_grpc_unregister_all_case(CUDA_KIND)


@case(
    "rest.shm.cuda.infer",
    "A tensor round-trips through a registered CUDA region (needs a GPU on both sides)",
    NO_DATA,
    Level.MUST,
    protocols=HTTP,
    extension=CUDA,
    models=("identity_fp32",),
)
def _(ctx: Context) -> None:
    ctx.need_local()
    from kserve_v2 import InferInput, RequestedOutput
    from kserve_v2.errors import KServeError
    from kserve_v2.extensions import read_shared_memory_output
    from kserve_v2.shm import CudaSharedMemoryRegion

    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    try:
        rin = CudaSharedMemoryRegion.create(_name(), 24)
    except KServeError as exc:
        ctx.skip(f"no CUDA device here: {exc}")
    with rin, CudaSharedMemoryRegion.create(_name(), 24) as rout:
        rin.copy_from_host(data)
        for region in (rin, rout):
            ctx.http.register_region(region)
            ctx.cleanup(functools.partial(ctx.http.unregister_region, region))
        result = ctx.http.infer(
            "identity_fp32",
            [
                InferInput(
                    "INPUT0", None, datatype="FP32", shape=data.shape, shared_memory=rin.placement()
                )
            ],
            outputs=[RequestedOutput("OUTPUT0", shared_memory=rout.placement())],
        )
        got = read_shared_memory_output(result, "OUTPUT0", rout)
        ctx.check(same_array(got, data), f"OUTPUT0 = {np.asarray(got).tolist()}")
