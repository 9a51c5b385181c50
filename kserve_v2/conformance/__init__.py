"""A spec-cited conformance suite for KServe v2 / Open Inference Protocol servers.

Each case checks one sentence of the specs (the Open Inference Protocol and Triton's protocol
extensions), says how binding it is (MUST, SHOULD, MAY, or expected practice where the text is
silent) and keeps the evidence: the requests it sent and the responses it got. Run it with
``kserve-v2 conformance --http URL --grpc URL`` or, from a source checkout,
``pytest conformance --http URL --grpc URL``; see ``conformance/README.md``.

Example::

    from kserve_v2.conformance import Target, all_cases, load_expected, run, write_report

    result = run(all_cases(), Target(http="http://localhost:8000", grpc="grpc://localhost:8001"),
                 expected=load_expected("triton-2.51"))
    write_report(result, "report.html")
    raise SystemExit(result.exit_status())
"""

from kserve_v2.conformance.catalog import all_cases
from kserve_v2.conformance.context import CaseFailed, CaseSkipped, Context, Session, Target
from kserve_v2.conformance.registry import Case, case, register, select
from kserve_v2.conformance.report import render_html, render_markdown, to_json, write_report
from kserve_v2.conformance.runner import (
    CaseResult,
    ExpectedDeviations,
    Outcome,
    RunResult,
    load_expected,
    run,
    run_case,
)
from kserve_v2.conformance.spec import Level, Spec

__all__ = [
    "Case",
    "CaseFailed",
    "CaseResult",
    "CaseSkipped",
    "Context",
    "ExpectedDeviations",
    "Level",
    "Outcome",
    "RunResult",
    "Session",
    "Spec",
    "Target",
    "all_cases",
    "case",
    "load_expected",
    "register",
    "render_html",
    "render_markdown",
    "run",
    "run_case",
    "select",
    "to_json",
    "write_report",
]
