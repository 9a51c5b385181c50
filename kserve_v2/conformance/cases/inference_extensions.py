"""Triton extensions that change inference: classification, sequence, schedule policy and
custom parameters, over REST and gRPC."""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from typing import Any

import numpy as np

from kserve_v2.conformance.cases.common import (
    expect_error_object,
    expect_grpc_error,
    expect_json,
    output_array,
)
from kserve_v2.conformance.context import Context
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import (
    CLASSIFICATION,
    PARAMETERS,
    SCHEDULE,
    SEQUENCE,
    Level,
    Spec,
)
from kserve_v2.errors import ServerError
from kserve_v2.messages import InferResult
from kserve_v2.parameters import ParameterValue
from kserve_v2.tensors import RequestedOutput

HTTP = ("http",)
GRPC = ("grpc",)
BOTH = ("http", "grpc")

# -- classification ----------------------------------------------------------------------------

SCORES = np.array([0.5, 3.0, 1.5, 9.0, 2.0, 7.5, 0.0, 4.0, 6.0, 1.0], dtype=np.float32)
LABELS = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep", "goat", "duck", "frog"]
TOP3 = [3, 5, 8]  # indices of the three highest scores, highest first

COUNT = Spec(
    CLASSIFICATION,
    "Classification Extension",
    "The \\<count\\> dimension of the returned tensor will equal the “count” value specified "
    "in the classification parameter.",
)
TOP_N = Spec(
    CLASSIFICATION,
    "Classification Extension",
    "When the classification parameter is used, Triton will determine the top-n classifications "
    "as the n highest-valued elements in the output tensor compared using the output tensor’s "  # noqa: RUF001 (quoted verbatim)
    "data type.",
)
FORMAT = Spec(
    CLASSIFICATION,
    "Classification Extension",
    "The format of the returned string will be “\\<value\\>:\\<index\\>[:\\<label\\>]”, where "
    "\\<index\\> is the index of the class in the model output tensor, \\<value\\> is the value "
    "associated with that index in the model output, and the \\<label\\> associated with that "
    "index is optional.",
)
BYTES_TYPE = Spec(
    CLASSIFICATION,
    "Classification Extension",
    "For such an output the returned tensor will not be the shape and type produced by the "
    "model, but will instead be type BYTES with shape [ batch-size, \\<count\\> ] where each "
    "element returns the classification index and label as a single string.",
)
LABELLED = Spec(
    CLASSIFICATION,
    "Classification Extension",
    "If the model has labels associated with those indices, the returned tensor will be [ "
    "“10:2:apple”, “5:1:pickle” ].",
)


def _classify(ctx: Context, protocol: str, count: int, binary: bool = False) -> InferResult:
    client = ctx.client(protocol)
    return client.infer(
        "classify",
        {"INPUT0": SCORES},
        outputs=[RequestedOutput("OUTPUT0", class_count=count)],
        binary=binary,  # gRPC ignores it: tensors always travel raw there
    )


def _entries(ctx: Context, result: InferResult) -> list[list[str]]:
    """The classification strings, split at ':'."""
    out = output_array(ctx, result, "OUTPUT0").reshape(-1)
    entries = []
    for item in out:
        text = item.decode() if isinstance(item, bytes) else str(item)
        entries.append(text.split(":"))
    return entries


