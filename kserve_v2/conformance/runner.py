"""Running cases: outcomes, known deviations, the run's result.

Each case ends in one :class:`Outcome`. A server's known deviations (a checked-in list per
server: case id -> why, see :func:`load_expected`) turn the failure of a listed case into
``deviation``: reported, with its spec quote, but not a failure. A listed case that passes is
flagged (``expected_deviation`` with outcome ``passed``) so the list can be kept true, and a
failure of an unlisted case is a new deviation.

Example::

    from kserve_v2.conformance import Target, all_cases, run

    result = run(all_cases(), Target(http="http://localhost:8000", grpc="localhost:8001"))
    print(result.counts(), result.exit_status())
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Final

from kserve_v2.conformance.context import CaseFailed, CaseSkipped, Context, Session, Target
from kserve_v2.conformance.evidence import Exchange
from kserve_v2.conformance.registry import Case
from kserve_v2.conformance.spec import DOCUMENTS, EXTENSIONS, Level
from kserve_v2.errors import KServeError

__all__ = [
    "EXIT_UNCHECKED",
    "CaseResult",
    "ExpectedDeviations",
    "Outcome",
    "RunResult",
    "load_expected",
    "run",
    "run_case",
]


#: the exit status of a run that could not check the server (see :meth:`RunResult.unchecked`)
EXIT_UNCHECKED: Final = 3


class Outcome:
    """The outcomes a case can have (plain strings, as they appear in reports)."""

    PASSED: Final = "passed"
    #: the server does not do what the sentence says (and the case is not a known deviation)
    FAILED: Final = "failed"
    SKIPPED: Final = "skipped"
    #: a known deviation of this server: failed as expected, reported, not a failure
    DEVIATION: Final = "deviation"
    #: the case itself broke (a bug of the suite, or an exception it did not expect)
    ERROR: Final = "error"

    ALL: Final = (PASSED, FAILED, DEVIATION, ERROR, SKIPPED)


@dataclass(frozen=True)
class ExpectedDeviations:
    """A server's known deviations: case id -> the reason (checked against the spec text)."""

    server: str = ""
    source: str = ""
    deviations: Mapping[str, str] = field(default_factory=dict)


def load_expected(name_or_path: str | None) -> ExpectedDeviations:
    """Load a known-deviations list: a JSON file, or the name of one shipped with the suite
    (``triton-2.51``). ``None`` gives an empty list.

    The file holds ``{"server": "...", "deviations": {"<case id>": "<why>", ...}}``.
    """
    if not name_or_path:
        return ExpectedDeviations()
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        text = path.read_text(encoding="utf-8")
        source = str(path)
    else:
        resource = resources.files("kserve_v2.conformance") / "expected" / f"{name_or_path}.json"
        if not resource.is_file():
            shipped = sorted(
                p.name.removesuffix(".json")
                for p in (resources.files("kserve_v2.conformance") / "expected").iterdir()
                if p.name.endswith(".json")
            )
            raise ValueError(
                f"no expected-deviations list {name_or_path!r} (shipped: {', '.join(shipped)}; "
                "or give a path to a .json file)"
            )
        text = resource.read_text(encoding="utf-8")
        source = name_or_path
    data = json.loads(text)
    deviations = data.get("deviations", {})
    if not isinstance(deviations, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in deviations.items()
    ):
        raise ValueError(f"{source}: 'deviations' must map case ids to reasons")
    return ExpectedDeviations(str(data.get("server", "")), source, deviations)


@dataclass
class CaseResult:
    """What one case did: its outcome, the message (failure, skip reason, deviation note) and
    the exchanges it made."""

    case: Case
    outcome: str
    message: str = ""
    exchanges: list[Exchange] = field(default_factory=list)
    duration: float = 0.0
    #: the reason from the known-deviations list, when the case is listed there
    expected_deviation: str | None = None

    @property
    def counts_as_failure(self) -> bool:
        """Failed or errored (known deviations do not count)."""
        return self.outcome in (Outcome.FAILED, Outcome.ERROR)

    def evidence(self) -> str:
        """The exchanges as text."""
        return "\n".join(exchange.render() for exchange in self.exchanges)


@dataclass
class RunResult:
    """A whole run."""

    target: Target
    results: list[CaseResult]
    started: datetime
    duration: float
    server: dict[str, dict[str, Any] | None]
    expected: ExpectedDeviations
    #: per protocol given whose server metadata could not be read: why (unreachable, not an
    #: OIP server, ...); every case of that protocol was skipped
    unreachable: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(Outcome.ALL, 0)
        for result in self.results:
            counts[result.outcome] += 1
        return counts

    def must_failures(self) -> list[CaseResult]:
        return [r for r in self.results if r.counts_as_failure and r.case.level is Level.MUST]

    def stale_deviations(self) -> list[str]:
        """Listed deviations whose case passed: the list should lose them."""
        return [
            r.case.id
            for r in self.results
            if r.expected_deviation is not None and r.outcome == Outcome.PASSED
        ]

    def unchecked(self) -> list[str]:
        """Why the run checked less than it was asked to: one line per protocol given whose
        server could not be reached (or did not answer its server metadata), and one when no
        case ran at all (every case skipped; the first skip reason). Empty when all is well."""
        lines = [
            f"{'HTTP' if protocol == 'http' else 'gRPC'} "
            f"{self.target.http if protocol == 'http' else self.target.grpc}: {problem}"
            for protocol, problem in self.unreachable.items()
        ]
        if self.results and all(r.outcome == Outcome.SKIPPED for r in self.results):
            first = self.results[0]
            lines.append(
                f"no case ran: all {len(self.results)} were skipped"
                # the first skip reason, unless it is only the unreachable server again
                + ("" if lines else f" (the first, {first.case.id}: {first.message})")
            )
        return lines

    def exit_status(self) -> int:
        """1 when a MUST case failed (or any case errored); else 3 when the server could not
        be checked (:meth:`unchecked`: a protocol given did not answer, or no case ran); else
        0."""
        if self.must_failures() or any(r.outcome == Outcome.ERROR for r in self.results):
            return 1
        if self.unchecked():
            return EXIT_UNCHECKED
        return 0


