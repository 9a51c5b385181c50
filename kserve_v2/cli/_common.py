"""What every subcommand of ``kserve-v2`` shares: global options, the client, output, errors.

Kept free of heavy imports at module level (numpy, the client, the codecs): ``kserve-v2
--help`` imports this module for every subcommand, so only ``argparse``, ``os`` and ``sys``
are loaded here; the rest is imported inside the functions that need it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, Final

from kserve_v2.cli.style import Style

if TYPE_CHECKING:
    from kserve_v2 import AsyncClient, Client
    from kserve_v2.hooks import WireHook

__all__ = [
    "DEFAULT_URL",
    "URL_ENV",
    "CLIError",
    "Style",
    "add_connection_options",
    "add_output_options",
    "async_client",
    "check_output_file",
    "client",
    "client_options",
    "describe_error",
    "emit",
    "exit_status",
    "fill_defaults",
    "format_table",
    "parse_key_values",
    "parse_scalar",
    "positive_seconds",
    "read_file",
    "wants_color",
    "writing",
]

#: Environment variable giving the default ``--url``.
URL_ENV: Final = "KSERVE_V2_URL"
DEFAULT_URL: Final = "http://localhost:8000"

# Defaults of the global options. They are declared with ``default=SUPPRESS`` both on the
# top-level parser and on each subcommand, so ``kserve-v2 --url X health`` and ``kserve-v2
# health --url X`` both work (a subparser's default would otherwise overwrite the value given
# before the subcommand); fill_defaults puts these in afterwards.
_DEFAULTS: Final[dict[str, Any]] = {
    "url": None,
    "header": [],
    "ca_file": None,
    "cert_file": None,
    "key_file": None,
    "insecure": False,
    "timeout": 30.0,
    "json": False,
    "debug": False,
    "dump": False,
    "color": "auto",
    "grpc_transport": "native",
}


class CLIError(Exception):
    """A mistake on the command line or in a file it names: printed as one line, exit 2."""

    def __init__(self, message: str, *, hint: str = "", status: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.status = status


# -- options --------------------------------------------------------------------------------------


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--debug`` and ``--color``: for every subcommand."""
    s = argparse.SUPPRESS
    group = parser.add_argument_group("output options")
    group.add_argument(
        "--json",
        action="store_true",
        default=s,
        help="machine-readable output: one JSON document on stdout",
    )
    group.add_argument(
        "--debug", action="store_true", default=s, help="show the traceback of an error"
    )
    group.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=s,
        help="colours: on a terminal only (auto, the default; NO_COLOR turns them off), "
        "always or never",
    )


def positive_seconds(text: str) -> float:
    """``--timeout``'s type: a positive number of seconds (argparse names the option)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"wants a positive number of seconds, not {text!r}")
    return value


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Where the server is and how to talk to it: for the subcommands that use a server."""
    s = argparse.SUPPRESS
    group = parser.add_argument_group("connection options")
    group.add_argument(
        "-u",
        "--url",
        default=s,
        metavar="URL",
        help=f"the server: http://, https://, grpc:// or grpcs://host:port (default: "
        f"${URL_ENV}, else {DEFAULT_URL})",
    )
    group.add_argument(
        "-H",
        "--header",
        action="append",
        default=s,
        metavar="NAME=VALUE",
        help="send this header (gRPC metadata) with every request; repeatable "
        "('NAME: VALUE' works too)",
    )
    group.add_argument(
        "--timeout",
        type=positive_seconds,
        default=s,
        metavar="SECONDS",
        help="timeout of each request (default 30)",
    )
    group.add_argument("--ca-file", default=s, metavar="PEM", help="CA certificates to trust")
    group.add_argument(
        "--cert-file", default=s, metavar="PEM", help="client certificate (mutual TLS)"
    )
    group.add_argument("--key-file", default=s, metavar="PEM", help="client key (mutual TLS)")
    group.add_argument(
        "-k",
        "--insecure",
        action="store_true",
        default=s,
        help="https://: do not check the server's certificate",
    )
    group.add_argument(
        "--grpc-transport",
        choices=("native", "grpcio"),
        default=s,
        help="gRPC: the library's own HTTP/2 client (native, the default) or grpcio",
    )
    group.add_argument(
        "--dump",
        action="store_true",
        default=s,
        help="print every message sent and received (stderr): HTTP heads, JSON, binary "
        "tensors; gRPC messages as protobuf text",
    )


