"""Shared-memory regions registered on the server (system and CUDA shared-memory
extensions).

examples:
  kserve-v2 shm status
  kserve-v2 shm status --region in0 --json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("status",), help="status: list the regions")
    parser.add_argument("--region", default="", metavar="NAME", help="only this region")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--system", action="store_true", help="system shared memory only")
    kind.add_argument("--cuda", action="store_true", help="CUDA shared memory only")


def run(args: argparse.Namespace) -> int:
    from kserve_v2.errors import ServerError

    data: dict[str, Any] = {}
    with _common.client(args) as client:
        if not args.cuda:
            data["system"] = client.system_shared_memory_status(args.region)
        if not args.system:
            try:
                data["cuda"] = client.cuda_shared_memory_status(args.region)
            except ServerError:
                if args.cuda:
                    raise
                data["cuda"] = []  # a server without CUDA: the system regions still count
    rows = [
        ("system", r.get("name", ""), r.get("key", ""), r.get("offset", 0), r.get("byte_size", 0))
        for r in data.get("system", [])
    ]
    rows += [
        ("cuda", r.get("name", ""), f"device {r.get('device_id', '?')}", "", r.get("byte_size", 0))
        for r in data.get("cuda", [])
    ]
    style = _common.Style(_common.wants_color(args, sys.stdout))
    table = _common.format_table(
        ("kind", "region", "key", "offset", "bytes"), rows, style=style, align="<<<>>"
    )
    _common.emit(args, data, f"{table}\n{len(rows)} region(s)")
    return 0
