"""The models of the repository, loaded or not, with their state (model-repository
extension).

examples:
  kserve-v2 models
  kserve-v2 models --ready --json
"""

from __future__ import annotations

import argparse
import sys

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ready", action="store_true", help="only the models ready for inference")


def run(args: argparse.Namespace) -> int:
    with _common.client(args) as client:
        models = client.repository_index(ready_only=args.ready)
    data = [
        {"name": m.name, "version": m.version, "state": m.state, "reason": m.reason} for m in models
    ]
    style = _common.Style(_common.wants_color(args, sys.stdout))

    def state(text: str) -> str:
        return style(text, "green") if text == "READY" else style(text, "yellow")

    table = _common.format_table(
        ("model", "version", "state", "reason"),
        [(m.name, m.version or "-", state(m.state or "?"), m.reason) for m in models],
        style=style,
    )
    _common.emit(args, data, f"{table}\n{len(models)} model(s)")
    return 0