def _classification_cases(protocol: str, prefix: str) -> None:
    protocols = (protocol,)

    @case(
        f"{prefix}.classification.count",
        "Asking for 3 classes returns 3 strings",
        COUNT,
        Level.MUST,
        protocols=protocols,
        extension="classification",
        models=("classify",),
    )
    def _(ctx: Context) -> None:
        result = _classify(ctx, protocol, 3)
        ctx.equal(list(result.output("OUTPUT0").shape)[-1:], [3], "last dimension")

    @case(
        f"{prefix}.classification.datatype",
        "The classification output is BYTES",
        BYTES_TYPE,
        Level.MUST,
        protocols=protocols,
        extension="classification",
        models=("classify",),
    )
    def _(ctx: Context) -> None:
        ctx.equal(_classify(ctx, protocol, 2).output("OUTPUT0").datatype, "BYTES", "datatype")

    @case(
        f"{prefix}.classification.top-n",
        "The classes are the highest values, highest first",
        TOP_N,
        Level.MUST,
        protocols=protocols,
        extension="classification",
        models=("classify",),
    )
    def _(ctx: Context) -> None:
        entries = _entries(ctx, _classify(ctx, protocol, 3))
        indices = [int(e[1]) if len(e) > 1 and e[1].isdigit() else e for e in entries]
        ctx.equal(indices, TOP3, "indices")

    @case(
        f"{prefix}.classification.format",
        "Each string is <value>:<index>[:<label>]",
        FORMAT,
        Level.MUST,
        protocols=protocols,
        extension="classification",
        models=("classify",),
    )
    def _(ctx: Context) -> None:
        for entry, index in zip(_entries(ctx, _classify(ctx, protocol, 3)), TOP3, strict=True):
            ctx.check(len(entry) in (2, 3), f"{':'.join(entry)!r} is not value:index[:label]")
            ctx.equal(float(entry[0]), float(SCORES[index]), f"value of class {index}")

    @case(
        f"{prefix}.classification.labels",
        "A labelled model's classes carry their labels",
        LABELLED,
        Level.MUST,
        protocols=protocols,
        extension="classification",
        models=("classify",),
    )
    def _(ctx: Context) -> None:
        entries = _entries(ctx, _classify(ctx, protocol, 3))
        ctx.equal(
            [e[2] if len(e) == 3 else None for e in entries], [LABELS[i] for i in TOP3], "labels"
        )


_classification_cases("http", "rest")
_classification_cases("grpc", "grpc")


@case(
    "rest.classification.binary",
    "A classification output requested in binary form decodes to the same strings",
    FORMAT,
    Level.MUST,
    protocols=HTTP,
    extension="classification",
    models=("classify",),
)
def _(ctx: Context) -> None:
    binary = _entries(ctx, _classify(ctx, "http", 2, binary=True))
    text = _entries(ctx, _classify(ctx, "http", 2, binary=False))
    ctx.equal(binary, text, "binary vs JSON classification")


