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
from collections.abc import Callable
from typing import TYPE_CHECKING

from kserve_v2.cli import _common

if TYPE_CHECKING:
    from kserve_v2.hooks import WireHook, WireMessage

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL", help="also ask about this model")
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")


class _Answers:
    """A wire hook keeping the status of the last response (and passing messages on to
    ``--dump``'s): a "no" says what the server answered when that was not a plain no."""

    def __init__(self, dump: WireHook | None) -> None:
        self.dump = dump
        self.status: int | str | None = None

    def __call__(self, message: WireMessage) -> None:
        if message.direction == "receive":
            self.status = message.status
        if self.dump is not None:
            self.dump(message)

    def take(self) -> int | str | None:
        """The last status, when it is not one of a plain yes or no (200/503, gRPC OK)."""
        status, self.status = self.status, None
        return None if status in (None, 200, 503, "OK") else status


def run(args: argparse.Namespace) -> int:
    answers = _Answers(_common.dump_hook(args))
    data: dict[str, object] = {"url": args.url}
    statuses: dict[str, int | str] = {}

    def check(key: str, ask: Callable[[], bool]) -> None:
        data[key] = ask()
        status = answers.take()
        if not data[key] and status is not None:
            statuses[key] = status
            data[f"{key}_status"] = status

    with _common.client(args, hook=answers) as client:
        check("live", client.is_server_live)
        check("ready", client.is_server_ready)
        if args.model:
            data["model"] = args.model
            check("model_ready", lambda: client.is_model_ready(args.model, args.model_version))
    style = _common.Style(_common.wants_color(args, sys.stdout))
    protocol = "gRPC" if args.url.startswith("grpc") else "HTTP"

    def yes(key: str) -> str:
        if data[key]:
            return style("yes", "green")
        answered = f" (the server answered {protocol} {statuses[key]})" if key in statuses else ""
        return style("no", "red", "bold") + answered

    lines = [
        f"server {args.url}",
        f"  live:  {yes('live')}",
        f"  ready: {yes('ready')}",
    ]
    if args.model:
        version = f" (version {args.model_version})" if args.model_version else ""
        lines.append(f"model {args.model}{version} ready: {yes('model_ready')}")
    _common.emit(args, data, "\n".join(lines))
    return 0 if all(data[k] for k in ("live", "ready", "model_ready") if k in data) else 1
