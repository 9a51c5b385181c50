"""Server metadata (name, version, extensions), or a model's platform, versions, inputs and
outputs.

examples:
  kserve-v2 metadata
  kserve-v2 metadata simple
  kserve-v2 metadata simple --json --url grpc://localhost:8001
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL", help="a model (default: the server)")
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")


def run(args: argparse.Namespace) -> int:
    style = _common.Style(_common.wants_color(args, sys.stdout))
    with _common.client(args) as client:
        if not args.model:
            server = client.server_metadata()
            data: dict[str, Any] = {
                "name": server.name,
                "version": server.version,
                "extensions": list(server.extensions),
            }
            lines = [
                f"{style('server', 'bold')} {server.name} {server.version}",
                f"{style('extensions', 'bold')} ({len(server.extensions)}):",
                *(f"  {ext}" for ext in server.extensions),
            ]
            _common.emit(args, data, "\n".join(lines))
            return 0
        model = client.model_metadata(args.model, args.model_version)
    data = {
        "name": model.name,
        "platform": model.platform,
        "versions": list(model.versions),
        "inputs": [
            {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in model.inputs
        ],
        "outputs": [
            {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in model.outputs
        ],
    }
    rows = [("input", t.name, t.datatype, list(t.shape)) for t in model.inputs]
    rows += [("output", t.name, t.datatype, list(t.shape)) for t in model.outputs]
    lines = [
        f"{style('model', 'bold')} {model.name}  platform {model.platform or '?'}  "
        f"versions {', '.join(model.versions) or '?'}",
        "",
        _common.format_table(("", "name", "datatype", "shape"), rows, style=style),
    ]
    _common.emit(args, data, "\n".join(lines))
    return 0
