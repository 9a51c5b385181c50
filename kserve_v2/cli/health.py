"""Is the server live and ready, and (with MODEL) is that model ready?

The exit status is 0 when everything asked about is live and ready, 1 otherwise, so it works
in scripts and readiness probes.

examples:
  kserve-v2 health
  kserve-v2 health simple --url grpc://localhost:8001
  kserve-v2 health --json
"""

from __future__ import annotations

import argparse
import sys

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL", help="also ask about this model")
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")


def run(args: argparse.Namespace) -> int:
    with _common.client(args) as client:
        data: dict[str, object] = {
            "url": args.url,
            "live": client.is_server_live(),
            "ready": client.is_server_ready(),
        }
        if args.model:
            data["model"] = args.model
            data["model_ready"] = client.is_model_ready(args.model, args.model_version)
    style = _common.Style(_common.wants_color(args, sys.stdout))

    def yes(flag: object) -> str:
        return style("yes", "green") if flag else style("no", "red", "bold")

    lines = [
        f"server {args.url}",
        f"  live:  {yes(data['live'])}",
        f"  ready: {yes(data['ready'])}",
    ]
    if args.model:
        version = f" (version {args.model_version})" if args.model_version else ""
        lines.append(f"model {args.model}{version} ready: {yes(data['model_ready'])}")
    _common.emit(args, data, "\n".join(lines))
    return 0 if all(v for k, v in data.items() if k in ("live", "ready", "model_ready")) else 1
