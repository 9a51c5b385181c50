"""Load or reload a model (model-repository extension; the server must run with
``--model-control-mode=explicit``).

examples:
  kserve-v2 load simple
  kserve-v2 load simple --config '{"max_batch_size": 4}'
  kserve-v2 load uploaded --config @config.json --file 1/model.py=./model.py
"""

from __future__ import annotations

import argparse
import json

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument(
        "--config",
        metavar="JSON|@FILE",
        help="a model configuration (JSON text, or @file) to use instead of the repository's",
    )
    parser.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH=LOCAL",
        help="upload a model file: PATH inside the model directory (1/model.py), LOCAL the "
        "file here; repeatable (needs --config)",
    )


def run(args: argparse.Namespace) -> int:
    config = None
    if args.config:
        text = args.config
        if text.startswith("@"):
            text = _common.read_file(text[1:], "--config").decode("utf-8", "replace")
        try:
            config = json.loads(text)
        except ValueError as exc:
            raise _common.CLIError(f"--config is not valid JSON: {exc}") from None
    files = {}
    for item in args.file:
        path, sep, local = item.partition("=")
        if not sep or not path or not local:
            raise _common.CLIError(f"--file wants PATH=LOCAL, not {item!r}")
        files[path] = _common.read_file(local, f"--file {path}")
    with _common.client(args) as client:
        client.load_model(args.model, config=config, files=files or None)
        ready = client.is_model_ready(args.model)
    data = {"model": args.model, "loaded": True, "ready": ready}
    _common.emit(args, data, f"loaded {args.model} (ready: {'yes' if ready else 'no'})")
    return 0