@case(
    "rest.classification.json-number",
    "The classification parameter is a JSON number in $request_output parameters",
    Spec(
        CLASSIFICATION,
        "HTTP/REST",
        "“classification” : `$number` indicating the number of "
        "classes that should be returned for the output.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension="classification",
    models=("classify",),
)
def _(ctx: Context) -> None:
    body = {
        "inputs": [{"name": "INPUT0", "shape": [10], "datatype": "FP32", "data": SCORES.tolist()}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
    }
    obj = expect_json(ctx, ctx.rest("POST", "v2/models/classify/infer", json_body=body))
    data = obj["outputs"][0].get("data") if obj.get("outputs") else None
    ctx.check(isinstance(data, list) and len(data) == 2, f"data: {data!r}")
    assert isinstance(data, list)
    ctx.equal([str(d).split(":")[1] for d in data], ["3", "5"], "indices")


# -- sequence ------------------------------------------------------------------------------------

SEQ_ID = Spec(
    SEQUENCE,
    "Sequence Extension",
    "All inference requests that belong to the same sequence must use the same sequence ID.",
)
SEQ_START = Spec(
    SEQUENCE,
    "Sequence Extension",
    '"sequence_start" : boolean value if set to true in a request indicates that the request is '
    "the first in a sequence.",
)
SEQ_NEEDS_ID = Spec(
    SEQUENCE,
    "Sequence Extension",
    'If set the "sequence_id" parameter must be set to a non-zero or non-empty string value.',
)
SEQ_STREAM = Spec(
    SEQUENCE,
    "GRPC",
    "In addition to supporting the sequence parameters described above, the GRPC API adds a "
    "streaming version of the inference API to allow a sequence of inference requests to be "
    "sent over the same GRPC stream.",
)
_ids = itertools.count((int(time.time() * 1000) % (1 << 40)) * 64 + os.getpid() % 64)


def _sequence_id() -> int:
    """A sequence id no earlier run used (sequences outlive runs on the server)."""
    return next(_ids) + 1


def _expect_sequence_refused(ctx: Context, parameters: dict[str, Any]) -> None:
    """A one-step REST request to the sequence model, with these request parameters, is
    refused with an error object."""
    body = {
        "parameters": parameters,
        "inputs": [{"name": "INPUT", "shape": [1], "datatype": "INT32", "data": [1]}],
    }
    expect_error_object(
        ctx, ctx.rest("POST", "v2/models/sequence_accumulate/infer", json_body=body)
    )


def _step(
    ctx: Context,
    protocol: str,
    model: str,
    seq: int | str,
    value: int,
    *,
    start: bool = False,
    end: bool = False,
) -> int:
    result = ctx.client(protocol).infer(
        model,
        {"INPUT": np.array([value], np.int32)},
        sequence_id=seq,
        sequence_start=start,
        sequence_end=end,
    )
    return int(output_array(ctx, result, "OUTPUT").reshape(-1)[0])


def _sequence_cases(protocol: str, prefix: str) -> None:
    protocols = (protocol,)

    @case(
        f"{prefix}.sequence.accumulate",
        "Requests with one sequence_id, start to end, reach the same sequence state",
        SEQ_ID,
        Level.MUST,
        protocols=protocols,
        extension="sequence",
        models=("sequence_accumulate",),
    )
    def _(ctx: Context) -> None:
        seq = _sequence_id()
        sums = [
            _step(ctx, protocol, "sequence_accumulate", seq, 1, start=True),
            _step(ctx, protocol, "sequence_accumulate", seq, 2),
            _step(ctx, protocol, "sequence_accumulate", seq, 3, end=True),
        ]
        ctx.equal(sums, [1, 3, 6], "running sums")

    @case(
        f"{prefix}.sequence.interleaved",
        "Two sequences interleaved keep separate state",
        SEQ_ID,
        Level.MUST,
        protocols=protocols,
        extension="sequence",
        models=("sequence_accumulate",),
    )
    def _(ctx: Context) -> None:
        a, b = _sequence_id(), _sequence_id()
        model = "sequence_accumulate"
        sums = [
            _step(ctx, protocol, model, a, 1, start=True),
            _step(ctx, protocol, model, b, 100, start=True),
            _step(ctx, protocol, model, a, 2, end=True),
            _step(ctx, protocol, model, b, 200, end=True),
        ]
        ctx.equal(sums, [1, 100, 3, 300], "running sums of a, b, a, b")

    @case(
        f"{prefix}.sequence.restart",
        "sequence_start resets the sequence's state",
        SEQ_START,
        Level.MUST,
        protocols=protocols,
        extension="sequence",
        models=("sequence_accumulate",),
    )
    def _(ctx: Context) -> None:
        seq = _sequence_id()
        model = "sequence_accumulate"
        first = [
            _step(ctx, protocol, model, seq, 5, start=True),
            _step(ctx, protocol, model, seq, 5, end=True),
        ]
        second = _step(ctx, protocol, model, seq, 7, start=True, end=True)
        ctx.equal([*first, second], [5, 10, 7], "sums")

    @case(
        f"{prefix}.sequence.string-id",
        "A string sequence_id identifies a sequence",
        Spec(
            SEQUENCE,
            "Sequence Extension",
            '"sequence_id" : a string or uint64 value that '
            "identifies the sequence to which a request belongs.",
        ),
        Level.MUST,
        protocols=protocols,
        extension="sequence",
        models=("sequence_accumulate_string",),
        note="A server may (not must) advertise 'sequence(string_id)'. When it does not, "
        "a refused string id skips the case; when it does, string ids must work.",
    )
    def _(ctx: Context) -> None:
        seq = f"conformance-{uuid.uuid4()}"
        model = "sequence_accumulate_string"
        advertised = "sequence(string_id)" in ctx.session.extensions()
        try:
            first = _step(ctx, protocol, model, seq, 4, start=True)
        except ServerError as exc:
            if advertised:
                raise
            ctx.skip(f"string sequence ids are refused and not advertised: {exc}")
        sums = [first, _step(ctx, protocol, model, seq, 6, end=True)]
        ctx.equal(sums, [4, 10], "running sums")


_sequence_cases("http", "rest")
_sequence_cases("grpc", "grpc")


@case(
    "rest.sequence.start-without-id",
    "sequence_start without a sequence_id is refused with an error object",
    SEQ_NEEDS_ID,
    Level.PRACTICE,
    protocols=HTTP,
    extension="sequence",
    models=("sequence_accumulate",),
    note="The sentence binds the client; the server is expected to refuse the request.",
)
def _(ctx: Context) -> None:
    _expect_sequence_refused(ctx, {"sequence_start": True})


@case(
    "rest.sequence.id-zero-not-a-sequence",
    "A request with sequence_id 0 to a sequence model is refused with an error object",
    Spec(
        SEQUENCE,
        "Sequence Extension",
        'A sequence ID of 0 or "" indicates the inference request is not part of a sequence.',
    ),
    Level.PRACTICE,
    protocols=HTTP,
    extension="sequence",
    models=("sequence_accumulate",),
    note="A stateful model needs its requests in a sequence; 0 says there is none.",
)
def _(ctx: Context) -> None:
    _expect_sequence_refused(ctx, {"sequence_id": 0})


@case(
    "grpc.sequence.start-without-id",
    "sequence_start without a sequence_id ends with an error status",
    SEQ_NEEDS_ID,
    Level.PRACTICE,
    protocols=GRPC,
    extension="sequence",
    models=("sequence_accumulate",),
    note="The sentence binds the client; the server is expected to refuse the request.",
)
def _(ctx: Context) -> None:
    request = ctx.pb.ModelInferRequest(model_name="sequence_accumulate")
    request.inputs.add(name="INPUT", datatype="INT32", shape=[1])
    request.raw_input_contents.append(np.array([1], "<i4").tobytes())
    request.parameters["sequence_start"].bool_param = True
    expect_grpc_error(ctx, ctx.rpc("ModelInfer", request))


@case(
    "grpc.sequence.stream",
    "A sequence sent over one ModelStreamInfer stream keeps its state",
    SEQ_STREAM,
    Level.MUST,
    protocols=GRPC,
    extension="sequence",
    models=("sequence_accumulate",),
)
def _(ctx: Context) -> None:
    seq = _sequence_id()
    with ctx.grpc.stream() as stream:
        sums = []
        for value, start, end in ((1, True, False), (2, False, False), (3, False, True)):
            request = stream.send(
                "sequence_accumulate",
                {"INPUT": np.array([value], np.int32)},
                sequence_id=seq,
                sequence_start=start,
                sequence_end=end,
            )
            results = request.results(timeout=30)
            ctx.equal(len(results), 1, "responses per request")
            sums.append(int(results[0].as_numpy("OUTPUT").reshape(-1)[0]))
    ctx.equal(sums, [1, 3, 6], "running sums")


# -- schedule policy -------------------------------------------------------------------------------

PRIORITY = Spec(
    SCHEDULE,
    "Dynamic Batcher",
    '"priority" : int64 value indicating the priority of the request.',
)
PRIORITY_ZERO = Spec(
    SCHEDULE,
    "Dynamic Batcher",
    "Priority value zero indicates that the default priority level should be used (i.e. same "
    "behavior as not specifying the priority parameter).",
)
TIMEOUT = Spec(
    SCHEDULE,
    "Dynamic Batcher",
    '"timeout" : int64 value indicating the timeout value for the request, in microseconds.',
)


def _simple(ctx: Context, protocol: str, **kw: Any) -> None:
    inputs = {
        "INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
        "INPUT1": np.ones((1, 16), np.int32),
    }
    result = ctx.client(protocol).infer("simple", inputs, **kw)
    ctx.equal(output_array(ctx, result, "OUTPUT0")[0, :3].tolist(), [1, 2, 3], "OUTPUT0")


def _schedule_cases(protocol: str, prefix: str) -> None:
    protocols = (protocol,)
    note = "'simple' has a dynamic batcher with two priority levels."
    for name, title, spec, kw, case_note in (
        (
            "priority",
            "A request with priority 1 (the highest) is served",
            PRIORITY,
            {"priority": 1},
            note,
        ),
        (
            "priority-zero",
            "Priority 0 means the default priority",
            PRIORITY_ZERO,
            {"priority": 0},
            "",
        ),
        (
            "timeout",
            "A request with a generous timeout (60 s, in microseconds) is served",
            TIMEOUT,
            {"timeout_us": 60_000_000},
            "",
        ),
    ):

        @case(
            f"{prefix}.schedule.{name}",
            title,
            spec,
            Level.MUST,
            protocols=protocols,
            extension="schedule_policy",
            models=("simple",),
            note=case_note,
        )
        def _(ctx: Context, kw: dict[str, int] = kw) -> None:
            _simple(ctx, protocol, **kw)


_schedule_cases("http", "rest")
_schedule_cases("grpc", "grpc")


# -- parameters ------------------------------------------------------------------------------------

CUSTOM = Spec(
    PARAMETERS,
    "Parameters Extension",
    "The parameters extension allows an inference request to provide custom parameters that "
    "cannot be provided as inputs.",
)
PARAMS: dict[str, ParameterValue] = {
    "conformance_text": "hello",
    "conformance_number": 42,
    "conformance_flag": True,
}


def _echoed(ctx: Context, protocol: str) -> dict[str, Any]:
    result = ctx.client(protocol).infer(
        "params_echo", {"INPUT0": np.array([1], np.int32)}, parameters=PARAMS
    )
    raw = output_array(ctx, result, "PARAMS").reshape(-1)[0]
    try:
        echoed = json.loads(bytes(raw))
    except ValueError as exc:
        ctx.fail(f"PARAMS is not JSON: {exc}: {raw!r:.200}")
    ctx.check(isinstance(echoed, dict), f"PARAMS: {echoed!r:.200}")
    return dict(echoed)


def _parameter_cases(protocol: str, prefix: str) -> None:
    @case(
        f"{prefix}.parameters.reach-model",
        "Custom request parameters reach the model",
        CUSTOM,
        Level.MUST,
        protocols=(protocol,),
        extension="parameters",
        models=("params_echo",),
        note="'params_echo' returns the parameters its request carried, as JSON.",
    )
    def _(ctx: Context) -> None:
        echoed = _echoed(ctx, protocol)
        for key in PARAMS:
            ctx.check(key in echoed, f"{key} did not reach the model: {echoed!r:.300}")

    @case(
        f"{prefix}.parameters.types",
        "Parameter values keep their type (string, int, bool)",
        Spec(
            PARAMETERS,
            "HTTP/REST",
            "The following example shows how a request can include custom parameters.",
        ),
        Level.MUST,
        protocols=(protocol,),
        extension="parameters",
        models=("params_echo",),
    )
    def _(ctx: Context) -> None:
        echoed = _echoed(ctx, protocol)
        for key, value in PARAMS.items():
            ctx.equal(echoed.get(key), value, key)


_parameter_cases("http", "rest")
_parameter_cases("grpc", "grpc")


@case(
    "cross.parameters.same-on-both",
    "The same custom parameters reach the model alike over HTTP and gRPC",
    CUSTOM,
    Level.PRACTICE,
    protocols=BOTH,
    extension="parameters",
    models=("params_echo",),
    note="Both protocols carry the same parameters field.",
)
def _(ctx: Context) -> None:
    ctx.equal(_echoed(ctx, "grpc"), _echoed(ctx, "http"), "parameters seen by the model")
