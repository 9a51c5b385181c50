"""Build an inference request body of the binary-data extension from --input values (the
syntax of `infer`, offline: literals take JSON's datatype unless :DATATYPE says), and print
its Inference-Header-Content-Length, so that curl (or anything) can send it.

The body goes to --body FILE, or to stdout when that is not a terminal; the header length and
a matching curl command go to stderr (to stdout with --body).

examples:
  kserve-v2 encode -i INPUT0=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]:INT32 \\
      -i INPUT1=[[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]]:INT32 --model simple --body body.bin
  curl -s -i -H 'Content-Type: application/octet-stream' \\
      -H 'Inference-Header-Content-Length: 231' --data-binary @body.bin \\
      http://localhost:8000/v2/models/simple/infer > response.http
  kserve-v2 decode response.http
"""

from __future__ import annotations

import argparse
import sys

from kserve_v2.cli import _common, _tensors

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("output",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _tensors.add_input_arguments(parser, generated=False)
    parser.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="NAME[:N]",
        help="ask for this output (NAME:N: top N classes); repeatable",
    )
    parser.add_argument(
        "-p", "--param", action="append", default=[], metavar="KEY=VALUE", help="a parameter"
    )
    parser.add_argument("--request-id", default="", metavar="ID")
    parser.add_argument("--json-data", action="store_true", help="tensors as JSON (no binary part)")
    parser.add_argument(
        "--json-outputs", action="store_true", help="ask for the outputs as JSON, not binary"
    )
    parser.add_argument("--model", default="MODEL", help="the model, for the curl command shown")
    parser.add_argument("--body", metavar="FILE", help="write the body here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    from kserve_v2 import InferRequest
    from kserve_v2.rest import codec

    specs = [_tensors.parse_input(text) for text in args.input]
    if not specs:
        raise _common.CLIError("give the inputs with --input NAME=VALUE")
    if args.body:
        _common.check_output_file(args.body, "--body")
    inputs = _tensors.build_inputs(specs, None, shapes=_tensors.parse_shapes(args.shape))
    request = InferRequest(
        model_name=args.model,
        inputs=tuple(inputs),
        outputs=tuple(_tensors.parse_outputs(args.output)),
        id=args.request_id,
        parameters=_common.parse_key_values(args.param, "--param"),
    )
    body = codec.encode_infer_request(
        request, binary_inputs=not args.json_data, binary_outputs=not args.json_outputs
    )
    headers = dict(body.headers)
    header_length = headers.get(codec.HEADER_LENGTH)
    data = body.join()
    if args.body:
        with _common.writing(args.body, "--body"), open(args.body, "wb") as f:
            f.write(data)
    elif sys.stdout.isatty():
        raise _common.CLIError("the body is binary: give --body FILE, or redirect stdout")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    # Without --body the body went to stdout: curl reads it from a pipe (@-).
    target = args.body or "-"
    curl = (
        f"curl -s -i -H 'Content-Type: {headers.get('Content-Type')}'"
        + (f" -H '{codec.HEADER_LENGTH}: {header_length}'" if header_length else "")
        + f" --data-binary @{target} http://localhost:8000/v2/models/{args.model}/infer"
    )
    record = {
        "content_type": headers.get("Content-Type"),
        "header_length": int(header_length) if header_length else None,
        "content_length": len(data),
        "body": args.body,
        "curl": curl,
    }
    info = sys.stdout if args.body else sys.stderr
    if args.json:
        _common.emit(args, record, "", out=info)
    else:
        lines = [
            f"{codec.HEADER_LENGTH}: {header_length}"
            if header_length
            else "JSON body (no binary part)",
            f"Content-Length: {len(data)}",
            curl if args.body else f"send it with: kserve-v2 encode ... | {curl}",
        ]
        info.write("\n".join(lines) + "\n")
    return 0
