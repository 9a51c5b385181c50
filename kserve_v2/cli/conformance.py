"""Run the conformance suite against a KServe v2 / Open Inference Protocol server.

Every case cites the spec sentence it checks and its requirement level (MUST, SHOULD, MAY, or
expected practice where the text is silent); failures print the request sent, the response
received and the sentence violated.

exit status:
  0  no MUST case failed and no case broke
  1  a MUST case failed, or a case broke
  2  usage error (e.g. a grpc:// URL given to --http, or an http:// URL to --grpc)
  3  the server could not be checked: a URL given did not answer the server metadata request
     (nothing listening, not a KServe v2 server), or no case ran at all (every case skipped);
     the reason is printed on stderr

examples:
  kserve-v2 conformance --http http://localhost:8000 --grpc localhost:8001
  kserve-v2 conformance --http localhost:8000 --only 'rest.binary.*' --report report.html
  kserve-v2 conformance --grpc localhost:8001 --expected triton-2.51 --report out.json
  kserve-v2 conformance --list

The suite's models (names and signatures) are described in conformance/README.md of the
source; a case whose model the server lacks is skipped, never failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import IO, TYPE_CHECKING

from kserve_v2.cli._common import CLIError, check_output_file, positive_seconds, writing

if TYPE_CHECKING:
    from kserve_v2.conformance.runner import CaseResult, RunResult

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        metavar="URL",
        help="the server's HTTP/REST URL (http://host:port[/base], or host:port)",
    )
    parser.add_argument(
        "--grpc", metavar="URL", help="the server's gRPC URL (grpc://host:port, or host:port)"
    )
    parser.add_argument(
        "--only",
        metavar="PATTERN",
        action="append",
        default=[],
        help="run the cases whose id matches: a glob ('rest.binary.*') or a "
        "substring ('sequence'); repeatable",
    )
    parser.add_argument(
        "--report",
        metavar="FILE",
        action="append",
        default=[],
        help="write a report; the suffix picks the format: .json, .md, .html (repeatable)",
    )
    parser.add_argument(
        "--expected",
        metavar="NAME|FILE",
        help="known deviations of this server: a JSON file, or a list shipped "
        "with the suite (triton-2.51); listed cases that fail are reported "
        "as deviations, not failures",
    )
    parser.add_argument(
        "--header",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="send this header (gRPC metadata) with every request; repeatable",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="timeout of each request (default 30)",
    )
    local = parser.add_mutually_exclusive_group()
    local.add_argument(
        "--local",
        dest="local",
        action="store_true",
        default=None,
        help="the server runs on this machine (shared-memory cases); the "
        "default decides from the host name",
    )
    local.add_argument(
        "--remote",
        dest="local",
        action="store_false",
        help="the server does not share this machine's memory",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the cases (id, level, protocols, section) and exit",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar and no evidence, only the summary",
    )


# -- output ---------------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on a terminal; on anything else a line every 10%."""

    def __init__(self, stream: IO[str], enabled: bool = True) -> None:
        self.stream = stream
        self.enabled = enabled
        self.tty = stream.isatty()
        self.width = shutil.get_terminal_size((80, 20)).columns
        self._next_percent = 10

    def __call__(self, done: int, total: int, result: CaseResult) -> None:
        if not self.enabled:
            return
        if self.tty:
            bar_width = 24
            filled = bar_width * done // max(total, 1)
            line = f"\r[{'#' * filled}{'.' * (bar_width - filled)}] {done}/{total} {result.case.id}"
            self.stream.write(line[: self.width - 1].ljust(self.width - 1))
            if done == total:
                self.stream.write("\r" + " " * (self.width - 1) + "\r")
            self.stream.flush()
            return
        percent = 100 * done // max(total, 1)
        if percent >= self._next_percent or done == total:
            self.stream.write(f"conformance: {done}/{total} cases ({percent}%)\n")
            self.stream.flush()
            self._next_percent = (percent // 10 + 1) * 10


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _print_failure(result: CaseResult, out: IO[str], evidence: bool) -> None:
    case = result.case
    out.write(f"\n{result.outcome.upper()} {case.id} [{case.level.value}] {case.title}\n")
    out.write(f"  {case.spec.document} § {case.spec.section}\n")
    out.write(f"  > {case.spec.quote}\n")
    out.write(_indent(result.message, "  ! ") + "\n")
    if evidence and result.exchanges:
        out.write(_indent(result.evidence()) + "\n")


def print_summary(result: RunResult, out: IO[str]) -> None:
    """The summary by spec section, then the totals."""
    from kserve_v2.conformance.runner import Outcome, sections

    rows = sections(result.results)
    width = min(max((len(k) for k in rows), default=10), 64)
    head = f"{'section':<{width}}  cases  pass  fail  dev  err  skip"
    out.write("\n" + head + "\n" + "-" * len(head) + "\n")
    for key, row in rows.items():
        o = row["outcomes"]
        label = key if len(key) <= width else key[: width - 1] + "…"
        out.write(
            f"{label:<{width}}  {sum(o.values()):>5}  {o[Outcome.PASSED]:>4}  "
            f"{o[Outcome.FAILED]:>4}  {o[Outcome.DEVIATION]:>3}  {o[Outcome.ERROR]:>3}  "
            f"{o[Outcome.SKIPPED]:>4}\n"
        )
    counts = result.counts()
    out.write("-" * len(head) + "\n")
    out.write(
        f"{len(result.results)} cases in {result.duration:.1f} s: "
        + ", ".join(f"{counts[o]} {o}" for o in Outcome.ALL)
        + f"; {len(result.must_failures())} MUST failure(s)\n"
    )
    for case_id in result.stale_deviations():
        out.write(f"note: {case_id} is listed as a known deviation but passed\n")


# -- the command ----------------------------------------------------------------------------------


def _headers(values: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise CLIError(f"--header wants NAME=VALUE, not {value!r}")
        pairs.append((name.strip(), text))
    return tuple(pairs)


def _check_url(option: str, url: str | None) -> None:
    """A URL that cannot name a server (no host, a port that is not a number) is a usage
    error (exit 2), not a server that did not answer (3)."""
    from urllib.parse import urlsplit

    if url is None:
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError when the port is not a number in range
    except ValueError as exc:
        raise ValueError(f"{option} {url}: {exc}") from None
    if not parts.hostname:
        raise ValueError(f"{option} {url}: no host")


def run(args: argparse.Namespace) -> int:
    from kserve_v2.conformance.catalog import all_cases
    from kserve_v2.conformance.context import Target
    from kserve_v2.conformance.registry import select
    from kserve_v2.conformance.report import write_report
    from kserve_v2.conformance.runner import Outcome, load_expected
    from kserve_v2.conformance.runner import run as run_cases

    out = sys.stdout
    cases = select(all_cases(), args.only)
    if args.list:
        for c in cases:
            out.write(
                f"{c.id:<58} {c.level.value:<17} {'+'.join(c.protocols):<9} "
                f"{c.spec.document} § {c.spec.section}\n"
            )
        out.write(f"{len(cases)} cases\n")
        return 0
    if not args.http and not args.grpc:
        sys.stderr.write("kserve-v2 conformance: give --http URL and/or --grpc URL\n")
        return 2
    if not cases:
        sys.stderr.write(f"kserve-v2 conformance: no case matches {args.only}\n")
        return 2
    for path in args.report:
        if os.path.splitext(path)[1].lower() not in (".json", ".md", ".markdown", ".html", ".htm"):
            sys.stderr.write(f"kserve-v2 conformance: --report {path}: use .json, .md or .html\n")
            return 2
        check_output_file(path, "--report")  # before the cases run, not after
    try:
        expected = load_expected(args.expected)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"kserve-v2 conformance: --expected: {exc}\n")
        return 2
    try:
        http, grpc = Target.normalize(args.http, "http"), Target.normalize(args.grpc, "grpc")
        for option, url in (("--http", http), ("--grpc", grpc)):
            _check_url(option, url)
    except ValueError as exc:
        sys.stderr.write(f"kserve-v2 conformance: {exc}\n")
        return 2
    headers = _headers(args.header)
    target = Target(
        http=http,
        grpc=grpc,
        headers=headers,
        timeout=args.timeout,
        local=args.local,
    )
    progress = Progress(sys.stderr, enabled=not args.quiet)
    result = run_cases(cases, target, expected=expected, progress=progress)
    problems = [r for r in result.results if r.outcome in (Outcome.FAILED, Outcome.ERROR)]
    for r in problems:
        _print_failure(r, out, evidence=not args.quiet)
    deviations = [r for r in result.results if r.outcome == Outcome.DEVIATION]
    if deviations:
        out.write(f"\nknown deviations ({len(deviations)}):\n")
        for r in deviations:
            out.write(f"  {r.case.id} [{r.case.level.value}]: {r.expected_deviation}\n")
    print_summary(result, out)
    for path in args.report:
        with writing(path, "--report"):
            written = write_report(result, path)
        out.write(f"report: {written}\n")
    unchecked = result.unchecked()
    if unchecked:
        out.flush()
        sys.stderr.write("kserve-v2 conformance: the server could not be checked:\n")
        for line in unchecked:
            sys.stderr.write(f"  {line}\n")
    return result.exit_status()
