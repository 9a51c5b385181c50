"""Inference over a gRPC bidirectional stream (ModelStreamInfer): each response is printed as
it arrives, with its final flag; decoupled models answer one request with any number of
responses. An error response is printed in its place and the stream goes on (the exit status
is then 1). Once the requests are sent the sending side is ended, and the command waits at
most --timeout for the responses still due (servers other than Triton mark no final response:
their stream ends after their last one).

The inputs and options are those of `infer`. --repeat N sends the request N times on the same
stream (with --sequence-id, the first starts the sequence and the last ends it). With --json
each response is one JSON object per line (JSON Lines), as it arrives.

examples:
  kserve-v2 stream repeat_decoupled -i IN=[1,2,3] -i REPEAT=[3] --url grpc://localhost:8001
  kserve-v2 stream sequence_accumulate -i INPUT=[1] --sequence-id 42 --repeat 4 --url grpc://localhost:8001
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TextIO

from kserve_v2.cli import _common, _streams, _tensors
from kserve_v2.errors import ServerError

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    _tensors.add_request_arguments(parser)
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="send the request N times (default 1)"
    )
    parser.add_argument(
        "--no-metadata",
        action="store_true",
        help="do not ask the model's metadata (every input must be given)",
    )


def run(args: argparse.Namespace) -> int:
    from kserve_v2.cli.infer import prepare_inputs

    if not args.url.startswith("grpc"):
        raise _common.CLIError(
            f"streams are gRPC only, and --url is {args.url}",
            hint="use --url grpc://host:8001 (Triton's gRPC port)",
        )
    if args.repeat < 1:
        raise _common.CLIError("--repeat must be at least 1")
    style = _common.Style(_common.wants_color(args, sys.stdout))
    kwargs = _tensors.request_kwargs(args)
    out = sys.stdout
    count = 0
    with _common.client(args) as client:
        inputs, _ = prepare_inputs(args, client, args.model)
        outputs = _tensors.parse_outputs(args.output) or None
        started = time.perf_counter()
        failed = 0
        # Triton's empty final response shows where a decoupled model's answer ends; other
        # servers would take the request for it as a parameter for the model, and not answer.
        with client.stream(
            enable_empty_final_response=_streams.flags_final_responses(client)
        ) as stream:
            ids = []
            for index in range(args.repeat):
                call = dict(kwargs)
                if args.sequence_id is not None and args.repeat > 1:
                    call["sequence_start"] = args.sequence_start or index == 0
                    call["sequence_end"] = args.sequence_end or index == args.repeat - 1
                if args.repeat > 1 and not args.request_id:
                    call["request_id"] = f"{index + 1}"
                elif args.repeat > 1:
                    call["request_id"] = f"{args.request_id}-{index + 1}"
                stream.send(args.model, inputs, outputs=outputs, **call)
                ids.append(index)
            for result in _streams.responses_until_over(stream):
                count += 1
                elapsed = time.perf_counter() - started
                if isinstance(result, ServerError):
                    failed += 1
                    _print_error(args, out, style, count, elapsed, result)
                    continue
                if args.json:
                    record = {
                        "response": count,
                        "elapsed_s": round(elapsed, 6),
                        "final": bool(result.final),
                        **_tensors.result_data(result),
                    }
                    out.write(json.dumps(_common.to_jsonable(record)) + "\n")
                else:
                    flag = style("final", "green", "bold") if result.final else "not final"
                    head = f"response {count}  {elapsed * 1000:.1f} ms  id {result.id}  {flag}"
                    out.write(style(head, "bold") + "\n")
                    body = _tensors.result_text(result, style=style, title=False)
                    if not result.outputs and result.parameters.get("triton_final_response"):
                        body = "  (empty final response)"
                    if body:
                        out.write(body + "\n")
                out.flush()
    if not args.json:
        errors = f", {failed} of them error(s)" if failed else ""
        out.write(f"{count} response(s) to {len(ids)} request(s){errors}\n")
    return 1 if failed else 0


def _print_error(
    args: argparse.Namespace,
    out: TextIO,
    style: _common.Style,
    count: int,
    elapsed: float,
    error: ServerError,
) -> None:
    """An error response, in its place among the others (the stream goes on after it)."""
    if args.json:
        record = {"response": count, "elapsed_s": round(elapsed, 6), "error": error.message}
        out.write(json.dumps(record) + "\n")
    else:
        head = f"response {count}  {elapsed * 1000:.1f} ms  " + style("error", "red", "bold")
        out.write(style(head, "bold") + f"\n  {error.message}\n")
    out.flush()