def fill_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Put the global options' defaults into ``args`` where they were not given."""
    for name, value in _DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, list(value) if isinstance(value, list) else value)
    if args.url is None:
        args.url = os.environ.get(URL_ENV) or DEFAULT_URL
    return args


# -- colours --------------------------------------------------------------------------------------


def wants_color(args: argparse.Namespace, stream: IO[str]) -> bool:
    """Colours on a terminal (unless NO_COLOR is set), or as ``--color`` says."""
    mode = getattr(args, "color", "auto")
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# -- clients --------------------------------------------------------------------------------------


def parse_headers(values: Iterable[str]) -> list[tuple[str, str]]:
    """``NAME=VALUE`` or ``NAME: VALUE`` pairs."""
    pairs = []
    for value in values:
        colon, equals = value.find(":"), value.find("=")
        cut = min(i for i in (colon, equals) if i >= 0) if max(colon, equals) >= 0 else -1
        name = value[:cut].strip() if cut > 0 else ""
        if not name:
            raise CLIError(f"--header wants NAME=VALUE or 'NAME: VALUE', not {value!r}")
        pairs.append((name, value[cut + 1 :].strip()))
    return pairs


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The client's keyword arguments from the global options (picklable; no hook)."""
    from kserve_v2.options import TLSOptions

    kwargs: dict[str, Any] = {
        "headers": parse_headers(args.header),
        "timeout": args.timeout,
    }
    if args.key_file and not args.cert_file:
        raise CLIError("--key-file needs --cert-file (the client certificate)")
    for option, path in (
        ("--ca-file", args.ca_file),
        ("--cert-file", args.cert_file),
        ("--key-file", args.key_file),
    ):
        if path and not os.path.isfile(path):
            raise CLIError(f"{option}: no such file {path}")
    if args.ca_file or args.cert_file or args.key_file or args.insecure:
        if args.insecure and args.url.startswith("grpcs"):
            raise CLIError(
                "--insecure works with https:// only; give the server's CA with --ca-file"
            )
        _check_tls_files(args)
        kwargs["tls"] = TLSOptions(
            ca_file=args.ca_file,
            cert_file=args.cert_file,
            key_file=args.key_file,
            verify=not args.insecure,
        )
    if args.url.startswith("grpc"):
        kwargs["grpc_transport"] = args.grpc_transport
    return kwargs


#: The library's names of the TLS files, and the options that give them.
_TLS_OPTIONS: Final = {"ca_file": "--ca-file", "cert_file": "--cert-file", "key_file": "--key-file"}


def _check_tls_files(args: argparse.Namespace) -> None:
    """Refuse TLS files that are missing or not PEM, naming the option. The client checks
    them too when it is made (:func:`kserve_v2.pem.check_tls_files`), but in the library's
    words (``ca_file``): checked here, where every client's options are made (perf's
    workers' included)."""
    import re

    from kserve_v2.errors import InvalidInputError
    from kserve_v2.pem import check_tls_files

    if not args.url.lower().startswith(("https://", "grpcs://")):
        return  # the client refuses TLS files for a plain-text URL, and says so
    try:
        check_tls_files(args.ca_file, args.cert_file, args.key_file)
    except InvalidInputError as exc:
        message = re.sub(
            r"\b(?:TLS )?(ca_file|cert_file|key_file)\b",
            lambda name: _TLS_OPTIONS[name.group(1)],
            exc.message,
        )
        raise CLIError(message) from exc


