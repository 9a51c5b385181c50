"""A model's configuration (model-configuration extension), as Triton's REST JSON on both
protocols.

examples:
  kserve-v2 config simple
  kserve-v2 config simple --url grpc://localhost:8001 --json | jq .max_batch_size
"""

from __future__ import annotations

import argparse

from kserve_v2.cli import _common

__all__ = ["OPTIONS", "add_arguments", "run"]

OPTIONS = ("connection", "output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument("--model-version", default="", metavar="V", help="the model's version")


def run(args: argparse.Namespace) -> int:
    from kserve_v2.cli.dump import pretty_json

    with _common.client(args) as client:
        config = client.model_config(args.model, args.model_version)
    _common.emit(args, config, lambda: pretty_json(config))
    return 0
