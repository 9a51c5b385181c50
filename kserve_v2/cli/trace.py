"""Get or set trace settings, globally or for one model (trace extension).

examples:
  kserve-v2 trace
  kserve-v2 trace get --model simple
  kserve-v2 trace set trace_rate=100 --model simple
  kserve-v2 trace set trace_rate=null --model simple      # back to the global setting
"""

from __future__ import annotations

import argparse

from kserve_v2.cli import _common, _settings

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _settings.add_settings_arguments(parser, "trace_rate=100")
    parser.add_argument("--model", default="", metavar="MODEL", help="one model's settings")


def run(args: argparse.Namespace) -> int:
    title = f"trace settings of {args.model}" if args.model else "trace settings"
    with _common.client(args) as client:
        return _settings.run_settings(
            args,
            title,
            lambda: client.trace_settings(args.model),
            lambda s: client.update_trace_settings(s, args.model),
            lists=("trace_level",),
        )
