"""The ``kserve-v2`` command.

Each subcommand lives in its own module, named in :data:`COMMANDS`, with two functions:
``add_arguments(parser)`` declares its options and ``run(args) -> int`` does the work. Only
the chosen subcommand's ``run`` imports anything heavy, so ``kserve-v2 --help`` stays fast.

Example::

    $ kserve-v2 conformance --http http://localhost:8000 --grpc localhost:8001 --report out.html
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final

__all__ = ["COMMANDS", "build_parser", "main"]

#: subcommand -> (module, one-line help). New commands add a line here.
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "conformance": (
        "kserve_v2.cli.conformance",
        "check a KServe v2 / Open Inference Protocol server against the specs",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand's options."""
    from kserve_v2.version import __version__

    parser = argparse.ArgumentParser(
        prog="kserve-v2",
        description="Tools for KServe v2 / Open Inference Protocol servers.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__.split("\n\n")[0] if module.__doc__ else help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog="\n\n".join(module.__doc__.split("\n\n")[1:]) if module.__doc__ else None,
        )
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kserve-v2`` with ``argv`` (default: the command line); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    status: int = args._module.run(args)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