def dump_hook(args: argparse.Namespace) -> WireHook | None:
    """The ``--dump`` hook (stderr), or None without ``--dump``."""
    if not args.dump:
        return None
    from kserve_v2.cli.dump import DumpPrinter

    return DumpPrinter(sys.stderr, color=wants_color(args, sys.stderr))


def client(args: argparse.Namespace, *, hook: WireHook | None = None) -> Client:
    """A synchronous client for ``--url`` with the global options (and ``--dump``)."""
    from kserve_v2 import Client

    return Client(args.url, wire_hook=hook or dump_hook(args), **client_options(args))


def async_client(
    args: argparse.Namespace, *, hook: WireHook | None = None, pool_size: int = 16
) -> AsyncClient:
    """An asyncio client for ``--url`` with the global options."""
    from kserve_v2 import AsyncClient

    return AsyncClient(
        args.url, pool_size=pool_size, wire_hook=hook or dump_hook(args), **client_options(args)
    )


# -- output ---------------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars, bytes and tuples turned into JSON types."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": raw.hex()}
    tolist = getattr(value, "tolist", None)
    if tolist is not None and not isinstance(value, (str, int, float, bool)):
        return to_jsonable(tolist())
    if isinstance(value, float) and value != value:  # NaN: JSON has no literal for it
        return None
    return value


def emit(
    args: argparse.Namespace,
    data: Any,
    human: Callable[[], str] | str,
    out: IO[str] | None = None,
) -> None:
    """Print ``data`` as JSON with ``--json``, else the human form."""
    out = out or sys.stdout
    if args.json:
        out.write(json.dumps(to_jsonable(data), indent=2) + "\n")
        return
    text = human if isinstance(human, str) else human()
    if text:
        out.write(text if text.endswith("\n") else text + "\n")


def format_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    style: Style | None = None,
    align: str = "",
) -> str:
    """A plain text table: a bold header, columns padded; ``align`` has one ``<`` or ``>``
    per column (default: left)."""
    text_rows = [[str(c) for c in row] for row in rows]
    if style is not None and style.enabled:
        rich_table = _rich_table(headers, text_rows, align)
        if rich_table is not None:
            return rich_table
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    aligns = align.ljust(len(headers), "<")
    style = style or Style(False)

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.rjust(widths[i]) if aligns[i] == ">" else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "  ".join(parts).rstrip()

    out = [style(line(list(headers)), "bold")]
    out.extend(line(row) for row in text_rows)
    return "\n".join(out)


def _rich_table(headers: Sequence[str], rows: list[list[str]], align: str) -> str | None:
    """The table drawn by rich (the ``cli`` extra), for terminals; None without rich."""
    import importlib
    import io
    import shutil

    try:
        # By name: rich is an optional extra, without type stubs in the dev environment.
        Console = importlib.import_module("rich.console").Console
        Table = importlib.import_module("rich.table").Table
        Text = importlib.import_module("rich.text").Text
    except ImportError:
        return None

    table = Table(box=None, header_style="bold", pad_edge=False)
    aligns = align.ljust(len(headers), "<")
    for i, header in enumerate(headers):
        table.add_column(header, justify="right" if aligns[i] == ">" else "left", no_wrap=True)
    for row in rows:
        # Cells may hold our own ANSI colours: rich measures them without the escapes.
        table.add_row(*(Text.from_ansi(cell) for cell in row))
    buffer = io.StringIO()
    # Never narrower than the table: rich would elide cells, and a wide table still reads
    # better wrapped by the terminal than with its numbers cut.
    natural = sum(max([len(h), *(len(r[i]) for r in rows)]) + 2 for i, h in enumerate(headers))
    width = max(shutil.get_terminal_size((100, 20)).columns, natural)
    Console(file=buffer, force_terminal=True, width=width).print(table)
    return buffer.getvalue().rstrip("\n")


