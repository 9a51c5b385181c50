"""gRPC ModelStreamInfer: decoupled models (0..N responses per request), final-response flags,
per-request errors in the stream, and HTTP/unary inference refused for decoupled models.

Streams are driven at the message level (generated protobuf messages through the transport's
stream call) so every field of every ``ModelStreamInferResponse`` is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import expect_error_object, expect_grpc_error
from kserve_v2.conformance.context import Context, RpcError, StreamMessageMismatch
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import DECOUPLED, PROTOCOLS_GUIDE, SEQUENCE, Level, Spec

GRPC = ("grpc",)
HTTP = ("http",)
MODEL = "repeat_decoupled"

MULTIPLE = Spec(
    DECOUPLED,
    "Decoupled Backends and Models",
    "Triton can support [backends](https://github.com/triton-inference-server/backend) and "
    "models that send multiple responses for a request or zero responses for a request.",
)
FINAL_FLAG = Spec(
    DECOUPLED,
    "Knowing When a Decoupled Inference Request is Complete",
    "Client applications using streaming GRPC can access this information by checking the "
    'response parameters for the `"triton_final_response"` parameter.',
)
OPT_IN = Spec(
    DECOUPLED,
    "Knowing When a Decoupled Inference Request is Complete",
    "In these cases where no response is sent by the backend, the streaming GRPC client can "
    "opt-in to receive an empty final response for each request.",
)
ERROR_MESSAGE = Spec(
    SEQUENCE,
    "GRPC",
    "The message describing the error. The empty message indicates the inference was "
    "successful without errors.",
)
STREAM_ANY = Spec(
    SEQUENCE,
    "GRPC",
    "This streaming API is not required to be used for requests that specify a sequence_id and "
    "may be used by requests that do not specify a sequence_id.",
)


def _repeat(
    ctx: Context,
    rid: str,
    repeat: int,
    *,
    error_at: int | None = None,
    empty_final: bool = False,
    values: Sequence[int] = (7, 8),
) -> Any:
    request = ctx.pb.ModelInferRequest(model_name=MODEL, id=rid)
    inputs = [("IN", [len(values)], list(values)), ("REPEAT", [1], [repeat])]
    if error_at is not None:
        inputs.append(("ERROR_AT", [1], [error_at]))
    for name, shape, data in inputs:
        request.inputs.add(name=name, datatype="INT32", shape=shape)
        request.raw_input_contents.append(np.asarray(data, "<i4").tobytes())
    if empty_final:
        request.parameters["triton_enable_empty_final_response"].bool_param = True
    return request


def _identity(ctx: Context, rid: str, value: int) -> Any:
    request = ctx.pb.ModelInferRequest(model_name="identity_int32", id=rid)
    request.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 1])
    request.raw_input_contents.append(np.asarray([value], "<i4").tobytes())
    return request


def _final(response: Any) -> bool | None:
    params = response.infer_response.parameters
    if "triton_final_response" not in params:
        return None
    return bool(params["triton_final_response"].bool_param)


def _data(responses: list[Any]) -> list[Any]:
    """The responses that carry outputs."""
    return [r for r in responses if not r.error_message and r.infer_response.outputs]


def _idx(ctx: Context, response: Any) -> int:
    infer = response.infer_response
    names = [o.name for o in infer.outputs]
    ctx.check(
        "IDX" in names and len(infer.raw_output_contents) == len(names),
        f"response without raw IDX output: {names}",
    )
    raw = infer.raw_output_contents[names.index("IDX")]
    return int(np.frombuffer(raw, "<i4")[0])


def _finals(responses: list[Any]) -> int:
    return sum(1 for r in responses if _final(r))


def _stream_problem(ctx: Context) -> str | None:
    """What keeps the server's ``ModelStreamInfer`` from being the sequence extension's RPC:
    learnt once per run from one request to identity_int32 (None: nothing, or no model to
    tell with)."""
    facts = ctx.session.facts
    if "stream" not in facts:
        problem = None
        if ctx.session.model_problem("identity_int32") is None:
            try:
                responses, error = ctx.stream_rpc(
                    [_identity(ctx, "probe", 1)], expect=lambda rs: len(rs) >= 1
                )
            except StreamMessageMismatch as exc:
                problem = f"the server answers ModelStreamInfer with other messages: {exc}"
            else:
                if error is not None and error.code == "UNIMPLEMENTED" and not responses:
                    problem = f"the server does not implement ModelStreamInfer ({error.message})"
        facts["stream"] = problem
    known: str | None = facts["stream"]
    return known


def _need_stream(ctx: Context) -> None:
    """Skip when the server's ModelStreamInfer is not the extension's and the server does not
    advertise the extension (grpc.stream.response-message reports a mismatch); fail when it
    does advertise it."""
    problem = _stream_problem(ctx)
    if problem is None:
        return
    if "sequence" in ctx.session.extensions():
        ctx.fail(f"the server advertises 'sequence', but {problem}")
    ctx.skip(
        f"{problem}; ModelStreamInfer is the sequence extension's RPC, which the server does "
        "not advertise (grpc.stream.response-message checks its messages)"
    )


def _run(ctx: Context, requests: list[Any], done: Any, **kw: Any) -> list[Any]:
    _need_stream(ctx)
    responses, error = ctx.stream_rpc(requests, expect=done, **kw)
    if error is not None:
        ctx.fail(f"the stream ended with {error.code}: {error.message}")
    return responses


@case(
    "grpc.stream.response-message",
    "ModelStreamInfer answers with ModelStreamInferResponse messages",
    Spec(SEQUENCE, "GRPC", "The ModelStreamInferResponse message is shown below."),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
    note="The sequence extension defines the RPC and its response message. A server that answers "
    "the RPC, advertised or not, with another message (a ModelInferResponse, say) is misread "
    "by the extension's clients: protobuf parses it as a ModelStreamInferResponse without error. "
    "A server without the RPC (UNIMPLEMENTED) that does not advertise the extension is skipped.",
)
def _(ctx: Context) -> None:
    problem = _stream_problem(ctx)
    if problem is not None and "does not implement" in problem:
        _need_stream(ctx)
    ctx.check(problem is None, problem or "")


@case(
    "grpc.stream.decoupled.responses",
    "A decoupled model's N responses to one request all arrive, in order",
    MULTIPLE,
    Level.MUST,
    protocols=GRPC,
    models=(MODEL,),
    note="'repeat_decoupled' answers REPEAT responses with IDX = 0, 1, ... and OUT = IN.",
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_repeat(ctx, "d1", 3)], lambda rs: len(_data(rs)) >= 3)
    data = _data(responses)
    ctx.equal(len(data), 3, "data responses")
    ctx.equal([_idx(ctx, r) for r in data], [0, 1, 2], "IDX of the responses")


@case(
    "grpc.stream.decoupled.final-flag",
    "With empty final responses enabled, exactly the last response says triton_final_response",
    FINAL_FLAG,
    Level.MUST,
    protocols=GRPC,
    models=(MODEL,),
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_repeat(ctx, "d2", 2, empty_final=True)], lambda rs: _finals(rs) >= 1)
    flags = [_final(r) for r in responses]
    ctx.check(flags and flags[-1] is True, f"triton_final_response of the responses: {flags}")
    ctx.check(
        all(f is False for f in flags[:-1]),
        f"a response before the last is flagged final (or unflagged): {flags}",
    )
    ctx.equal(len(_data(responses)), 2, "data responses")


@case(
    "grpc.stream.decoupled.zero-responses",
    "A request answered with no response gets one empty final response when opted in",
    OPT_IN,
    Level.MUST,
    protocols=GRPC,
    models=(MODEL,),
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_repeat(ctx, "d3", 0, empty_final=True)], lambda rs: _finals(rs) >= 1)
    ctx.equal(len(responses), 1, "responses")
    ctx.equal(_final(responses[0]), True, "triton_final_response")
    ctx.equal(len(responses[0].infer_response.outputs), 0, "outputs of the empty final response")
    ctx.equal(responses[0].infer_response.id, "d3", "id of the empty final response")


@case(
    "grpc.stream.decoupled.no-empty-final-by-default",
    "Without opting in, no empty final response is sent",
    Spec(
        DECOUPLED,
        "Knowing When a Decoupled Inference Request is Complete",
        "By default, empty final responses are not sent to save on network traffic.",
    ),
    Level.SHOULD,
    protocols=GRPC,
    models=(MODEL,),
    note="Read after half-closing the stream: every response the server sends arrives "
    "before it ends the call.",
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_repeat(ctx, "d4", 2)], lambda rs: len(_data(rs)) >= 2)
    empty = [r for r in responses if not r.error_message and not r.infer_response.outputs]
    ctx.equal(len(empty), 0, "empty responses")


@case(
    "grpc.stream.id-echo",
    "Every response of a request carries the request's id",
    Spec(SEQUENCE, "GRPC", "The ModelInferRequest is the same as for the ModelInfer API."),
    Level.MUST,
    protocols=GRPC,
    models=(MODEL,),
    note="ModelInferResponse.id: 'The id of the inference request if one was specified.'",
)
def _(ctx: Context) -> None:
    requests = [
        _repeat(ctx, "id-a", 2, empty_final=True),
        _repeat(ctx, "id-b", 1, empty_final=True),
    ]
    responses = _run(ctx, requests, lambda rs: _finals(rs) >= 2)
    ids = [r.infer_response.id for r in responses]
    ctx.equal(sorted(ids), ["id-a", "id-a", "id-a", "id-b", "id-b"], "ids of the responses")


@case(
    "grpc.stream.error-message",
    "An error for one response comes as error_message, and the stream goes on",
    ERROR_MESSAGE,
    Level.MUST,
    protocols=GRPC,
    models=(MODEL,),
    note="ERROR_AT=1 makes the model send an error in place of its second response.",
)
def _(ctx: Context) -> None:
    responses = _run(
        ctx,
        [_repeat(ctx, "e1", 3, error_at=1), _repeat(ctx, "e2", 1)],
        lambda rs: len(_data(rs)) >= 3 and any(r.error_message for r in rs),
    )
    errors = [r.error_message for r in responses if r.error_message]
    ctx.equal(len(errors), 1, "responses with an error_message")
    ctx.check("deliberate error" in errors[0], f"error_message lost the model's text: {errors}")
    ctx.equal(
        sorted(r.infer_response.id for r in _data(responses)),
        ["e1", "e1", "e2"],
        "data responses after the error",
    )


@case(
    "grpc.stream.success-no-error-message",
    "Successful responses have an empty error_message",
    ERROR_MESSAGE,
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_identity(ctx, "s1", 5)], lambda rs: len(rs) >= 1)
    ctx.check(responses, "no response")
    ctx.equal(responses[0].error_message, "", "error_message")


@case(
    "grpc.stream.non-decoupled",
    "A request for an ordinary model over the stream gets its one response",
    STREAM_ANY,
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    responses = _run(ctx, [_identity(ctx, "n1", 5)], lambda rs: len(rs) >= 1)
    data = _data(responses)
    ctx.equal(len(data), 1, "responses")
    raw = data[0].infer_response.raw_output_contents
    value = int(np.frombuffer(raw[0], "<i4")[0]) if raw else None
    ctx.equal(value, 5, "OUTPUT0")


@case(
    "grpc.stream.order",
    "Requests for one model over one stream are answered in the order sent",
    Spec(
        PROTOCOLS_GUIDE,
        "HTTP/REST and GRPC Protocols",
        "If the order of requests/responses "
        "needs to be preserved over the network, a GRPC stream will ensure that the server "
        "receives the requests in the same order as they were sent from the client.",
    ),
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_int32",),
    note="identity_int32 runs one request at a time, so the order received is the order answered.",
)
def _(ctx: Context) -> None:
    requests = [_identity(ctx, f"o{i}", i) for i in range(5)]
    responses = _run(ctx, requests, lambda rs: len(rs) >= 5)
    ctx.equal([r.infer_response.id for r in responses], [f"o{i}" for i in range(5)], "order")


@case(
    "grpc.stream.typed-contents",
    "Typed InferTensorContents work over the stream too",
    Spec(SEQUENCE, "GRPC", "The ModelInferRequest is the same as for the ModelInfer API."),
    Level.MUST,
    protocols=GRPC,
    models=("identity_int32",),
)
def _(ctx: Context) -> None:
    request = ctx.pb.ModelInferRequest(model_name="identity_int32", id="t1")
    tensor = request.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 2])
    tensor.contents.int_contents.extend([4, 5])
    responses = _run(ctx, [request], lambda rs: len(rs) >= 1)
    data = _data(responses)
    ctx.equal(len(data), 1, "responses")
    from kserve_v2.conformance.cases.common import decode_grpc

    out = decode_grpc(ctx, data[0].infer_response).as_numpy("OUTPUT0")
    ctx.equal(out.tolist(), [[4, 5]], "OUTPUT0")


@case(
    "grpc.stream.unknown-model",
    "A request for an unknown model gets an error_message; the stream still serves",
    ERROR_MESSAGE,
    Level.PRACTICE,
    protocols=GRPC,
    models=("identity_int32",),
    note="Errors are per response (error_message), so one bad request need not end the stream.",
)
def _(ctx: Context) -> None:
    bad = _identity(ctx, "u1", 1)
    bad.model_name = "conformance_no_such_model"
    responses = _run(
        ctx, [bad, _identity(ctx, "u2", 2)], lambda rs: len(rs) >= 2 or len(_data(rs)) >= 1
    )
    ctx.check(any(r.error_message for r in responses), "no error_message for the unknown model")
    ctx.equal([r.infer_response.id for r in _data(responses)], ["u2"], "answered requests")


@case(
    "grpc.stream.triton-grpc-error",
    "With the triton_grpc_error header, an error ends the stream with an error status",
    Spec(
        PROTOCOLS_GUIDE,
        "GRPC Status Codes",
        "Upon encountering an error, Triton returns the "
        "appropriate GRPC error code and subsequently closes the stream.",
    ),
    Level.SHOULD,
    protocols=GRPC,
    models=("failing",),
    note="Triton-specific; a server that ignores the header (errors as error_message, "
    "stream open) is skipped.",
)
def _(ctx: Context) -> None:
    _need_stream(ctx)
    request = ctx.pb.ModelInferRequest(model_name="failing", id="g1")
    request.inputs.add(name="INPUT0", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.asarray([1], "<i4").tobytes())
    responses, error = ctx.stream_rpc(
        [request], expect=lambda rs: len(rs) >= 1, metadata=[("triton_grpc_error", "true")]
    )
    if error is None and any(r.error_message for r in responses):
        ctx.skip("the server ignores triton_grpc_error (it answered with error_message)")
    ctx.check(isinstance(error, RpcError), "the stream ended OK after an error")


# -- decoupled models outside the stream --------------------------------------------------------

REFUSED = Spec(
    DECOUPLED,
    "Running Inference on Decoupled Models",
    "For decoupled models, Triton's HTTP endpoint cannot be used for running inference as it "
    "supports exactly one response per request.",
)


@case(
    "rest.decoupled.infer-refused",
    "HTTP inference on a decoupled model answering 2 responses is refused with an error object",
    REFUSED,
    Level.PRACTICE,
    protocols=HTTP,
    models=(MODEL,),
    note="One HTTP response cannot carry several inference responses; the server is expected "
    "to refuse rather than drop some.",
)
def _(ctx: Context) -> None:
    body = {
        "inputs": [
            {"name": "IN", "shape": [1], "datatype": "INT32", "data": [1]},
            {"name": "REPEAT", "shape": [1], "datatype": "INT32", "data": [2]},
        ]
    }
    expect_error_object(ctx, ctx.rest("POST", f"v2/models/{MODEL}/infer", json_body=body))


@case(
    "grpc.decoupled.unary-refused",
    "ModelInfer on a decoupled model answering 2 responses ends with an error status",
    Spec(
        DECOUPLED,
        "Running Inference on Decoupled Models",
        "Even standard ModelInfer RPC in the GRPC endpoint does not support decoupled responses.",
    ),
    Level.PRACTICE,
    protocols=GRPC,
    models=(MODEL,),
)
def _(ctx: Context) -> None:
    request = _repeat(ctx, "x1", 2)
    expect_grpc_error(ctx, ctx.rpc("ModelInfer", request))
