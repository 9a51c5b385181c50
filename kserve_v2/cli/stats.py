"""Inference statistics of every model, or of one (statistics extension): counts and the
average time per request in the queue and in each compute phase.

examples:
  kserve-v2 stats
  kserve-v2 stats simple
  kserve-v2 stats simple --json      # the full statistics, as Triton's REST JSON
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run", "summary_row"]

OPTIONS = ("connection", "output")

_PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default="", metavar="MODEL", help="one model")
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")
    parser.add_argument(
        "--all", action="store_true", help="also list models that never ran an inference"
    )


def _avg_us(stat: Any) -> str:
    if not isinstance(stat, dict) or not stat.get("count"):
        return "-"
    return f"{int(stat.get('ns', 0)) / int(stat['count']) / 1000:.1f}"


def summary_row(model: dict[str, Any]) -> list[Any]:
    """A model's row: name, version, counts, then average µs per request of each phase."""
    inference = model.get("inference_stats", {})
    success = inference.get("success", {})
    return [
        model.get("name", "?"),
        model.get("version", ""),
        model.get("inference_count", 0),
        model.get("execution_count", 0),
        success.get("count", 0),
        inference.get("fail", {}).get("count", 0),
        _avg_us(success),
        *(_avg_us(inference.get(phase)) for phase in _PHASES),
    ]


def run(args: argparse.Namespace) -> int:
    with _common.client(args) as client:
        stats = client.model_statistics(args.model, args.model_version)
    models = stats.get("model_stats", [])
    shown = [m for m in models if args.model or args.all or m.get("inference_count")]
    style = _common.Style(_common.wants_color(args, sys.stdout))
    headers = (
        "model",
        "version",
        "inferences",
        "executions",
        "success",
        "fail",
        "avg µs",
        "queue µs",
        "input µs",
        "infer µs",
        "output µs",
    )
    table = _common.format_table(
        headers, [summary_row(m) for m in shown], style=style, align="<<>>>>>>>>>"
    )
    hidden = len(models) - len(shown)
    note = f"\n({hidden} model(s) with no inference yet: --all lists them)" if hidden else ""
    _common.emit(args, stats, table + note)
    return 0