# -- files the command line names -----------------------------------------------------------------


def read_file(path: str, what: str = "") -> bytes:
    """The bytes of a file given as ``what`` (an option; '' for an argument): one it cannot
    read is a usage error."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        prefix = f"{what}: " if what else ""
        raise CLIError(f"{prefix}cannot read {path}: {exc.strerror or exc}") from None


def check_output_file(path: str, what: str) -> None:
    """Refuse an output file given as ``what`` whose directory does not exist, before any
    work is done (a measurement or an inference is not lost to a mistyped path)."""
    if os.path.isdir(path):
        raise CLIError(f"{what}: {path} is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CLIError(f"{what}: cannot write {path}: no such directory {directory}")


@contextlib.contextmanager
def writing(path: str, what: str) -> Iterator[None]:
    """Writing the output file given as ``what``: a failure (permissions, a full disk) is
    one line naming it, exit 2, not an OSError's traceback."""
    try:
        yield
    except OSError as exc:
        raise CLIError(f"{what}: cannot write {path}: {exc.strerror or exc}") from None


# -- small parsers --------------------------------------------------------------------------------


def parse_scalar(text: str) -> Any:
    """A command-line value: JSON when it parses (numbers, true/false, lists), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_key_values(values: Iterable[str], what: str) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, values through :func:`parse_scalar`."""
    result: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"{what} wants KEY=VALUE, not {item!r}")
        result[key.strip()] = parse_scalar(value)
    return result


# -- errors ---------------------------------------------------------------------------------------