def _skip_reason(session: Session, case: Case) -> str | None:
    for protocol in case.protocols:
        url = session.target.http if protocol == "http" else session.target.grpc
        if not url:
            flag = "--http" if protocol == "http" else "--grpc"
            return f"needs {protocol.upper() if protocol == 'http' else 'gRPC'} ({flag} not given)"
    problems = [p for p in (session.metadata_problem(pr) for pr in case.protocols) if p]
    if problems:
        return f"the server does not answer its metadata: {problems[0]}"
    if case.extension is not None:
        advertised = EXTENSIONS[case.extension].advertised
        if advertised is not None and advertised not in session.extensions():
            return f"the server does not advertise the {advertised!r} extension"
    for model in case.models:
        problem = session.model_problem(model)
        if problem is not None:
            return f"{problem} (the suite's models are described in conformance/README.md)"
    return None


def run_case(
    session: Session, case: Case, expected: ExpectedDeviations | None = None
) -> CaseResult:
    """Run one case against the session's server."""
    started = time.perf_counter()
    ctx = Context(session)
    listed = (expected.deviations.get(case.id) if expected is not None else None) or None
    reason = _skip_reason(session, case)
    if reason is not None:
        return CaseResult(case, Outcome.SKIPPED, reason, [], 0.0, listed)
    outcome, message = Outcome.PASSED, ""
    with session.running(ctx):
        try:
            case.run(ctx)
        except CaseSkipped as exc:
            outcome, message = Outcome.SKIPPED, str(exc)
        except CaseFailed as exc:
            outcome, message = Outcome.FAILED, str(exc)
        except KServeError as exc:
            # The project's client refused the answer (a protocol violation) or the server
            # failed a call the case expected to succeed.
            outcome, message = Outcome.FAILED, f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            outcome = Outcome.ERROR
            message = f"the case broke: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        finally:
            for cleanup in reversed(ctx.cleanups):
                # Best effort: a failing cleanup does not change the case's outcome.
                with contextlib.suppress(Exception):
                    cleanup()
    if outcome == Outcome.FAILED:
        if listed is not None:
            outcome = Outcome.DEVIATION
        elif case.extension is not None and EXTENSIONS[case.extension].advertised:
            message = (
                f"the server advertises {EXTENSIONS[case.extension].advertised!r}, but: {message}"
            )
    return CaseResult(
        case, outcome, message, list(ctx.exchanges), time.perf_counter() - started, listed
    )


def run(
    cases: Sequence[Case],
    target: Target,
    *,
    expected: ExpectedDeviations | None = None,
    progress: Callable[[int, int, CaseResult], None] | None = None,
) -> RunResult:
    """Run ``cases`` in order against ``target``; ``progress(done, total, result)`` is called
    after each."""
    expected = expected or ExpectedDeviations()
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    results: list[CaseResult] = []
    with Session(target) as session:
        for index, case in enumerate(cases, 1):
            result = run_case(session, case, expected)
            results.append(result)
            if progress is not None:
                progress(index, len(cases), result)
        server = {p: session.server_metadata(p) for p in session.protocols()}
        unreachable = {
            p: problem for p in session.protocols() if (problem := session.metadata_problem(p))
        }
    return RunResult(
        target, results, started, time.perf_counter() - clock, server, expected, unreachable
    )


def sections(results: Iterable[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per spec section (``document § heading``): outcome counts and level counts, grouped
    by document (in the order of :data:`~kserve_v2.conformance.spec.DOCUMENTS`), sections in
    the order their first case ran."""
    documents = list(DOCUMENTS)
    ordered = sorted(results, key=lambda r: documents.index(r.case.spec.document))
    table: dict[str, dict[str, Any]] = {}
    for result in ordered:
        row = table.setdefault(
            result.case.section,
            {
                "document": result.case.spec.document,
                "section": result.case.spec.section,
                "outcomes": dict.fromkeys(Outcome.ALL, 0),
                "levels": {level.value: 0 for level in Level},
                "must_failures": 0,
            },
        )
        row["outcomes"][result.outcome] += 1
        row["levels"][result.case.level.value] += 1
        if result.counts_as_failure and result.case.level is Level.MUST:
            row["must_failures"] += 1
    return table
