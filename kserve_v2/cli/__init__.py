"""The ``kserve-v2`` command.

Each subcommand lives in its own module, named in :data:`COMMANDS`, with two functions:
``add_arguments(parser)`` declares its options and ``run(args) -> int`` does the work. A module
may set ``OPTIONS`` to the global option groups it takes: ``"connection"`` (``--url``,
``--header``, TLS, ``--timeout``, ``--dump``) and ``"output"`` (``--json``, ``--debug``,
``--color``); without it the module declares all its options itself (``conformance``).

Only the chosen subcommand's module is imported, and only its ``run`` imports anything heavy,
so ``kserve-v2 --help`` stays fast. Errors print as one line with a hint of what to try and
exit 1, or 2 for usage errors (the command line, the files it names, and the library's
InvalidInputError); ``--debug`` shows the traceback.

Example::

    $ kserve-v2 health --url grpc://localhost:8001
    $ kserve-v2 infer simple --input INPUT0=[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]] --dump
    $ kserve-v2 perf simple --concurrency 1:8:x2 --csv perf.csv
    $ kserve-v2 conformance --http http://localhost:8000 --grpc localhost:8001 --report out.html
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Final

__all__ = ["COMMANDS", "build_parser", "main"]

#: subcommand -> (module, one-line help). New commands add a line here.
COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "health": ("kserve_v2.cli.health", "is the server live and ready (and a model)?"),
    "metadata": ("kserve_v2.cli.metadata", "server metadata, or a model's inputs and outputs"),
    "config": ("kserve_v2.cli.config", "a model's configuration"),
    "models": ("kserve_v2.cli.models", "the models of the repository and their state"),
    "load": ("kserve_v2.cli.load", "load or reload a model (explicit model control)"),
    "unload": ("kserve_v2.cli.unload", "unload a model"),
    "stats": ("kserve_v2.cli.stats", "inference statistics of every model or of one"),
    "shm": ("kserve_v2.cli.shm", "shared-memory regions registered on the server"),
    "trace": ("kserve_v2.cli.trace", "get or set trace settings"),
    "log": ("kserve_v2.cli.log", "get or set log settings"),
    "metrics": ("kserve_v2.cli.metrics", "the server's Prometheus metrics"),
    "infer": ("kserve_v2.cli.infer", "run one inference and print its outputs"),
    "stream": ("kserve_v2.cli.stream", "inference over a gRPC stream, responses as they arrive"),
    "generate": ("kserve_v2.cli.generate", "generate text (generate / generate_stream)"),
    "decode": ("kserve_v2.cli.decode", "decode a captured binary-extension body offline"),
    "encode": ("kserve_v2.cli.encode", "build a binary-extension request body (for curl)"),
    "perf": ("kserve_v2.cli.perf", "measure throughput and latency, like perf_analyzer"),
    "conformance": (
        "kserve_v2.cli.conformance",
        "check a KServe v2 / Open Inference Protocol server against the specs",
    ),
}


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is one), without parsing."""
    for word in argv:
        if word == "--":
            return None
        if word in COMMANDS:
            return word
    return None


def _add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, load: bool
) -> None:
    from kserve_v2.cli import _common

    module_name, help_text = COMMANDS[name]
    if not load:
        # Listed in the top-level help, but not imported: another command was chosen.
        sub.add_parser(name, help=help_text, add_help=False)
        return
    module: ModuleType = importlib.import_module(module_name)
    doc = module.__doc__ or help_text
    command = sub.add_parser(
        name,
        help=help_text,
        description=doc.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(doc.split("\n\n")[1:]) or None,
    )
    module.add_arguments(command)
    groups = getattr(module, "OPTIONS", ())
    if "connection" in groups:
        _common.add_connection_options(command)
    if "output" in groups:
        _common.add_output_options(command)
    command.set_defaults(_module=module)


def build_parser(
    command: str | None = None, *, all_commands: bool = True
) -> argparse.ArgumentParser:
    """The argument parser: with every subcommand's options, or only ``command``'s (none
    when it is None and ``all_commands`` is false), so the other modules are not imported."""
    from kserve_v2.cli import _common
    from kserve_v2.version import __version__

    parser = argparse.ArgumentParser(
        prog="kserve-v2",
        description="Poke, debug and measure KServe v2 / Open Inference Protocol servers "
        "(HTTP/REST and gRPC, with Triton's extensions).",
        epilog="`kserve-v2 COMMAND --help` describes a command. The global options may come "
        "before or after the command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common.add_connection_options(parser)
    _common.add_output_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        _add_command(sub, name, load=name == command or (command is None and all_commands))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kserve-v2`` with ``argv`` (default: the command line); returns the exit status."""
    from kserve_v2.cli import _common

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_chosen_command(argv), all_commands=False)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _common.fill_defaults(args)
    try:
        status: int = args._module.run(args)
    except KeyboardInterrupt:
        sys.stderr.write("kserve-v2: interrupted\n")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        line, hint = _common.describe_error(
            exc, args.url, command=args.command, model=getattr(args, "model", "") or ""
        )
        color = _common.Style(_common.wants_color(args, sys.stderr))
        sys.stderr.write(f"{color('kserve-v2 ' + args.command + ':', 'red', 'bold')} {line}\n")
        if hint:
            sys.stderr.write(f"  {color('hint:', 'yellow')} {hint}\n")
        return _common.exit_status(exc)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