def _answers_http1(host: str, port: int) -> bool:
    """Whether ``host:port`` answers a plain HTTP/1.1 request (a quick probe, 1 s at most)."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            return sock.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


#: Commands whose endpoints are extensions (model repository, configuration, statistics,
#: shared memory, trace, logging, generate): a 404 not about a model means the server lacks it.
_EXTENSION_COMMANDS: Final = frozenset(
    {"models", "config", "stats", "shm", "trace", "log", "load", "unload", "generate"}
)
#: Commands whose endpoints are the model's own (v2/models/NAME...): a 404 is about the model.
_MODEL_COMMANDS: Final = frozenset({"metadata", "infer", "stream", "perf", "health"})
_METRICS_HINT: Final = (
    "set --metrics-url to where the server serves metrics (Triton's: http://host:8002/metrics)"
)
_MODELS_HINT: Final = "`kserve-v2 models` lists the models the server has"
_EXTENSION_HINT: Final = "this server may not implement that extension (see `kserve-v2 metadata`)"


def _not_found_hint(text: str, command: str, model: str) -> str:
    """The hint for a 404 / NOT_FOUND of ``command`` (naming ``model`` if not '')."""
    if "shared memory region" in text:
        without = " without --region" if command == "shm" else ""
        return f"`kserve-v2 shm status`{without} lists the registered regions"
    import re

    named = model and re.search(rf"(?<![\w.-]){re.escape(model.lower())}(?![\w-])(?!\.\w)", text)
    about_model = "unknown model" in text or bool(named)
    if model and (about_model or command in _MODEL_COMMANDS):
        return _MODELS_HINT
    if command == "metrics":
        return _METRICS_HINT
    if command in _EXTENSION_COMMANDS:
        return _EXTENSION_HINT
    if not command and about_model:  # called without a command: the library's own errors
        return _MODELS_HINT
    return ""


def exit_status(exc: BaseException) -> int:
    """The exit status of an error: 2 for the user's input (the command line, the files it
    names), 1 for the rest (the server, the network, the protocol)."""
    from kserve_v2.errors import InvalidInputError

    if isinstance(exc, CLIError):
        return exc.status
    # The library's own word for input it cannot express: here that input is the user's
    # (a URL, a value for a datatype, a TLS file), as for CLIError.
    if isinstance(exc, InvalidInputError):
        return 2
    return 1


def describe_error(
    exc: BaseException, url: str, *, command: str = "", model: str = ""
) -> tuple[str, str]:
    """One line for an error, and a hint of what to try ('' when there is none); ``command``
    and the ``model`` it names make a 404's hint fit."""
    from kserve_v2.errors import (
        DeadlineExceededError,
        InvalidInputError,
        KServeError,
        MissingDependencyError,
        ProtocolError,
        ServerError,
        TransportError,
    )

    if isinstance(exc, CLIError):
        return exc.message, exc.hint
    if isinstance(exc, ServerError):
        where = []
        if exc.http_status is not None:
            where.append(f"HTTP {exc.http_status}")
        if exc.grpc_code is not None:
            where.append(f"gRPC {exc.grpc_code}")
        from kserve_v2.rest.codec import BINARY_REFUSED_HINT

        # The library's advice names its own argument (binary=False): say the option instead.
        message = exc.message.replace(f" ({BINARY_REFUSED_HINT})", "")
        line = f"the server says: {message} ({', '.join(where) or 'error'})"
        text = message.lower()
        hint = ""
        if message != exc.message:
            option = "--input-tensor-format json" if command == "perf" else "--json-data"
            hint = f"this server may not support binary tensors: try {option}"
        elif exc.http_status == 404 or exc.grpc_code == "NOT_FOUND":
            hint = _not_found_hint(text, command, model)
        elif "unknown model" in text and (model or not command):
            hint = _MODELS_HINT
        elif "polling is enabled" in text or "explicit model load" in text:
            hint = "start the server with --model-control-mode=explicit to load and unload models"
        elif "decoupled" in text:
            hint = (
                "a decoupled model answers over a stream: `kserve-v2 stream MODEL --url grpc://...`"
            )
        elif exc.grpc_code == "UNIMPLEMENTED" or exc.http_status in (405, 501):
            hint = _EXTENSION_HINT
        elif exc.http_status in (401, 403) or exc.grpc_code in (
            "UNAUTHENTICATED",
            "PERMISSION_DENIED",
        ):
            hint = "pass credentials with --header 'Authorization=Bearer ...'"
        elif "input" in text and ("expected" in text or "missing" in text or "shape" in text):
            hint = "`kserve-v2 metadata MODEL` shows the inputs it takes"
        return line, hint
    if isinstance(exc, DeadlineExceededError):
        return f"timed out: {exc}", "raise --timeout, or check that the server is not stuck"
    if isinstance(exc, ProtocolError):
        # A scheme that does not match the port is named by the error itself ("did you
        # mean grpc://...?"), as it is for library users.
        return f"the server broke the protocol: {exc.message}", ""
    if isinstance(exc, TransportError):
        from kserve_v2.endpoint import parse_url

        hint = ""
        try:
            endpoint = parse_url(url)
        except KServeError:
            endpoint = None
        text = str(exc)
        if command == "metrics" and "refused" in text.lower():
            hint = _METRICS_HINT
        elif "refused" in text.lower() or "failed to connect" in text.lower():
            hint = (
                f"is the server running at {url}? (set --url or ${URL_ENV}; Triton's "
                "defaults: http://host:8000, grpc://host:8001)"
            )
        elif "did you mean" in text:
            pass  # the error names the scheme the port speaks
        elif endpoint is not None and endpoint.protocol == "grpc" and not endpoint.tls:
            if _answers_http1(endpoint.host, endpoint.port):
                hint = "this port answers HTTP/1.1: did you mean http://?"
        elif endpoint is not None and endpoint.tls and "ssl" in text.lower():
            hint = "check the certificate (--ca-file), or use --insecure for https://"
        return f"cannot reach the server: {exc}", hint
    if isinstance(exc, MissingDependencyError):
        return exc.message, ""
    if isinstance(exc, InvalidInputError):
        return exc.message, ""
    if isinstance(exc, KServeError):
        return str(exc), ""
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", ""
    return f"{type(exc).__name__}: {exc}", ""
