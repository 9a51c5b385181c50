"""The server's Prometheus metrics, parsed: one row per sample.

Triton serves them on another port than inference (8002 by default): ``--metrics-url`` says
where, else the --url host with port 8002 is asked.

examples:
  kserve-v2 metrics --metrics-url http://localhost:8002/metrics
  kserve-v2 metrics --filter nv_inference_count --label model=simple
  kserve-v2 metrics --raw
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-url",
        metavar="URL",
        help="where the metrics are (default: --url host, port 8002)",
    )
    parser.add_argument(
        "--filter", default="", metavar="TEXT", help="only metrics whose name contains TEXT"
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="only samples with this label value; repeatable",
    )
    parser.add_argument(
        "--raw", action="store_true", help="print the text exposition format as parsed"
    )


def _value(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


def run(args: argparse.Namespace) -> int:
    from kserve_v2.metrics import format_metrics

    labels = {k: str(v) for k, v in _common.parse_key_values(args.label, "--label").items()}
    with _common.client(args) as client:
        families = client.metrics(args.metrics_url)
    chosen = {
        name: family
        for name, family in families.items()
        if args.filter in name and (not labels or family.find(**labels))
    }
    if args.raw and not args.json:
        sys.stdout.write(format_metrics(chosen))
        return 0
    data: dict[str, Any] = {
        name: {
            "type": family.type,
            "help": family.help,
            "samples": [
                {"name": s.name, "labels": dict(s.labels), "value": s.value}
                for s in family.find(**labels)
            ],
        }
        for name, family in chosen.items()
    }
    rows = []
    for family in chosen.values():
        for sample in family.find(**labels):
            label_text = ",".join(f'{k}="{v}"' for k, v in sample.labels.items())
            rows.append((sample.name, label_text, _value(sample.value)))
    style = _common.Style(_common.wants_color(args, sys.stdout))
    table = _common.format_table(("metric", "labels", "value"), rows, style=style, align="<<>")
    _common.emit(args, data, f"{table}\n{len(rows)} sample(s) of {len(chosen)} metric(s)")
    return 0
