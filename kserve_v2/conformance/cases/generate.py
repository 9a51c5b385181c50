"""Triton's provisional generate extension (HTTP only): ``generate`` and ``generate_stream``.

No server advertises it (the document names no extension string), so these cases run when the
models are there; a server without the endpoints answers 404 for the path itself, which skips.
"""

from __future__ import annotations

import json
from typing import Any

from kserve_v2.conformance.cases.common import (
    expect_client_error_status,
    expect_error_object,
    expect_json,
)
from kserve_v2.conformance.context import Context, RestResponse
from kserve_v2.conformance.registry import case
from kserve_v2.conformance.spec import GENERATE, Level, Spec

HTTP = ("http",)
EXT = "generate"
ECHO = "text_echo"
STREAM = "text_generate"

RESPONSE = "Generate Response JSON Object"
STREAM_VS = "generate vs. generate_stream"
OK = Spec(
    GENERATE, RESPONSE, "A successful generate request is indicated by a 200 HTTP status code."
)
FAIL = Spec(
    GENERATE,
    "Generate Response JSON Error Object",
    "A failed generate request must be indicated by an HTTP error status (typically 400).",
)
FAIL_BODY = Spec(
    GENERATE,
    "Generate Response JSON Error Object",
    "The HTTP body must contain the `$generate_error_response` object.",
)


def _endpoint_problem(ctx: Context, stream: bool) -> str | None:
    """Why the server's generate (or generate_stream) endpoint is not the extension's: a
    plain generate request for the model that is there answers a client error (other than
    404, no endpoint). Learnt once per run; None when it is, or cannot be told."""
    endpoint = "generate_stream" if stream else "generate"
    facts = ctx.session.facts
    if endpoint not in facts:
        model = STREAM if stream else ECHO
        problem = None
        if ctx.session.model_problem(model) is None:
            response = ctx.rest(
                "POST", f"v2/models/{model}/{endpoint}", json_body={"text_input": "conformance"}
            )
            if 400 <= response.status < 500 and response.status != 404:
                problem = (
                    f"the server's v2/models/<model>/{endpoint} does not take the generate "
                    f'request object: {{"text_input": ...}} answers HTTP {response.status} '
                    f"({response.body[:120]!r})"
                )
        facts[endpoint] = problem
    known: str | None = facts[endpoint]
    return known


def _generate(
    ctx: Context, model: str, body: Any, stream: bool = False, basic: bool = False
) -> RestResponse:
    """POST ``body`` to the model's generate endpoint. Skips when the server has no such
    endpoint, and (unless ``basic``: the case that reports it) when the endpoint takes other
    requests than the extension's."""
    path = f"v2/models/{model}/generate" + ("_stream" if stream else "")
    endpoint = path.rsplit("/", 1)[1]
    problem = None if basic else _endpoint_problem(ctx, stream)
    if problem is not None:
        basic_case = "rest.generate-stream.content-type" if stream else "rest.generate.basic"
        ctx.skip(f"{problem}; {basic_case} reports it")
    response = ctx.rest("POST", path, json_body=body)
    if response.status == 404:
        # A 404 for a model the case knows is there means the path itself is unknown; for
        # another model (an unknown one, say) ask with the model that is there.
        known = response
        if model not in (ECHO, STREAM):
            own = STREAM if stream else ECHO
            known = ctx.rest(
                "POST", f"v2/models/{own}/{endpoint}", json_body={"text_input": "conformance"}
            )
        if known.status == 404 and b"unknown model" not in known.body.lower():
            ctx.skip(f"the server has no v2/models/<model>/{endpoint} endpoint (404)")
    return response


def _events(ctx: Context, response: RestResponse) -> list[dict[str, Any]]:
    """The JSON objects of the "data" fields of a text/event-stream body."""
    text = response.body.decode("utf-8", "replace").replace("\r\n", "\n")
    events = []
    for block in text.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")
        )
        if not data:
            continue
        try:
            events.append(json.loads(data))
        except ValueError as exc:
            ctx.fail(f"an event's data is not JSON ({exc}): {data[:200]!r}")
    return events


