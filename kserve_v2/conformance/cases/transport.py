"""HTTP and gRPC details around the protocol: compression, unknown paths, large bodies."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import numpy as np

from kserve_v2.conformance.cases.common import (
    decode_rest,
    expect_client_error_status,
    output_array,
    same_array,
)
from kserve_v2.conformance.context import Context
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import OIP_REST, PROTOCOLS_GUIDE, Level, Spec
from kserve_v2.errors import ServerError

HTTP = ("http",)
GRPC = ("grpc",)

HTTP_COMPRESSION = Spec(
    PROTOCOLS_GUIDE,
    "Compression",
    "Triton allows the on-wire compression of request/response on HTTP through its clients.",
)
GRPC_COMPRESSION = Spec(
    PROTOCOLS_GUIDE,
    "Compression",
    "Triton allows the on-wire compression "
    "of request/response messages by exposing following option on "
    "server-side:",
)
BODY = b'{"inputs":[{"name":"INPUT0","shape":[1,3],"datatype":"INT32","data":[1,2,3]}]}'


def _compressed_request(ctx: Context, encoding: str, data: bytes) -> None:
    response = ctx.rest(
        "POST",
        "v2/models/identity_int32/infer",
        body=data,
        headers=[("Content-Type", "application/json"), ("Content-Encoding", encoding)],
    )
    if 400 <= response.status < 500:
        # A MAY: a server without it refuses the body, which is its right.
        ctx.skip(f"the server does not take {encoding} request bodies (HTTP {response.status})")
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(out.tolist(), [[1, 2, 3]], "OUTPUT0")


def _compressed_request_case(encoding: str, compress: Callable[[bytes], bytes]) -> None:
    @case(
        f"rest.compression.request-{encoding}",
        f"A {encoding}-compressed request body is accepted",
        HTTP_COMPRESSION,
        Level.MAY,
        protocols=HTTP,
        models=("identity_int32",),
    )
    def _(ctx: Context) -> None:
        _compressed_request(ctx, encoding, compress(BODY))


_compressed_request_case("gzip", gzip.compress)
_compressed_request_case("deflate", zlib.compress)


@case(
    "rest.compression.response-gzip",
    "Asked with Accept-Encoding: gzip, a large response may come gzip-encoded and decodes",
    HTTP_COMPRESSION,
    Level.MAY,
    protocols=HTTP,
    models=("identity_int32",),
    note="Either encoding is allowed; the body must decode to the right result.",
)
def _(ctx: Context) -> None:
    data = list(range(4096))
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "INT32", "data": data}]}
    response = ctx.rest(
        "POST",
        "v2/models/identity_int32/infer",
        json_body=body,
        headers=[("Accept-Encoding", "gzip")],
    )
    out = output_array(ctx, decode_rest(ctx, response), "OUTPUT0")
    ctx.equal(out.reshape(-1).tolist(), data, "OUTPUT0")


@case(
    "grpc.compression.request-gzip",
    "A gzip-compressed gRPC request message is accepted",
    GRPC_COMPRESSION,
    Level.MAY,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    data = np.arange(1024, dtype=np.int32).reshape(1, 1024)
    result = ctx.grpc.infer("identity_int32", {"INPUT0": data}, compression="gzip")
    ctx.check(same_array(output_array(ctx, result, "OUTPUT0"), data), "OUTPUT0 != INPUT0")


@case(
    "rest.unknown-path",
    "A path outside the protocol answers a 4xx status",
    Spec(
        OIP_REST,
        "HTTP/REST",
        "The HTTP/REST API uses JSON because it is widely supported and language independent.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    note="HTTP answers a resource that does not exist with 404 (a 4xx).",
)
def _(ctx: Context) -> None:
    expect_client_error_status(
        ctx, ctx.rest("GET", "v2/conformance/no/such/path"), "an unknown path"
    )


@case(
    "rest.infer.large-binary-tensor",
    "A 16 MiB binary tensor round-trips",
    Spec(
        OIP_REST,
        "Tensor Data Types",
        "Tensor data types are shown in the following table "
        "along with the size of each type, in bytes.",
    ),
    Level.PRACTICE,
    protocols=HTTP,
    extension="binary_tensor_data",
    models=("identity_fp32",),
    note="Servers commonly cap request sizes; 16 MiB is well within what inference needs.",
)
def _(ctx: Context) -> None:
    data = np.random.default_rng(0).random((1024, 4096), dtype=np.float32)
    result = ctx.http.infer("identity_fp32", {"INPUT0": data})
    ctx.check(same_array(output_array(ctx, result, "OUTPUT0"), data), "OUTPUT0 != INPUT0")


@case(
    "grpc.infer.large-tensor",
    "A 16 MiB tensor round-trips over gRPC",
    Spec(
        OIP_REST,
        "Tensor Data Types",
        "Tensor data types are shown in the following table "
        "along with the size of each type, in bytes.",
    ),
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_fp32",),
    note="The specs set no size limit; gRPC servers make the message limit a setting (often "
    "4 MiB by default). A server under its limit must round-trip the tensor; one refusing it "
    "with RESOURCE_EXHAUSTED, gRPC's code for a limit, is skipped with the limit it gave.",
)
def _(ctx: Context) -> None:
    data = np.random.default_rng(1).random((1024, 4096), dtype=np.float32)
    try:
        result = ctx.grpc.infer("identity_fp32", {"INPUT0": data})
    except ServerError as exc:
        if exc.grpc_code == "RESOURCE_EXHAUSTED":
            ctx.skip(f"the server's gRPC message limit is below 16 MiB: {exc.message}")
        raise
    ctx.check(same_array(output_array(ctx, result, "OUTPUT0"), data), "OUTPUT0 != INPUT0")
