"""Generate text: the generate extension over HTTP (generate_stream by default, tokens printed
as they arrive; --no-stream for one answer), or over gRPC a stream inference with
text_input/text_output tensors (what Triton's generate endpoint maps to).

--param KEY=VALUE adds a field to the request (over gRPC: the input of that name when the
model has one, else a request parameter). With --json: one JSON object per event (JSON Lines)
when streaming, else the answer.

examples:
  kserve-v2 generate text_generate --text "the quick brown fox"
  kserve-v2 generate text_echo --text hello --no-stream
  kserve-v2 generate text_generate --text "one two three" --param max_tokens=2 --url grpc://localhost:8001
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kserve_v2.cli import _common, _streams
from kserve_v2.errors import ServerError

if TYPE_CHECKING:
    from kserve_v2 import Client

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument("-t", "--text", required=True, help="the prompt (text_input)")
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another field of the request (max_tokens=16); repeatable",
    )
    parser.add_argument(
        "--no-stream", action="store_true", help="one answer (generate), not a stream"
    )
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")


def _grpc_events(
    client: Client, args: argparse.Namespace, fields: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """generate over gRPC: text_input (and the fields the model takes as inputs) as tensors on
    a stream; each response's text_output as an event."""
    import numpy as np

    from kserve_v2 import InferInput

    metadata = client.model_metadata(args.model, args.model_version)
    meta = {t.name: t for t in metadata.inputs}
    inputs = [
        InferInput("text_input", np.array([args.text.encode()], dtype=object), datatype="BYTES")
    ]
    parameters: dict[str, Any] = {}
    for key, value in fields.items():
        tensor = meta.get(key)
        if tensor is None:
            parameters[key] = value
            continue
        # The input checks the value against its datatype (an error names the input).
        data = [str(value) if tensor.datatype == "BYTES" else value]
        inputs.append(InferInput(key, data, datatype=tensor.datatype))
    with client.stream() as stream:
        stream.send(args.model, inputs, version=args.model_version, parameters=parameters or None)
        for result in _streams.responses_until_over(stream):
            if isinstance(result, ServerError):
                raise result
            event: dict[str, Any] = {"model_name": result.model_name}
            if result.model_version:
                event["model_version"] = result.model_version
            for output in result.outputs:
                if output.data is None:
                    continue
                values = [
                    v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                    for v in output.data.reshape(-1).tolist()
                ]
                event[output.name] = values[0] if len(values) == 1 else values
            yield event


def run(args: argparse.Namespace) -> int:
    fields = _common.parse_key_values(args.param, "--param")
    out = sys.stdout
    started = time.perf_counter()
    pieces: list[str] = []
    with _common.client(args) as client:
        if client.protocol == "http" and args.no_stream:
            answer = client.generate(
                args.model, {"text_input": args.text, **fields}, args.model_version
            )
            _common.emit(args, answer, str(answer.get("text_output", answer)))
            return 0
        if client.protocol == "http":
            events: Iterator[dict[str, Any]] = client.generate_stream(
                args.model, {"text_input": args.text, **fields}, args.model_version
            )
        else:
            events = _grpc_events(client, args, fields)
        answers = []
        for event in events:
            text = event.get("text_output")
            if args.no_stream:  # over gRPC: the pieces make one answer
                answers.append(event)
            elif args.json or not isinstance(text, str):
                out.write(json.dumps(_common.to_jsonable(event)) + "\n")
            else:
                out.write(text)
            if isinstance(text, str):
                pieces.append(text)
            out.flush()
    if args.no_stream:
        answer = answers[-1] if len(answers) == 1 else {"events": answers}
        if len(answers) > 1:
            answer["text_output"] = "".join(pieces)
        _common.emit(args, answer, str(answer.get("text_output", answer)))
    elif not args.json:
        elapsed = time.perf_counter() - started
        out.write("\n")
        sys.stderr.write(f"({len(pieces)} piece(s) in {elapsed * 1000:.0f} ms)\n")
    return 0