@case(
    "rest.generate.basic",
    "POST .../generate answers 200 with text_output",
    OK,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
    note="'text_echo' answers text_output = text_input.",
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _generate(ctx, ECHO, {"text_input": "hello conformance"}, basic=True))
    ctx.equal(body.get("text_output"), "hello conformance", "text_output")


@case(
    "rest.generate.fields",
    "The generate response names the model and its version",
    Spec(GENERATE, RESPONSE, '"model_name" : The name of the model used for inference.'),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _generate(ctx, ECHO, {"text_input": "x"}))
    ctx.equal(body.get("model_name"), ECHO, "model_name")
    ctx.check(isinstance(body.get("model_version"), str), f"model_version: {body!r:.200}")


@case(
    "rest.generate.id-echo",
    "The generate request's id comes back",
    Spec(
        GENERATE,
        "Generate Request JSON Object",
        '"id": An identifier for this request. '
        "Optional, but if specified this identifier must be returned in the response.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _generate(ctx, ECHO, {"id": "conformance-7", "text_input": "x"}))
    ctx.equal(body.get("id"), "conformance-7", "id")


@case(
    "rest.generate.content-type",
    "/generate answers Content-Type: application/json",
    Spec(
        GENERATE,
        STREAM_VS,
        "`/generate` returns exactly 1 response JSON object with a "
        "`Content-Type` of `application/json`",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
)
def _(ctx: Context) -> None:
    response = _generate(ctx, ECHO, {"text_input": "x"})
    ctx.check(
        response.content_type.startswith("application/json"),
        f"Content-Type is {response.content_type!r}",
    )


@case(
    "rest.generate.extra-properties",
    "Additional request properties reach the model as parameters or inputs",
    Spec(
        GENERATE,
        "Generate Request JSON Object",
        "Any additional properties in the request "
        "object are passed either as parameters or tensors based on model specification.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
    note="'text_echo' keeps the first max_tokens words when its optional input is given.",
)
def _(ctx: Context) -> None:
    body = expect_json(ctx, _generate(ctx, ECHO, {"text_input": "one two three", "max_tokens": 2}))
    ctx.equal(body.get("text_output"), "one two", "text_output")


@case(
    "rest.generate.parameters",
    'Request "parameters" reach the model',
    Spec(GENERATE, "Parameters", "Parameters are model-specific."),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(ECHO,),
)
def _(ctx: Context) -> None:
    body = expect_json(
        ctx, _generate(ctx, ECHO, {"text_input": "one two three", "parameters": {"max_tokens": 1}})
    )
    ctx.equal(body.get("text_output"), "one", "text_output")


def _error_cases(kind: str, title: str, model: str, body: Any, client_fault: bool = True) -> None:
    @case(
        f"rest.generate.error.{kind}",
        f"{title}: an HTTP error status",
        FAIL,
        Level.MUST,
        protocols=HTTP,
        extension=EXT,
        models=(ECHO,),
    )
    def _(ctx: Context) -> None:
        response = _generate(ctx, model, body)
        ctx.check(
            response.status >= 400,
            f"expected an error status, got {response.status}: {response.body[:200]!r}",
        )

    @case(
        f"rest.generate.error.{kind}.error-object",
        f"{title}: the body is an error object",
        FAIL_BODY,
        Level.MUST,
        protocols=HTTP,
        extension=EXT,
        models=(ECHO,),
    )
    def _(ctx: Context) -> None:
        response = _generate(ctx, model, body)
        if response.status < 400:
            # Checked by the status case; here only the body's form counts.
            obj = response.json()
            ctx.check(
                isinstance(obj, dict) and isinstance(obj.get("error"), str),
                f"not an error object: {obj!r:.200}",
            )
            return
        expect_error_object(ctx, response)

    if client_fault:

        @case(
            f"rest.generate.error.{kind}.status-4xx",
            f"{title}: a 4xx status",
            FAIL,
            Level.PRACTICE,
            protocols=HTTP,
            extension=EXT,
            models=(ECHO,),
        )
        def _(ctx: Context) -> None:
            expect_client_error_status(ctx, _generate(ctx, model, body), title)


_error_cases(
    "unknown-model",
    "generate on an unknown model",
    "conformance_no_such_model",
    {"text_input": "x"},
)
_error_cases("missing-text-input", "generate without text_input", ECHO, {"conformance": "x"})


@case(
    "rest.generate.error.multi-response-model",
    "generate on a model that answers several responses: an error status and error object",
    FAIL,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(STREAM,),
    note="/generate returns exactly one response; a model streaming several cannot be "
    "served by it, which is a failed request.",
)
def _(ctx: Context) -> None:
    response = _generate(ctx, STREAM, {"text_input": "one two"})
    ctx.check(
        response.status >= 400,
        f"HTTP {response.status} for a failed request: {response.body[:200]!r}",
    )
    expect_error_object(ctx, response)


# -- generate_stream -------------------------------------------------------------------------------


@case(
    "rest.generate-stream.content-type",
    "/generate_stream answers Content-Type: text/event-stream",
    Spec(
        GENERATE,
        STREAM_VS,
        "`/generate_stream` may return multiple responses based on the "
        "inference results, with a `Content-Type` of `text/event-stream; charset=utf-8`.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(STREAM,),
)
def _(ctx: Context) -> None:
    response = _generate(ctx, STREAM, {"text_input": "one two"}, stream=True, basic=True)
    ctx.equal(response.status, 200, "status")
    ctx.check(
        response.content_type.startswith("text/event-stream"),
        f"Content-Type is {response.content_type!r}",
    )


@case(
    "rest.generate-stream.events",
    'Each response is a "data" event holding a generate response object',
    Spec(
        GENERATE,
        STREAM_VS,
        "These responses will be sent as [Server-Sent Events]"
        "(https://html.spec.whatwg.org/multipage/server-sent-events.html#server-sent-events) "
        '(SSE), where each response will be a "data" chunk in the HTTP response body.',
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(STREAM,),
    note="'text_generate' streams its input word by word.",
)
def _(ctx: Context) -> None:
    response = _generate(ctx, STREAM, {"id": "s-1", "text_input": "one two three"}, stream=True)
    events = _events(ctx, response)
    ctx.equal(
        "".join(str(e.get("text_output", "")) for e in events),
        "one two three",
        "text_output of the events, joined",
    )
    ctx.equal({e.get("id") for e in events}, {"s-1"}, "ids of the events")
    ctx.equal({e.get("model_name") for e in events}, {STREAM}, "model_name of the events")


@case(
    "rest.generate-stream.with-client",
    "The project's client reads the event stream",
    OK,
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(STREAM,),
)
def _(ctx: Context) -> None:
    _generate(ctx, STREAM, {"text_input": "probe"}, stream=True)  # skips without the endpoint
    events = list(ctx.http.generate_stream(STREAM, {"text_input": "alpha beta"}))
    ctx.equal(
        "".join(str(e.get("text_output", "")) for e in events), "alpha beta", "text_output joined"
    )


@case(
    "rest.generate-stream.error-before-inference",
    "A request failing before inference answers an error status with a JSON error object",
    Spec(
        GENERATE,
        STREAM_VS,
        "If the request fails before inference begins, then a JSON error "
        "will be returned with `Content-Type` of `application/json`, similar to errors from "
        "other endpoints with the status code set to an error.",
    ),
    Level.MUST,
    protocols=HTTP,
    extension=EXT,
    models=(STREAM,),
)
def _(ctx: Context) -> None:
    response = _generate(ctx, "conformance_no_such_model", {"text_input": "x"}, stream=True)
    expect_error_object(ctx, response)
    ctx.check(
        response.content_type.startswith("application/json"),
        f"Content-Type is {response.content_type!r}",
    )
