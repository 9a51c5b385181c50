"""Unload a model (model-repository extension).

examples:
  kserve-v2 unload simple
  kserve-v2 unload my_ensemble --dependents
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from kserve_v2.cli import _common

if TYPE_CHECKING:
    from kserve_v2 import Client

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="return at once (the server unloads in the background)",
    )
    parser.add_argument(
        "--dependents",
        action="store_true",
        help="also unload the models loaded with it (an ensemble's parts)",
    )


def _state(client: Client, model: str) -> str:
    states = [m.state for m in client.repository_index() if m.name == model]
    return states[0] if states else ""


def run(args: argparse.Namespace) -> int:
    import time

    with _common.client(args) as client:
        client.unload_model(args.model, unload_dependents=args.dependents)
        state = ""
        if not args.no_wait:
            # Triton answers before the model is gone: wait (at most --timeout) until it is.
            deadline = time.monotonic() + (args.timeout or 30.0)
            state = _state(client, args.model)
            while state in ("UNLOADING", "READY") and time.monotonic() < deadline:
                time.sleep(0.05)
                state = _state(client, args.model)
    data = {"model": args.model, "unloaded": True, "state": state}
    _common.emit(args, data, f"unloaded {args.model}" + (f" ({state})" if state else ""))
    return 0
